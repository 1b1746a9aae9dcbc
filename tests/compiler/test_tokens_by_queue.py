"""coproc_sync's fast paths: the tokens worked out a queue at a time (``_by_queue``, ``_room``)
are those of the instruction-by-instruction path, and a DMA's memoised description
(``_describe``) is its ``accesses``."""

from dataclasses import replace

from _vta_helpers import hw, lowered, run_until
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.compiler.accel.passes._common import flat_stream
from vta.compiler.accel.passes.coproc_sync import _Tokens, accesses
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.isa import Deps, Load, MemType, Store, Unit, module_of


def _one_by_one(tokens: _Tokens, insns: list[Insn]) -> list[Insn]:
    rows, table = tokens._table(insns)
    tokens._one_by_one(insns, rows, table.tolist())
    return tokens._given()


def test_tokens_by_queue_are_those_of_the_one_by_one_path() -> None:
    """On a flattened conv2d with virtual threads, at token queue depths down to one (where
    waits move pushes instead of adding tokens) and on hardware with a separate ALU module
    (relays: the one-by-one path itself), ``run`` gives the instructions and flags of
    appending the instructions one by one."""
    spec = Conv2dSpec(n=1, ic=32, h=12, w=6, oc=32, kh=3, kw=3, stride=1, pad=1)
    flat = flat_stream(run_until(lowered(spec), "drain_tail"))
    assert flat is not None
    insns = flat[0]
    for changes in ({"queues.token_depth": 1}, {"queues.token_depth": 2}, {},
                    {"alu.separate_pipeline": True, "alu.acc_banks": 2}):
        h = hw("pynq").with_changes(**changes)
        fast, slow = _Tokens(h), _Tokens(h)
        got = fast.run(insns)
        assert [(x.insn, x.note) for x in got] == \
            [(x.insn, x.note) for x in _one_by_one(slow, insns)], changes
        assert fast.push_at == slow.push_at and fast.pop_at == slow.pop_at, changes
    # depth one moves pushes instead of adding tokens
    tight, roomy = (_Tokens(hw("pynq").with_changes(**{"queues.token_depth": d})) for d in (1, 8))
    tight.run(insns)
    roomy.run(insns)
    assert sum(map(len, tight.push_at.values())) < sum(map(len, roomy.push_at.values()))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4)), max_size=20),
       st.integers(1, 4))
def test_room_places_tokens_as_one_wait_at_a_time(steps: list[tuple[int, int]],
                                                 depth: int) -> None:
    """``_room`` (every wait a token where none could find the queue full, else a loop) gives
    the pushes and pops of ``_would_overflow`` and ``_retarget`` applied one wait at a time,
    on increasing needs each before its waiting instruction."""
    needs, waiting, n = [], [], 0
    for dn, dk in steps:
        n += dn
        needs.append(n)
        waiting.append(n + dk + (waiting[-1] - n if waiting and waiting[-1] >= n else 0))
    h = hw("pynq").with_changes(**{"queues.token_depth": depth})
    q = (Unit.LOAD, Unit.COMPUTE)
    ref = _Tokens(h)
    ref.pending = [0] * (max(waiting, default=0) + 1)
    for need, k in zip(needs, waiting, strict=True):
        if ref._would_overflow(q, need):
            ref._retarget(q, need)
        else:
            ref.push_at[q].append(need)
            ref.pop_at[q].append(k)
    got = _Tokens(h)
    assert got._room(q, list(needs), list(waiting)) == (ref.push_at[q], ref.pop_at[q])


_LOADS = st.builds(Load, st.sampled_from([MemType.UOP, MemType.WGT, MemType.INP, MemType.ACC]),
                   st.integers(0, 500), st.integers(0, 900),
                   st.integers(0, 6), st.integers(0, 6), st.integers(1, 9), st.integers(0, 2),
                   st.integers(0, 2), st.integers(0, 2), st.integers(0, 2),
                   st.builds(Deps, st.booleans(), st.booleans(), st.booleans(), st.booleans()))
_STORES = st.builds(Store, st.just(MemType.OUT), st.integers(0, 500), st.integers(0, 900),
                    st.integers(0, 6), st.integers(0, 6), st.integers(1, 9))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_LOADS, _STORES), min_size=1, max_size=12))
def test_a_dma_s_memoised_description_is_its_accesses(dmas: list[Load | Store]) -> None:
    """DMAs alike but for their addresses and flags share one memo entry of
    ``_describe``, moved to each one's ``sram_base``: every answer is the DMA's own module
    and ``accesses``."""
    h = hw("pynq")
    tokens = _Tokens(h)
    for x in dmas:
        for y in (x, replace(x, sram_base=x.sram_base + 7, dram_base=3, deps=Deps())):
            ins = Insn(y)
            assert tokens._describe(ins) == (module_of(y, h), tokens._flat(accesses(ins, h)))
    assert len(tokens.dma_seen) <= len(dmas)  # each moved copy answered from its original's
