"""The target-neutral tensor IR and everything that works on it without knowing a target.

``expr``/``stmt`` (frozen expression and statement nodes), ``tensor`` (placeholders, computes,
reductions), ``visitor`` and ``printer``, ``schedule`` (split, reorder, tile, cache, tensorize,
virtual threads, bind; each primitive checked), ``lower`` (a schedule to the loop-nest IR),
``regions`` (the region each stage must produce, inferred with isl), ``poly`` (isl: access
relations, footprints, dependences), ``intrin`` (tensor intrinsics and matching a loop region
against one), ``interp`` (the loop-nest interpreter), ``verify`` (the IR's invariants) and
``tiles`` (which split sizes an on-chip tile, for errors). Imports nothing above ``vta.config``.
"""

from vta.compiler.ir import printer as _printer  # noqa: F401 - installs the nodes' __str__
