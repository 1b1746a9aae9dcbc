"""The oracle's own parts that need no sources: a config's VTA_LOG_* macros, the configs vta.cc
cannot express, the DRAM image's mapping onto vta()'s pointers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tools.vta_oracle.errors import OracleConfigError
from tools.vta_oracle.image import POINTER_OF, regions, vta_byte_offset
from tools.vta_oracle.macros import MACRO_ORDER, macro_flags, mat_axi_ratio, vta_macros
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.run.targets import AccelTarget

#: tvm-vta config/pynq_sample.json (LOG_INP_WIDTH 3, LOG_WGT_WIDTH 3, LOG_ACC_WIDTH 5,
#: LOG_BATCH 0, LOG_BLOCK 4, buffers 2^15/2^15/2^18/2^17 B) with pkg_config.py's derived keys
#: (BLOCK_IN = BLOCK_OUT = BLOCK, OUT_WIDTH = INP_WIDTH, OUT_BUFF_SIZE = 17 + 3 - 5 = 15) and
#: its pynq AXI width (fpga_log_axi_bus_width 6: 64 bits = our memory.bus_bytes 8)
PYNQ = {"LOG_INP_WIDTH": 3, "LOG_WGT_WIDTH": 3, "LOG_ACC_WIDTH": 5, "LOG_BATCH": 0,
        "LOG_BLOCK": 4, "LOG_UOP_BUFF_SIZE": 15, "LOG_INP_BUFF_SIZE": 15,
        "LOG_WGT_BUFF_SIZE": 18, "LOG_ACC_BUFF_SIZE": 17, "LOG_BLOCK_IN": 4,
        "LOG_BLOCK_OUT": 4, "LOG_OUT_WIDTH": 3, "LOG_OUT_BUFF_SIZE": 15, "LOG_BUS_WIDTH": 6}


def test_pynq_macros_are_vtas_pynq_config() -> None:
    m = vta_macros(HwConfig.load("pynq"))
    assert m == PYNQ
    assert tuple(m) == MACRO_ORDER


def test_ultra96_differs_only_in_its_128_bit_bus() -> None:
    # tvm-vta ultra96_sample.json has pynq's sizes; pkg_config.py: log AXI width 7
    assert vta_macros(HwConfig.load("ultra96")) == {**PYNQ, "LOG_BUS_WIDTH": 7}


def test_research_32x32_macros() -> None:
    # 32x32 int8 core: LOG_BLOCK 5; buffers 32 KiB, 64 KiB, 1 MiB, 256 KiB (logs 15, 16, 20,
    # 18); out buffer 2^(18 + 3 - 5) = 64 KiB; a 256-bit bus (32 bytes: log 8)
    m = vta_macros(HwConfig.load("research_32x32"))
    assert m == {**PYNQ, "LOG_BLOCK": 5, "LOG_BLOCK_IN": 5, "LOG_BLOCK_OUT": 5,
                 "LOG_INP_BUFF_SIZE": 16, "LOG_WGT_BUFF_SIZE": 20, "LOG_ACC_BUFF_SIZE": 18,
                 "LOG_OUT_BUFF_SIZE": 16, "LOG_BUS_WIDTH": 8}


def test_macro_flags_are_pkg_configs() -> None:
    flags = macro_flags(PYNQ)
    assert "-DVTA_LOG_BLOCK=4" in flags and "-DVTA_LOG_BUS_WIDTH=6" in flags
    assert len(flags) == len(PYNQ)


def _refused(hw: HwConfig, field: str) -> None:
    with pytest.raises(OracleConfigError, match=field.replace(".", r"\.")):
        vta_macros(hw)


def test_refuses_different_block_sizes() -> None:
    hw = HwConfig.load("pynq").with_changes(**{"gemm.block_out": 32, "scratchpad.wgt": 524288,
                                               "scratchpad.acc": 262144,
                                               "scratchpad.out": 65536})
    _refused(hw, "gemm.block_out")


def test_refuses_a_separate_alu() -> None:
    _refused(HwConfig.load("pynq_overlap"), "alu.separate_pipeline")


def test_refuses_an_out_width_other_than_the_input_width() -> None:
    hw = HwConfig.load("pynq").with_changes(**{"gemm.out_dtype": "int16",
                                               "scratchpad.out": 65536})
    _refused(hw, "gemm.out_dtype")


def test_refuses_an_out_buffer_not_matching_the_accumulator() -> None:
    # HwConfig's validation refuses this already; the oracle does not rely on it
    pynq = HwConfig.load("pynq")
    _refused(replace(pynq, scratchpad=replace(pynq.scratchpad, out=65536)), "scratchpad.out")


def test_refuses_a_bus_wider_than_an_entry() -> None:
    # an inp entry is 16 bytes: vta.cc cannot split it into 32-byte bus words
    _refused(HwConfig.load("pynq").with_changes(**{"memory.bus_bytes": 32}), "memory.bus_bytes")


def test_refuses_another_immediate_width() -> None:
    _refused(HwConfig.load("pynq").with_changes(**{"alu.imm_bits": 12}), "alu.imm_bits")


def test_refuses_an_accumulator_deeper_than_the_input_buffer() -> None:
    # 1024 inp entries, 2048 acc entries: vta's micro-op src field is 11 bits, vta.cc's 10
    _refused(HwConfig.load("pynq").with_changes(**{"scratchpad.inp": 16384}), "scratchpad.acc")


def test_refuses_a_size_that_is_not_a_power_of_two() -> None:
    # HwConfig's validation refuses these already; the oracle does not rely on it
    pynq = HwConfig.load("pynq")
    hw = replace(pynq, scratchpad=replace(pynq.scratchpad, inp=3 * 8192))
    _refused(hw, "scratchpad.inp")


def test_mat_axi_ratios_on_pynq() -> None:
    # entries of 16, 256, 64 and 16 bytes over a 64-bit bus
    hw = HwConfig.load("pynq")
    assert [mat_axi_ratio(hw, k) for k in ("inp", "wgt", "acc", "out")] == [2, 32, 8, 2]


def test_pointers_are_vtas_arguments() -> None:
    assert POINTER_OF == {"uop": "uops", "inp": "inputs", "wgt": "weights", "acc": "biases",
                          "out": "outputs"}


@pytest.mark.parametrize("config", ["pynq", "research_32x32"])
def test_every_allocation_is_where_vta_cc_addresses_it(config: str) -> None:
    """With every pointer at the image's first byte, vta.cc's pointer arithmetic for an
    allocation's first element address (what the instructions hold) lands on the allocation's
    first byte, for every kind (micro-ops, inputs, weights, the bias, the result)."""
    hw = HwConfig.load(config)
    program = AccelTarget(hw).compile_layer(resolve("matmul", [32, 32, 32])).program
    regs = regions(program, hw)
    assert {r.kind for r in regs} >= {"uop", "inp", "wgt", "out"}
    for r, a in zip(regs, program.allocations, strict=True):
        assert (r.name, r.offset, r.nbytes) == (a.name, a.offset, a.nbytes)
        assert r.address == a.base
        assert vta_byte_offset(hw, r.kind, r.address) == r.offset
        last = r.address + a.elems - 1
        assert vta_byte_offset(hw, r.kind, last) == r.offset + r.nbytes - a.elem_bytes


def test_byte_offsets_by_hand_on_pynq() -> None:
    hw = HwConfig.load("pynq")
    assert vta_byte_offset(hw, "uop", 10) == 40  # uops[10], 4-byte words
    assert vta_byte_offset(hw, "inp", 3) == 48  # inputs[3 * 2], 8-byte bus words
    assert vta_byte_offset(hw, "wgt", 2) == 512  # weights[2 * 32]
    assert vta_byte_offset(hw, "acc", 5) == 320  # biases[5 * 8]
    assert vta_byte_offset(hw, "out", 7, pointer_base=64) == 64 + 112  # outputs[7 * 2]
