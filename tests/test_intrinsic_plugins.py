"""Custom instructions from the command line (issue 25): an ALU-opcode instruction runs where
the ALU does without an undocumented flag; ``--plugin FILE`` loads a user's instruction so a
config can list it under ``intrinsics:``; free function values and the width left in a half
word come from helpers; plugin errors are named."""

from __future__ import annotations

import importlib.machinery
import os
import subprocess
import sys
from pathlib import Path

import pytest

import vta.intrinsics as vi
from vta.cli import main
from vta.config import HwConfig
from vta.errors import PluginError
from vta.isa.defs import by_name, registered

ROOT = Path(__file__).resolve().parents[1]
REQUANT = ROOT / "examples" / "intrinsics" / "requant.py"


def test_an_alu_opcode_instruction_runs_on_the_alu_module_of_a_separate_alu() -> None:
    """The issue's case: REQUANT, written as docs/custom_intrinsics.md teaches (no
    ``alu=True``), ran on pynq_overlap's compute module; the unit follows from the opcode."""
    overlap = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq_overlap.yaml")
    pynq = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq.yaml")
    assert overlap.alu.separate_pipeline and not pynq.alu.separate_pipeline
    add = by_name("ALU.ADD")
    assert add.alu is True
    mine = vi.InstructionDef(name="ALU.MINE", cls=add.cls, opcode=vi.Opcode.ALU,
                             function=("op", 7), layout=add.layout, unit=vi.Unit.COMPUTE,
                             duration=add.duration, asm=add.asm)
    assert mine.alu is True  # from the opcode
    insn = vi.instance(add, iter_out=1, iter_in=1, uop_end=1)
    assert mine.unit_of(insn, overlap) == vi.Unit.ALU
    assert mine.unit_of(insn, pynq) == vi.Unit.COMPUTE
    dwmac_like = vi.InstructionDef(name="X", cls=add.cls, opcode=5, layout=add.layout,
                                   unit=vi.Unit.COMPUTE, duration=add.duration, asm=add.asm)
    assert dwmac_like.alu is False and dwmac_like.unit_of(insn, overlap) == vi.Unit.COMPUTE
    forced = vi.InstructionDef(name="Y", cls=add.cls, opcode=vi.Opcode.ALU, layout=add.layout,
                               unit=vi.Unit.COMPUTE, duration=add.duration, asm=add.asm,
                               alu=False)
    assert forced.unit_of(insn, overlap) == vi.Unit.COMPUTE


def test_free_function_values_and_bits_left() -> None:
    taken = {d.opcode for d in registered()}
    assert {0, 1, 2, 3, 4} <= taken and not taken & set(vi.free_opcodes())  # 0..4 are VTA's
    assert taken | set(vi.free_opcodes()) == set(range(8))  # a 3-bit opcode
    free = vi.free_functions(vi.Opcode.ALU, "op")
    used = {d.function[1] for d in registered()
            if d.opcode == vi.Opcode.ALU and d.function is not None}
    assert free and not used & set(free) and {0, 1, 2, 3, 4} <= used
    assert free == sorted(free) and max(free) < 1 << vi.validation_config().isa.alu_opcode
    w = vi.validation_config().isa
    others = (vi.Field("a", w.acc_idx), vi.Field("b", w.acc_idx), vi.Field("op", w.alu_opcode))
    assert vi.bits_left(*others) == 64 - 2 * w.acc_idx - w.alu_opcode
    with pytest.raises(vi.DefinitionError, match="take 65 bits, more than a 64-bit half"):
        vi.bits_left(vi.Field("a", 40), vi.Field("b", 25))
    with pytest.raises(vi.DefinitionError, match="no registered instruction of opcode 4 has a "
                                                 "field 'nope'"):
        vi.free_functions(vi.Opcode.ALU, "nope")


