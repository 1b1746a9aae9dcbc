"""Bring your own quantized model: ONNX Runtime's twelve quantize_static formats, judged by ORT.

For each float model built from seeded weights (``vta.graph.onnx_ort``: the small CNN, the
two-layer MLP, ResNet-18) and each of the twelve formats ``quantize_static`` writes (QDQ and
QOperator x symmetric int8 / asymmetric int8 / uint8 activations x per-tensor / per-channel
weights), calibrated on 8 seeded inputs:

* ``accepted``: whether ``load_onnx`` takes the file, else the start of its named refusal;
* ``e2e`` and ``per-op``: vta's int8 tensors against ONNX Runtime's (CPU, in the format's
  reference configuration, ``onnx_ort.reference_for``: QDQ int8 fused into ORT's integer
  kernels, uint8 on its exact U8U8 kernels, QOperator int8 as written; the row's
  ``reference`` names it and ``ort_ops`` counts the operators ORT runs) on ``--inputs``
  seeded inputs, every int8 tensor ORT computes compared by name: end to end (a one-unit
  difference compounds through later layers) and per operator (each fed ORT's own operands,
  ``onnx_ort.run_fed``), as the share of values bit-identical and the largest difference;
* ``as written e2e`` (``ort_exact_as_written``): the exact import against ORT's graph as
  written (``ORT_DISABLE_ALL``: a QDQ model's float Conv, the saturating U8S8 kernels on x64
  without VNNI) where that is not the reference; ``host_cpu`` in the JSON names the CPU;
* ``pynq shift-add``: VTA's stock ALU (MIN, MAX, ADD, SHR: no multiply) runs the fixed-point
  import with every multiplier that is not a power of two computed by shifts and adds
  (``quant.shift_add_multipliers``, ``vta run --approx shift-add``: Horner's rule on a scratch
  accumulator tile; per-channel multipliers by register shifts): cycles of one simulated run,
  checked bit-exact against the interpreter, so its agreement with ORT is the ``fixed e2e`` and
  ``per-op`` columns' (ORT's float32 scales approximated by fixed-point multipliers; a
  power-of-two ratio rounds half to even, as ORT does);
* ``pynq_mul``: pynq with ALU MUL (the fixed-point requantization variant): cycles of one
  simulated run from the input to the outputs, every stored tensor checked bit-exact against
  the graph interpreter (the interpreter's tensors are the ones compared with ORT);
* ``exact e2e`` and ``pynq_requant``: the model imported with ORT's requantize arithmetic
  (``load_onnx(requant="ort")``: each QLinearConv / QGemm / QDQ conv and dense requantizes
  with ORT's float32 ratio exactly), its end-to-end agreement with ORT, and its cycles on
  ``hwconfigs/pynq_requant.yaml`` (pynq_mul with ``ALU.REQUANT_F32``), checked as above.

Then, per model, which requantization arithmetic gives ORT's bits: every QLinearConv / QGemm
output of the QOperator symmetric per-tensor model, its int32 accumulator computed from ORT's
own operands, requantized four ways and compared with ORT's tensor: the graph IR's (a
multiplier of at most 15 bits, round half up), the same multiplier rounding half to even, a
24-bit multiplier with a 64-bit product rounding half to even once (a requantize
instruction's arithmetic), and ``quant.ort_requantize`` (float32 rounding reproduced in
integers).

MobileNet-V2 (``--models mobilenet_v2``, input ``--mobilenet-size``, 32 by default): its
depthwise convolutions run on the GEMM core with block-diagonal weights, its adds and ReLU6
islands with ORT's exact arithmetic in the ``exact`` import (``vta.graph.ort_add``);
``--formats`` picks some of the twelve formats (each MobileNet format compiles ~70 kernels
per config).

BERT-tiny (``--models bert_tiny``, ``onnx_ort.bert_tiny``: 2 layers, hidden 128, 2 heads,
sequence 128) gets the same rows plus ``QDQ/s8/per-tensor pow2``: the symmetric model with
every scale rounded up to a power of two (``onnx_ort.pow2_scales``: what ``vta run bert_tiny``
runs on stock pynq), and per row the agreement split by tensor kind (``per_kind``: each
producing operator, every float island named by its float operators) for ORT's arithmetic,
end to end and per operator. Its requantize-arithmetic table is skipped (it reads
QLinearConv / QGemm outputs, which BERT has none of). ``--models bert_tiny_qop``: the same
network under its own key (give it ``--formats`` of the QOperator layout: what ``vta run
bert_tiny_qop`` runs), each QOperator model's float output (the last LayerNormalization)
quantized as ORT's QDQ form quantizes it (``onnx_ort.quantize_outputs``).

Per model a second table names, for each format whose exact import is not bit-identical to
ORT end to end, every tensor with a differing value (per operator: which operator computes
differently; end to end: where the differences spread), as differing / elements (max diff);
the row's JSON keeps them (``ort_exact.differs``). Why the graph as written differs is
proven in ``tests/graph/test_ort_kernels.py`` (``vta.graph.quant_mlas``: ORT's AVX2 U8S8 pair
saturation, the QDQ form's float Conv). ``--exact-only`` judges the exact import alone (no
fixed-point import, no compile, no arithmetic table): ResNet-18's exactness on 20 inputs
within the time a shared 2-core machine gives.

    python bench/onnx_models.py [--models small_cnn,mlp,resnet18,mobilenet_v2,bert_tiny,
                                          bert_tiny_qop]
                                [--inputs 20] [--resnet-size 32] [--mobilenet-size 32]
                                [--no-sim] [--exact-only] [--stock-only]
                                [--formats QDQ/a8/per-tensor,...]

Prints one table per model and writes its rows into bench/results/onnx_models.json (the
other models' rows already there are kept). Exit status 1 if a simulated run differs from
the interpreter.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vta.config import HwConfig  # noqa: E402
from vta.errors import VtaError  # noqa: E402
from vta.graph import interp  # noqa: E402
from vta.graph.compile import compile_graph  # noqa: E402
from vta.graph.onnx_import import load_onnx  # noqa: E402
from vta.graph.onnx_ort import (  # noqa: E402
    AS_WRITTEN,
    FORMATS,
    MODELS,
    ONNX_NETWORKS,
    Agreement,
    Format,
    OrtReference,
    agreement,
    agreement_by_kind,
    bert_tiny,
    calibration_inputs,
    mobilenet_v2,
    optimized_ops,
    ort_module,
    ort_tensors,
    pow2_scales,
    quantize,
    quantize_outputs,
    reference_for,
    requant_arithmetic,
    resnet18,
    run_fed,
)
from vta.graph.quant import SHIFT_ADD, quantize_linear, shift_add_multipliers  # noqa: E402
from vta.graph.quant_mlas import cpu_flags  # noqa: E402
from vta.run.graph import run_graph  # noqa: E402


def _sum(parts: list[Agreement]) -> dict[str, Any]:
    el = sum(a.elements for a in parts)
    eq = sum(a.equal for a in parts)
    return {"equal": eq, "elements": el, "share": eq / el if el else 0.0,
            "max_diff": max(a.max_diff for a in parts), "tensors": parts[0].tensors}


def tensor_diffs(g: Any, values: Any, ort: dict[str, np.ndarray]) -> dict[str, list[int]]:
    """Per int8 tensor ``agreement`` compares: ``[values that differ, elements, max diff]``."""
    out = {}
    for v in g.values():
        want = ort.get(v.name)
        if v.is_const or v.type.dtype != "int8" or want is None or v not in values:
            continue
        got = np.asarray(values[v]).reshape(-1).astype(np.int64)
        ref = np.asarray(want).reshape(-1).astype(np.int64)
        if ref.size != got.size:
            continue
        ref = ref - (128 if np.asarray(want).dtype == np.uint8 else 0)
        d = np.abs(got - ref)
        out[v.name] = [int(np.count_nonzero(d)), int(d.size), int(d.max(initial=0))]
    return out


def _add_diffs(into: dict[str, list[int]], more: dict[str, list[int]]) -> None:
    for name, (n, el, mx) in more.items():
        have = into.setdefault(name, [0, 0, 0])
        have[0], have[1], have[2] = have[0] + n, have[1] + el, max(have[2], mx)


def judge(fm: Any, q: Any, inputs: int, requant: str = "fixed",
          references: tuple[OrtReference, ...] | None = None
          ) -> tuple[Any, list[dict[str, Any]]]:
    """The graph imported with ``requant`` arithmetic and its agreement with ORT in each of
    ``references`` (``reference_for(q)`` when None), end to end and per operator (``differs``:
    each tensor with a value that differs, ``[values that differ, elements, max diff]`` over
    the inputs, in graph order). vta's own run is computed once per input."""
    refs = references if references is not None else (reference_for(q),)
    g = load_onnx(q, requant=requant)
    v = g.inputs[0]
    found = [_Tally() for _ in refs]
    for x in calibration_inputs(fm, 99, inputs):
        xq = quantize_linear(x, v.type.scale, v.type.zero)
        env = interp.run_graph(g, {v.name: xq})
        for ref, tally in zip(refs, found, strict=True):
            ort = ort_tensors(q, {v.name: x}, ref)
            tally.add(g, env, run_fed(g, {v.name: xq}, ort), ort)
    return g, [t.result() for t in found]


