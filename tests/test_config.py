"""HwConfig: shipped configs load with the documented derived values; every bad input path
raises one HwConfigError naming the file, the field and the expectation; the CLI exits 2."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from vta.cli import main
from vta.config import (
    _SECTIONS,
    ALU_OPS,
    BOARD_RESOURCES,
    MODEL_DEFAULTS,
    VTA_ALU_OPS,
    HwConfig,
)
from vta.errors import HwConfigError
from vta.isa import by_name
from vta.isa.defs import layout_of
from vta.resources import breakdown

ROOT = Path(__file__).resolve().parents[1]
PYNQ = ROOT / "hwconfigs" / "pynq.yaml"
SHIPPED = sorted((ROOT / "hwconfigs").glob("*.yaml"))


def pynq_dict() -> dict:
    return yaml.safe_load(PYNQ.read_text())


def write(tmp_path: Path, data: object, name: str = "bad.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return p


def test_pynq_matches_vta_defaults() -> None:
    hw = HwConfig.from_yaml(PYNQ)
    assert (hw.gemm.batch, hw.gemm.block_in, hw.gemm.block_out) == (1, 16, 16)
    assert (hw.gemm.inp_dtype, hw.gemm.wgt_dtype, hw.gemm.acc_dtype, hw.gemm.out_dtype) == (
        "int8", "int8", "int32", "int8")
    sp = hw.scratchpad
    assert (sp.uop, sp.inp, sp.wgt, sp.acc, sp.out) == (32768, 32768, 262144, 131072, 32768)
    # VTA_REFERENCE.md's table: entries per buffer
    assert (hw.uop_depth, hw.inp_depth, hw.wgt_depth, hw.acc_depth, hw.out_depth) == (
        8192, 2048, 1024, 2048, 2048)
    assert [hw.elem_bytes(k) for k in ("inp", "wgt", "acc", "out")] == [16, 256, 64, 16]
    assert [hw.entry(k).shape for k in ("uop", "inp", "wgt", "acc", "out")] == [
        (), (1, 16), (16, 16), (1, 16), (1, 16)]
    assert hw.board.clock_mhz == 100 and hw.memory.bus_bytes == 8
    assert hw.queues.command_depth == 512
    assert hw.macs_per_cycle == 256
    assert hw.peak_gops == pytest.approx(51.2)
    w = hw.isa
    assert (w.uop_idx, w.inp_idx, w.wgt_idx, w.acc_idx, w.sram_addr) == (13, 11, 10, 11, 16)
    used = {n: tuple(sum(f.width for f in half) for half in layout_of(by_name(n), hw))
            for n in ("LOAD", "STORE", "GEMM", "ALU.ADD")}
    assert used == {"LOAD": (58, 64), "STORE": (58, 64), "GEMM": (63, 64), "ALU.ADD": (63, 64)}
    assert hw.fits_board()


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_configs_load_and_round_trip(path: Path) -> None:
    hw = HwConfig.from_yaml(path)
    assert HwConfig.from_dict(hw.to_dict(), source="x") == hw
    assert hw.fits_board(), hw.resource_estimate()
    assert len(hw.hash) == 16


def test_shipped_set() -> None:
    names = {p.stem for p in SHIPPED}
    assert {"pynq", "ultra96", "zcu104", "de10nano"} <= names
    assert len(names) >= 5  # plus at least one research point
    u = HwConfig.from_yaml(ROOT / "hwconfigs" / "ultra96.yaml")
    assert u.board.clock_mhz == 333 and u.memory.bus_bytes == 16


def test_codesign_variants_cost_what_their_rules_say() -> None:
    """pynq_uop_base, pynq_flat, pynq_uop64 are pynq with one field group changed each; their
    estimate adds the rows vta.resources states: a base-start multiplexer per operand index
    bit (GEMM 11 + 11 + 10, ALU 11 + 11 = 54 LUTs), a flattened loop's index generator per
    loop (end compares of 14 + 14 + 14 counter bits and two offset adders per index bit: GEMM
    42 + 64 = 106 LUTs, 64 FF; ALU 42 + 44 = 86 LUTs, 44 FF), a 2:1 micro-op read
    multiplexer (32 LUTs)."""
    base = HwConfig.load("pynq").resource_estimate()
    extra = {"pynq_uop_base": {"lut": 54}, "pynq_flat": {"lut": 106 + 86, "ff": 64 + 44},
             "pynq_uop64": {"lut": 32}}
    for name, delta in extra.items():
        got = HwConfig.load(name).resource_estimate()
        assert got == {k: v + delta.get(k, 0) for k, v in base.items()}, name
        assert HwConfig.load(name).fits_board()


def test_hash_ignores_source_but_not_fields() -> None:
    a = HwConfig.from_yaml(PYNQ)
    b = HwConfig.from_dict(pynq_dict(), source="elsewhere.yaml")
    assert a.hash == b.hash and a == b
    assert a.with_changes(**{"memory.bus_bytes": 16}).hash != a.hash


def test_with_changes_revalidates() -> None:
    hw = HwConfig.from_yaml(PYNQ)
    wide = hw.with_changes(**{"gemm.block_out": 32, "scratchpad.wgt": 524288})
    assert wide.elem_bytes("wgt") == 512
    with pytest.raises(HwConfigError, match=r"gemm\.block_in: must be a power of two, got 12"):
        hw.with_changes(**{"gemm.block_in": 12})


# ---------------------------------------------------------------------- every bad-input path

def mutate(path: str, value: object) -> dict:
    d = pynq_dict()
    node = d
    *parents, leaf = path.split(".")
    for p in parents:
        node = node[p]
    if value is DELETE:
        del node[leaf]
    else:
        node[leaf] = value
    return d


DELETE = object()

BAD = [
    # (dotted field, value, expected message fragment)
    ("gemm.block_in", DELETE, "gemm.block_in: missing required field"),
    ("memory.bus_bytes", DELETE, "memory.bus_bytes: missing required field"),
    ("name", DELETE, "name: missing required field"),
    ("gemm", DELETE, "gemm: missing required section"),
    ("gemm.block_in", "sixteen", "gemm.block_in: expected an integer, got 'sixteen'"),
    ("gemm.block_in", 16.0, "gemm.block_in: expected an integer, got 16.0"),
    ("gemm.batch", True, "gemm.batch: expected an integer, got True"),
    ("memory.shared_port", "yes", "memory.shared_port: expected true or false"),
    ("board.clock_mhz", "fast", "board.clock_mhz: expected a number"),
    ("alu.ops", "add", "alu.ops: expected a list of strings"),
    ("gemm", [1, 2], "gemm: expected a mapping of fields"),
    ("gemm.block_in", 12, "gemm.block_in: must be a power of two, got 12"),
    ("gemm.batch", 0, "gemm.batch: must be a power of two, got 0"),
    ("memory.bus_bytes", 12, "memory.bus_bytes: must be a power of two, got 12"),
    ("scratchpad.inp", 30000, "scratchpad.inp: must be a power of two (bytes), got 30000"),
    ("scratchpad.wgt", 128, "scratchpad.wgt: too small for one tile: one wgt entry is 256 bytes"),
    ("scratchpad.out", 16384, "scratchpad.out: must hold as many entries as acc"),
    ("gemm.inp_dtype", "int4", "gemm.inp_dtype: must be one of int8, int16, int32, got 'int4'"),
    ("gemm.acc_dtype", "int8", "gemm.acc_dtype: must be at least as wide as a product"),
    ("gemm.ii", 0, "gemm.ii: must be >= 1, got 0"),
    ("alu.ops", ["add", "shl"], "alu.ops: unknown op 'shl' (did you mean 'shr'?)"),
    ("alu.lanes", 12, "alu.lanes: must be a power of two, got 12"),
    ("alu.imm_bits", 40, "alu.imm_bits: must be between 2 and 32, got 40"),
    ("alu.shift_bits", 1, "alu.shift_bits: must be between 2 and the accumulator's width "
                          "(32 bits, int32), got 1"),
    ("alu.shift_bits", 33, "alu.shift_bits: must be between 2 and the accumulator's width"),
    ("alu.shift_bits", "five", "alu.shift_bits: expected an integer, got 'five'"),
    ("alu.reset", "clear", "alu.reset: unknown value 'clear'; expected one of ignored, zero"),
    ("gemm.reset_out", "zeros", "gemm.reset_out: unknown value 'zeros' (did you mean 'zero'?); "
                                "expected one of sum, keep, zero"),
    ("queues.command_depth", 0, "queues.command_depth: must be >= 1, got 0"),
    ("memory.burst_bytes", 12, "memory.burst_bytes: must be a multiple of bus_bytes (8)"),
    ("memory.latency", -1, "memory.latency: must be >= 0, got -1"),
    ("memory.outstanding", 0, "memory.outstanding: must be >= 1"),
    ("board.clock_mhz", 0, "board.clock_mhz: must be > 0"),
    ("board.dsp", -5, "board.dsp: must be >= 0"),
    # unknown keys, with a hint
    ("gemm.blok_in", 16, "gemm.blok_in: unknown key (did you mean 'block_in'?)"),
    ("scratchpd", {}, "scratchpd: unknown key (did you mean 'scratchpad'?)"),
    ("memory.bandwidth", 8, "memory.bandwidth: unknown key; expected one of"),
    # ISA fields that no longer fit 128 bits: a 2^14-entry uop buffer needs 65 low-half bits
    ("scratchpad.uop", 65536, "ISA fields no longer fit the 128-bit instruction: GEMM needs 65"),
    # a 4096-entry accumulator overflows the ALU's high half
    ("scratchpad.acc", 262144, "scratchpad.out: must hold as many entries as acc"),
]


@pytest.mark.parametrize("field,value,message", BAD,
                         ids=[b[0] + ":" + repr(b[1])[:12] for b in BAD])
def test_bad_field_names_file_field_and_expectation(tmp_path: Path, field: str, value: object,
                                                    message: str) -> None:
    p = write(tmp_path, mutate(field, value))
    with pytest.raises(HwConfigError) as exc:
        HwConfig.from_yaml(p)
    text = str(exc.value)
    assert text.startswith(f"{p}: "), text
    assert message in text, text


def test_high_half_overflow(tmp_path: Path) -> None:
    d = mutate("scratchpad.acc", 262144)
    d["scratchpad"]["out"] = 65536  # keep out consistent so the ISA check is what fails
    p = write(tmp_path, d)
    with pytest.raises(HwConfigError,
                       match=r"GEMM needs 66 bits in the high 64-bit half = 12 \(dst_factor_out\)"
                             r" \+ 12 \(dst_factor_in\)"):
        HwConfig.from_yaml(p)


def test_uop_field_overflow(tmp_path: Path) -> None:
    d = pynq_dict()
    # every instruction still fits (GEMM high half: 2x11 + 2x10 + 2x11 = 64), but a micro-op
    # needs dst 11 (acc) + src 11 (max of inp 10, acc 11) + wgt 11 = 33 bits
    d["scratchpad"]["inp"] = 16384
    d["scratchpad"]["wgt"] = 524288
    p = write(tmp_path, d)
    with pytest.raises(HwConfigError, match=r"micro-op fields need 33 bits \(dst 11 \+ src 11"):
        HwConfig.from_yaml(p)


def test_not_yaml_and_not_mapping(tmp_path: Path) -> None:
    p = write(tmp_path, "gemm: [1, 2\n")
    with pytest.raises(HwConfigError, match=r"not valid YAML \(line 2"):
        HwConfig.from_yaml(p)
    p = write(tmp_path, "- 1\n- 2\n", "list.yaml")
    with pytest.raises(HwConfigError, match=r"list\.yaml: expected a mapping"):
        HwConfig.from_yaml(p)


def test_missing_file() -> None:
    with pytest.raises(HwConfigError, match=r"nope\.yaml: cannot read file"):
        HwConfig.from_yaml("nope.yaml")


# ---------------------------------------------------------------------- CLI

def test_cli_info_prints_derived_values(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--hw", str(PYNQ), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"peak_gops": 51.2' in out and '"inp": 2048' in out


def test_cli_info_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--hw", str(PYNQ)]) == 0
    assert "isa_widths" in capsys.readouterr().out


@pytest.mark.parametrize("field,value,message", BAD[:6] + BAD[-4:-1])
def test_cli_bad_config_exits_2_without_traceback(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str], field: str,
                                                   value: object, message: str) -> None:
    p = write(tmp_path, mutate(field, value))
    assert main(["info", "--hw", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vta: error: ") and message in err
    assert "Traceback" not in err


# ---------------------------------------------------------------------- docs/hwconfig.md

_ROW = re.compile(r"^\| `([a-z0-9_.]+)` \| ([^|]+) \| ([^|]+) \| [^|]+ \| [^|]+ \| ([^|]+) \|$")
_TYPES = {"int": "int", "string": "str", "bool": "bool", "number": "float",
          "list of strings": "tuple[str, ...]"}


def doc_fields() -> dict[str, tuple[str, str, str]]:
    """docs/hwconfig.md's field table: dotted field -> (type, default, pynq value)."""
    rows: dict[str, tuple[str, str, str]] = {}
    for line in (ROOT / "docs" / "hwconfig.md").read_text().splitlines():
        m = _ROW.match(line)
        if m:
            assert m[1] not in rows, f"{m[1]} is listed twice"
            rows[m[1]] = (m[2].strip(), m[3].strip(), m[4].strip())
    return rows