def test_plugin_lets_a_config_list_a_users_instruction(tmp_path: Path) -> None:
    """The issue's case: a YAML listing REQUANT under ``intrinsics:`` got "registered: none";
    with ``--plugin`` the config loads and the run checks bit-exact."""
    text = (ROOT / "hwconfigs" / "pynq_mul.yaml").read_text()
    hw = tmp_path / "rq.yaml"
    hw.write_text(text.replace("name: pynq_mul", "name: pynq_rq") +
                  "\nintrinsics:\n  requant: {}\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "vta.cli", "run", "--hw", str(hw), "matmul", "16", "16", "16"]
    bare = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert bare.returncode == 2 and "intrinsics.requant: unknown intrinsic" in bare.stderr
    ok = subprocess.run([*argv, "--plugin", str(REQUANT)], capture_output=True, text=True,
                        env=env, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "pynq_rq" in ok.stdout


def test_plugin_errors_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    bad_define = tmp_path / "bad_define.py"
    bad_define.write_text("def define():\n    raise ValueError('no opcode left')\n")
    for spec, says in ((str(tmp_path / "none.py"), "no such file"),
                       ("no_such_module_xyz", "cannot import it"),
                       (str(broken), "importing it failed: RuntimeError: boom"),
                       (str(bad_define), "define() failed: ValueError: no opcode left")):
        with pytest.raises(PluginError, match=f"--plugin {spec}: .*{says}".replace("(", r"\(")
                           .replace(")", r"\)")):
            vi.load_plugin(spec)
        assert main(["run", "--plugin", spec, "matmul", "16", "16", "16"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"vta: error: --plugin {spec}") and err.count("\n") == 1
    assert vi.load_entry_points() == []  # none installed here; idempotent


def test_an_intrinsic_of_the_other_target_is_refused_by_name(pynq: HwConfig) -> None:
    """The issue's case: an accelerator instruction in a GPU schedule built silently as scalar
    loops (or failed on a buffer scope)."""
    import numpy as np  # noqa: F401  (the doc blocks use it)

    import vta
    from tests.test_docs_python_api import DOC, code_blocks

    ns: dict[str, object] = {}
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for block in code_blocks(DOC.read_text())[:3]:
            exec(block, ns)
    finally:
        os.chdir(cwd)
    P, on_vta = ns["P"], ns["on_vta"]
    s = on_vta(P, pynq)  # type: ignore[operator]
    with pytest.raises(vta.BuildError, match=r"build\(target='cuda-emu'\): stage acc_acc is "
                                             r"tensorized with vta\.gemm\.1x16x16\.int8\.int8\."
                                             r"int32, an intrinsic of the accelerator "
                                             r"\(target='vta'\); build there"):
        vta.build(s, P, "cuda-emu")
    assert vta.build(s, P, "vta", hw=pynq).program is not None


def _dist(root: Path, name: str, entry_points: str | None) -> None:
    """A package's metadata directory under ``root`` (``entry_points.txt`` when given)."""
    info = root / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    if entry_points is not None:
        (info / "entry_points.txt").write_text(entry_points)


def test_entry_points_are_looked_for_only_where_a_package_lists_the_group(
        tmp_path: Path) -> None:
    """``may_list_entry_points`` (``load_entry_points`` asks ``importlib.metadata`` only when
    it is True): False only where no package on the path can list the group."""
    site = tmp_path / "site"
    _dist(site, "plain", None)
    _dist(site, "script", "[console_scripts]\nscript = script:main\n")
    (site / "legacy.egg-info").write_text("Name: legacy\n")  # a file: no entry points
    path = [str(site), str(tmp_path / "missing")]
    std = [importlib.machinery.PathFinder]
    assert not vi.may_list_entry_points(vi.ENTRY_POINT_GROUP, path, std)
    assert vi.may_list_entry_points("console_scripts", path, std)
    _dist(site, "mine", f"[{vi.ENTRY_POINT_GROUP}]\nmine = mine:define\n")
    assert vi.may_list_entry_points(vi.ENTRY_POINT_GROUP, path, std)
    zipped = tmp_path / "packages.zip"
    zipped.write_bytes(b"")
    assert vi.may_list_entry_points(vi.ENTRY_POINT_GROUP, [str(zipped)], std)

    class Finder:
        def find_distributions(self, context: object = None) -> list[object]:
            return []

    assert vi.may_list_entry_points(vi.ENTRY_POINT_GROUP, [], [*std, Finder()])
    assert not vi.may_list_entry_points(vi.ENTRY_POINT_GROUP, [], std)


def test_an_installed_entry_point_is_loaded(tmp_path: Path) -> None:
    """A package listing the examples' REQUANT under ``vta.intrinsics`` (in a process of its
    own: the instruction stays registered there)."""
    _dist(tmp_path, "requant_plugin", f"[{vi.ENTRY_POINT_GROUP}]\nrequant = requant:define\n")
    code = ("import sys\n"
            f"sys.path[:0] = [{str(tmp_path)!r}, {str(REQUANT.parent)!r}]\n"
            "import vta.intrinsics as vi\nprint(vi.load_entry_points())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert "REQUANT" in out