class _Tally:
    """One reference's agreement over the inputs (``judge``)."""

    def __init__(self) -> None:
        self.e2e: list[Agreement] = []
        self.local: list[Agreement] = []
        self.kinds: dict[str, dict[str, list[Agreement]]] = {"e2e": {}, "per_op": {}}
        self.diffs: dict[str, dict[str, list[int]]] = {"e2e": {}, "per_op": {}}

    def add(self, g: Any, env: Any, fed: Any, ort: dict[str, np.ndarray]) -> None:
        self.e2e.append(agreement(g, env, ort))
        self.local.append(agreement(g, fed, ort))
        for how, vals in (("e2e", env), ("per_op", fed)):
            for kind, a in agreement_by_kind(g, vals, ort).items():
                self.kinds[how].setdefault(kind, []).append(a)
            _add_diffs(self.diffs[how], tensor_diffs(g, vals, ort))

    def result(self) -> dict[str, Any]:
        per_kind = {how: {k: _sum(parts) for k, parts in by.items()}
                    for how, by in self.kinds.items()}
        differs = {how: {k: d for k, d in by.items() if d[0]} for how, by in self.diffs.items()}
        return {"e2e": _sum(self.e2e), "per_op": _sum(self.local), "per_kind": per_kind,
                "differs": differs}


