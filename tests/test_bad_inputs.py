"""The bad-input corpus: every input a user can get wrong, through ``vta info|sim|run``.

Each case asserts what a user sees: exit status 2, exactly one line on stderr starting with
``vta: error:``, the culprit named (the file, field, line, flag or shape), no traceback and
nothing on stdout. The cases cover hardware descriptions (every field: missing when required,
wrong type, negative, zero where zero is invalid, absurd; duplicate and unknown keys, syntax
errors, non-UTF-8 and empty files), assembly programs (unknown mnemonics, field overflow, SRAM
and DRAM out of range, deadlock, absurd allocations, garbage bytes, empty programs), command
lines (every flag with a wrong type, a negative and an absurd value; flags that do not apply)
and ``--input`` arrays (wrong dtype, shape, range). Everything is refused before compiling or
simulating anything large, so the whole file runs in seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.cli import main
from vta.config import _SECTIONS, MAX_FIELD

ROOT = Path(__file__).resolve().parents[1]
PYNQ = ROOT / "hwconfigs" / "pynq.yaml"
HW = str(PYNQ)
GEMM_TINY = str(ROOT / "examples" / "gemm_tiny.asm")


def refused(argv: list[str], capsys: pytest.CaptureFixture[str], *culprits: str) -> str:
    """Run the CLI; assert exit 2, one ``vta: error:`` line naming every culprit, no
    traceback, no stdout. Returns the line."""
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, (rc, out, err)
    assert err.startswith("vta: error: ") and err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err and out == "", (out, err)
    for c in culprits:
        assert c in err, (c, err)
    return err


# ============================================================================ YAML


def pynq_dict() -> dict[str, Any]:
    return yaml.safe_load(PYNQ.read_text())


def schema() -> dict[str, dataclasses.Field]:  # type: ignore[type-arg]
    out = {}
    for sec, cls in _SECTIONS.items():
        for f in dataclasses.fields(cls):
            out[f"{sec}.{f.name}"] = f
    return out


FIELDS = schema()
NUMERIC = [k for k, f in FIELDS.items() if str(f.type) in ("int", "float", "int | None")]
REQUIRED = ["name"] + [k for k, f in FIELDS.items() if f.default is dataclasses.MISSING]
#: fields where 0 is documented as valid (docs/hwconfig.md: "≥ 0")
ZERO_OK = {"memory.latency", "memory.row_overhead", "board.dsp", "board.bram36", "board.lut",
           "gemm.fill", "alu.fill"}
WRONG_TYPE = {"int": "sixteen", "float": "fast", "str": 5, "bool": "yes",
              "tuple[str, ...]": "add", "int | None": "sixteen", "bool | None": "yes",
              "str | None": 5}


def mutated(key: str, value: object) -> dict[str, Any]:
    d = pynq_dict()
    *parents, leaf = key.split(".")
    node = d
    for p in parents:
        node = node.setdefault(p, {})  # a section the file leaves out (energy)
    if value is DELETE:
        del node[leaf]
    else:
        node[leaf] = value
    return d


DELETE = object()

YAML_CASES: list[tuple[str, object]] = (
    [(k, DELETE) for k in REQUIRED]
    + [(k, WRONG_TYPE[str(f.type)]) for k, f in FIELDS.items()] + [("name", 7)]
    + [(k, -1) for k in NUMERIC]
    + [(k, 0) for k in NUMERIC if k not in ZERO_OK]
    + [(k, 1 << 40) for k in NUMERIC]
    + [(k, v) for k, v in (("gemm.inp_dtype", "int1024"), ("gemm.out_dtype", "float8"),
                           ("alu.ops", ["fma"]), ("name", "  "), ("board.part", ""),
                           ("board.clock_mhz", float("nan")), ("board.clock_mhz", float("inf")),
                           ("gemm.block_in", 1 << 30), ("gemm.batch", 1 << 20),
                           ("gemm.block_out", 1 << 24), ("scratchpad.wgt", 1 << 30),
                           ("scratchpad.uop", 1 << 30), ("alu.imm_bits", 33),
                           ("timing_model", 5), ("timing_model", "rtl"),
                           ("stock", "yes"),  # pynq claims stock VTA: no MUL
                           ("alu.ops", ["min", "max", "add", "shr", "mul"]),
                           ("alu.acc_banks", 3), ("alu.acc_banks", 2),
                           ("alu.separate_pipeline", True), ("alu.ii_imm", None),
                           ("memory.arbiter", "fifo"), ("memory.uop_beat_bytes", 16),
                           ("memory.uop_beat_bytes", 3), ("memory.burst_boundary", 4),
                           ("memory.burst_boundary", 1001))]
    # whole sections: not a mapping, empty, missing when required
    + [("queues", 5), ("board", None), ("gemm", [1, 2]), ("scratchpad", DELETE),
       ("memory", DELETE)]
)


@pytest.mark.parametrize("key,value", YAML_CASES,
                         ids=[f"{k}={'missing' if v is DELETE else repr(v)[:10]}"
                              for k, v in YAML_CASES])
def test_yaml_field(tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str,
                    value: object) -> None:
    p = tmp_path / "hw.yaml"
    p.write_text(yaml.safe_dump(mutated(key, value)))
    err = refused(["info", "--hw", str(p)], capsys, str(p))
    assert f": {key}: " in err or f": {key.split('.')[0]}." in err, err
    if value is DELETE:
        assert "missing required" in err
    if value == 1 << 40:
        assert f"must be at most {MAX_FIELD}" in err


def test_yaml_fields_the_corpus_covers() -> None:
    """Every schema field has a wrong-type, a negative (numbers) and an absurd case."""
    keys = {k for k, _ in YAML_CASES}
    assert keys >= set(FIELDS) | {"name"}
    assert {k for k, v in YAML_CASES if v == -1} == set(NUMERIC)
    assert {k for k, v in YAML_CASES if v == 1 << 40} == set(NUMERIC)


PYNQ_TEXT = PYNQ.read_text()
#: the line of pynq.yaml's gemm.block_in (the duplicate goes two lines later, after block_out)
BLOCK_IN_LINE = PYNQ_TEXT.splitlines().index("  block_in: 16") + 1
FILE_CASES: list[tuple[str, bytes, tuple[str, ...]]] = [
    ("duplicate key in a section",
     PYNQ_TEXT.replace("  block_out: 16\n", "  block_out: 16\n  block_in: 32\n").encode(),
     ("duplicate key 'block_in'", f"line {BLOCK_IN_LINE + 2}",
      f"first given at line {BLOCK_IN_LINE}")),
    ("duplicate section", (PYNQ_TEXT + "gemm:\n  batch: 1\n").encode(),
     ("duplicate key 'gemm'",)),
    ("duplicate name", ("name: other\n" + PYNQ_TEXT).encode(), ("duplicate key 'name'",)),
    ("unknown top-level key", (PYNQ_TEXT + "cache: {}\n").encode(),
     ("cache: unknown key",)),
    ("misspelt section", PYNQ_TEXT.replace("queues:", "queue:").encode(),
     ("queue: unknown key (did you mean 'queues'?)",)),
    ("unknown field", PYNQ_TEXT.replace("  lanes: 16", "  lane: 16").encode(),
     ("alu.lane: unknown key (did you mean 'lanes'?)",)),
    ("syntax error", b"name: x\ngemm: [1, 2\n", ("not valid YAML", "line 3")),
    ("bad indentation", PYNQ_TEXT.replace("  block_in: 16", " block_in: 16").encode(),
     ("not valid YAML", "line")),
    ("tab indentation", PYNQ_TEXT.replace("  batch: 1", "\tbatch: 1").encode(),
     ("not valid YAML",)),
    ("non-UTF-8 bytes", b"\xff\xfe\x00name: pynq\n", ("not UTF-8", "byte 0xff at offset 0")),
    ("latin-1 comment", PYNQ_TEXT.encode() + b"# caf\xe9\n", ("not UTF-8", "byte 0xe9")),
    ("empty file", b"", ("empty (no YAML document)",)),
    ("only comments", b"# nothing here\n\n", ("empty (no YAML document)",)),
    ("a list", b"- 1\n- 2\n", ("expected a mapping",)),
    ("a scalar", b"42\n", ("expected a mapping",)),
    ("two documents", (PYNQ_TEXT + "---\nname: b\n").encode(), ("not valid YAML",)),
    ("python tag", b"name: !!python/object:os.system x\n", ("not valid YAML",)),
    ("list as key", b"? [a, b]\n: 1\n", ("a key must be a name",)),
]


@pytest.mark.parametrize("case,data,culprits", FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_yaml_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, data: bytes,
                   culprits: tuple[str, ...]) -> None:
    p = tmp_path / "hw.yaml"
    p.write_bytes(data)
    refused(["info", "--hw", str(p)], capsys, str(p), *culprits)


def test_yaml_missing_file_and_directory(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    refused(["info", "--hw", str(tmp_path / "none.yaml")], capsys, "none.yaml",
            "cannot read file")
    refused(["info", "--hw", str(tmp_path)], capsys, str(tmp_path), "cannot read file")


def test_bad_yaml_reaches_sim_and_run_as_one_line(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "hw.yaml"
    p.write_bytes(b"\xff")
    refused(["sim", GEMM_TINY, "--hw", str(p)], capsys, "not UTF-8")
    refused(["run", "--hw", str(p), "matmul", "16", "16", "16"], capsys, "not UTF-8")


# ============================================================================ assembly

ALLOC = ".alloc A inp 16\n.alloc W wgt 1\n.alloc C out 16\n.alloc U uop 1\n.uop U 0 0 0\n"
ASM_CASES: list[tuple[str, str, tuple[str, ...]]] = [
    ("unknown mnemonic", "FOO x=1\n", ("p.asm:1", "unknown instruction 'FOO'")),
    ("lower-case typo", "finsh\n", ("p.asm:1", "unknown instruction 'finsh'")),
    ("unknown ALU op", "ALU.FMA uop=0:1 iter=1,1 dst=0,0 src=0,0\n", ("unknown ALU op 'FMA'",)),
    ("unknown memory type", ALLOC + "LOAD.BIAS sram=0 dram=A+0 y=1 x=1 stride=1\n",
     ("p.asm:6", "unknown memory type 'BIAS'")),
    ("GEMM suffix", "GEMM.X uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0\n",
     ("GEMM takes no suffix",)),
    ("FINISH operand", "FINISH now\n", ("FINISH takes no operands",)),
    ("unknown operand", ALLOC + "LOAD.INP sram=0 dram=A+0 y=1 x=1 stride=1 len=3\n",
     ("unknown operand 'len'",)),
    ("missing operands", "GEMM uop=0:1\n", ("missing operand(s) dst, iter, src, wgt",)),
    ("stray word", ALLOC + "LOAD.INP sram=0 dram=A+0 y=1 x=1 stride=1 now\n",
     ("unexpected word(s) now",)),
    ("not an integer", ALLOC + "LOAD.INP sram=zero dram=A+0 y=1 x=1 stride=1\n",
     ("sram: expected an integer, got 'zero'",)),
    ("float operand", ALLOC + "LOAD.INP sram=1.5 dram=A+0 y=1 x=1 stride=1\n",
     ("sram: expected an integer",)),
    ("bad pair", "GEMM uop=0:1 iter=1 dst=0,0 src=0,0 wgt=0,0\n", ("iter: expected two",)),
    ("bad range", "GEMM uop=0 iter=1,1 dst=0,0 src=0,0 wgt=0,0\n", ("uop: expected 'begin:end'",)),
    ("three pads", ALLOC + "LOAD.INP sram=0 dram=A+0 y=1 x=1 stride=1 pad=1,1,1\n",
     ("pad: expected four integers",)),
    ("unknown flag", "FINISH | pop_all\n", ("unknown dependency flag 'pop_all'",)),
    ("unterminated quote", "FINISH 'x\n", ("p.asm:1",)),
    ("unknown directive", ".align 64\n", ("unknown directive '.align'",)),
    ("directive with flags", ".alloc A inp 4 | pop_prev\n", ("directives take no dependency",)),
    (".alloc arity", ".alloc A inp\n", (".alloc takes NAME KIND COUNT",)),
    (".alloc kind", ".alloc A bias 4\n", ("allocation 'A': kind must be one of",)),
    (".alloc negative", ".alloc A inp -4\n", ("element count must be >= 0",)),
    (".alloc twice", ".alloc A inp 4\n.alloc A wgt 4\n", ("p.asm:2", "declared twice")),
    (".alloc count not a number", ".alloc A inp many\n", ("count: expected an integer",)),
    (".uop arity", ".alloc U uop 1\n.uop U 0 0\n", (".uop takes NAME DST SRC WGT",)),
    (".uop unknown allocation", ".uop V 0 0 0\n", ("no uop allocation named 'V'",)),
    (".uop overflow", ".alloc U uop 1\n.uop U 99999 0 0\nFINISH\n", ("dst", "99999")),
    ("dram names no allocation", "LOAD.INP sram=0 dram=B+0 y=1 x=1 stride=1\n",
     ("no allocation named 'B'",)),
    ("dram of the wrong kind", ALLOC + "LOAD.WGT sram=0 dram=A+0 y=1 x=1 stride=1\n",
     ("allocation 'A' holds inp elements",)),
    # field overflow: each field's width comes from the HwConfig
    ("iter overflow", "GEMM uop=0:1 iter=16384,1 dst=0,0 src=0,0 wgt=0,0\n",
     ("iter_out=16384 does not fit in 14 bits",)),
    ("sram overflow", ALLOC + "LOAD.INP sram=70000 dram=A+0 y=1 x=1 stride=1\n",
     ("sram_base=70000",)),
    ("x_size overflow", ALLOC + "LOAD.INP sram=0 dram=A+0 y=1 x=65536 stride=65536\n",
     ("x_size=65536",)),
    ("pad overflow", ALLOC + "LOAD.INP sram=0 dram=A+0 y=1 x=1 stride=1 pad=16,0,0,0\n",
     ("pad_y0=16",)),
    ("imm overflow", "ALU.ADD uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=40000\n", ("imm=40000",)),
    ("negative dram", "LOAD.INP sram=0 dram=-1 y=1 x=1 stride=1\n", ("dram_base=-1",)),
    ("uop end overflow", "GEMM uop=0:99999 iter=1,1 dst=0,0 src=0,0 wgt=0,0\n",
     ("uop_end=99999",)),
    # out of range at run time: the instruction is named
    ("SRAM out of range", ALLOC + "LOAD.UOP sram=0 dram=U+0 y=1 x=1 stride=1\n"
     "GEMM uop=0:1 iter=3,1 dst=1100,0 src=0,0 wgt=0,0\nFINISH\n",
     ("instruction 1 (GEMM", "acc index 2200 out of range")),
    ("DRAM out of range", ALLOC + "LOAD.INP sram=0 dram=A+0 y=100 x=16 stride=16\nFINISH\n",
     ("instruction 0 (LOAD.INP", "DRAM inp element")),
    ("store past its allocation", ALLOC + "STORE.OUT sram=0 dram=C+8 y=1 x=16 stride=16\n"
     "FINISH\n", ("instruction 0 (STORE.OUT", "DRAM out element")),
    ("deadlock", ALLOC + "LOAD.INP sram=0 dram=A+0 y=1 x=1 stride=1 | pop_next\nFINISH\n",
     ("deadlock at cycle", "load unit waits on token queue compute->load")),
    ("flag without a queue", ALLOC + "LOAD.INP sram=0 dram=A+0 y=1 x=1 stride=1 | pop_prev\n"
     "FINISH\n", ("instruction 0", "pop_prev has no token queue")),
    # absurd allocations: refused before anything is allocated
    ("unaddressable allocation", ".alloc A inp 99999999999\nFINISH\n",
     ("p.asm:1", "allocation 'A'", "do not fit the DRAM address space")),
    ("allocation past 2**32 elements", ".alloc A inp 16\n.alloc B out 4294967295\nFINISH\n",
     ("allocation 'B'", "32-bit element addresses")),
    ("addressable but larger than the simulator", ".alloc A inp 500000000\nFINISH\n",
     ("DRAM image of 8,000,000,000 bytes", "largest allocation is 'A'")),
    ("huge uop allocation", ".alloc U uop 4000000000\nFINISH\n", ("largest allocation is 'U'",)),
    # nothing to run
    ("empty file", "", ("p.asm: no instructions",)),
    ("only comments", "# a program\n; still nothing\n\n", ("p.asm: no instructions",)),
    ("only allocations", ".alloc A inp 4\n", ("p.asm: no instructions",)),
    ("NUL bytes", "\x00\x01\x02\n", ("p.asm:1", "unknown instruction")),
    ("flags alone", "| pop_prev\n", ("p.asm:1", "dependency flags without an instruction")),
    ("empty quotes", "'' x\n", ("p.asm:1",)),
]


@pytest.mark.parametrize("case,text,culprits", ASM_CASES, ids=[c[0] for c in ASM_CASES])
def test_assembly(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, text: str,
                  culprits: tuple[str, ...]) -> None:
    p = tmp_path / "p.asm"
    p.write_text(text)
    refused(["sim", str(p), "--hw", HW], capsys, *culprits)


@pytest.mark.parametrize("data", [b"\xff\xfe\x00\x01", b"FINISH\n\x80\n", bytes(range(128, 256))],
                         ids=["utf16-bom", "stray-continuation", "high-bytes"])
def test_assembly_garbage_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                data: bytes) -> None:
    p = tmp_path / "p.asm"
    p.write_bytes(data)
    refused(["sim", str(p), "--hw", HW], capsys, str(p), "not UTF-8")


def test_assembly_missing_file_and_directory(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    refused(["sim", str(tmp_path / "no.asm"), "--hw", HW], capsys, "no.asm", "cannot read")
    refused(["sim", str(tmp_path), "--hw", HW], capsys, str(tmp_path), "cannot read")


# ============================================================================ command lines

#: (argv after the command, culprits) for ``vta run`` on the accelerator (default target).
RUN = ["run", "--hw", HW]
GPU = ["run", "--target", "cuda-emu"]
INT_FLAGS = ["batch", "height", "width", "in-channels", "out-channels", "kernel", "stride",
             "pad", "tco", "tci", "th", "tw", "vthreads"]
RUN_CASES: list[tuple[list[str], tuple[str, ...]]] = (
    [([*RUN, "conv2d", f"--{f}", "x"], (f"argument --{f}", "invalid int value: 'x'"))
     for f in INT_FLAGS]
    + [([*RUN, "conv2d", f"--{f}", "2.5"], (f"argument --{f}", "'2.5'")) for f in INT_FLAGS]
    + [([*RUN, "conv2d", f"--{f}", "-3"], (f"--{f}" if f not in ("tco", "tci", "th", "tw",
                                                                  "vthreads") else f,
                                           "-3"))
       for f in INT_FLAGS]
    + [([*RUN, "conv2d", f"--{f}", str(10 ** 9)], ("1000000000",)) for f in INT_FLAGS
       if f != "pad"]
    + [
        ([*RUN, "conv2d", "--pad", str(10 ** 9)], ("pad",)),
        ([*RUN, "conv2d", "--batch", "0"], ("--batch must be >= 1",)),
        ([*RUN, "conv2d", "--stride", "0"], ("--stride must be >= 1",)),
        ([*RUN, "conv2d", "--tco", "0"], ("tco must be >= 1",)),
        ([*RUN, "conv2d", "--vthreads", "0"], ("vthreads must be >= 1",)),
        ([*RUN, "matmul", "16", "16", "16", "--seed", "-1"], ("argument --seed", "-1")),
        ([*RUN, "matmul", "16", "16", "16", "--seed", "x"], ("argument --seed", "'x'")),
        ([*RUN, "matmul", "16", "16", "16", "--seed", str(1 << 64)], ("argument --seed",)),
        ([*RUN, "matmul", "16.5", "16", "16"], ("argument sizes", "'16.5'")),
        ([*RUN, "matmul", "sixteen"], ("argument sizes", "'sixteen'")),
        ([*RUN, "matmul", "0", "4", "4"], ("M must be >= 1",)),
        ([*RUN, "matmul", "4", "-4", "4"], ("N must be >= 1",)),
        ([*RUN, "matmul", "16", "16"], ("matmul takes three sizes M N K, got 2",)),
        ([*RUN, "matmul", "1", "2", "3", "4"], ("got 4",)),
        ([*RUN, "matmul", "1000000000", "1", "1"], ("matmul M=1000000000", "too large")),
        ([*RUN, "matmul", "1", "1", "1000000000"], ("K=1000000000", "too large")),
        ([*RUN, "dense", "--batch", "1000000000"], ("dense", "too large")),
        ([*RUN, "conv2d", "1", "2", "3"], ("conv2d takes no sizes, got 1 2 3",)),
        ([*RUN, "resnet18:C5", "7"], ("resnet18:C5 takes no sizes",)),
        ([*RUN, "resnet18", "16"], ("resnet18 takes no sizes",)),
        ([*RUN, "resnet18:C99"], ("unknown ResNet-18 layer 'C99'",)),
        ([*RUN, "resnet19"], ("unknown workload 'resnet19'",)),
        ([*RUN, "resnet18", "--layers", "C2,C99"], ("unknown ResNet-18 layer 'C99'",)),
        ([*RUN, "resnet18", "--layers", "C2,,C3"], ("--layers 'C2,,C3'",)),
        ([*RUN, "conv2d", "--kernel", "99"], ("kernel 99x99 does not fit",)),
        ([*RUN, "conv2d", "--pad", "5"], ("pad must be smaller than the kernel",)),
        ([*RUN, "conv2d", "--stride", "59"], ("--stride 59 is larger than the padded input",)),
        ([*RUN, "conv2d", "--dump-ir", "bogus"], ("unknown pass",)),
        ([*RUN, "conv2d", "--tco", "4", "--tci", "4", "--th", "56", "--tw", "56"],
         ("does not fit the inp scratchpad",)),
        ([*RUN, "conv2d", "--trace", "/nonexistent-dir/t.json"], ("/nonexistent-dir/t.json",)),
        (["run", "--hw", "/nonexistent.yaml", "conv2d"], ("/nonexistent.yaml",
                                                          "cannot read file")),
        # flags that do not apply to the workload
        ([*RUN, "matmul", "16", "16", "16", "--height", "5"],
         ("--height does not apply to matmul",)),
        ([*RUN, "matmul", "16", "16", "16", "--batch", "2"], ("--batch does not apply to matmul",)),
        ([*RUN, "matmul", "--kernel", "3"], ("--kernel does not apply to matmul",)),
        ([*RUN, "dense", "4", "4", "4", "--in-channels", "8"],
         ("--in-channels does not apply to dense",)),
        ([*RUN, "dense", "--stride", "2"], ("--stride does not apply to dense",)),
        ([*RUN, "resnet18", "--height", "5"], ("--height does not apply to the network",)),
        ([*RUN, "resnet18", "--pad", "0"], ("--pad does not apply to the network",)),
        ([*RUN, "resnet18", "--batch", "0"], ("--batch must be >= 1",)),
        ([*RUN, "resnet18", "--batch", "100000"], ("resnet18:C1", "N=100000", "too large")),
        ([*RUN, "conv2d", "--layers", "C3"], ("--layers does not apply to conv2d",)),
        ([*RUN, "matmul", "--layers", "C3"], ("--layers does not apply to matmul",)),
        ([*RUN, "conv2d", "--vthreads", "1", "--vt-axis", "oc"], ("--vt-axis does not apply",)),
        ([*RUN, "conv2d", "--no-latency-hiding", "--vt-axis", "oh"],
         ("--vt-axis does not apply",)),
        ([*RUN, "conv2d", "--emit-cuda"], ("--emit-cuda does not apply to --target vta",)),
        # flags that do not apply to a GPU target
        *[([*GPU, "matmul", "16", "16", "16", *flag],
           (f"{flag[0]} does not apply to --target cuda-emu",))
          for flag in (["--hw", HW], ["--tco", "1"], ["--tci", "1"], ["--th", "1"],
                       ["--tw", "1"], ["--vthreads", "2"], ["--vt-axis", "oc"],
                       ["--no-latency-hiding"], ["--dump-ir", "all"], ["--trace", "t.json"])],
        ([*GPU, "matmul", "100000", "100000", "100000"],
         ("matmul M=100000", "too large for the GPU targets")),
        ([*GPU, "conv2d", "--height", "100000"],
         ("64x100000x100000", "too large for the GPU targets")),
        ([*GPU, "dense", "--in-channels", str(10 ** 9)], ("K=1000000000", "too large")),
        ([*GPU, "matmul", "4", "4", "4", "--height", "2"], ("--height does not apply",)),
        ([*GPU, "matmul", "4", "4", "4", "--seed", "-2"], ("argument --seed",)),
        (["run", "conv2d", "1", "--target", "cuda-emu"], ("conv2d takes no sizes",)),
        ([*GPU, "conv2d", "--seed", "1", "2"], ("unrecognized arguments: 2",)),
        ([*RUN, "conv2d", "--target", "tpu"], ("argument --target", "'tpu'")),
        ([*RUN, "conv2d", "--vt-axis", "ow"], ("argument --vt-axis", "'ow'")),
        ([*RUN, "conv2d", "--epilogue", "relu"], ("argument --epilogue", "'relu'")),
        ([*RUN, "conv2d", "--bogus"], ("unrecognized arguments: --bogus",)),
        ([*RUN, "conv2d", "--height"], ("argument --height: expected one argument",)),
        ([*RUN, "conv2d", "--plot", "/no/such/dir/c2.png"],
         ("--plot /no/such/dir/c2.png", "no directory /no/such/dir")),
        ([*RUN, "conv2d", "--plot", "c2.xyz"], ("--plot c2.xyz", "'.xyz'", "png")),
        ([*RUN, "resnet18", "--plot", "net"], ("--plot net", "'(none)'")),
    ]
)


@pytest.mark.parametrize("argv,culprits", RUN_CASES,
                         ids=[" ".join(a[3:])[:60] for a, _ in RUN_CASES])
def test_run_arguments(argv: list[str], culprits: tuple[str, ...],
                       capsys: pytest.CaptureFixture[str]) -> None:
    refused(argv, capsys, *culprits)


OTHER_CASES: list[tuple[list[str], tuple[str, ...]]] = [
    ([], ("the following arguments are required: command",)),
    (["frobnicate"], ("argument command", "'frobnicate'")),
    (["info"], ("the following arguments are required: --hw",)),
    (["info", "--hw", HW, "--verbose"], ("unrecognized arguments: --verbose",)),
    (["sim", "--hw", HW], ("the following arguments are required: program",)),
    (["sim", GEMM_TINY], ("the following arguments are required: --hw",)),
    (["sim", GEMM_TINY, "--hw", HW, "--seed", "-1"], ("argument --seed", "-1")),
    (["sim", GEMM_TINY, "--hw", HW, "--seed", "1e3"], ("argument --seed", "'1e3'")),
    (["sim", GEMM_TINY, "--hw", HW, "--seed", str(10 ** 30)], ("argument --seed",)),
    (["sim", GEMM_TINY, "--hw", HW, "--timing-only", "--save-outputs", "d"],
     ("--save-outputs does not apply with --timing-only",)),
    (["sim", GEMM_TINY, "--hw", HW, "--timing-only", "--no-check"],
     ("--no-check does not apply with --timing-only",)),
    (["sim", GEMM_TINY, "--hw", HW, "--timing-only", "--input", "A=a.npy"],
     ("--input does not apply with --timing-only",)),
    (["sim", GEMM_TINY, "--hw", HW, "--trace", "/nonexistent-dir/t.json"],
     ("/nonexistent-dir/t.json",)),
    (["sim", GEMM_TINY, "--hw", HW, "--save-outputs", "/proc/nope"], ("--save-outputs",)),
    (["sim", GEMM_TINY, "--hw", HW, "--save-outputs", GEMM_TINY], ("--save-outputs",)),
]


@pytest.mark.parametrize("argv,culprits", OTHER_CASES,
                         ids=[" ".join(a)[-50:] or "nothing" for a, _ in OTHER_CASES])
def test_info_and_sim_arguments(argv: list[str], culprits: tuple[str, ...],
                                capsys: pytest.CaptureFixture[str]) -> None:
    refused(argv, capsys, *culprits)


def test_help_still_prints_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["run", "--help"])
    assert e.value.code == 0 and "--epilogue" in capsys.readouterr().out


# ============================================================================ --input arrays

INPUT_PROGRAM = ".alloc A inp 4\n.alloc B acc 2\n.alloc U uop 1\n.alloc C out 4\nFINISH\n"


def _npy(tmp_path: Path, arr: Any, name: str = "x.npy") -> str:
    p = tmp_path / name
    np.save(p, arr)
    return str(p)


INPUT_CASES: list[tuple[str, Any, tuple[str, ...]]] = [
    ("A", np.zeros((4, 1, 16), np.float32), ("input 'A' (inp)", "got dtype float32")),
    ("A", np.zeros((4, 1, 16), np.complex64), ("input 'A'", "complex64")),
    ("A", np.zeros((4, 1, 16), "U1"), ("input 'A'", "<U1")),
    ("A", np.zeros((3, 16), np.int8), ("input 'A' (inp)", "expected shape (4, 1, 16)",
                                       "got shape (3, 16)")),
    ("A", np.zeros((), np.int8), ("input 'A'", "got shape ()")),
    ("A", np.full((4, 1, 16), 300, np.int16), ("input 'A'", "values must lie in -128..127",
                                               "300")),
    ("A", np.full((4, 1, 16), -129, np.int32), ("input 'A'", "-129")),
    ("B", np.full((2, 1, 16), 1 << 40, np.int64), ("input 'B' (acc)",
                                                   "values must lie in -2147483648..2147483647")),
    ("B", np.zeros((2, 16), np.float64), ("input 'B' (acc)", "float64")),
    ("U", np.zeros(1, np.uint32), ("allocation 'U' holds micro-ops",)),
    ("Z", np.zeros(4, np.int8), ("no DRAM allocation named 'Z'",)),
]


@pytest.mark.parametrize("name,arr,culprits", INPUT_CASES,
                         ids=[f"{n}-{a.dtype}-{a.shape}" for n, a, _ in INPUT_CASES])
def test_input_arrays(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, arr: Any,
                      culprits: tuple[str, ...]) -> None:
    prog = tmp_path / "p.asm"
    prog.write_text(INPUT_PROGRAM)
    refused(["sim", str(prog), "--hw", HW, "--input", f"{name}={_npy(tmp_path, arr)}"], capsys,
            *culprits)


def test_input_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = tmp_path / "p.asm"
    prog.write_text(INPUT_PROGRAM)
    base = ["sim", str(prog), "--hw", HW, "--input"]
    good = _npy(tmp_path, np.zeros((4, 1, 16), np.int8))
    (tmp_path / "empty.npy").write_bytes(b"")
    (tmp_path / "text.npy").write_text("1 2 3\n")
    np.savez(tmp_path / "arch.npz", a=np.zeros(3))
    obj = tmp_path / "obj.npy"
    np.save(obj, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    cases = [
        ("A", ("--input 'A': expected NAME=FILE.npy",)),
        ("=x.npy", ("expected NAME=FILE.npy",)),
        (f"A={tmp_path / 'none.npy'}", ("--input A: cannot read", "none.npy")),
        (f"A={tmp_path / 'empty.npy'}", ("--input A: cannot read", "empty.npy")),
        (f"A={tmp_path / 'text.npy'}", ("--input A: cannot read", "text.npy")),
        (f"A={tmp_path / 'arch.npz'}", ("--input A", "arch.npz", "npz archive")),
        (f"A={obj}", ("--input A: cannot read", "obj.npy")),
        (f"A={tmp_path}", ("--input A: cannot read",)),
    ]
    for spec, culprits in cases:
        refused([*base, spec], capsys, *culprits)
    refused([*base, f"A={good}", "--input", f"A={good}"], capsys, "--input A: given twice")


# ============================================================================ the last resort


def test_a_bug_is_one_line_with_status_3(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """An exception that is not a user error (a bug) still prints one line, not a traceback,
    and exits 3 so that scripts can tell it from bad input."""
    import vta.config

    def broken(path: object) -> None:
        raise RuntimeError("invariant\nbroken")

    monkeypatch.setattr(vta.config.HwConfig, "from_yaml", broken)
    assert main(["info", "--hw", HW]) == 3
    out, err = capsys.readouterr()
    assert err.startswith("vta: internal error: RuntimeError: invariant broken (this is a bug")
    assert err.count("\n") == 1 and "Traceback" not in err and out == ""


# ============================================================================ any input at all
# Property tests: whatever the text or value, the CLI ends with 0/1 (it ran) or 2 and one
# ``vta: error:`` line; never a traceback, never the internal-error status 3.


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _handled(rc: int, err: str) -> None:
    assert rc in (0, 1, 2), (rc, err)
    if rc == 2:
        assert err.startswith("vta: error: ") and err.count("\n") == 1, err
    else:
        assert err == "", err
    assert "Traceback" not in err


_SMALL = st.sampled_from([-1, 0, 1, 2, 3, 15, 16, 1 << 14, 1 << 16, 1 << 40])
_WORD = st.one_of(
    st.sampled_from(["LOAD.INP", "LOAD.WGT", "LOAD.UOP", "LOAD.ACC", "STORE.OUT", "GEMM",
                     "ALU.ADD", "ALU.SHR", "ALU.MAX", "FINISH", ".alloc", ".uop", "reset", "reg",
                     "|", "pop_prev", "push_next", "A", "inp", "uop", "U", "#"]),
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(["sram", "dram", "y", "x", "stride",
                                                        "pad", "uop", "iter", "dst", "src",
                                                        "wgt", "imm"]),
              st.one_of(_SMALL.map(str), st.just("A+1"), st.just("1,1"), st.just("0:1"),
                        st.just("1,1,1,1"))),
    _SMALL.map(str))
_LINE = st.one_of(st.lists(_WORD, max_size=8).map(" ".join), st.text(max_size=30))


@settings(max_examples=150, deadline=None)
@given(st.lists(_LINE, max_size=8))
def test_any_assembly_text_is_handled(lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "p.asm"
        text = ".alloc A inp 16\n.alloc U uop 1\n.uop U 0 0 0\n" + "\n".join(lines)
        p.write_bytes(text.encode("utf-8", errors="replace"))
        rc, _, err = _cli(["sim", str(p), "--hw", HW])
    _handled(rc, err)


_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70), st.floats(),
                   st.text(max_size=12), st.lists(st.integers(-3, 20), max_size=3),
                   st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
                   st.sampled_from([0, 1, 2, 16, 64, 128, 1 << 20, 1 << 31, "int8", "int32"]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([*sorted(FIELDS), "name", "gemm", "board"]), _VALUE),
                min_size=1, max_size=3))
def test_any_yaml_values_are_handled(changes: list[tuple[str, object]]) -> None:
    d = pynq_dict()
    for key, value in changes:
        *parents, leaf = key.split(".")
        node = d
        for part in parents:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[leaf] = value
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "hw.yaml"
        p.write_text(yaml.safe_dump(d))
        rc, _, err = _cli(["info", "--hw", str(p), "--json"])
    _handled(rc, err)


@pytest.mark.parametrize("argv", [["info", "--hw", HW], ["info", "--hw", HW, "--json"],
                                  ["sim", GEMM_TINY, "--hw", HW]])
def test_a_reader_that_stops_early_ends_quietly(argv: list[str]) -> None:
    """``vta info ... | head -1``: the reader closes the pipe before vta writes; vta ends with
    status 1 (its output is incomplete) and nothing on stderr, not an internal error, whether
    rich's tables or plain prints met the closed pipe."""
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-m", "vta.cli", *argv],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # before vta has imported anything, let alone written
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 1 and err == "", err
