"""coproc_sync's kinds of a whole stream at once (``_Tokens._kinds``: one loop answering the
memo's hits in place) are those of each instruction asked alone on a fresh pass state: every
instruction gets its own module and accesses, alike micro-op instructions and alike DMAs share
a kind, and a DMA's kind is moved by its ``sram_base``."""

from __future__ import annotations

from _vta_helpers import hw, lowered, run_until

from vta.compiler.accel.passes._common import flat_stream
from vta.compiler.accel.passes.coproc_sync import _Tokens, accesses
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.isa import module_of


def test_a_streams_kinds_are_each_instructions_own() -> None:
    spec = Conv2dSpec(n=1, ic=32, h=12, w=6, oc=32, kh=3, kw=3, stride=1, pad=1)
    flat = flat_stream(run_until(lowered(spec), "drain_tail"))
    assert flat is not None
    insns = flat[0]
    h = hw("pynq")
    tokens = _Tokens(h)
    kinds, bases = tokens._kinds(insns)
    assert len(kinds) == len(bases) == len(insns)
    assert len(set(kinds)) == len(tokens.kinds) < len(insns)  # hits answered from the memo
    for ins, k, b in zip(insns, kinds, bases, strict=True):
        m, flat_acc = tokens.kinds[k]
        moved = tuple(v + b if j % 4 in (1, 2) else v for j, v in enumerate(flat_acc))
        assert (m, moved) == (int(module_of(ins.insn, h)), tokens._flat(accesses(ins, h)))
        assert b == (0 if ins.uops else ins.insn.sram_base)
        alone = _Tokens(h)
        assert alone._describe(ins) == (module_of(ins.insn, h), moved)


def test_the_routing_of_a_configuration_is_worked_out_once() -> None:
    """What the pass reads of a configuration (``_routing``) is shared by every stream's
    state on it; another configuration gets its own."""
    h = hw("pynq")
    a, b = _Tokens(h), _Tokens(h)
    assert a.queued is b.queued and a.flags is b.flags and a.depth is b.depth
    sep = _Tokens(h.with_changes(**{"alu.separate_pipeline": True, "alu.acc_banks": 2}))
    assert sep.separate and not a.separate and sep.modules != a.modules
    assert a.satisfied is not b.satisfied and a.push_at is not b.push_at  # per stream