def on_stock(g: Any, simulate: bool) -> dict[str, Any]:
    """``on_hw`` on stock ``pynq`` of ``g`` with its multipliers that are not powers of two
    by shifts and adds (``quant.shift_add_multipliers``, ``vta run --approx shift-add``: the
    same bits as the fixed-point import, so its agreement with ORT is the row's ``e2e`` and
    ``per_op``); ``approx`` names the approximation when one was needed, and ``marked``
    counts the nodes."""
    sa = shift_add_multipliers(g)
    marked = sum(bool(getattr(n, "shift_add", False)) for n in sa.nodes)
    return {**on_hw(sa, "pynq", simulate), "approx": SHIFT_ADD if marked else None,
            "marked": marked}


def on_hw(g: Any, config: str, simulate: bool) -> dict[str, Any]:
    """Compile (and simulate one input) on ``config``: cycles, or the refusal."""
    hw = HwConfig.load(ROOT / "hwconfigs" / f"{config}.yaml")
    try:
        cg = compile_graph(g, hw, refine=1)
    except VtaError as e:
        return {"accepted": False, "reason": str(e)}
    if not simulate:
        return {"accepted": True}
    v = g.inputs[0]
    x = calibration_inputs_for(v.type.shape)
    r = run_graph(cg, {v.name: quantize_linear(x, v.type.scale, v.type.zero)})
    s = r.summary()
    return {"accepted": True, "cycles": r.cycles, "passed": r.passed,
            "mac_share": s.get("mac_share"), "host_fallbacks": len(cg.host_ops)}


