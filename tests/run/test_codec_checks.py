"""The codec's round-trip check made cheaper, with the same answers: ``encode_program`` encodes
each distinct instruction object once (the words are ``encode``'s), ``encode_uops_checked``
says whether the micro-op words decode back without making a ``Uop`` per word (the answer of
comparing the decoded micro-ops), and ``unpack_compiled`` of bytes this process just packed
takes the instructions the check decoded instead of decoding the same words again."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.compiler.accel import driver
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.errors import IsaError
from vta.isa import Uop, encoding, registered
from vta.isa.encoding import decode_uops, encode, encode_program, encode_uops, encode_uops_checked
from vta.run import codec

ROOT = Path(__file__).resolve().parents[2]
PYNQ = HwConfig.load(ROOT / "hwconfigs" / "pynq.yaml")


@pytest.fixture(scope="module")
def compiled() -> driver.Compiled:
    w = resolve("resnet18:C11", [], height=7, in_channels=64, out_channels=64)
    return driver.compile_workload(w, PYNQ)


def _words(insns: list[Any]) -> list[int]:
    """``encode`` of each instruction, as ``encode_program``'s rows read back."""
    return [encode(x, PYNQ) for x in insns]


def _rows(words: Any) -> list[int]:
    return [int(lo) | (int(hi) << 64) for lo, hi in words.tolist()]


def test_shared_objects_are_encoded_once_with_encode_s_words(
        compiled: driver.Compiled, monkeypatch: pytest.MonkeyPatch) -> None:
    """A program holding one object at many places, and equal objects that are not one:
    every row is ``encode``'s word of its instruction; the definition is looked up once per
    distinct object (fails when each place is encoded anew)."""
    base = list(compiled.program.instructions)
    insns = base + base[::-1] + [replace(x) for x in base[:20]]
    want = _words(insns)
    asked: list[int] = []
    real = encoding.definition_of

    def counted(x: Any) -> Any:
        asked.append(id(x))
        return real(x)

    monkeypatch.setattr(encoding, "definition_of", counted)
    got = encode_program(insns, PYNQ)
    assert _rows(got) == want
    assert len(asked) == len({id(x) for x in insns}) < len(insns)


def test_a_bad_instruction_is_named_at_its_first_place(compiled: driver.Compiled) -> None:
    """A field out of range on an object held at two places: the error names the first."""
    base = list(compiled.program.instructions)
    k = next(i for i, x in enumerate(base) if hasattr(x, "sram_base"))
    bad = replace(base[k], sram_base=1 << 16)
    insns = [*base[:k], bad, *base[k + 1:], bad]
    with pytest.raises(IsaError, match=f"^instruction {k}: "):
        encode_program(insns, PYNQ)


@dataclass(frozen=True)
class _OtherUop(Uop):
    """A micro-op of another class: never equal to a decoded ``Uop``."""


_field = st.one_of(st.integers(-3, (1 << 12)), st.booleans(), st.sampled_from([3.0, 3.5, 2 ** 63]))


def _outcome(fn: Any, uops: list[Uop]) -> Any:
    """``fn(uops, PYNQ)``, or the exception it raised (an IsaError for a field out of range;
    ``encode_uop``'s own TypeError or OverflowError for a float or oversized one)."""
    try:
        return fn(uops, PYNQ)
    except Exception as e:  # compared by type and message
        return e


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_field, _field, _field, st.booleans()), max_size=6))
def test_the_micro_op_check_answers_as_decoding_does(rows: list[tuple[Any, ...]]) -> None:
    """``encode_uops_checked``: the words of ``encode_uops`` (or its very error) and True exactly
    when decoding them gives the micro-ops back, for integer, boolean, float and oversized
    fields and another class."""
    uops = [(_OtherUop if other else Uop)(a, b, c) for a, b, c, other in rows]
    want, words_same = _outcome(encode_uops, uops), _outcome(encode_uops_checked, uops)
    if isinstance(want, Exception) or isinstance(words_same, Exception):
        assert (type(words_same), str(words_same)) == (type(want), str(want))
        return
    words, same = words_same
    assert words.tolist() == want.tolist()
    assert same == (tuple(decode_uops(words, PYNQ)) == tuple(uops))


