"""Building the oracle: the two source trees, g++, the per-config cache, the layout check.

The sources are the user's, never the project's:

* a checkout of apache/tvm-vta (``--tvm-vta DIR`` or ``$VTA_ORACLE_TVM_VTA``): its
  ``hardware/xilinx/src/vta.cc`` and ``vta.h`` and ``include/vta/hw_spec*.h``;
* Xilinx's open-source arbitrary-precision headers, github.com/Xilinx/
  HLS_arbitrary_Precision_Types (``--ap-int DIR`` or ``$VTA_ORACLE_AP_INT``: the repository
  or its ``include`` folder, the one holding ``ap_int.h``).

``build_driver`` compiles vta.cc and our ``driver.cc`` with ``g++ -std=c++17 -O2
-fno-strict-aliasing`` (vta.cc reads instructions through pointer casts) and the macros of
``vta_macros(hw)``, into ``$XDG_CACHE_HOME/vta/oracle/<digest>/vta_oracle_driver`` (else
``~/.cache/...``); the digest covers the macros, the flags, the compiler's version and every
source file, so a changed checkout or config builds anew and an unchanged one is reused.
Before a driver is used, ``check_layout`` compares the instruction and micro-op layout the
built design decodes (``driver layout``: each bit field as hw_spec.h lays it out) with
``vta.isa.layout``; any difference is an ``OracleBuildError`` naming the field.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tools.vta_oracle.errors import OracleBuildError, OracleSourceError
from tools.vta_oracle.macros import macro_flags, vta_macros
from vta.config import HwConfig
from vta.isa import layout, uop_layout

__all__ = ["ENV_TVM_VTA", "ENV_AP_INT", "HERE", "Sources", "Driver", "locate_sources",
           "build_driver", "cache_dir", "CXXFLAGS", "check_layout", "parse_layout"]

ENV_TVM_VTA = "VTA_ORACLE_TVM_VTA"
ENV_AP_INT = "VTA_ORACLE_AP_INT"
#: this folder: driver.cc, hls_stream.h, ap_axi_sdata.h
HERE = Path(__file__).resolve().parent
CXXFLAGS = ("-std=c++17", "-O2", "-fno-strict-aliasing", "-w")
_OURS = ("driver.cc", "hls_stream.h", "ap_axi_sdata.h")
#: the tvm-vta files the build reads, relative to the checkout
_VTA_FILES = ("hardware/xilinx/src/vta.cc", "hardware/xilinx/src/vta.h",
              "include/vta/hw_spec.h", "include/vta/hw_spec_const.h")
_BINARY = "vta_oracle_driver"


@dataclass(frozen=True)
class Sources:
    """The two source trees: a tvm-vta checkout and the folder holding ``ap_int.h``."""

    tvm_vta: Path
    ap_int: Path

    @property
    def vta_cc(self) -> Path:
        return self.tvm_vta / _VTA_FILES[0]

    def include_dirs(self) -> list[Path]:
        """-I folders, ours first (our hls_stream.h and ap_axi_sdata.h stand-ins)."""
        return [HERE, self.ap_int, self.tvm_vta / "include", self.vta_cc.parent]

    def files(self) -> list[Path]:
        """Every file the build reads (for the cache digest)."""
        ap = sorted(p for p in self.ap_int.rglob("*.h") if p.is_file())
        return [*(HERE / f for f in _OURS), *(self.tvm_vta / f for f in _VTA_FILES), *ap]


def _given(value: str | Path | None, env: str) -> tuple[Path, str] | None:
    """``value`` (a command-line argument) else the environment variable, with where it came
    from; None when neither is set."""
    if value:
        return Path(value).expanduser(), "the argument"
    if os.environ.get(env):
        return Path(os.environ[env]).expanduser(), f"${env}"
    return None


def locate_sources(tvm_vta: str | Path | None = None,
                   ap_int: str | Path | None = None) -> Sources:
    """The sources from the arguments, else ``$VTA_ORACLE_TVM_VTA`` / ``$VTA_ORACLE_AP_INT``.
    An ``OracleSourceError`` names the flag and the variable when one is missing, and the file
    it lacks when a folder is not the right tree."""
    vta = _given(tvm_vta, ENV_TVM_VTA)
    if vta is None:
        raise OracleSourceError(
            f"no tvm-vta checkout: pass --tvm-vta DIR or set {ENV_TVM_VTA} to a checkout of "
            f"https://github.com/apache/tvm-vta (the oracle compiles its "
            f"hardware/xilinx/src/vta.cc)")
    ap = _given(ap_int, ENV_AP_INT)
    if ap is None:
        raise OracleSourceError(
            f"no ap_int headers: pass --ap-int DIR or set {ENV_AP_INT} to a checkout of "
            f"https://github.com/Xilinx/HLS_arbitrary_Precision_Types (or its include/ folder)")
    vta_dir, vta_from = vta
    for rel in _VTA_FILES:
        if not (vta_dir / rel).is_file():
            raise OracleSourceError(f"{vta_dir} (from {vta_from}, {ENV_TVM_VTA}) is not a "
                                    f"tvm-vta checkout: it has no {rel}")
    ap_dir, ap_from = ap
    if not (ap_dir / "ap_int.h").is_file() and (ap_dir / "include" / "ap_int.h").is_file():
        ap_dir = ap_dir / "include"
    if not (ap_dir / "ap_int.h").is_file():
        raise OracleSourceError(f"{ap_dir} (from {ap_from}, {ENV_AP_INT}) holds no ap_int.h "
                                f"(give HLS_arbitrary_Precision_Types or its include/ folder)")
    return Sources(vta_dir.resolve(), ap_dir.resolve())


def cache_dir() -> Path:
    """Where built drivers are kept: ``$XDG_CACHE_HOME/vta/oracle``, else
    ``~/.cache/vta/oracle``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vta" / "oracle"