def calibration_inputs_for(shape: tuple[int, ...]) -> np.ndarray:
    """The simulated run's input: seeded, standard normal."""
    return np.random.default_rng(7).standard_normal(shape).astype(np.float32)


def _references(q: Any) -> tuple[OrtReference, ...]:
    """The model's reference configuration, then ``AS_WRITTEN`` where that differs (a QDQ
    model's float Conv, a uint8 model's saturating U8S8 kernels)."""
    ref = reference_for(q)
    return (ref,) if ref == AS_WRITTEN else (ref, AS_WRITTEN)


def _judged(agree: list[dict[str, Any]], refs: tuple[OrtReference, ...], q: Any
            ) -> dict[str, Any]:
    """The row's ORT keys: ``ort_exact`` (the reference), ``reference`` and the operators ORT
    runs in it (``ort_ops``), and ``ort_exact_as_written`` (``AS_WRITTEN``'s e2e / per-op)
    where the reference is another configuration."""
    version = ort_module().__version__
    out: dict[str, Any] = {"ort_exact": agree[0], "reference": refs[0].describe(version),
                           "ort_ops": dict(Counter(optimized_ops(q, refs[0])))}
    if len(refs) > 1:
        out["ort_exact_as_written"] = {"reference": refs[1].describe(version),
                                       "e2e": agree[1]["e2e"], "per_op": agree[1]["per_op"]}
    return out


def row(fmt: Format, fm: Any, inputs: int, simulate: bool, pow2: bool = False,
        exact_only: bool = False, stock_only: bool = False) -> dict[str, Any]:
    """One format's row (``pow2``: its scales rounded to powers of two, ``pow2_scales``;
    ``exact_only``: only the exact import's agreement, no fixed import, no hardware;
    ``stock_only``: only the fixed import's agreement and the stock ``pynq`` column)."""
    t0 = time.perf_counter()
    q = quantize_outputs(quantize(fm, fmt, seed=1), fm, fmt, seed=1)  # QOperator BERT's LN
    name = fmt.name
    if pow2:
        q, name = pow2_scales(q), f"{fmt.name} pow2"
    refs = _references(q)
    if exact_only:
        try:
            _, agree_ort = judge(fm, q, inputs, requant="ort", references=refs)
        except VtaError as e:
            return {"format": name, "accepted": False, "reason": str(e),
                    "seconds": time.perf_counter() - t0}
        return {"format": name, "accepted": True, **_judged(agree_ort, refs, q),
                "seconds": time.perf_counter() - t0}
    try:
        g, (agree,) = judge(fm, q, inputs)
    except VtaError as e:
        return {"format": name, "accepted": False, "reason": str(e),
                "seconds": time.perf_counter() - t0}
    if stock_only:
        return {"format": name, "accepted": True, **agree, "pynq": on_stock(g, simulate),
                "macs": g.macs, "seconds_stock": time.perf_counter() - t0}
    g_ort, agree_ort = judge(fm, q, inputs, requant="ort", references=refs)
    out = {"format": name, "accepted": True, **agree,
           "pynq": on_stock(g, simulate), "pynq_mul": on_hw(g, "pynq_mul", simulate),
           **_judged(agree_ort, refs, q),
           "pynq_requant": on_hw(g_ort, "pynq_requant", simulate), "macs": g.macs}
    out["seconds"] = time.perf_counter() - t0
    return out


