"""Fixed-point requantization parameters: ``mult / 2**shift`` approximating a ratio of scales.

A quantized operator rescales an integer ``x`` of scale ``s_in`` to scale ``s_out`` by
``x * mult`` and a rounding shift right by ``shift`` in 32-bit arithmetic, with ``mult /
2**shift ~ s_in / s_out`` (the TFLite form, without its 64-bit intermediate: the
accelerator's ALU is 32-bit). ``fixed_point`` picks the most precise pair whose products
cannot overflow int32 for any input of magnitude up to ``bound`` and whose multiplier fits a
signed immediate of ``MULT_BITS`` bits (the ALU's ``imm_bits`` on every shipped config).
"""

from __future__ import annotations

import math

from vta.errors import GraphError
from vta.graph.ir import split_shift

__all__ = ["MULT_BITS", "fixed_point", "fixed_point_pair", "effective_ratio"]

#: multipliers are signed 16-bit immediates (``alu.imm_bits`` of the shipped configs)
MULT_BITS = 16
_MULT_MAX = (1 << (MULT_BITS - 1)) - 1
_INT32_MAX = (1 << 31) - 1


def fixed_point(ratio: float, bound: int, what: str = "requantize") -> tuple[int, int]:
    """``(mult, shift)`` with ``mult / 2**shift ~ ratio`` (``1 <= shift <= 31``, ``0 < mult
    <= 32767``) and ``bound * mult`` plus the rounding constant below ``2**31``: the largest
    shift (most precise) for which both hold, then in lowest terms (a power-of-two ratio is
    ``mult = 1``: a shift alone, no multiplication; ``x * 2**k`` rounding-shifted by ``s + k``
    equals ``x`` rounding-shifted by ``s``). A ratio that cannot be represented is a
    ``GraphError``."""
    mults, shift = _pairs([ratio], [bound], what)
    return mults[0], shift


def fixed_point_pair(ratios: tuple[float, float], bounds: tuple[int, int],
                     what: str = "add") -> tuple[int, int, int]:
    """``(mult_a, mult_b, shift)``: two multipliers sharing one shift, for ``a * mult_a + b *
    mult_b`` with ``|a| <= bounds[0]``, ``|b| <= bounds[1]`` (the sum cannot overflow)."""
    (ma, mb), shift = _pairs(list(ratios), list(bounds), what)
    return ma, mb, shift


def _pairs(ratios: list[float], bounds: list[int], what: str) -> tuple[list[int], int]:
    for r in ratios:
        if not (math.isfinite(r) and r > 0):
            raise GraphError(f"{what}: the ratio of scales must be a positive finite number, "
                             f"got {r}")
    for shift in range(31, 0, -1):
        mults = [round(r * (1 << shift)) for r in ratios]
        if max(mults) > _MULT_MAX:
            continue
        post = split_shift(shift)[1]
        worst = sum(b * m for b, m in zip(bounds, mults, strict=True)) + (1 << (post - 1))
        if worst > _INT32_MAX:
            continue
        if min(mults) < 1:
            break  # too small at the most precise shift that fits: not representable
        while shift > 1 and all(m % 2 == 0 for m in mults):  # lowest terms: the same value
            mults, shift = [m // 2 for m in mults], shift - 1
        return mults, shift
    raise GraphError(f"{what}: scale ratio{'s' if len(ratios) > 1 else ''} "
                     f"{', '.join(f'{r:.4g}' for r in ratios)} cannot be represented as "
                     f"mult / 2**shift with a {MULT_BITS}-bit multiplier, a shift in 1..31 "
                     f"and no int32 overflow for inputs up to {max(bounds)}")


def effective_ratio(mult: int, shift: int) -> float:
    """The ratio ``mult / 2**shift`` actually applied."""
    return mult / (1 << shift)
