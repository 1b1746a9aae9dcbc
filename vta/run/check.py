"""One verdict for every run: ``compare`` decides PASS or FAIL, ``Check.line`` says it.

Every run in ``vta.run`` (a layer, a network's layers, a whole graph, a TC definition, a
``vta.build`` module, ``vta sim``) ends by comparing what a target computed with a reference,
and every one of them goes through ``compare`` (one pair of arrays) or ``compare_all`` (tensors
by name). The rule is the same everywhere:

* integer outputs must be equal, element for element: the line says ``bit-exact``;
* floating-point outputs (a compiled float sum adds in another order than the reference) must
  be within ``tolerance`` of it, relative and absolute (``numpy.isclose``): the line says
  ``within 0.001``, never ``bit-exact``. The default tolerance is ``FLOAT_TOLERANCE`` by dtype.

A ``Check`` also says what was compared (``subject``: the outputs, the int32 accumulators, every
stored tensor) and against what (``against``: numpy, the graph interpreter, the TC interpreter,
the ISA's reference interpreter), so a PASS never claims more than was checked. ``saturated``
(the fraction of outputs an epilogue's clip pinned to its limits, ``ops.epilogue.
saturated_fraction``) is reported beside a PASS: such outputs carry little information.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Check", "FLOAT_TOLERANCE", "compare", "compare_all", "differing", "tolerance_of",
           "merge"]

#: relative and absolute tolerance of a float comparison, by dtype (the widest dtype compared)
FLOAT_TOLERANCE = {"float16": 1e-2, "bfloat16": 1e-2, "float32": 1e-3, "float64": 1e-3}


def tolerance_of(dtype: np.dtype | str) -> float | None:
    """None for an integer (or boolean) dtype: equal bits; else its float tolerance."""
    dt = np.dtype(dtype)
    if dt.kind in "iub":
        return None
    return FLOAT_TOLERANCE.get(dt.name, 1e-3)


@dataclass(frozen=True)
class Check:
    """The outcome of one comparison (module docstring)."""

    #: what produced the expected values: "numpy", "the graph interpreter (numpy)", ...
    against: str
    #: what was compared, for the line ("" for a layer's outputs)
    subject: str = ""
    #: what one mismatch counts, for a failure ("output elements", "int32 accumulators")
    unit: str = "output elements"
    compared: int = 0
    mismatches: int = 0
    #: None: bit-exact (integers); else the float tolerance used
    tolerance: float | None = None
    #: fraction of the outputs the epilogue's clip saturated (None: not applicable)
    saturated: float | None = None
    #: names of the tensors that differ (a comparison by name)
    mismatched: tuple[str, ...] = ()
    #: a parenthesis after the verdict ("read back in 4 slices, no epilogue")
    note: str = ""
    #: per-tensor mismatch counts of a comparison by name
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.mismatches == 0 and not self.mismatched

    @property
    def how(self) -> str:
        """``bit-exact`` or ``within TOL``."""
        return "bit-exact" if self.tolerance is None else f"within {self.tolerance:g}"

    def line(self) -> str:
        """``PASS: ...`` or ``FAIL: ...``: the verdict a command prints."""
        if self.passed:
            what = f"{self.subject} " if self.subject else ""
            note = self.note
            if not note and self.saturated is not None:
                note = f"{self.saturated:.2%} of outputs saturated"
            return f"PASS: {what}{self.how} against {self.against}" + (f" ({note})" if note
                                                                        else "")
        if self.mismatched:
            who = ", ".join(self.mismatched)
            verb = "differs" if len(self.mismatched) == 1 else "differ"
            return f"FAIL: {who} {verb} from {self.against} ({self.how} required)"
        return (f"FAIL: {self.mismatches:,} {self.unit} differ from {self.against} "
                f"({self.how} required)")

    def to_dict(self) -> dict[str, object]:
        return {"passed": self.passed, "against": self.against, "how": self.how,
                "compared": self.compared, "mismatches": self.mismatches,
                "tolerance": self.tolerance, "saturated": self.saturated,
                "mismatched": list(self.mismatched), "line": self.line()}


def differing(want: np.ndarray, got: np.ndarray, rtol: float | None = None,
              atol: float | None = None) -> np.ndarray:
    """Where ``got`` differs from ``want`` (same shapes): unequal bits when no tolerance is
    given (integers), else beyond ``atol + rtol * |want|`` (``numpy.isclose``; NaN equals
    NaN). The one rule every comparison in vta applies."""
    if rtol is None and atol is None:
        return np.asarray(want != got)
    return ~np.isclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol or 0.0,
                       atol=atol or 0.0, equal_nan=True)


def _mismatches(want: np.ndarray, got: np.ndarray, tol: float | None) -> int:
    if want.shape != got.shape:
        return max(int(want.size), int(got.size), 1)
    return int(np.count_nonzero(differing(want, got, tol, tol)))


def _tolerance(want: np.ndarray, got: np.ndarray, tolerance: float | None) -> float | None:
    if tolerance is not None:
        return tolerance
    tols = [t for t in (tolerance_of(want.dtype), tolerance_of(got.dtype)) if t is not None]
    return max(tols) if tols else None


def compare(want: np.ndarray, got: np.ndarray, *, against: str = "numpy", subject: str = "",
            unit: str = "output elements", saturated: float | None = None, note: str = "",
            tolerance: float | None = None) -> Check:
    """Compare one array with its reference: equal bits when both are integers, else within
    ``tolerance`` (default by dtype, ``FLOAT_TOLERANCE``). A shape mismatch fails every
    element."""
    w, g = np.asarray(want), np.asarray(got)
    tol = _tolerance(w, g, tolerance)
    return Check(against, subject, unit, int(w.size), _mismatches(w, g, tol), tol, saturated,
                 (), note)


def compare_all(want: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray], *,
                against: str, subject: str = "", note: str = "",
                tolerance: float | None = None) -> Check:
    """Compare tensors by name (every name of ``want``; one missing from ``got`` differs),
    each by ``compare``'s rule; the check names the tensors that differ."""
    counts: dict[str, int] = {}
    compared = 0
    tols: list[float] = []
    for name, w in want.items():
        w = np.asarray(w)
        if name not in got:
            counts[name] = max(int(w.size), 1)
            continue
        g = np.asarray(got[name])
        tol = _tolerance(w, g, tolerance)
        if tol is not None:
            tols.append(tol)
        counts[name] = _mismatches(w, g, tol)
        compared += int(w.size)
    bad = tuple(n for n, c in counts.items() if c)
    return Check(against, subject, "elements", compared, sum(counts.values()),
                 max(tols) if tols else None, None, bad, note, counts)


def merge(checks: list[Check], *, against: str, subject: str, note: str = "",
          names: list[str] | None = None) -> Check:
    """One check of several (a network's layers, a graph's tensors): passed when every one
    passed; ``names`` (one per check) name the failed ones."""
    bad = tuple(n for n, c in zip(names or [], checks, strict=False) if not c.passed)
    tols = [c.tolerance for c in checks if c.tolerance is not None]
    sat = [c.saturated for c in checks if c.saturated is not None]
    return Check(against, subject, "elements", sum(c.compared for c in checks),
                 sum(c.mismatches for c in checks), max(tols) if tols else None,
                 max(sat) if sat else None, bad, note)
