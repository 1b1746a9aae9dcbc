"""The ``vta`` command. It only wires the library together: parse arguments, call, print.

``vta.cli.parser`` builds every parser (the only argparse in vta); each command lives in its
own module here (``info``, ``sim``, ``run``, ``tc``, ``tune``: tune, cache and sweep), which
``main`` imports when that command runs, so a command loads only what it uses (``run`` loads
``run_layers`` the same way for a layer's run, and reads the cache file through ``cached``,
not ``tune``). ``main`` also notes when the process started and when the command was ready
(``args.clock``), from which ``vta run`` reports its startup.

Every user error (a ``VtaError``, or a bad command line: an unknown flag, a value of the wrong
type or range, a flag that does not apply to the workload or target) is printed as one line
``vta: error: ...`` on stderr and exits with status 2; a failed correctness check exits with
status 1, as does output cut short by a reader that closed the pipe (silently). Anything else
is a bug in vta: one line ``vta: internal error: ...`` and status 3.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from importlib import import_module

from vta.cli.parser import build_parser
from vta.errors import VtaError

__all__ = ["main"]

_DESCRIPTION = "The vta command: compile, simulate, run on a GPU, tune and sweep."


def _handler(name: str) -> Callable[..., int]:
    """``"run.main"`` -> ``vta.cli.run.main``: a command's module is imported when it runs."""
    module, _, func = name.partition(".")
    return getattr(import_module(f"vta.cli.{module}"), func)  # type: ignore[no-any-return]


def process_age() -> float | None:
    """Seconds since this process started (Linux: ``/proc/self/stat``'s start time against the
    clock since boot, at the kernel's clock-tick resolution); None where that cannot be read.
    ``vta run`` reports the startup (the interpreter and the imports) from it."""
    try:
        with open("/proc/self/stat") as f:
            stat = f.read()
        ticks = int(stat.rpartition(")")[2].split()[19])  # field 22, starttime
        return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vta`` console script."""
    try:
        now, age = time.perf_counter(), process_age()
        args = build_parser(_DESCRIPTION).parse_args(argv)
        handler = _handler(args.handler)
        # when the process started and when the command was ready to run (imports done), on
        # perf_counter's clock: ``vta run`` breaks its wall time down with them
        args.clock = (now - (age if age is not None and argv is None else 0.0),
                      time.perf_counter())
        return handler(args)
    except VtaError as e:
        msg = str(e).replace("\n", " ")  # one line, whatever the message
        print(f"vta: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # pragma: no cover
        return 130
    except BrokenPipeError:  # the reader went away (``vta run ... | head``): no traceback;
        # status 1 (the output is incomplete), as rich's Console does for the tables
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's own flush at exit must not fail too
        return 1
    except Exception as e:  # a bug in vta: still one line, and a distinct status
        msg = " ".join(str(e).split())
        print(f"vta: internal error: {type(e).__name__}: {msg} (this is a bug in vta, not in "
              f"your input: please report it with the command line)", file=sys.stderr)
        return 3


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
