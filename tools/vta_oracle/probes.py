"""ISA corner probes: small hand-written programs whose outputs show what vta.cc does at the
edges of the ISA, with the outputs vta.cc's source says they must have.

Each ``Probe`` is assembly text (``vta.isa.assemble``), its inputs (drawn from a fixed seed)
and ``expect``: the contents of the out allocations that vta.cc's source (apache/tvm-vta
``hardware/xilinx/src/vta.cc``) implies, computed here in numpy. A probe observes the
accumulator through a *readout* that both vta.cc and vta compute alike (ALU.ADD by a
register, ALU.SHR by 8, ALU.ADD by 0): ``G`` groups of accumulator entries ``R`` are copied
into three zero blocks, shifted right by 8, 16 and 24 bits (8 at a time) and stored, so the
out allocation ``Y`` holds the four bytes of every ``R`` (``decode_readout`` joins them).

The probes (``PROBES``), each against a line of vta.cc:

* ``alu_reset``: an ALU instruction with the reset bit set computes as if it were clear
  (``alu()`` never reads ``reset_reg``);
* ``alu_mul``: ALU function 4 (vta's MUL) leaves the accumulator unchanged (``alu()`` has
  branches for MIN, MAX, ADD and SHR only; the out buffer then receives an uninitialised
  value, which the probe does not look at);
* ``shr_imm``, ``shr_reg``: SHR's amount is the low 5 bits of the immediate or register
  operand taken as signed (``aluop_shr_arg_T shft_by = src_1.range(4, 0)``): 16 shifts left
  by 16, 24 left by 8, 32 by nothing, -17 right by 15; a negative amount shifts left
  (ap_int's ``>>`` by a negative signed amount);
* ``gemm_reset_out``: a GEMM with reset zeroes the accumulator but writes the low bits of the
  *old* accumulator plus inp·wgt to the out buffer (``o_tensor = accum.range(...)`` is taken
  before ``a_tensor = reset ? 0 : accum`` matters);
* ``load_wgt_pads``: a LOAD of weights ignores its pad fields (``load_2d``, no padding): the
  data lands at the SRAM base;
* ``load_uop_y2``: a LOAD of micro-ops copies ``x_size`` words only (``memcpy(..., x_size *
  sizeof(uop_T))``), whatever ``y_size`` is;
* ``empty_load_pads``: a LOAD with ``y_size`` 0 still writes its pads (``load_pad_2d``'s
  ``reset_mem`` of ``y_offset_0`` and ``y_offset_1`` entries);
* ``empty_row_load_pads``: likewise a LOAD with ``x_size`` 0 writes each row's x pads.

``token_chain(n)`` is no output probe: ``n`` empty loads and ``n`` empty micro-op loads
passing one token back and forth, then an ALU copy of one accumulator entry and its store.
vta()'s main loop runs one link of the chain per round and gives up after 1001 rounds
(``exit_counter > 1000`` counts every round): with ``n`` = 1000 vta.cc finishes, with 1001 it
stops early and fails its final assertion (tokens left); vta's simulators run both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from vta.config import HwConfig
from vta.isa import Program, assemble
from vta.sim.dram import entry_spec

__all__ = ["Probe", "PROBES", "probe", "decode_readout", "readout_bytes", "vta_cc_shift",
           "token_chain"]

#: the out allocation every readout stores to
READOUT = "Y"


@dataclass(frozen=True)
class Probe:
    """A corner probe (module docstring): ``claim`` is what vta.cc does, ``source`` the
    assembly for a config, ``inputs`` its DRAM inputs, ``expect`` the out allocations vta.cc
    produces on them."""

    name: str
    claim: str
    source: Callable[[HwConfig], str]
    inputs: Callable[[HwConfig, np.random.Generator], dict[str, np.ndarray]]
    expect: Callable[[HwConfig, dict[str, np.ndarray]], dict[str, np.ndarray]]
    seed: int = 0
    #: the config the probe's program is assembled and simulated on, from the oracle's (the
    #: instruction words vta.cc runs are the same: a variant only lets vta's side build them)
    variant: Callable[[HwConfig], HwConfig] | None = None

    def config(self, hw: HwConfig) -> HwConfig:
        """The config vta's side runs the probe on (``hw`` unless the probe needs a variant)."""
        return self.variant(hw) if self.variant is not None else hw

    def program(self, hw: HwConfig) -> Program:
        return assemble(self.source(hw), self.config(hw), f"<probe {self.name}>")

    def draw(self, hw: HwConfig) -> dict[str, np.ndarray]:
        return self.inputs(hw, np.random.default_rng(self.seed))

    def mismatches(self, hw: HwConfig, inputs: dict[str, np.ndarray],
                   outputs: dict[str, np.ndarray]) -> list[str]:
        """What in ``outputs`` differs from vta.cc's documented behaviour (empty: agrees)."""
        out = []
        for name, want in self.expect(hw, inputs).items():
            got = np.asarray(outputs[name])
            if not np.array_equal(got, want):
                bad = np.argwhere(got != want)[0]
                at = tuple(int(i) for i in bad)
                out.append(f"{self.name}: {name}{list(at)} is {got[at]}, vta.cc's source says "
                           f"{want[at]}")
        return out


