"""Python's cycle collector paused around work that makes many long-lived objects and no
garbage cycles (``collector_paused``): the compiler's passes (``vta.compiler.accel.pipeline``,
``driver.compile_workload``) and vta's own imports (``vta/__init__.py``). Below every layer:
it imports nothing of vta's."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["collector_paused"]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off for the block, back as it was after it. The compiler's
    passes build hundreds of thousands of small acyclic objects (expression nodes,
    instructions, micro-ops: 150,000 ``Uop``s for ResNet-18's layers), which reference
    counting frees; each allocation
    burst otherwise triggers collections that walk every live object of the process (the IR,
    the schedule model's tables) and find nothing to free (C1-C11's ``compile_layer`` on
    pynq, each layer's three candidates: 3.49 -> 3.21 CPU s). Garbage cycles made meanwhile
    wait for the next collection.

    The objects the block made and left alive (the result: the IR after every pass, the
    program, its micro-ops) would all still be in the youngest generation, so the first
    allocation after it would collect that generation and walk every one of them while the
    caller still holds them (about a tenth of the pipeline's time). They are moved to the
    oldest generation instead (``gc.freeze`` then ``gc.unfreeze``: two list splices, no walk),
    as if they had survived the young collections, which changes when a collection looks at
    them, never what it frees. Skipped where the process has frozen objects of its own
    (``gc.get_freeze_count``): unfreezing would release those too.

    ``driver.compile_workload`` holds it around its candidates' whole choice too (each
    lowered, compiled, bounded and timed on the simulator, whose events and generators are
    more of the same): compiling C1-C11 on pynq ran 100 collections outside the passes,
    which freed 3,135 objects in all (a full collection afterwards frees about 80,000 either
    way), and runs 15 with it. Nested, only the outermost block enables and moves anything.

    ``vta/__init__.py`` holds it around vta's imports (numpy's and yaml's among them): what
    they make (modules, classes, functions, the ISA's tables) lives as long as the process,
    and the young collections walked all of it to promote it (the start of a ``vta run``,
    to its first error, callgrind: 841.5M -> 810.6M instructions with the command's own
    imports paused too, ``vta.cli.console``)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
