"""``vta info --hw HW``: a hardware config's derived values, resource estimate and board fit."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from vta.config import HwConfig
from vta.resources import BOARDS, fits, published_comparison, shares

__all__ = ["main"]

#: summary entries printed one item a line
_MULTILINE = ("resource_breakdown", "boards", "against VTA's published PYNQ design")


def main(args: argparse.Namespace) -> int:
    hw = HwConfig.load(args.hw)
    summary = hw.summary()
    est = hw.resource_estimate()
    summary["boards"] = {b.name: ("fits" if fits(est, b.limits) else "does not fit") + " (" +
                         ", ".join(f"{k} {v:.0%}" for k, v in shares(est, b.limits).items()) +
                         ")" for b in BOARDS.values()}
    summary["against VTA's published PYNQ design"] = {
        what: f"published {pub}; estimate {mine}: {verdict}"
        for what, pub, mine, verdict in published_comparison(hw)}
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    table = Table(title=f"{hw.name} ({hw.source})", show_header=False)
    for key, value in summary.items():
        if isinstance(value, dict):
            sep = "\n" if key in _MULTILINE else "  "
            value = sep.join(f"{k}={v}" for k, v in value.items())
        table.add_row(key, str(value))
    Console().print(table)
    return 0