def _hw_cell(h: dict[str, Any] | None) -> str:
    if h is None:
        return "-"
    if not h["accepted"]:
        return "refused (MUL)" if "needs ALU MUL" in h["reason"] else "refused"
    if "cycles" not in h:
        return "compiles"
    return f"{h['cycles']:,}{'' if h['passed'] else ' FAIL'}"


def _share(a: dict[str, Any]) -> str:
    """Share equal (max diff): ``100 %`` only when every value is equal, else 3 decimals
    rounded down (99.9995 % is not 100 %)."""
    if a["equal"] == a["elements"]:
        return f"100% ({a['max_diff']})"
    return f"{math.floor(a['share'] * 1e5) / 1e3:.3f}% ({a['max_diff']})"


def _as_written(r: dict[str, Any]) -> str:
    """The exact import's end-to-end agreement with ``AS_WRITTEN`` (``-`` where that is the
    reference)."""
    w = r.get("ort_exact_as_written")
    return _share(w["e2e"]) if w is not None else "-"


def table(model: str, rows: list[dict[str, Any]]) -> str:
    """Per format: accepted; stock pynq (cycles, or refused); pynq_mul cycles and the
    fixed-point import's agreement with ORT (what pynq and pynq_mul run: end to end and per
    operator, share equal (max diff)); the requantize variant pynq_requant's cycles and the
    exact import's agreement with ORT's reference (``reference_for``), and end to end with
    ORT's graph as written (``ORT_DISABLE_ALL``: a QDQ model's float Conv, a uint8 model's
    saturating U8S8 kernels on x64 without VNNI) where that is another configuration."""
    head = (f"{'format':26} {'accepted':8} {'pynq ' + SHIFT_ADD:>14} {'pynq_mul':>9} "
            f"{'fixed e2e':>14} "
            f"{'per-op':>14} {'pynq_requant':>12} {'exact e2e':>14} {'exact per-op':>14} "
            f"{'as written e2e':>15}  reference")
    lines = [f"{model}", head]
    for r in rows:
        if not r["accepted"]:
            why = r["reason"].split(": ", 1)[-1][:70]
            lines.append(f"{r['format']:26} {'no':8} {why}")
            continue
        if "ort_exact" not in r:  # --stock-only, no exact import judged yet
            lines.append(f"{r['format']:26} {'yes':8} {_hw_cell(r['pynq']):>14} {'-':>9} "
                         f"{_share(r['e2e']):>14} {_share(r['per_op']):>14}")
            continue
        ex = r["ort_exact"]
        ref = r["reference"].split(" CPU, ", 1)[-1]
        if "pynq" not in r:  # --exact-only
            lines.append(f"{r['format']:26} {'yes':8} {'-':>14} {'-':>9} {'-':>14} {'-':>14} "
                         f"{'-':>12} {_share(ex['e2e']):>14} {_share(ex['per_op']):>14} "
                         f"{_as_written(r):>15}  {ref}")
            continue
        lines.append(f"{r['format']:26} {'yes':8} {_hw_cell(r['pynq']):>14} "
                     f"{_hw_cell(r.get('pynq_mul')):>9} {_share(r['e2e']):>14} "
                     f"{_share(r['per_op']):>14} {_hw_cell(r.get('pynq_requant')):>12} "
                     f"{_share(ex['e2e']):>14} {_share(ex['per_op']):>14} "
                     f"{_as_written(r):>15}  {ref}")
    accepted = sum(r["accepted"] for r in rows)
    exact = sum(r["accepted"] and "ort_exact" in r and r["ort_exact"]["e2e"]["share"] == 1.0
                for r in rows)
    stock = sum(r["accepted"] and r.get("pynq", {}).get("passed", False) for r in rows)
    lines.append(f"accepted {accepted} of {len(rows)}; the exact import bit-identical to ORT's "
                 f"reference end to end in {exact} of {len(rows)}; stock pynq ran {stock} of "
                 f"{len(rows)} ({SHIFT_ADD}: the fixed-point multipliers, that column's "
                 f"agreement, by shifts and adds on an ALU without MUL)")
    return "\n".join(lines)


