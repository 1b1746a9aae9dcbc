"""The cache file as the commands find it, and what ``vta run`` does with it.

``cache_path`` reads the environment (``VTA_CACHE``, ``XDG_CACHE_HOME``) at the command line's
edge and passes a path down; ``run_compile_cache`` is ``vta run``'s use of the compile cache
(``vta.tune.compile_cache``, in the same file as the tuning cache), ``say_cache`` its line on
stderr. This module is apart from ``vta.cli.tune`` so that ``vta run`` of a whole graph loads
neither the tuner, the sweeps nor their progress bars.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from vta.intrinsics import load_entry_points, load_plugin
from vta.run.targets import AccelTarget, Target
from vta.tune.cache import default_cache_path, open_cache
from vta.tune.compile_cache import CompileCache

__all__ = ["load_plugins", "cache_path", "open_cache_for", "run_compile_cache", "say_cache",
           "when"]


def load_plugins(args: argparse.Namespace) -> None:
    """The installed ``vta.intrinsics`` entry points, then each ``--plugin`` (``vta run``,
    ``tune`` and ``sweep``, before the hardware config is read)."""
    load_entry_points()
    for spec in getattr(args, "plugin", None) or ():
        load_plugin(spec)


def cache_path(args: argparse.Namespace) -> Path:
    """``--cache FILE``, else ``$VTA_CACHE``, else the user cache directory's file."""
    given = getattr(args, "cache", None)
    return Path(given) if given else default_cache_path(os.environ)


def open_cache_for(args: argparse.Namespace, *, create: bool) -> Any:
    """The cache (None with ``--no-cache``, or when reading a file that does not exist)."""
    return open_cache(None if getattr(args, "no_cache", False) else cache_path(args),
                      create=create)


@contextmanager
def run_compile_cache(args: argparse.Namespace, target: Target) -> Iterator[CompileCache | None]:
    """For ``vta run`` on the accelerator: the compile cache in the cache file (``--cache``,
    else ``$VTA_CACHE``, else the user's; created when missing) set as ``target``'s memo for
    the duration of a ``with``, so the layers and graph kernels it holds are not compiled and
    those compiled are kept (and, through ``CompileCache.graph_later``, the built-in models: a
row the run left unwritten is written at the end of the ``with``, even when the run fails). None
    (no memo) with ``--no-cache``, with ``--dump-ir`` (the IR after each pass is not kept) and
    on a GPU target. A cache this process may not write is read (what it holds is used,
    nothing is kept)."""
    if not isinstance(target, AccelTarget) or args.no_cache or getattr(args, "dump_ir", None):
        yield None
        return
    path = cache_path(args)
    writable = not path.exists() or (os.access(path, os.W_OK)
                                     and os.access(path.parent, os.W_OK))
    with open_cache(path, create=writable) as cache:
        assert cache is not None  # the file exists, or is created
        memo = CompileCache(cache, target.hw)
        target.memo = memo
        try:
            yield memo
        except BaseException:
            with suppress(Exception):  # the run's own error is the one to report
                memo.write_pending()
            raise
        else:
            memo.write_pending()  # a built model's row, when the run left it to write
        finally:
            target.memo = None


def say_cache(memo: CompileCache | None) -> None:
    """One line on stderr (stdout stays the report or the JSON) saying what the compile cache
    answered and what was compiled."""
    if memo is None:
        return
    s = memo.stats
    damaged = f", {s['rejected']} damaged rows compiled again" if s["rejected"] else ""
    graph = "; the graph from the cache" if memo.graph_hits else \
        "; the graph's damaged row built again" if memo.graph_rejected else ""
    print(f"compile cache {memo.cache.path}: {s['hits']} from the cache, {s['misses']} "
          f"compiled{damaged}{graph}", file=sys.stderr)


def when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "-"
