"""``PackedOp``: an accelerator operator's tensors, bundled for the scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vta.compiler.ir.tensor import Tensor

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class PackedOp:
    """An accelerator op in the tensor IR: ``inputs`` (placeholders, in parameter order),
    the padding stage to inline into the input copy (or None), the int32 reduction ``acc``
    (reduce axes: channel blocks first, block lanes last), the epilogue stages and the int8
    output. ``roles`` name the output's tile axes (``n``, ``oc``, ``oh``, ``ow``) by position."""

    name: str
    inputs: tuple[Tensor, ...]
    pad: Tensor | None
    acc: Tensor
    epilogue: tuple[Tensor, ...]
    out: Tensor
    roles: Mapping[str, int]

    @property
    def data(self) -> Tensor:
        return self.inputs[0]

    @property
    def kernel(self) -> Tensor:
        return self.inputs[1]

    @property
    def bias(self) -> Tensor | None:
        return self.inputs[2] if len(self.inputs) > 2 else None

    @property
    def args(self) -> list[Tensor]:
        return [*self.inputs, self.out]