@dataclass(frozen=True)
class Driver:
    """A built driver for ``hw``: the binary, its macros, and what the build reported."""

    path: Path
    hw: HwConfig
    macros: dict[str, int]
    digest: str
    built: bool = field(default=False, compare=False)

    def layout(self) -> dict[str, object]:
        """What the built design defines (``driver layout``, parsed: ``parse_layout``)."""
        out = subprocess.run([str(self.path), "layout"], capture_output=True, text=True,
                             check=False)
        if out.returncode != 0:
            raise OracleBuildError(f"{self.path} layout failed: {out.stderr.strip()}")
        return parse_layout(out.stdout)


def _compiler() -> str:
    return os.environ.get("CXX") or "g++"


def _compiler_version(cxx: str) -> str:
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    except OSError as e:
        raise OracleBuildError(f"cannot run the C++ compiler {cxx!r} ($CXX): {e}") from None
    return out.stdout.splitlines()[0] if out.stdout else cxx


def _digest(sources: Sources, macros: dict[str, int], cxx: str) -> str:
    h = hashlib.sha256()
    for part in (" ".join(macro_flags(macros)), " ".join(CXXFLAGS), _compiler_version(cxx)):
        h.update(part.encode() + b"\0")
    for f in sources.files():
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build_driver(hw: HwConfig, sources: Sources, *, cache: Path | None = None,
                 force: bool = False) -> Driver:
    """The driver for ``hw`` built from ``sources`` (from the cache when it holds one for the
    same digest, unless ``force``), its layout checked against vta's (``check_layout``)."""
    macros = vta_macros(hw)
    cxx = _compiler()
    digest = _digest(sources, macros, cxx)
    folder = (cache or cache_dir()) / digest
    binary = folder / _BINARY
    built = False
    if force or not binary.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        _compile(cxx, sources, macros, binary)
        built = True
    driver = Driver(binary, hw, macros, digest, built)
    check_layout(hw, driver.layout())
    return driver


