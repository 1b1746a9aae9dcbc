"""``vta sim``: success paths and every bad input, through ``vta.cli.main``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vta.cli import main

ROOT = Path(__file__).resolve().parents[2]
HW = str(ROOT / "hwconfigs" / "pynq.yaml")
EXAMPLES = sorted((ROOT / "examples").glob("*.asm"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_pass(path, capsys):
    assert main(["sim", str(path), "--hw", HW, "--seed", "7"]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "cycles" in out and "per-unit cycles" in out


def test_json_trace_and_outputs(tmp_path, capsys):
    a = np.arange(64, dtype=np.int8).reshape(4, 16)
    np.save(tmp_path / "a.npy", a)
    trace = tmp_path / "t.json"
    rc = main(["sim", str(ROOT / "examples" / "gemm_tiny.asm"), "--hw", HW, "--json",
               "--input", f"A={tmp_path / 'a.npy'}", "--trace", str(trace),
               "--save-outputs", str(tmp_path / "out")])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["check"]["passed"] is True and doc["check"]["mismatched"] == []
    assert doc["check"]["how"] == "bit-exact"
    assert doc["cycles"] > 0 and doc["gemm_ops"] == 4
    assert json.loads(trace.read_text())["traceEvents"]
    assert np.array_equal(np.load(tmp_path / "out" / "A.npy").reshape(4, 16), a)
    assert np.load(tmp_path / "out" / "C.npy").shape == (4, 1, 16)


def test_timing_only(capsys):
    assert main(["sim", str(ROOT / "examples" / "gemm_tiny.asm"), "--hw", HW,
                 "--timing-only", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["timing_only"] and doc["check"] is None and doc["acc_hazards"] is None


def _asm(tmp_path, text):
    p = tmp_path / "p.asm"
    p.write_text(text)
    return str(p)


RACY = """.alloc X acc 4
.alloc Y out 4
.alloc U uop 1
.uop U 0 0 0
LOAD.UOP sram=0 dram=U+0 y=1 x=1 stride=1
LOAD.ACC sram=0 dram=X+0 y=1 x=4 stride=4
ALU.ADD uop=0:1 iter=4,1 dst=1,0 src=1,0 imm=1
STORE.OUT sram=0 dram=Y+0 y=1 x=4 stride=4
FINISH
"""


def test_racy_program_fails_the_check(tmp_path, capsys):
    """Without a token the store runs before the ALU: the machine differs from the reference."""
    assert main(["sim", _asm(tmp_path, RACY), "--hw", HW]) == 1
    out = capsys.readouterr().out
    assert "FAIL: Y differs from the reference interpreter (bit-exact required)" in out


@pytest.mark.parametrize("text,extra,message", [
    (None, [], "missing.asm: cannot read file"),
    ("GEMM uop=0:1\n", [], "p.asm:1: missing operand(s) dst, iter, src, wgt"),
    (".alloc A inp 4\nLOAD.INP sram=0 dram=A+0 y=1 x=4 stride=4 | pop_next\nFINISH\n", [],
     "deadlock at cycle"),
    (".alloc A inp 4\nLOAD.INP sram=0 dram=A+0 y=2 x=4 stride=4\n", [],
     "instruction 0 (LOAD.INP sram=0 dram=A+0 y=2 x=4 stride=4): DRAM inp element 7"),
    (".alloc A inp 4\nFINISH\n", ["--input", "B={npy}"], "no DRAM allocation named 'B'"),
    (".alloc A inp 4\nFINISH\n", ["--input", "A={npy}"], "input 'A' (inp): expected shape"),
    (".alloc A inp 4\nFINISH\n", ["--input", "A"], "--input 'A': expected NAME=FILE.npy"),
    (".alloc A inp 4\nFINISH\n", ["--input", "A=nothere.npy"], "--input A: cannot read"),
])
def test_bad_inputs(tmp_path, capsys, text, extra, message):
    np.save(tmp_path / "x.npy", np.zeros(3, dtype=np.int8))
    path = _asm(tmp_path, text) if text is not None else str(tmp_path / "missing.asm")
    extra = [e.replace("{npy}", str(tmp_path / "x.npy")) for e in extra]
    assert main(["sim", path, "--hw", HW, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vta: error: ") and message in err
    assert "Traceback" not in err
