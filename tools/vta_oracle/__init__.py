"""The vta.cc oracle: VTA's own HLS source run as C-simulation on vta's compiled programs.

apache/tvm-vta's ``hardware/xilinx/src/vta.cc`` (unmodified, from a checkout the user gives)
is compiled with g++ against Xilinx's open-source ap_int headers, this folder's
``hls_stream.h`` stand-in and our ``driver.cc``, for the VTA_LOG_* macros of one
``HwConfig``; any ``isa.Program`` then runs through VTA's ``vta()`` and every allocation comes
back as ``vta.sim`` returns them, to be compared byte for byte with ``vta.sim.simulate`` or
``vta.sim.run_reference``. docs/simulator.md, "The vta.cc oracle", says how to get the sources
and what differs today.

Modules: ``errors``, ``macros`` (HwConfig -> VTA_LOG_* macros), ``image`` (the DRAM image and
vta()'s pointers), ``build`` (the sources, the build, its cache, the layout check), ``run``
(running a program, comparing, the ``OracleTarget`` every run layer can use), ``probes`` (the
ISA corner probes) and ``oracle`` (the command line: ``python tools/vta_oracle/oracle.py``).
This package ships none of VTA's or Xilinx's files.
"""
