"""acc_inplace: an element-wise stage on acc takes over its producer's buffer."""

from _accel_ir import PYNQ

from vta.compiler.accel.passes.acc_inplace import reuse_acc_buffers
from vta.compiler.ir.builder import alloc, buf, func, loop, seq, stage
from vta.compiler.ir.structural import assert_structural_equal

RES = buf("res", (2, 1, 16), "int8")


def _each(body: object) -> object:
    return loop(2, lambda i: loop(16, lambda j: body(i, j)))


def test_shift_stage_writes_over_the_reduction_buffer() -> None:
    acc = buf("conv_acc", (2, 1, 16), "int32", "acc")
    shr = buf("res_shr", (2, 1, 16), "int32", "acc")
    before = func("f", [RES], alloc(acc, alloc(shr, seq(
        stage("conv_acc", _each(lambda i, j: acc.store(0, i, 0, j))),
        stage("res_shr", _each(lambda i, j: shr.store(acc.load(i, 0, j) >> 8, i, 0, j))),
        stage("res", _each(lambda i, j: RES.store(shr.load(i, 0, j).astype("int8"), i, 0, j)))))))
    expected = func("f", [RES], alloc(acc, seq(
        stage("conv_acc", _each(lambda i, j: acc.store(0, i, 0, j))),
        stage("res_shr", _each(lambda i, j: acc.store(acc.load(i, 0, j) >> 8, i, 0, j))),
        stage("res", _each(lambda i, j: RES.store(acc.load(i, 0, j).astype("int8"), i, 0, j))))))
    assert_structural_equal(reuse_acc_buffers(before, PYNQ), expected)


def test_a_read_at_another_element_keeps_both_buffers() -> None:
    """``shr[i] = acc[1 - i]`` reads an element another iteration overwrites: not in place."""
    acc = buf("conv_acc", (2, 1, 16), "int32", "acc")
    shr = buf("res_shr", (2, 1, 16), "int32", "acc")
    f = func("f", [RES], alloc(acc, alloc(shr, seq(
        _each(lambda i, j: acc.store(0, i, 0, j)),
        _each(lambda i, j: shr.store(acc.load(1 - i, 0, j) >> 8, i, 0, j))))))
    assert reuse_acc_buffers(f, PYNQ) is f


def test_a_producer_read_later_keeps_both_buffers() -> None:
    acc = buf("conv_acc", (2, 1, 16), "int32", "acc")
    shr = buf("res_shr", (2, 1, 16), "int32", "acc")
    f = func("f", [RES], alloc(acc, alloc(shr, seq(
        _each(lambda i, j: acc.store(0, i, 0, j)),
        _each(lambda i, j: shr.store(acc.load(i, 0, j) >> 8, i, 0, j)),
        _each(lambda i, j: RES.store((acc.load(i, 0, j) + shr.load(i, 0, j)).astype("int8"),
                                     i, 0, j))))))
    assert reuse_acc_buffers(f, PYNQ) is f


def test_a_chain_of_stages_is_replaced_in_one_rewrite(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """shr -> clip collapse onto the reduction's buffer: the pairs are found on the statement
    as it is (reading the buffers taken over through ``taken``) and replaced in one rewrite,
    each buffer by the one standing for it at the end (acc)."""
    from vta.compiler.accel.passes import acc_inplace

    acc = buf("conv_acc", (2, 1, 16), "int32", "acc")
    shr = buf("res_shr", (2, 1, 16), "int32", "acc")
    clip = buf("res_clip", (2, 1, 16), "int32", "acc")
    before = func("f", [RES], alloc(acc, alloc(shr, alloc(clip, seq(
        stage("conv_acc", _each(lambda i, j: acc.store(0, i, 0, j))),
        stage("res_shr", _each(lambda i, j: shr.store(acc.load(i, 0, j) >> 8, i, 0, j))),
        stage("res_clip", _each(lambda i, j: clip.store(shr.load(i, 0, j) >> 1, i, 0, j))),
        stage("res", _each(lambda i, j: RES.store(clip.load(i, 0, j).astype("int8"), i, 0,
                                                  j))))))))
    expected = func("f", [RES], alloc(acc, seq(
        stage("conv_acc", _each(lambda i, j: acc.store(0, i, 0, j))),
        stage("res_shr", _each(lambda i, j: acc.store(acc.load(i, 0, j) >> 8, i, 0, j))),
        stage("res_clip", _each(lambda i, j: acc.store(acc.load(i, 0, j) >> 1, i, 0, j))),
        stage("res", _each(lambda i, j: RES.store(acc.load(i, 0, j).astype("int8"), i, 0,
                                                  j))))))
    calls: list[dict[object, object]] = []
    replace = acc_inplace._replace_buffers

    def counted(s, taken, *rest):  # type: ignore[no-untyped-def]
        calls.append(dict(taken))
        return replace(s, taken, *rest)

    monkeypatch.setattr(acc_inplace, "_replace_buffers", counted)
    assert_structural_equal(reuse_acc_buffers(before, PYNQ), expected)
    assert len(calls) == 1 and set(calls[0]) == {shr, clip}