# ---------------------------------------------------------------------------- helpers


def _entries(hw: HwConfig) -> tuple[int, int]:
    """(batch, block_out): the shape of one acc/out entry."""
    return hw.gemm.batch, hw.gemm.block_out


def _wrap(v: np.ndarray, bits: int) -> np.ndarray:
    half = 1 << (bits - 1)
    return ((np.asarray(v, dtype=np.int64) + half) & ((1 << bits) - 1)) - half


def _acc_bits(hw: HwConfig) -> int:
    return entry_spec(hw, "acc")[0].itemsize * 8


def _out_bits(hw: HwConfig) -> int:
    return entry_spec(hw, "out")[0].itemsize * 8


def vta_cc_shift(x: np.ndarray, amount: np.ndarray | int, hw: HwConfig) -> np.ndarray:
    """vta.cc's SHR: the amount's low log2(acc bits) bits as a signed number; right by a
    non-negative amount (arithmetic), left by a negative one, wrapped to the acc width."""
    acc = _acc_bits(hw)
    k = acc.bit_length() - 1  # VTA_SHR_ARG_BIT_WIDTH = LOG_ACC_WIDTH
    a = np.asarray(amount, dtype=np.int64) & ((1 << k) - 1)
    s = np.where(a >= 1 << (k - 1), a - (1 << k), a)
    x = np.asarray(x, dtype=np.int64)
    right = x >> np.clip(s, 0, 63)
    left = _wrap((x.astype(np.uint64) << np.clip(-s, 0, 63).astype(np.uint64)).astype(np.int64),
                 acc)
    return np.where(s >= 0, right, left)


def _slices(hw: HwConfig) -> int:
    return _acc_bits(hw) // _out_bits(hw)


def readout_bytes(hw: HwConfig, acc: np.ndarray) -> np.ndarray:
    """The readout's out allocation for accumulator groups ``acc`` ((G, batch, block_out)):
    block ``k`` holds the out-width slice ``k`` of every group."""
    bits = _out_bits(hw)
    acc = np.asarray(acc, dtype=np.int64)
    return np.concatenate([_wrap(acc >> (k * bits), bits) for k in range(_slices(hw))]
                          ).astype(entry_spec(hw, "out")[0].newbyteorder("="))


def decode_readout(hw: HwConfig, out: np.ndarray, groups: int) -> np.ndarray:
    """The accumulator groups a readout stored in ``out`` (inverse of ``readout_bytes``)."""
    bits = _out_bits(hw)
    total = np.zeros((groups, *out.shape[1:]), dtype=np.int64)
    for k in range(_slices(hw)):
        total |= (out[k * groups:(k + 1) * groups].astype(np.int64) & ((1 << bits) - 1)) \
            << (k * bits)
    return _wrap(total, _acc_bits(hw))


