"""Operators on the accelerator: each over the packed NCHWnc layout (``*_packed``), the
runtime's packing between user and packed layouts (``packing``), reduction folding for few
input channels (``fold``), the instruction plans of the epilogue and of fused chains
(``epilogue_plan``, ``chain_plan``) and the bundle the scheduler takes (``packed_op``)."""