def schema_fields() -> dict[str, dataclasses.Field]:  # type: ignore[type-arg]
    out: dict[str, dataclasses.Field] = {}  # type: ignore[type-arg]
    for sec, cls in _SECTIONS.items():
        for f in dataclasses.fields(cls):
            out[f"{sec}.{f.name}"] = f
    return out


def _doc_value(text: str) -> object:
    return yaml.safe_load(text.strip("`"))


def test_docs_table_lists_every_field_with_the_codes_default() -> None:
    doc, schema = doc_fields(), schema_fields()
    assert set(doc) == set(schema) | {"name", "timing_model", "stock"}
    assert doc["name"][1] == "required"
    assert _doc_value(doc["timing_model"][1]) == "hls" and doc["timing_model"][0] == "string"
    assert _doc_value(doc["stock"][1]) is False and doc["stock"][0] == "bool"
    for key, f in schema.items():
        typ, default, _ = doc[key]
        if default == "model":  # the timing model's (MODEL_DEFAULTS), documented per model
            assert f.default is None and key in MODEL_DEFAULTS, key
            assert str(f.type) == f"{_TYPES[typ]} | None", key
            continue
        if default == "part":  # the board part's (vta.resources.BOARDS)
            assert f.default is None and key in {f"board.{k}" for k in BOARD_RESOURCES}
            assert typ == "int" and str(f.type) == "int | None", key
            continue
        if default == "acc":  # log2 of the accumulator's width
            assert f.default is None and key == "alu.shift_bits"
            assert typ == "int" and str(f.type) == "int | None", key
            continue
        assert _TYPES[typ] == str(f.type), key
        if f.default is dataclasses.MISSING:
            assert default == "required", key
        else:
            want = list(f.default) if isinstance(f.default, tuple) else f.default
            assert default != "required" and _doc_value(default) == want, key
    assert {k for k, (_, d, _) in doc.items() if d == "model"} == set(MODEL_DEFAULTS)


