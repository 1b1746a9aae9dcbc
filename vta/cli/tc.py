"""``vta tc show FILE [--entry NAME] [--size N=..]``: each TC statement's inferred domain."""

from __future__ import annotations

import argparse

from vta.compiler.tc import definitions, describe, load_file, parse_sizes

__all__ = ["main"]


def main(args: argparse.Namespace) -> int:
    sizes = parse_sizes(args.size)
    names = [args.entry] if args.entry else definitions(args.file)
    texts = []
    for name in names:
        d = load_file(args.file, name)
        texts.append(describe(d, d.at(sizes) if sizes else None))
    print("\n\n".join(texts))
    return 0
