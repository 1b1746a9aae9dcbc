"""The DRAM image: micro-op encoding and typed views."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from vta.isa import ProgramBuilder, Uop, decode_uops, encode_uop
from vta.isa.encoding import EncodedUops
from vta.sim.dram import Dram, encode_uops


@given(st.lists(st.tuples(st.integers(0, 2047), st.integers(0, 2047), st.integers(0, 1023)),
                min_size=1, max_size=20))
def test_vectorised_uop_encoding_matches_encode_uop(pynq, fields):
    uops = [Uop(*f) for f in fields]
    assert encode_uops(uops, pynq).tolist() == [encode_uop(u, pynq) for u in uops]


@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=20))
def test_micro_ops_kept_as_words_give_the_image_of_their_decoding(pynq, words):
    """A program whose micro-ops are kept as words (``EncodedUops``: read back from the compile
    cache) writes them into the image as they are, but for any bit outside the fields (what
    decoding drops): the image of the same program with the decoded micro-ops."""
    b = ProgramBuilder(pynq)
    b.alloc("U", "uop", len(words) + 2)
    b.alloc("A", "inp", 3)
    arr = np.array(words, dtype=np.uint32)
    decoded = replace(b.build(), uops={"U": tuple(decode_uops(arr, pynq))})
    kept = replace(decoded, uops=EncodedUops({"U": arr}, pynq))
    assert np.array_equal(Dram(kept, pynq).buf, Dram(decoded, pynq).buf)
    assert not kept.uops._decoded  # nothing was decoded to make the image


def test_image_layout(pynq):
    b = ProgramBuilder(pynq)
    b.alloc("A", "inp", 3)
    b.alloc("U", "uop", 0)
    b.add_uops("U", [Uop(1, 2, 3)])
    b.alloc("C", "acc", 2)
    p = b.build()
    d = Dram(p, pynq)
    assert d.buf.size == p.dram_bytes
    u = p.allocation("U")
    assert int.from_bytes(d.buf[u.offset:u.offset + 4].tobytes(), "little") == \
        encode_uop(Uop(1, 2, 3), pynq)
    d.write("C", np.arange(32).reshape(2, 1, 16) - 16)
    c = p.allocation("C")
    assert d.buf[c.offset:c.offset + 8].tolist() == [240, 255, 255, 255, 241, 255, 255, 255]
    assert d.read("C").shape == (2, 1, 16) and d.read("A").dtype == np.int8


@given(st.sampled_from(["A", "C"]), st.sampled_from(["same", "int64", "list", "big-endian"]),
       st.integers(0, 2**32 - 1))
def test_write_gives_the_same_bytes_from_any_integer_array(pynq, name, form, seed):
    """``Dram.write`` takes data already of the entries' dtype without the range check (it
    cannot fail); any other integer array of the same values gives the same image."""
    b = ProgramBuilder(pynq)
    b.alloc("A", "inp", 3)
    b.alloc("C", "acc", 2)
    p = b.build()
    ref = Dram(p, pynq)
    dtype = ref.view(name).dtype.newbyteorder("=")
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    data = rng.integers(info.min, info.max, size=ref.view(name).shape, dtype=dtype,
                        endpoint=True)
    ref.write(name, data)
    got = Dram(p, pynq)
    if form == "int64":
        got.write(name, data.astype(np.int64))
    elif form == "list":
        got.write(name, data.reshape(-1).tolist())
    elif form == "big-endian":
        got.write(name, data.astype(dtype.newbyteorder(">")))
    else:
        got.write(name, data.copy())
    assert got.buf.tobytes() == ref.buf.tobytes()
    np.testing.assert_array_equal(got.read(name), data)