def test_docs_model_table_matches_the_model_defaults() -> None:
    """docs/hwconfig.md's per-model table gives each model's value (burst in beats)."""
    rows = {}
    lines = (ROOT / "docs" / "hwconfig.md").read_text().splitlines()
    start = lines.index("| field | `hls` | `chisel` |")
    for line in lines[start + 2:]:
        m = re.match(r"^\| `([a-z_.]+)` \| ([^|]+) \| ([^|]+) \|$", line)
        if not m:
            break
        rows[m[1]] = (m[2].strip(), m[3].strip())
    assert set(rows) == set(MODEL_DEFAULTS)
    # a rule of the section's other fields is written as an expression of them
    sec = {"bus_bytes": 8, "pipeline_depth": 5, "burst_bytes": 2048}
    for key, by_model in MODEL_DEFAULTS.items():
        for text, model in zip(rows[key], ("hls", "chisel"), strict=True):
            rule = by_model[model]
            if callable(rule):
                expr = text.replace("\u00d7", "*").replace("`", "")
                assert eval(expr, {}, dict(sec)) == rule(sec), key
            else:
                assert _doc_value(text) == rule, key


def test_timing_model_chooses_the_left_out_fields() -> None:
    """pynq_tsim.yaml differs from pynq.yaml in its name and timing_model alone; the fields the
    file leaves out follow the model, and changing the model derives them again."""
    hls, tsim = HwConfig.from_yaml(PYNQ), HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq_tsim.yaml")
    assert (hls.alu.ii_imm, hls.memory.outstanding, hls.memory.burst_bytes) == (2, 4, 128)
    assert (tsim.alu.ii_imm, tsim.memory.outstanding, tsim.memory.burst_bytes) == (1, 16, 2048)
    assert hls.with_changes(timing_model="chisel").to_dict() == {**tsim.to_dict(), "name": "pynq"}
    assert tsim.with_changes(timing_model="hls").memory == hls.memory
    # a value the file gives stays
    fixed = hls.with_changes(**{"memory.outstanding": 8})
    assert fixed.with_changes(timing_model="chisel").memory.outstanding == 8


