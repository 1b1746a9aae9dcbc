"""``python -m vta.cli``: the ``vta`` command."""

from vta.cli import console

console()
