"""The ``vta`` command. It only wires the library together: parse arguments, call, print.

``vta.cli.parser`` builds every parser (the only argparse in vta); each command lives in its
own module here (``info``, ``sim``, ``run``, ``tc``, ``tune``: tune, cache and sweep), which
``main`` imports when that command runs, so a command loads only what it uses (``run`` loads
``run_layers`` the same way for a layer's run, and reads the cache file through ``cached``,
not ``tune``). ``main`` starts what the command needs first before importing its module
(``early``: ``vta run resnet18``'s weight draws; stopped after it where it went unused) and
notes when the process started and when the command was ready (``args.clock``), from which
``vta run`` reports its startup.
``console`` is the program (the console script, ``python -m vta.cli``): ``main``, then the
exit, quick after ``vta run``.

Every user error (a ``VtaError``, or a bad command line: an unknown flag, a value of the wrong
type or range, a flag that does not apply to the workload or target) is printed as one line
``vta: error: ...`` on stderr and exits with status 2; a failed correctness check exits with
status 1, as does output cut short by a reader that closed the pipe (silently). Anything else
is a bug in vta: one line ``vta: internal error: ...`` and status 3.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import NoReturn

from vta._collector import collector_paused

# (the command's imports, here and in ``_command``, without the cycle collector: what they make
# lives as long as the process, none of it garbage)
with collector_paused():
    from vta.cli import early
    from vta.cli.parser import build_parser
    from vta.errors import VtaError
    from vta.run.pool import one_blas_thread

__all__ = ["main", "console", "QUICK_EXIT"]

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


#: commands after which the ``vta`` program ends without Python's teardown (``console``):
#: ``vta run`` holds a whole network (its programs, constants, simulations and values) until
#: it ends, and freeing it object by object after the report was printed took 0.1-0.25 s of
#: the process's wall (a warm ``vta run resnet18``: 0.20-0.27 s at load 4, 0.02 s without)
QUICK_EXIT = frozenset({"run.main"})


def main(argv: Sequence[str] | None = None) -> int:
    """The ``vta`` command on ``argv`` (default: the process's); its exit status."""
    return _command(argv)[0]


def console() -> NoReturn:
    """The ``vta`` program (the console script, ``python -m vta.cli``): ``main``, then the
    process exits with its status. After a ``QUICK_EXIT`` command, with no other thread left,
    it ends as Python's own exit would (the exit handlers run, stdout and stderr flushed)
    except that nothing is freed one object at a time: the operating system takes the
    memory back at once (``os._exit``)."""
    status, command = _command(None)
    if command in QUICK_EXIT and threading.active_count() == 1:
        atexit._run_exitfuncs()  # what Python's exit runs before its teardown
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a reader gone, a closed stream: nothing to flush
                status = status or 1
        os._exit(status)
    sys.exit(status)


def _command(argv: Sequence[str] | None) -> tuple[int, str | None]:
    """``main``'s status, and the command's handler (``"run.main"``; None when the command
    line did not parse)."""
    command = None
    try:
        now, age = time.perf_counter(), process_age()
        # the command's module and everything below it imported without the cycle
        # collector (``collector_paused``; the start of a ``vta run``, to its first error,
        # callgrind: 841.5M -> 810.6M instructions with vta's own imports paused too)
        with collector_paused():
            args = build_parser(_DESCRIPTION).parse_args(argv)
            command = args.handler
            one_blas_thread()  # the command's parallelism is its processes (vta.run.pool)
            early.start(args)  # ahead of the command's imports; ``early.finish`` after it
            handler = _handler(args.handler)
        # when the process started and when the command was ready to run (imports done), on
        # perf_counter's clock: ``vta run`` breaks its wall time down with them
        args.clock = (now - (age if age is not None and argv is None else 0.0),
                      time.perf_counter())
        return handler(args), command
    except VtaError as e:
        msg = str(e).replace("\n", " ")  # one line, whatever the message
        print(f"vta: error: {msg}", file=sys.stderr)
        return 2, command
    except KeyboardInterrupt:  # pragma: no cover
        return 130, command
    except BrokenPipeError:  # the reader went away (``vta run ... | head``): no traceback;
        # status 1 (the output is incomplete), as rich's Console does for the tables
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's own flush at exit must not fail too
        return 1, command
    except Exception as e:  # a bug in vta: still one line, and a distinct status
        msg = " ".join(str(e).split())
        print(f"vta: internal error: {type(e).__name__}: {msg} (this is a bug in vta, not in "
              f"your input: please report it with the command line)", file=sys.stderr)
        return 3, command
    finally:
        early.finish()  # (the weight draws of a run that ended before its build)


if __name__ == "__main__":  # pragma: no cover
    console()