def test_docs_table_pynq_column_matches_pynq_yaml() -> None:
    hw = HwConfig.from_yaml(PYNQ).to_dict()
    for key, (_, _, pynq) in doc_fields().items():
        if key in ("timing_model", "stock"):
            assert _doc_value(pynq) == hw[key]
            continue
        node: object = hw
        for part in key.split("."):
            node = node[part]  # type: ignore[index]
        assert _doc_value(pynq) == node, key


def test_only_required_fields_load_with_the_documented_defaults(tmp_path: Path) -> None:
    d: dict = {"name": "minimal"}
    for key, f in schema_fields().items():
        if f.default is dataclasses.MISSING:
            sec, leaf = key.split(".")
            d.setdefault(sec, {})[leaf] = pynq_dict()[sec][leaf]
    assert set(d) == {"name", "gemm", "scratchpad", "memory"}  # alu, queues, board: optional
    hw = HwConfig.from_yaml(write(tmp_path, d))
    for key, (_, default, _) in doc_fields().items():
        if default == "model":
            sec, leaf = key.split(".")
            rule = MODEL_DEFAULTS[key]["hls"]
            want = rule(pynq_dict()[sec]) if callable(rule) else rule
            assert getattr(getattr(hw, sec), leaf) == want, key
        elif default == "part":  # no board section: an unknown part, resources unknown (0)
            assert getattr(hw.board, key.split(".")[1]) == 0, key
        elif default == "acc":  # int32 accumulators: 5 bits
            assert hw.alu.shift_bits == 5, key
        elif key == "timing_model":
            assert hw.timing_model == "hls"
        elif key == "stock":
            assert hw.stock is False
        elif default != "required":
            sec, leaf = key.split(".")
            got = getattr(getattr(hw, sec), leaf)
            assert (list(got) if isinstance(got, tuple) else got) == _doc_value(default), key


