"""``passes._common.distinct``: ``np.unique`` of a 1-D array without ``numpy.ma``; a compile
(drain_tail's and coproc_sync's distinct entries and boundaries) loads no masked arrays."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from vta.compiler.accel.passes._common import distinct

ROOT = Path(__file__).resolve().parents[2]


@given(hnp.arrays(np.int64, st.integers(0, 200), elements=st.integers(-50, 50)))
def test_distinct_is_np_unique(a: np.ndarray) -> None:
    got = distinct(a)
    want = np.unique(a)
    assert got.dtype == want.dtype
    assert got.tolist() == want.tolist()


def test_a_compile_loads_no_masked_arrays() -> None:
    """numpy 2's ``np.unique`` of values alone imports ``numpy.ma`` at its first call; a
    fresh process compiling a layer (its candidates timed) never asks for it."""
    code = ("import json, sys\nfrom vta.config import HwConfig\n"
            "from vta.compiler.accel import driver\n"
            "from vta.compiler.ops.workloads import resolve\n"
            "from vta.run.targets import AccelTarget\n"
            "hw = HwConfig.load('hwconfigs/pynq.yaml')\n"
            "w = resolve('resnet18:C11', [], height=7, in_channels=64, out_channels=64)\n"
            "c = AccelTarget(hw).compile_layer(w)\n"
            "print(json.dumps([len(c.program.instructions) > 0, 'numpy.ma' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out) == [True, False]