def test_plain_micro_ops_are_checked_without_decoding(
        compiled: driver.Compiled, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiled program's micro-ops (``Uop`` of ints) are checked as fields: no ``Uop`` is
    made (fails when the check decodes them)."""
    def refused(*_: Any) -> Any:
        raise AssertionError("decoded")

    monkeypatch.setattr(encoding, "decode_uops", refused)
    for uops in compiled.program.uops.values():
        words, same = encode_uops_checked(uops, PYNQ)
        assert same and words.tolist() == encode_uops(uops, PYNQ).tolist()


def test_unpacking_the_bytes_just_packed_decodes_nothing(
        compiled: driver.Compiled, monkeypatch: pytest.MonkeyPatch) -> None:
    """``unpack_compiled`` of the very bytes ``pack_compiled`` returned in this process takes
    the instructions its check decoded (once); an equal copy of the bytes, or the same bytes
    again, are decoded; every one gives the program (fails when the first is decoded again)."""
    blob = codec.pack_compiled(compiled, PYNQ)
    assert blob is not None
    decoded: list[int] = []
    real = codec.decode_distinct

    def counted(words: Any, hw: HwConfig) -> Any:
        decoded.append(len(words))
        return real(words, hw)

    monkeypatch.setattr(codec, "decode_distinct", counted)
    first = codec.unpack_compiled(blob, PYNQ)
    assert decoded == []
    again = codec.unpack_compiled(blob, PYNQ)
    copy = codec.unpack_compiled(bytes(bytearray(blob)), PYNQ)
    assert len(decoded) == 2
    for back in (first, again, copy):
        assert back.program == compiled.program and back.schedule == compiled.schedule
    assert first.program.instructions == again.program.instructions


def test_the_kept_decodings_are_bounded() -> None:
    """``_Recent`` holds its latest bytes only: the oldest is dropped (then decoded)."""
    recent = codec._Recent(2)
    blobs = [bytes([k]) * 8 for k in range(3)]
    for k, b in enumerate(blobs):
        recent.keep(b, PYNQ, (k,))
    assert recent.take(blobs[0], PYNQ) is None
    assert recent.take(blobs[2], PYNQ) == (2,)
    assert recent.take(blobs[2], PYNQ) is None  # taken once
    assert recent.take(blobs[1], HwConfig.load(ROOT / "hwconfigs" / "pynq.yaml")) == (1,)


@pytest.mark.parametrize("cfg", sorted(p.stem for p in (ROOT / "hwconfigs").glob("*.yaml")))
def test_decoding_reads_each_field_where_the_layout_puts_it(cfg: str) -> None:
    """``encoding._half_fields`` (how ``decode_program`` reads all of a half's fields at once):
    every field of every registered definition at ``layout``'s first bit and width, signed
    where the definition's field is (fails without the table)."""
    hw = HwConfig.load(ROOT / "hwconfigs" / f"{cfg}.yaml")
    for d in registered():
        try:
            want = encoding.layout(hw, d)
        except Exception:  # a definition this config cannot lay out: nothing to decode
            continue
        got = []
        for base, (names, shift, mask, _) in zip((0, 64), encoding._half_fields(d, hw),
                                                 strict=True):
            got += [(n, base + int(s), int(m).bit_length())
                    for n, s, m in zip(names, shift, mask, strict=True)]
        assert got == want, (cfg, d.name)
        signed = {n for half in encoding.layout_of(d, hw) for n in (f.name for f in half
                                                                    if f.signed)}
        assert {names[j] for names, _, _, s in encoding._half_fields(d, hw)
                for j, _ in s} == signed