def _readout(groups: int, uop_base: int, last_pop: str = "") -> tuple[list[str], list[str]]:
    """Micro-ops and instructions of a readout of acc entries ``0..groups-1`` (blocks 1..3 of
    ``groups`` entries each must hold zeros), ending the program. Its micro-ops sit at
    ``uop_base`` in the uop buffer (loaded by the caller)."""
    g, b = groups, uop_base
    uops = [".uop U 0 0 0"] + [f".uop U {k * g} 0 0" for k in (1, 2, 3)]
    body = []
    for k in (1, 2, 3):  # copy R into zero block k
        body.append(f"ALU.ADD uop={b + k}:{b + k + 1} iter={g},1 dst=1,0 src=1,0")
    for k in (1, 2, 3):  # block k: R >> 8k, eight bits at a time
        for _ in range(k):
            body.append(f"ALU.SHR uop={b + k}:{b + k + 1} iter={g},1 dst=1,0 src=1,0 imm=8")
    if last_pop:
        body[0] += f" | {last_pop}"
    body += [f"ALU.ADD uop={b}:{b + 1} iter={4 * g},1 dst=1,0 src=1,0 imm=0 | push_next",
             f"STORE.OUT sram=0 dram={READOUT}+0 y=1 x={4 * g} stride={4 * g} "
             f"| pop_prev push_prev",
             "FINISH | pop_next"]
    return uops, body


def _program(groups: int, probe_uops: list[str], head: list[str], *,
             tail_uops: tuple[str, ...] = (), allocs: tuple[str, ...] = (),
             readout_pop: str = "") -> str:
    """A probe: allocations (X: 4·groups acc entries, Y: the readout, U: micro-ops), one
    LOAD.UOP of the probe's and the readout's micro-ops, a LOAD.ACC of X, the probe's
    instructions ``head``, the readout. ``tail_uops`` follow in U, unloaded, for the probe to
    load itself."""
    p = len(probe_uops)
    r_uops, r_body = _readout(groups, p, readout_pop)
    n = p + len(r_uops)
    lines = [f".alloc X acc {4 * groups}", f".alloc {READOUT} out {4 * groups}", *allocs,
             f".alloc U uop {n + len(tail_uops)}", *probe_uops, *r_uops, *tail_uops,
             f"LOAD.UOP sram=0 dram=U+0 y=1 x={n} stride={n}",
             f"LOAD.ACC sram=0 dram=X+0 y=1 x={4 * groups} stride={4 * groups}",
             *head, *r_body]
    return "\n".join(lines) + "\n"


def _acc_input(hw: HwConfig, rng: np.random.Generator, groups: int, lo: int, hi: int
               ) -> np.ndarray:
    """X: ``groups`` entries drawn from [lo, hi) followed by three zero blocks."""
    x = np.zeros((4 * groups, *_entries(hw)), dtype=np.int32)
    x[:groups] = rng.integers(lo, hi, size=(groups, *_entries(hw)), dtype=np.int64)
    return x


def _acc_full(hw: HwConfig, rng: np.random.Generator, groups: int) -> np.ndarray:
    info = np.iinfo(np.int32)
    return _acc_input(hw, rng, groups, info.min, info.max + 1)


# ---------------------------------------------------------------------------- the probes

_SHR_IMMS = (16, 24, 31, 32, 40, 100, -17, -32, -100, -16, -1, 0, 8, 15)
_SHR_REG = (16, 24, 31, 32, 33, 40, 48, 63, 64, -17, -32, -33, 1000, -1000, 100000, 15)


def _shr_imm_source(hw: HwConfig) -> str:
    g = len(_SHR_IMMS)
    uops = [f".uop U {i} 0 0" for i in range(g)]
    head = [f"ALU.SHR uop={i}:{i + 1} iter=1,1 dst=0,0 src=0,0 imm={imm}"
            for i, imm in enumerate(_SHR_IMMS)]
    return _program(g, uops, head)