def host_cpu() -> dict[str, Any]:
    """The judging host's CPU: model name and the flags that pick ORT's x64 integer kernels
    (``avx2``; ``avx512_vnni`` / ``avx_vnni``: the U8S8 kernels sum exactly; without them
    ``vpmaddubsw`` saturates pairs of products, ``quant_mlas``)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {"known": False}
    flags = cpu_flags()
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines()
                  if ln.startswith("model name")), "")
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")
    return {"known": True, "model": model, "flags": {f: f in flags for f in wanted},
            "vnni": "avx512_vnni" in flags or "avx_vnni" in flags}


def differs_table(model: str, rows: list[dict[str, Any]]) -> str:
    """Where the exact import differs from ORT: each tensor with a differing value, per
    operator (fed ORT's operands: the operator that computes it differently) and end to end
    (where the differences have propagated to), as differing / elements (max diff)."""
    lines = [f"{model}: where the exact import (pynq_requant) differs from ORT"]
    for r in rows:
        if not r["accepted"] or "ort_exact" not in r or r["ort_exact"]["e2e"]["share"] == 1.0:
            continue
        lines.append(f"  {r['format']}")
        for how in ("per_op", "e2e"):
            d = r["ort_exact"]["differs"][how]
            cells = [f"{name} {n:,}/{el:,} ({mx})" for name, (n, el, mx) in d.items()]
            lines.append(f"    {how:7} {'; '.join(cells) if cells else 'none'}")
    return "\n".join(lines)


def kind_table(model: str, rows: list[dict[str, Any]]) -> str:
    """Agreement with ORT by tensor kind, ORT's arithmetic, end to end and per operator."""
    lines = [f"{model}: agreement with ORT by tensor kind (imported with ORT's arithmetic; "
             f"e2e / per operator: share equal, max diff)"]
    for r in rows:
        if not r["accepted"]:
            continue
        lines.append(f"  {r['format']}")
        kinds = r["ort_exact"]["per_kind"]
        for kind, a in kinds["e2e"].items():
            b = kinds["per_op"][kind]
            lines.append(f"    {kind:28} {a['share']:>9.4%} {a['max_diff']:>3}  "
                         f"{b['share']:>9.4%} {b['max_diff']:>3}")
    return "\n".join(lines)


def requant_table(model: str, r: dict[str, Any]) -> str:
    lines = [f"{model}: requantize arithmetic vs ORT ({r['values']:,} values of QLinearConv / "
             f"QGemm outputs, each fed ORT's operands)"]
    for name, eq in r["equal"].items():
        lines.append(f"  {name:42} {eq:>9,} equal ({eq / r['values']:.4%})")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="small_cnn,mlp,resnet18")
    ap.add_argument("--inputs", type=int, default=20, help="seeded inputs judged per model")
    ap.add_argument("--resnet-size", type=int, default=32,
                    help="ResNet-18's input height and width (224: the ImageNet size)")
    ap.add_argument("--no-sim", action="store_true",
                    help="compile on pynq / pynq_mul without simulating (no cycles)")
    ap.add_argument("--mobilenet-size", type=int, default=32,
                    help="MobileNet-V2's input height and width (224: the ImageNet size)")
    ap.add_argument("--formats", default=None,
                    help="only these formats, e.g. QDQ/a8/per-tensor,QOperator/s8/per-channel")
    ap.add_argument("--exact-only", action="store_true",
                    help="only the requantize variant's import judged by ORT (no fixed-point "
                         "import, no compile, no arithmetic table): the exactness figures of a "
                         "large model on the issue's input count")
    ap.add_argument("--stock-only", action="store_true",
                    help="only the fixed-point import judged by ORT and the stock pynq column "
                         "(shift-add), merged into the model's rows already in --out (their "
                         "other keys kept): ResNet-18's stock column within the time a "
                         "shared 2-core machine gives")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "onnx_models.json"))
    a = ap.parse_args()
    builders = {**MODELS, "resnet18": lambda seed: resnet18(seed, size=a.resnet_size),
                "mobilenet_v2": lambda seed: mobilenet_v2(seed, size=a.mobilenet_size),
                "bert_tiny": bert_tiny, "bert_tiny_qop": bert_tiny}
    unknown = sorted(set(a.models.split(",")) - set(builders))
    formats = [f for f in FORMATS if a.formats is None or f.name in a.formats.split(",")]
    if unknown or not formats:
        ap.error(f"unknown model(s) {', '.join(unknown)} (known: {', '.join(builders)})"
                 if unknown else f"no format matches {a.formats!r} (e.g. {FORMATS[0].name})")
    out = Path(a.out)
    results: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    results.setdefault("models", {})
    results.update({"reference": "per row (reference_for): QDQ int8 fused (ORT_ENABLE_EXTENDED, "
                                 "session.qdqisint8allowed=1, float fusions off); uint8 fused "
                                 "with session.x64quantprecision=1; QOperator int8 "
                                 "ORT_DISABLE_ALL; ort_exact_as_written: ORT_DISABLE_ALL; a "
                                 "row without a 'reference' key was judged with "
                                 "ORT_DISABLE_ALL (before reference_for)",
                    "host_cpu": host_cpu()})
    ok = True
    for name in a.models.split(","):
        fm = builders[name](0)
        rows = [row(fmt, fm, a.inputs, not a.no_sim, exact_only=a.exact_only,
                    stock_only=a.stock_only) for fmt in formats]
        if a.stock_only:  # merged into the rows there (their exact import's keys kept)
            have = {r["format"]: r for r in results["models"].get(name, [])}
            rows = [{**have.get(r["format"], {}), **r} for r in rows]
            results.setdefault("stock_commands", {})[name] = "python " + " ".join(
                [Path(sys.argv[0]).as_posix().split(str(ROOT) + "/")[-1], *sys.argv[1:]])
        net = ONNX_NETWORKS.get(name)
        if net is not None and net.pow2:  # the stock-ALU form vta run NAME runs on pynq
            rows.append(row(net.shift_fmt or net.fmt, fm, a.inputs, not a.no_sim, pow2=True,
                            exact_only=a.exact_only))
        results["models"][name] = rows
        if not a.stock_only:
            results.setdefault("commands", {})[name] = "python " + " ".join(
                [Path(sys.argv[0]).as_posix().split(str(ROOT) + "/")[-1], *sys.argv[1:]])
        results.setdefault("stock_inputs_per_model" if a.stock_only else "inputs_per_model",
                           {})[name] = a.inputs
        if name == "mobilenet_v2":
            results["mobilenet_size"] = a.mobilenet_size
        if name == "resnet18":
            results["resnet_size"] = a.resnet_size
        print(table(name, rows), flush=True)
        print(differs_table(name, rows), flush=True)
        if name.startswith("bert_tiny"):
            print(kind_table(name, rows), flush=True)
            print()
            continue
        ok &= all(r.get(hw, {}).get("passed", True)
                  for hw in ("pynq", "pynq_mul", "pynq_requant") for r in rows if r["accepted"])
        if a.exact_only or a.stock_only:
            print()
            continue
        q = quantize(fm, Format("QOperator", "s8", False), seed=1)
        arith = requant_arithmetic(q, calibration_inputs(fm, 99, a.inputs))
        results.setdefault("requant_arithmetic", {})[name] = arith
        print(requant_table(name, arith), flush=True)
        print()
    results["onnxruntime"] = ort_module().__version__
    out.write_text(json.dumps(results, indent=1))
    print(f"wrote {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
