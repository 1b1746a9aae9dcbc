"""Tuning and co-design: schedule search with a persistent cache, hardware sweeps, executors.

``vta.tune`` sits above the compiler and the simulator (like ``vta.run``): it searches a
workload's schedule space (``vta.compiler.accel.schedules.space``) with the timing-only simulator as
the cost, keeps every measurement in an SQLite cache (``cache``), runs trials on local
processes or a Dask cluster (``executor``), and sweeps hardware variants over workloads,
tuning each (``sweep``). docs/tuning.md describes it; ``vta tune``, ``vta cache`` and ``vta
sweep`` are its commands.
"""
