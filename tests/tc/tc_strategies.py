"""Hypothesis strategies for TC programs from a safe grammar.

``tc_programs()`` draws the text of one definition and sizes for it: 1-3 inputs (int8 mostly,
int16/int32 now and then) of rank 1-3 over shared size variables; 1-3 statements, each an
element-wise value (``=``: sums, products, shifts, ``max``/``min`` with constants, ReLU as a
ternary, narrowing casts), a reduction (``+=!``, ``max=!``, ``min=!`` of one read), or a
contraction (``+=!`` of a product of two reads), over earlier statements' tensors too.

Index expressions are random affine forms ``v``, ``v + c``, ``v - 1``, ``2*v``, ``v + r``,
``2*v + r`` (windows: some contractions are convolutions) and ``r + c`` (``c`` <= 2, windows
``w`` <= 3; ``r + c`` only into inputs, whose dimensions are sizes, not into a statement's
tensor, which may be shorter), with at most one output index per dimension, and every
reduction index gets a ``where r in 0:w`` clause, so TC's range inference always succeeds
(each output index is resolved in the first round from every access that uses it). For
inputs, sizes of 6-10 give every range ``1 <= v <= 2`` at least and no precondition can fail;
a statement's tensor may be short enough to empty a later range (rare: the tests reject such
draws with ``assume``). Output ranges may start above zero (``v - 1``), which exercises the
placement of a partial range.
"""

from __future__ import annotations

from hypothesis import strategies as st

SIZES = ("N0", "N1", "N2")
OUT_VARS = ("i", "j", "l")
RED_VARS = ("r", "s")


@st.composite
def _index(draw: st.DrawFn, outs: list[str], reds: list[str], used: set[str],
           red_only: bool) -> str:
    forms = ["v", "v+c", "v-c", "2v+c"] + (["v+r", "2v+r"] if reds else []) \
        + (["r+c"] if reds and red_only else [])
    form = draw(st.sampled_from(forms))
    v = draw(st.sampled_from(outs))
    c = draw(st.integers(0, 2))
    if form == "r+c":
        return f"{draw(st.sampled_from(reds))} + {c}"
    used.add(v)
    if form == "v":
        return v
    if form == "v+c":
        return f"{v} + {c}"
    if form == "v-c":
        return f"{v} - 1"
    if form == "2v+c":
        return f"2 * {v}"
    return f"{'2 * ' if form == '2v+r' else ''}{v} + {draw(st.sampled_from(reds))}"


@st.composite
def _read(draw: st.DrawFn, tensors: list[tuple[str, int, str]], outs: list[str],
          reds: list[str], used: set[str], int8_only: bool = False) -> str:
    pool = [t for t in tensors if t[2] == "int8"] if int8_only else tensors
    name, rank, _ = draw(st.sampled_from(pool or tensors))
    # a dimension indexed by a reduction index alone must be at least 5 long: only inputs
    idx = [draw(_index(outs, reds, used, name.startswith("X"))) for _ in range(rank)]
    return f"{name}({', '.join(idx)})"


@st.composite
def _value(draw: st.DrawFn, tensors: list[tuple[str, int, str]], outs: list[str],
           used: set[str], depth: int) -> str:
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(_read(tensors, outs, [], used))
    a = draw(_value(tensors, outs, used, depth - 1))
    kind = draw(st.sampled_from(["add", "mul", "shr", "max", "min", "relu", "addc", "narrow"]))
    if kind in ("add", "mul"):
        b = draw(_value(tensors, outs, used, depth - 1))
        return f"({a} {'+' if kind == 'add' else '*'} {b})"
    c = draw(st.integers(-100, 100))
    if kind == "shr":
        return f"({a} >> {draw(st.integers(0, 6))})"
    if kind in ("max", "min"):
        return f"f{kind}({a}, {c})"
    if kind == "relu":
        return f"({a} > 0 ? {a} : 0)"
    if kind == "addc":
        return f"({a} + {c})"
    return f"int8({a})"


@st.composite
def tc_programs(draw: st.DrawFn) -> tuple[str, dict[str, int]]:
    """``(source, sizes)`` of a random, well-formed TC definition (module docstring)."""
    tensors: list[tuple[str, int, str]] = []
    params = []
    for k in range(draw(st.integers(1, 3))):
        rank = draw(st.integers(1, 3))
        dims = [draw(st.sampled_from(SIZES)) for _ in range(rank)]
        dtype = draw(st.sampled_from(["int8", "int8", "int8", "int16", "int32"]))
        params.append(f"{dtype}({', '.join(dims)}) X{k}")
        tensors.append((f"X{k}", rank, dtype))
    sizes_used = sorted({d for p in params for d in p[p.index("(") + 1:p.index(")")].split(", ")})
    stmts = []
    defined: list[str] = []
    for k in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["elementwise", "reduction", "contraction"]))
        outs = list(OUT_VARS[:draw(st.integers(1, 3))])
        used: set[str] = set()
        if kind == "elementwise":
            rhs = draw(_value(tensors, outs, used, 2))
            op, reds = "=", []
        else:
            reds = list(RED_VARS[:draw(st.integers(1, 2))])
            if kind == "contraction":
                a = draw(_read(tensors, outs, reds, used, int8_only=True))
                b = draw(_read(tensors, outs, reds, used, int8_only=True))
                rhs, op = f"{a} * {b}", "+=!"
            else:
                rhs = draw(_read(tensors, outs, reds, used))
                op = draw(st.sampled_from(["+=!", "max=!", "min=!"]))
        lhs = [v for v in OUT_VARS if v in used]
        if not lhs:  # every output index must come from some read
            continue
        where = ""
        mentioned = [r for r in reds if r in rhs]
        if mentioned:  # (without any, a reduction operator combines with its identity)
            where = " where " + ", ".join(f"{r} in 0:{draw(st.integers(1, 3))}" for r in mentioned)
        name = f"T{k}"
        stmts.append(f"    {name}({', '.join(lhs)}) {op} {rhs}{where}")
        tensors.append((name, len(lhs), "int32"))
        defined.append(name)
    if not stmts:
        stmts.append(f"    T9(i) = {tensors[0][0]}({', '.join(['i'] * tensors[0][1])}) + 1")
        defined.append("T9")
    # return every value, or only the last (then earlier ones are temporaries, dead or not)
    outs_ = defined[::-1] if draw(st.booleans()) else [defined[-1]]
    src = (f"def rand({', '.join(params)}) -> ({', '.join(outs_)}) {{\n" + "\n".join(stmts)
           + "\n}\n")
    sizes = {s: draw(st.integers(6, 10)) for s in sizes_used}
    return src, sizes
