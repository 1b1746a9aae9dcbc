"""Fetch's DMA timing is memoised per (config, batch, first word) (``machine._fetch_timing``):
the same object as ``fetch_timing`` gives, asked once per distinct batch across runs."""

from __future__ import annotations

from vta.config import HwConfig
from vta.isa.timing import fetch_timing
from vta.sim import machine

PYNQ = HwConfig.from_yaml("hwconfigs/pynq.yaml")


def test_fetch_timing_memoised() -> None:
    machine._fetch_timing.cache_clear()
    for first in (0, 8, 4096, 8):
        got = machine._fetch_timing(PYNQ, 8, first)
        assert got == fetch_timing(PYNQ, 8, first)
        assert machine._fetch_timing(PYNQ, 8, first) is got
    info = machine._fetch_timing.cache_info()
    assert (info.misses, info.hits) == (3, 5)
