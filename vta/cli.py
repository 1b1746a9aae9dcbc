"""The ``vta`` command. It only wires the library together: parse arguments, call, print.

Every user error (a ``VtaError``) is printed as one line on stderr and exits with status 2;
a failed correctness check exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Callable, Sequence

from vta.errors import VtaError

__all__ = ["main"]


def _cmd_info(args: argparse.Namespace) -> int:
    from vta.config import HwConfig

    hw = HwConfig.from_yaml(args.hw)
    summary = hw.summary()
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{hw.name} ({hw.source})", show_header=False)
    for key, value in summary.items():
        if isinstance(value, dict):
            value = "  ".join(f"{k}={v}" for k, v in value.items())
        table.add_row(key, str(value))
    Console().print(table)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vta", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    info = sub.add_parser("info", help="print a hardware config's derived values")
    info.add_argument("--hw", required=True, help="hardware config YAML")
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    info.set_defaults(func=_cmd_info)

    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vta`` console script."""
    args = _parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except VtaError as e:
        print(f"vta: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # pragma: no cover
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
