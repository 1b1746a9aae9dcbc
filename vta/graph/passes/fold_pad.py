"""Zero-point padding folded into the convolution that reads it.

An asymmetric tensor's real 0 is its zero point ``z``, so a convolution of it pads with ``z``;
the importer writes that as ``pad(x, p, z)`` then ``conv2d(pad=0)``, and the host ran the pad
(VTA's LOAD pads with zeros only). This pass makes the padding the convolution's own
attribute, ``conv2d(x, pad=p, pad_value=z)``; the accelerator then runs it as gemmlowp's and
TVM QNN's zero-point folding does: its LOAD pads with 0 and the accumulator gets the
difference, ``z * sum`` of the weights over the taps that fall in the padding, as a bias per
output position (``place.pad_correction``: ``z * conv(P, w)`` with ``P`` the image that is
``1`` in the padding and ``0`` inside, exact in int32 arithmetic modulo ``2**32`` like the
rest of the accumulator).

Pre:  a verified, unfused graph.
Post: every ``pad(x, p, z)`` that is not a graph output and whose every reader is a
      ``conv2d`` with ``pad`` 0 and ``pad_value`` 0 whose kernel is larger than ``p`` (the
      convolution's own padding stays below its kernel: ``verify``) is gone, and those
      convolutions read ``x`` with ``pad=p, pad_value=z``; every other node unchanged. The
      same integers: the interpreter pads with ``pad_value`` first, then convolves.
"""

from __future__ import annotations

import dataclasses

from vta.graph.ir import Conv2d, Graph, Node, Pad
from vta.graph.verify import verify_graph

__all__ = ["fold_pads", "foldable"]


def foldable(n: Node, graph: Graph) -> list[Conv2d]:
    """The convolutions pad ``n`` folds into (every reader of it), or ``[]`` when it stays."""
    if not isinstance(n, Pad) or any(v is n.output for v in graph.outputs):
        return []
    readers = graph.consumers(n.output)
    ok = [r for r in readers if isinstance(r, Conv2d) and r.x is n.output and r.pad == 0
          and not r.pad_value and min(r.weight.type.shape[2:]) > n.pad]
    return ok if ok and len(ok) == len(readers) else []


def fold_pads(graph: Graph) -> Graph:
    """``graph`` with its foldable pads folded into their convolutions (module docstring); the
    same graph object when there are none."""
    folds: dict[int, Pad] = {}
    gone: set[int] = set()
    for n in graph.nodes:
        convs = foldable(n, graph)
        if convs:
            assert isinstance(n, Pad)
            gone.add(id(n))
            folds.update({id(c): n for c in convs})
    if not gone:
        return graph
    nodes: list[Node] = []
    for n in graph.nodes:
        if id(n) in gone:
            continue
        p = folds.get(id(n))
        if p is not None:
            assert isinstance(n, Conv2d)
            n = dataclasses.replace(n, x=p.x, pad=p.pad, pad_value=p.value)
        nodes.append(n)
    return verify_graph(graph.with_nodes(nodes))
