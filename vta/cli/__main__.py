"""``python -m vta.cli``: the ``vta`` command."""

import sys

from vta.cli import main

sys.exit(main())