def test_edge_semantics_fields() -> None:
    """vta.cc's behaviour by default (5-bit shift amounts for int32 accumulators, the ALU's
    reset ignored, a GEMM reset's out the sum); each variant is a field of the hash, and the
    shift width follows the accumulator unless the file gives it."""
    hw = HwConfig.from_yaml(PYNQ)
    assert (hw.alu.shift_bits, hw.alu.reset, hw.gemm.reset_out) == (5, "ignored", "sum")
    for change in ({"alu.shift_bits": 6}, {"alu.reset": "zero"}, {"gemm.reset_out": "keep"}):
        assert hw.with_changes(**change).hash != hw.hash
    int16 = {"gemm.acc_dtype": "int16", "scratchpad.acc": 65536}
    assert hw.with_changes(**int16).alu.shift_bits == 4  # log2(16), as VTA_LOG_ACC_WIDTH
    assert hw.with_changes(**int16, **{"alu.shift_bits": 5}).alu.shift_bits == 5
    with pytest.raises(HwConfigError, match=r"alu.shift_bits: must be between 2 and the "
                                            r"accumulator's width \(16 bits, int16\), got 17"):
        hw.with_changes(**int16, **{"alu.shift_bits": 17})
    assert HwConfig.load("pynq_overlap").alu.reset == "zero"  # resets on the separate ALU