def _shr_imm_expect(hw: HwConfig, inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    g = len(_SHR_IMMS)
    x = inp["X"][:g].astype(np.int64)
    amounts = np.array(_SHR_IMMS, dtype=np.int64).reshape(g, 1, 1)
    return {READOUT: readout_bytes(hw, vta_cc_shift(x, amounts, hw))}


def _shr_reg_inputs(hw: HwConfig, rng: np.random.Generator) -> dict[str, np.ndarray]:
    x = _acc_full(hw, rng, 2)
    lanes = x[1].size
    x[1] = np.resize(np.array(_SHR_REG, dtype=np.int32), lanes).reshape(x[1].shape)
    return {"X": x}


def _shr_reg_expect(hw: HwConfig, inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x = inp["X"][:2].astype(np.int64)
    r = x.copy()
    r[0] = vta_cc_shift(x[0], x[1], hw)
    return {READOUT: readout_bytes(hw, r)}


def _alu_reset_expect(hw: HwConfig, inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {READOUT: readout_bytes(hw, _wrap(inp["X"][:1].astype(np.int64) + 5, _acc_bits(hw)))}


def _unchanged(hw: HwConfig, inp: dict[str, np.ndarray], groups: int = 1
               ) -> dict[str, np.ndarray]:
    return {READOUT: readout_bytes(hw, inp["X"][:groups])}


def _gemm_reset_source(hw: HwConfig) -> str:
    head = ["LOAD.INP sram=0 dram=I+0 y=1 x=1 stride=1",
            "LOAD.WGT sram=0 dram=W+0 y=1 x=1 stride=1 | push_next",
            "GEMM reset uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_prev push_next",
            "STORE.OUT sram=0 dram=Z+0 y=1 x=1 stride=1 | pop_prev push_prev"]
    return _program(1, [".uop U 0 0 0"], head,
                    allocs=(".alloc I inp 1", ".alloc W wgt 1", ".alloc Z out 1"),
                    readout_pop="pop_next")


def _gemm_inputs(hw: HwConfig, rng: np.random.Generator, acc: bool) -> dict[str, np.ndarray]:
    g = hw.gemm
    return {"X": _acc_input(hw, rng, 1, -(1 << 20), 1 << 20) if acc else
            _acc_input(hw, rng, 1, 0, 1),
            "I": rng.integers(-128, 128, size=(1, g.batch, g.block_in), dtype=np.int8),
            "W": rng.integers(-128, 128, size=(1, g.block_out, g.block_in), dtype=np.int8)}


def _product(inp: dict[str, np.ndarray]) -> np.ndarray:
    """inp · wgtᵀ of entry 0: (batch, block_out), int64."""
    return inp["I"][0].astype(np.int64) @ inp["W"][0].astype(np.int64).T


def _gemm_reset_expect(hw: HwConfig, inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    total = _wrap(inp["X"][0].astype(np.int64) + _product(inp), _acc_bits(hw))
    out_dtype = entry_spec(hw, "out")[0].newbyteorder("=")
    return {"Z": _wrap(total, _out_bits(hw))[None].astype(out_dtype),
            READOUT: readout_bytes(hw, np.zeros((1, *_entries(hw)), dtype=np.int64))}


def _load_wgt_pads_source(hw: HwConfig) -> str:
    head = ["LOAD.INP sram=0 dram=I+0 y=1 x=1 stride=1",
            "LOAD.WGT sram=0 dram=W+0 y=1 x=1 stride=1 pad=1,0,1,0 | push_next",
            "GEMM uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0 | pop_prev"]
    return _program(1, [".uop U 0 0 0"], head, allocs=(".alloc I inp 1", ".alloc W wgt 1"))


def _load_wgt_pads_expect(hw: HwConfig, inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {READOUT: readout_bytes(hw, _product(inp)[None])}


def _load_uop_y2_source(hw: HwConfig) -> str:
    # the readout's four micro-ops fill sram 0..3; U's two tail words, (0, 0, 0) and
    # (1, 0, 0), are loaded with y_size 2 into sram 4 and 5, then used from sram 5
    head = ["LOAD.UOP sram=4 dram=U+4 y=2 x=1 stride=1",
            "ALU.ADD uop=5:6 iter=1,1 dst=0,0 src=0,0 imm=7"]
    return _program(2, [], head, tail_uops=(".uop U 0 0 0", ".uop U 1 0 0"))


def _load_uop_y2_expect(hw: HwConfig, inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    r = inp["X"][:2].astype(np.int64)
    r[0] = _wrap(r[0] + 7, _acc_bits(hw))  # sram 5 still holds (0, 0, 0): dst entry 0
    return {READOUT: readout_bytes(hw, r)}


def _empty_load_source(pads: str, y: int, x: int) -> Callable[[HwConfig], str]:
    def source(hw: HwConfig) -> str:
        head = [f"LOAD.ACC sram=0 dram=X+0 y={y} x={x} stride=1 pad={pads}"]
        return _program(2, [], head)
    return source


def _zeroed_expect(hw: HwConfig, inp: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {READOUT: readout_bytes(hw, np.zeros((2, *_entries(hw)), dtype=np.int64))}


PROBES: tuple[Probe, ...] = (
    Probe("alu_reset", "an ALU instruction ignores its reset bit: acc = acc + 5, not 0",
          lambda hw: _program(1, [], ["ALU.ADD reset uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=5"]),
          lambda hw, rng: {"X": _acc_input(hw, rng, 1, -(1 << 30), 1 << 30)},
          _alu_reset_expect),
    Probe("alu_mul", "ALU function 4 (MUL) leaves the accumulator unchanged",
          lambda hw: _program(1, [], ["ALU.MUL uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=3"]),
          lambda hw, rng: {"X": _acc_input(hw, rng, 1, -(1 << 30), 1 << 30)},
          lambda hw, inp: _unchanged(hw, inp), variant=HwConfig.with_mul),
    Probe("shr_imm", "SHR by an immediate shifts by its low 5 bits as a signed number "
          "(16: left by 16; 24: left by 8; 32: none; -17: right by 15)",
          _shr_imm_source, lambda hw, rng: {"X": _acc_full(hw, rng, len(_SHR_IMMS))},
          _shr_imm_expect),
    Probe("shr_reg", "SHR by a register shifts by its low 5 bits as a signed number",
          lambda hw: _program(2, [".uop U 0 1 0"],
                              ["ALU.SHR uop=0:1 iter=1,1 dst=0,0 src=0,0"]),
          _shr_reg_inputs, _shr_reg_expect),
    Probe("gemm_reset_out", "GEMM with reset zeroes acc but writes low bits of acc + inp·wgt "
          "to out", _gemm_reset_source, lambda hw, rng: _gemm_inputs(hw, rng, True),
          _gemm_reset_expect),
    Probe("load_wgt_pads", "LOAD.WGT ignores its pads: the weights land at the SRAM base",
          _load_wgt_pads_source, lambda hw, rng: _gemm_inputs(hw, rng, False),
          _load_wgt_pads_expect),
    Probe("load_uop_y2", "LOAD.UOP with y_size 2 copies x_size micro-ops only",
          _load_uop_y2_source,
          lambda hw, rng: {"X": _acc_input(hw, rng, 2, -(1 << 30), 1 << 30)},
          _load_uop_y2_expect),
    Probe("empty_load_pads", "a LOAD with y_size 0 still writes its y pads (zeros)",
          _empty_load_source("1,1,0,0", 0, 1),
          lambda hw, rng: {"X": _acc_input(hw, rng, 2, 1, 1 << 30)}, _zeroed_expect),
    Probe("empty_row_load_pads", "a LOAD with x_size 0 still writes each row's x pads (zeros)",
          _empty_load_source("0,0,1,1", 1, 0),
          lambda hw, rng: {"X": _acc_input(hw, rng, 2, 1, 1 << 30)}, _zeroed_expect),
)


def token_chain(n: int) -> str:
    """The assembly of a token chain of ``n`` links (module docstring); it stores acc entry
    ``X[0]`` to ``Y[0]`` (through ALU.ADD 0)."""
    lines = [".alloc X acc 1", ".alloc Y out 1", ".alloc U uop 1", ".uop U 0 0 0"]
    for i in range(n):
        lines.append("LOAD.INP sram=0 dram=0 y=0 x=0 stride=0 | "
                     + ("pop_next " if i else "") + "push_next")
        lines.append("LOAD.UOP sram=0 dram=U+0 y=0 x=0 stride=0 | pop_prev"
                     + (" push_prev" if i < n - 1 else ""))
    lines += ["LOAD.UOP sram=0 dram=U+0 y=1 x=1 stride=1",
              "LOAD.ACC sram=0 dram=X+0 y=1 x=1 stride=1",
              "ALU.ADD uop=0:1 iter=1,1 dst=0,0 src=0,0 imm=0 | push_next",
              "STORE.OUT sram=0 dram=Y+0 y=1 x=1 stride=1 | pop_prev push_prev",
              "FINISH | pop_next"]
    return "\n".join(lines) + "\n"


def probe(name: str) -> Probe:
    """The probe called ``name``."""
    for p in PROBES:
        if p.name == name:
            return p
    raise KeyError(f"no probe {name!r} (have: {', '.join(p.name for p in PROBES)})")