def _compile(cxx: str, sources: Sources, macros: dict[str, int], binary: Path) -> None:
    """g++ vta.cc driver.cc -> ``binary`` (written under a temporary name, then renamed, so
    a concurrent build never sees half a file)."""
    fd, tmp = tempfile.mkstemp(prefix=".build-", dir=binary.parent)
    os.close(fd)
    cmd = [cxx, *CXXFLAGS, *(f"-I{d}" for d in sources.include_dirs()), *macro_flags(macros),
           str(sources.vta_cc), str(HERE / "driver.cc"), "-o", tmp, "-lpthread"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            tail = "\n".join(out.stderr.strip().splitlines()[-20:])
            raise OracleBuildError(f"building the vta.cc oracle failed ({' '.join(cmd)}):\n{tail}")
        shutil.move(tmp, binary)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# ---------------------------------------------------------------------------- layout check

#: VTA's bit-field names -> vta's field names (where they differ)
_FIELD_NAMES = {"pop_prev_dep": "pop_prev", "pop_next_dep": "pop_next",
                "push_prev_dep": "push_prev", "push_next_dep": "push_next",
                "memory_type": "mem", "y_pad_0": "pad_y0", "y_pad_1": "pad_y1",
                "x_pad_0": "pad_x0", "x_pad_1": "pad_x1", "reset_reg": "reset",
                "alu_opcode": "op"}
#: VTA's instruction structs -> one of vta's definitions laid out the same way
_STRUCTS = {"mem": "LOAD", "gemm": "GEMM", "alu": "ALU.ADD"}


def parse_layout(text: str) -> dict[str, object]:
    """``driver layout``'s output as ``{"fields": {(struct, vta field): (first bit, width)},
    "macros": {name: value}, "sizeof": {type: bytes}}``."""
    fields: dict[tuple[str, str], tuple[int, int]] = {}
    macros: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if parts[:1] == ["field"]:
            struct, name = parts[1], parts[2]
            fields[(struct, _FIELD_NAMES.get(name, name))] = (int(parts[3]), int(parts[4]))
        elif parts[:1] == ["macro"]:
            macros[parts[1]] = int(parts[2])
        elif parts[:1] == ["sizeof"]:
            sizes[parts[1]] = int(parts[2])
    return {"fields": fields, "macros": macros, "sizeof": sizes}


def _uop_ranges(macros: dict[str, int]) -> dict[tuple[str, str], tuple[int, int]]:
    """The micro-op fields as vta.cc decodes them (``uop.range(hi, lo)``): (first, width)."""
    def rng(lo: str, hi: str) -> tuple[int, int]:
        return macros[lo], macros[hi] - macros[lo] + 1
    return {("GEMM", "dst"): rng("VTA_UOP_GEM_0_0", "VTA_UOP_GEM_0_1"),
            ("GEMM", "src"): rng("VTA_UOP_GEM_1_0", "VTA_UOP_GEM_1_1"),
            ("GEMM", "wgt"): rng("VTA_UOP_GEM_2_0", "VTA_UOP_GEM_2_1"),
            ("ALU", "dst"): rng("VTA_UOP_ALU_0_0", "VTA_UOP_ALU_0_1"),
            ("ALU", "src"): rng("VTA_UOP_ALU_1_0", "VTA_UOP_ALU_1_1")}


def check_layout(hw: HwConfig, built: dict[str, object]) -> None:
    """An ``OracleBuildError`` naming the first field whose position or width differs
    between the built design and vta's encoding, or an element size or depth that differs."""
    fields = built["fields"]
    macros = built["macros"]
    assert isinstance(fields, dict) and isinstance(macros, dict)
    for struct, name in _STRUCTS.items():
        ours = {f: (pos, width) for f, pos, width in layout(hw, name)}
        theirs = {f: v for (s, f), v in fields.items() if s == struct}
        for f, v in theirs.items():
            if ours.get(f) != v:
                raise OracleBuildError(f"{hw.name}: {name} field {f}: vta.cc's hw_spec.h puts it "
                                       f"at bit {v[0]}, {v[1]} bits wide; vta encodes "
                                       f"{_describe(ours.get(f))}")
    for (insn, f), v in _uop_ranges(macros).items():
        pos_width = {n: (p, w) for n, p, w in uop_layout(hw)}[f]
        if pos_width != v:
            raise OracleBuildError(f"{hw.name}: {insn} micro-op field {f}: vta.cc reads bits "
                                   f"{v[0]}..{v[0] + v[1] - 1}, vta encodes "
                                   f"{_describe(pos_width)}")
    for kind in ("uop", "inp", "wgt", "acc", "out"):
        theirs_b, ours_b = macros[f"VTA_{kind.upper()}_ELEM_BYTES"], hw.elem_bytes(kind)
        if theirs_b != ours_b:
            raise OracleBuildError(f"{hw.name}: a {kind} entry is {theirs_b} bytes in vta.cc, "
                                   f"{ours_b} in vta")
    for kind in ("uop", "inp", "wgt", "acc"):
        if macros[f"VTA_{kind.upper()}_BUFF_DEPTH"] != hw.depth(kind):
            raise OracleBuildError(f"{hw.name}: the {kind} buffer has "
                                   f"{macros[f'VTA_{kind.upper()}_BUFF_DEPTH']} entries in "
                                   f"vta.cc, {hw.depth(kind)} in vta")


def _describe(pos_width: tuple[int, int] | None) -> str:
    if pos_width is None:
        return "no such field"
    return f"bit {pos_width[0]}, {pos_width[1]} bits wide"
