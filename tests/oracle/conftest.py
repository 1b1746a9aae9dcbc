"""The vta.cc oracle's tests (tools/vta_oracle, docs/simulator.md "The vta.cc oracle").

Tests marked ``oracle`` compile and run apache/tvm-vta's vta.cc: they are skipped, saying
why, unless ``VTA_ORACLE_TVM_VTA`` and ``VTA_ORACLE_AP_INT`` name the two source trees. The
others (the config's macros, the DRAM mapping, the errors, the layout check, the comparison)
are ours and always run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # tools/ is not installed: import it from this checkout
    sys.path.insert(0, str(ROOT))

from tools.vta_oracle.build import ENV_AP_INT, ENV_TVM_VTA, Driver, build_driver  # noqa: E402
from tools.vta_oracle.build import locate_sources as _locate  # noqa: E402
from vta.config import HwConfig  # noqa: E402

MISSING = [v for v in (ENV_TVM_VTA, ENV_AP_INT) if not os.environ.get(v)]
SKIP_REASON = (f"the vta.cc oracle needs {' and '.join(MISSING)} (a checkout of apache/tvm-vta "
               f"and Xilinx's HLS_arbitrary_Precision_Types; docs/simulator.md)")


@pytest.fixture(autouse=True)
def _needs_sources(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("oracle") is not None and MISSING:
        pytest.skip(SKIP_REASON)


@pytest.fixture(scope="session")
def oracle_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the tests build drivers: their own folder, never the user's cache."""
    return tmp_path_factory.mktemp("oracle-cache")


@pytest.fixture(scope="session")
def pynq_driver(oracle_cache: Path) -> Driver:
    """The driver for the shipped pynq config (built once per session)."""
    if MISSING:
        pytest.skip(SKIP_REASON)
    return build_driver(HwConfig.load("pynq"), _locate(), cache=oracle_cache)