def test_board_resources_come_from_the_part() -> None:
    """The shipped files name their part only; the resources are the part's (vta.resources
    .BOARDS), a file's own value stays, and a new part brings its own resources."""
    from vta.resources import BOARDS

    hw = HwConfig.from_yaml(PYNQ)
    b = BOARDS["pynq-z1"]
    assert (hw.board.dsp, hw.board.bram36, hw.board.lut) == (b.dsp, b.bram36, b.lut)
    assert hw.with_changes(**{"board.dsp": 100}).board.dsp == 100
    z = hw.with_changes(**{"board.part": "xczu7ev"}).board
    assert (z.dsp, z.bram36, z.lut) == (1728, 312, 230400)
    assert hw.with_changes(**{"board.part": "xc9999"}).board.lut == 0  # unknown part


def test_a_pickled_config_rehashes_in_its_process() -> None:
    """Workers of a process pool or a Dask cluster get configs by pickle: the copy equals the
    original and its hash is computed afresh (str hashes differ between processes)."""
    import pickle

    hw = HwConfig.from_yaml(PYNQ)
    hash(hw)
    copy = pickle.loads(pickle.dumps(hw))
    assert copy == hw and copy._hash_value is None and hash(copy) == hash(hw)
    assert copy.from_model == hw.from_model and copy.source == hw.source


# ---------------------------------------------------------------------- stock VTA


def test_a_stock_config_enables_vtas_alu_functions_alone(tmp_path: Path) -> None:
    """``stock: true`` claims VTA's hardware: MUL (not in VTA's ALU) is refused naming the file
    and the field; the same file without the claim loads, and the default claims nothing."""
    assert set(VTA_ALU_OPS) < set(ALU_OPS) and "mul" not in VTA_ALU_OPS
    d = pynq_dict()
    assert d["stock"] is True and HwConfig.from_dict(d).alu.ops == VTA_ALU_OPS
    d["alu"]["ops"] = [*VTA_ALU_OPS, "mul"]
    p = write(tmp_path, d)
    with pytest.raises(HwConfigError, match=rf"^{re.escape(str(p))}: alu\.ops: mul is not an ALU "
                                            r"function of VTA \(its ALU has min, max, add, "
                                            r"shr\), but this config claims to be stock VTA "
                                            r"\(stock: true\)"):
        HwConfig.from_yaml(p)
    d["stock"] = False
    assert HwConfig.from_yaml(write(tmp_path, d)).alu.ops == (*VTA_ALU_OPS, "mul")
    del d["stock"]
    assert HwConfig.from_yaml(write(tmp_path, d)).stock is False
    with pytest.raises(HwConfigError, match=r"alu\.ops: mul is not an ALU function of VTA"):
        HwConfig.from_yaml(PYNQ).with_changes(**{"alu.ops": [*VTA_ALU_OPS, "mul"]})


