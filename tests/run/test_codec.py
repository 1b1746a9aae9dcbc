"""``vta.run.codec``: a compiled kernel as bytes (``isa.encoding``'s words); a program with a
value that does not fit its field is not packed (None), as ``encode`` refuses it, and never
comes back as another program."""

from __future__ import annotations

import os
import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from vta.compiler.accel import driver
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.errors import IsaError
from vta.graph import models
from vta.graph.compile import CompiledGraph
from vta.isa import encoding
from vta.isa.encoding import EncodedUops, decode_program, encode_program, encode_uops
from vta.run.codec import decode_distinct, pack_compiled, unpack_compiled
from vta.run.graph import compile_for, run_graph
from vta.run.targets import AccelTarget

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compiled() -> tuple[driver.Compiled, HwConfig]:
    hw = HwConfig.load(ROOT / "hwconfigs" / "pynq.yaml")
    w = resolve("resnet18:C11", [], height=7, in_channels=64, out_channels=64)
    return driver.compile_workload(w, hw), hw


def test_a_round_trip_gives_the_program(compiled: tuple[driver.Compiled, HwConfig]) -> None:
    c, hw = compiled
    blob = pack_compiled(c, hw)
    assert blob is not None
    back = unpack_compiled(blob, hw)
    assert back.program == c.program and back.schedule == c.schedule


def test_a_value_out_of_its_field_is_not_packed(
        compiled: tuple[driver.Compiled, HwConfig]) -> None:
    """An SRAM base, an immediate or a micro-op index one past its field: ``encode`` refuses
    the instruction and the codec packs nothing (the masked word would decode to another)."""
    c, hw = compiled
    prog = c.program
    i = next(k for k, x in enumerate(prog.instructions) if hasattr(x, "sram_base"))
    j = next(k for k, x in enumerate(prog.instructions) if hasattr(x, "imm"))
    for k, change in ((i, {"sram_base": 1 << 16}), (j, {"imm": 1 << 15}),
                      (j, {"imm": -(1 << 15) - 1})):
        bad = list(prog.instructions)
        bad[k] = replace(bad[k], **change)
        with pytest.raises(IsaError):
            encode_program(bad, hw)
        broken = replace(c, result=replace(c.result, program=replace(
            prog, instructions=tuple(bad))))
        assert pack_compiled(broken, hw) is None
    name, uops = next(iter(prog.uops.items()))
    wide = (replace(uops[0], dst=1 << hw.isa.acc_idx), *uops[1:])
    with pytest.raises(IsaError):
        encode_uops(wide, hw)
    broken = replace(c, result=replace(c.result, program=replace(
        prog, uops={**prog.uops, name: wide})))
    assert pack_compiled(broken, hw) is None


def test_equal_words_decode_to_one_shared_instruction(
        compiled: tuple[driver.Compiled, HwConfig]) -> None:
    """``decode_distinct`` gives ``decode_program``'s instructions, in order, each distinct word
    decoded once: every repeat of a word is the same object (what linking's relocation memo and
    the simulator key on)."""
    c, hw = compiled
    words = encode_program(c.program.instructions, hw)
    got = decode_distinct(words, hw)
    assert list(got) == decode_program(words, hw)
    assert got == c.program.instructions
    rows = [tuple(r) for r in words.tolist()]
    assert len(rows) > len(set(rows))  # a tiled program repeats instructions
    first: dict[tuple[int, ...], object] = {}
    for row, insn in zip(rows, got, strict=True):
        assert first.setdefault(row, insn) is insn
    assert len({id(x) for x in got}) == len(set(rows))
    assert decode_distinct(words[:0], hw) == ()


def _decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts ``decode_uops`` calls in this process (one per micro-op buffer decoded)."""
    calls: list[int] = []
    real = encoding.decode_uops
    pid = os.getpid()

    def counted(*a: Any, **k: Any) -> Any:
        if os.getpid() == pid:  # (a forked worker's are its own)
            calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(encoding, "decode_uops", counted)
    return calls


def test_micro_ops_come_back_encoded_and_decode_where_read(
        compiled: tuple[driver.Compiled, HwConfig], monkeypatch: pytest.MonkeyPatch) -> None:
    """An unpacked program's micro-ops stay words (``EncodedUops``) until a buffer is read;
    renaming them (linking) decodes nothing; each buffer decodes once, and they equal the
    compiled program's (and pickle as such)."""
    c, hw = compiled
    blob = pack_compiled(c, hw)
    assert blob is not None
    calls = _decodes(monkeypatch)
    uops = unpack_compiled(blob, hw).program.uops
    assert isinstance(uops, EncodedUops) and calls == []
    assert uops.count() == sum(len(u) for u in c.program.uops.values())
    names = {k: f"s0#{k}" for k in uops}
    moved = uops.renamed(names)
    assert calls == [] and list(moved) == list(names.values())
    name = next(iter(uops))
    assert uops[name] == c.program.uops[name] and uops[name] is uops[name]
    assert len(calls) == 1
    assert uops == c.program.uops and len(calls) == len(uops)
    assert {names[k]: v for k, v in c.program.uops.items()} == moved
    assert pickle.loads(pickle.dumps(uops)) == c.program.uops


class _Words:
    """A compile cache in memory that keeps programs as the compile cache does (the codec's
    bytes), so that every hit comes back as words."""

    def __init__(self, hw: HwConfig) -> None:
        self.hw = hw
        self.rows: dict[str, bytes] = {}

    def get(self, key: str) -> Any:
        blob = self.rows.get(key)
        return None if blob is None else unpack_compiled(blob, self.hw)

    def put(self, key: str, compiled: Any) -> None:
        blob = pack_compiled(compiled, self.hw)
        if blob is not None:
            self.rows[key] = blob


def test_a_warm_graph_decodes_its_micro_ops_in_the_workers_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph compiled from the cache's words (a warm ``vta run``) is linked and its kernels
    simulated side by side without this process decoding one micro-op buffer (each worker
    decodes its kernels'); the run is the run of the graph compiled afresh, in order."""
    hw = HwConfig.load(ROOT / "hwconfigs" / "pynq.yaml")
    g = models.resnet18(image=32, width=16, classes=10)
    image = models.random_image(0, g.inputs[0].type.shape)
    fresh = AccelTarget(hw, _Words(hw))
    first = compile_for(g, fresh, jobs=1)
    assert isinstance(first, CompiledGraph)
    calls = _decodes(monkeypatch)
    warm = compile_for(g, AccelTarget(hw, fresh.memo), jobs=1)
    assert isinstance(warm, CompiledGraph)
    assert all(isinstance(p.uops, EncodedUops) for p in warm.programs if p is not None)
    side = run_graph(warm, image, jobs=2, timelines=False)
    assert calls == []
    in_order = run_graph(first, image, jobs=1)
    assert side.passed and side.cycles == in_order.cycles
    assert warm.programs == first.programs