def test_pynq_mul_is_pynq_with_mul_and_pays_its_dsps() -> None:
    """pynq_mul.yaml differs from pynq.yaml in its name, the claim and ALU MUL; the estimate
    charges MUL's DSPs (``lanes x ceil(32/25) x ceil(32/18)``) there and nowhere on pynq."""
    pynq = HwConfig.from_yaml(PYNQ)
    mul = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq_mul.yaml")
    assert mul.to_dict() == {**pynq.to_dict(), "name": "pynq_mul", "stock": False,
                             "alu": {**pynq.to_dict()["alu"], "ops": [*VTA_ALU_OPS, "mul"]}}
    assert pynq.with_mul() == mul and mul.with_mul() is mul  # with_mul: the same variant
    est, est_mul = pynq.resource_estimate(), mul.resource_estimate()
    gemm_dsp = 16 * 16 // 2  # 256 int8 multipliers, two per DSP48
    assert est["dsp"] == gemm_dsp == 128
    assert est_mul["dsp"] == gemm_dsp + 16 * 2 * 2 == 192
    assert {k: v for k, v in est_mul.items() if k != "dsp"} == \
        {k: v for k, v in est.items() if k != "dsp"}
    assert not any(c == "ALU multipliers" for _, c, _, _ in breakdown(pynq))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_derived_sizes_made_once_per_config(path: Path) -> None:
    """``entry``, ``elem_bytes``, ``depth`` and ``isa`` are made once per config and kind and
    kept on the object (``_derived``: the simulator reads them for every DMA and instruction it
    describes, and a lookup there hashes no config): a second read returns the same object
    without hashing the config, and equals what the formulas give."""
    from vta.config import _entry, _isa_widths

    hw = HwConfig.from_yaml(path)
    kinds = ("uop", "inp", "wgt", "acc", "out")
    first = [(hw.entry(k), hw.elem_bytes(k), hw.depth(k)) for k in kinds], hw.isa
    object.__setattr__(hw, "_hash_value", None)
    calls = []
    hashed = type(hw).__hash__
    try:
        type(hw).__hash__ = lambda self: calls.append(1) or hashed(self)  # type: ignore
        again = [(hw.entry(k), hw.elem_bytes(k), hw.depth(k)) for k in kinds], hw.isa
    finally:
        type(hw).__hash__ = hashed  # type: ignore[method-assign]
    assert not calls and hw._hash_value is None
    assert all(a is b for x, y in zip(first[0], again[0], strict=True)
               for a, b in zip(x, y, strict=True)) and first[1] is again[1]
    assert [e for e, _, _ in first[0]] == [_entry(hw, k) for k in kinds]
    assert [b for _, b, _ in first[0]] == [_entry(hw, k).nbytes for k in kinds]
    assert [d for _, _, d in first[0]] == \
        [getattr(hw.scratchpad, k) // _entry(hw, k).nbytes for k in kinds]
    assert first[1] == _isa_widths(hw)


def test_derived_sizes_are_not_the_identity() -> None:
    """What a config derived is not part of it: equal configs compare and hash equal whatever
    each has derived; a pickled copy, ``replace`` and ``with_changes`` derive afresh (their
    own, the same); ``to_dict`` and ``repr`` leave it out."""
    import pickle
    from dataclasses import replace

    hw, fresh = HwConfig.from_yaml(PYNQ), HwConfig.from_yaml(PYNQ)
    fresh._derived.clear()  # (validation derived some)
    hw.isa, hw.elem_bytes("wgt"), hw.depth("acc")
    assert hw._derived and not fresh._derived
    assert hw == fresh and hash(hw) == hash(fresh) and repr(hw) == repr(fresh)
    assert hw.to_dict() == fresh.to_dict() and hw.hash == fresh.hash
    assert not pickle.loads(pickle.dumps(hw))._derived
    for copy in (pickle.loads(pickle.dumps(hw)), replace(hw), hw.with_changes()):
        assert copy._derived is not hw._derived and copy == hw and hash(copy) == hash(hw)
        assert copy.isa == hw.isa and copy.depth("acc") == hw.depth("acc")
    bigger = replace(hw, scratchpad=replace(hw.scratchpad, acc=2 * hw.scratchpad.acc))
    assert bigger.depth("acc") == 2 * hw.depth("acc")
