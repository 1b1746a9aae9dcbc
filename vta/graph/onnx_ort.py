"""ONNX Runtime as the judge of the ONNX importer (needs ``onnx`` and ``onnxruntime``).

* ``small_cnn`` / ``mlp`` / ``resnet18``: float ONNX models built with ``onnx.helper`` from
  seeded weights (no downloads): what a user brings before quantizing.
* ``FORMATS`` and ``quantize``: the twelve ways ONNX Runtime's ``quantize_static`` writes a
  model (QDQ and QOperator x activations symmetric int8, asymmetric int8 (ORT's default),
  asymmetric uint8 (U8S8) x per-tensor, per-channel weights; weights int8, symmetric),
  calibrated on seeded inputs by a ``CalibrationDataReader``.
* ``ort_tensors``: ONNX Runtime's value of every int8 / uint8 tensor of a quantized model,
  each made a graph output, run in the model's reference configuration (``reference_for``):
  - **QDQ, int8 activations** (``FUSED``): ``ORT_ENABLE_EXTENDED``, the lowest level whose
    transformers (``QDQSelectorActionTransformer``, Level 2) fuse each DQ -> Conv / MatMul /
    Gemm / Add / GlobalAveragePool -> Q group into ORT's integer kernel (QLinearConv, QGemm,
    QLinearMatMul, QLinearAdd, QLinearGlobalAveragePool): the arithmetic QDQ stands for and
    what a deployment runs. ``session.qdqisint8allowed=1`` keeps int8 activations int8 (on
    x64 ORT otherwise rewrites them to uint8, ``QDQS8ToU8Transformer``, and runs its U8S8
    kernels, whose AVX2 form saturates pairs of products: ``quant_mlas``); Level 2's float
    fusions (``FLOAT_FUSIONS``: GELU, LayerNorm, attention ...) are disabled.
  - **uint8 activations**, either layout (``FUSED_U8``): the same level with
    ``session.x64quantprecision=1``, ORT's switch for the AVX2 / AVX-512 (no VNNI) U8S8
    overflow: ``Avx2WeightS8ToU8Transformer`` shifts the int8 weights to uint8 and the U8U8
    kernels sum exactly (a no-op where VNNI or ARM sum exactly already).
  - **QOperator, int8 activations** (``AS_WRITTEN``): ``ORT_DISABLE_ALL``, its integer
    kernels as written.
  ``AS_WRITTEN`` run on a QDQ model is ORT's float form (DequantizeLinear -> float Conv ->
  QuantizeLinear, MLAS SGEMM's float32 sums): the bench reports it beside, by that name.
  ``optimized_ops`` lists the operators ORT runs in a configuration.
* ``agreement``: a vta run's tensors against ORT's, by tensor name (``agreement_by_kind``:
  split by the operator that computed each).
* ``bert_tiny``: a float BERT-tiny encoder (2 layers, hidden 128, 2 heads, FFN 512, sequence
  128); ``pow2_scales`` rounds a symmetric QDQ model's scales to powers of two (VTA's ALU runs
  every requantization as a shift); ``quantized_network`` is what ``vta run bert_tiny`` runs.

Both packages are optional (the ``test`` extra installs them) and imported only when used.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vta.errors import OnnxImportError
from vta.graph import interp
from vta.graph.interp import wrap32
from vta.graph.ir import Fused, Graph, HostFloat, Requantize, Value
from vta.graph.onnx_import import contrib_inferred, load_onnx
from vta.graph.onnx_load import onnx_module, qdq_form, read_model
from vta.graph.quant import even_shift, float32_parts, ort_requantize, quantize_linear

__all__ = ["FORMATS", "Format", "OrtReference", "AS_WRITTEN", "FUSED", "FUSED_U8",
           "FLOAT_FUSIONS", "reference_for", "optimized_ops", "activation_types", "exposed",
           "small_cnn", "mlp", "resnet18", "MODELS", "calibration_inputs",
           "quantize", "ort_module", "ort_tensors", "Agreement", "agreement", "run_fed",
           "ort_verdict", "ARITHMETICS", "requant_arithmetic", "mobilenet_v2",
           "MOBILENET_V2_STAGES", "NETWORK_FORMAT", "FLOAT_OPSET", "FLOAT_IR_VERSION",
           "float_model", "BERT_TINY", "bert_tiny", "pow2_scales",
           "ONNX_NETWORKS", "OnnxNetwork", "SHIFT_FORMAT", "quantized_network", "tensor_kind",
           "QOP_FORMAT", "quantize_outputs",
           "agreement_by_kind"]


@dataclass(frozen=True)
class Format:
    """One of ``quantize_static``'s output formats."""

    layout: str  # "QDQ" or "QOperator"
    #: "s8": symmetric int8 activations; "a8": asymmetric int8 activations (ORT's default);
    #: "u8": asymmetric uint8 activations (ORT's U8S8); weights always int8, symmetric (ORT's
    #: default for int8 weights)
    types: str
    per_channel: bool

    @property
    def name(self) -> str:
        return f"{self.layout}/{self.types}/{'per-channel' if self.per_channel else 'per-tensor'}"


#: the twelve formats, symmetric per-tensor first
FORMATS: tuple[Format, ...] = tuple(Format(lay, t, pc) for lay in ("QDQ", "QOperator")
                                    for t in ("s8", "a8", "u8") for pc in (False, True))


def _init(name: str, a: np.ndarray) -> Any:
    return onnx_module().numpy_helper.from_array(np.ascontiguousarray(a), name)


def small_cnn(seed: int = 0, size: int = 8) -> Any:
    """A float CNN: conv3x3(3->16)+ReLU, max-pool 2x2, conv3x3(16->16) + skip + ReLU, global
    average pool, flatten, Gemm(16->10); input (1, 3, size, size), weights seeded."""
    onnx = onnx_module()
    h = onnx.helper
    rng = np.random.default_rng(seed)
    inits = [_init("w1", rng.normal(0, 0.25, (16, 3, 3, 3)).astype(np.float32)),
             _init("b1", rng.normal(0, 0.1, (16,)).astype(np.float32)),
             _init("w2", rng.normal(0, 0.12, (16, 16, 3, 3)).astype(np.float32)),
             _init("b2", rng.normal(0, 0.1, (16,)).astype(np.float32)),
             _init("wf", rng.normal(0, 0.3, (10, 16)).astype(np.float32)),
             _init("bf", rng.normal(0, 0.1, (10,)).astype(np.float32))]
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             h.make_node("Add", ["c2", "p1"], ["s2"]),
             h.make_node("Relu", ["s2"], ["r2"]),
             h.make_node("GlobalAveragePool", ["r2"], ["g"]),
             h.make_node("Flatten", ["g"], ["f"]),
             h.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    g = h.make_graph(nodes, "small_cnn",
                     [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, size, size])],
                     [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 10])], inits)
    return float_model(g)


def mlp(seed: int = 0, k: int = 64, hidden: int = 32, classes: int = 10) -> Any:
    """A float two-layer MLP: Gemm(k->hidden) + ReLU, Gemm(hidden->classes); input (1, k)."""
    onnx = onnx_module()
    h = onnx.helper
    rng = np.random.default_rng(seed)
    inits = [_init("w1", rng.normal(0, 0.15, (hidden, k)).astype(np.float32)),
             _init("b1", rng.normal(0, 0.1, (hidden,)).astype(np.float32)),
             _init("w2", rng.normal(0, 0.2, (classes, hidden)).astype(np.float32)),
             _init("b2", rng.normal(0, 0.1, (classes,)).astype(np.float32))]
    nodes = [h.make_node("Gemm", ["x", "w1", "b1"], ["h1"], transB=1),
             h.make_node("Relu", ["h1"], ["r1"]),
             h.make_node("Gemm", ["r1", "w2", "b2"], ["y"], transB=1)]
    g = h.make_graph(nodes, "mlp", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                             [1, k])],
                     [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, classes])],
                     inits)
    return float_model(g)


def resnet18(seed: int = 0, size: int = 224, classes: int = 1000) -> Any:
    """A float ResNet-18 (He et al.; torchvision's layout, batch norm folded into each conv's
    bias): 7x7/2 stem + max-pool 3x3/2, four stages of two basic blocks (64, 128, 256, 512
    channels; 1x1/2 projection shortcuts), global average pool, flatten, Gemm; input (1, 3,
    size, size), He-initialized seeded weights."""
    onnx = onnx_module()
    h = onnx.helper
    rng = np.random.default_rng(seed)
    inits: list[Any] = []
    nodes: list[Any] = []

    def conv(x: str, name: str, cin: int, cout: int, k: int, stride: int, relu: bool) -> str:
        w = rng.normal(0, np.sqrt(2.0 / (cin * k * k)), (cout, cin, k, k)).astype(np.float32)
        inits.extend([_init(f"{name}_w", w),
                      _init(f"{name}_b", rng.normal(0, 0.05, (cout,)).astype(np.float32))])
        nodes.append(h.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [name],
                                 kernel_shape=[k, k], strides=[stride, stride],
                                 pads=[k // 2] * 4))
        if not relu:
            return name
        nodes.append(h.make_node("Relu", [name], [f"{name}_relu"]))
        return f"{name}_relu"

    x = conv("x", "conv1", 3, 64, 7, 2, True)
    nodes.append(h.make_node("MaxPool", [x], ["pool1"], kernel_shape=[3, 3], strides=[2, 2],
                             pads=[1, 1, 1, 1]))
    x, cin = "pool1", 64
    for stage, cout in enumerate((64, 128, 256, 512), start=1):
        for block in range(2):
            stride = 2 if stage > 1 and block == 0 else 1
            name = f"layer{stage}_{block}"
            y = conv(x, f"{name}_conv1", cin, cout, 3, stride, True)
            y = conv(y, f"{name}_conv2", cout, cout, 3, 1, False)
            skip = conv(x, f"{name}_down", cin, cout, 1, stride, False) \
                if stride != 1 or cin != cout else x
            nodes.append(h.make_node("Add", [y, skip], [f"{name}_add"]))
            nodes.append(h.make_node("Relu", [f"{name}_add"], [f"{name}_out"]))
            x, cin = f"{name}_out", cout
    nodes.append(h.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(h.make_node("Flatten", ["gap"], ["flat"]))
    inits.extend([_init("fc_w", rng.normal(0, np.sqrt(1.0 / 512), (classes, 512))
                        .astype(np.float32)),
                  _init("fc_b", np.zeros(classes, np.float32))])
    nodes.append(h.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1))
    g = h.make_graph(nodes, "resnet18",
                     [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, size, size])],
                     [h.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, [1, classes])],
                     inits)
    return float_model(g)


#: the float models the tests and bench/onnx_models.py quantize (ResNet-18 only in the bench)
MODELS = {"small_cnn": small_cnn, "mlp": mlp}


def input_shape(model: Any) -> tuple[int, ...]:
    """The shape of ``model``'s (single) float input."""
    dims = model.graph.input[0].type.tensor_type.shape.dim
    return tuple(d.dim_value for d in dims)


def calibration_inputs(model: Any, seed: int, count: int) -> list[np.ndarray]:
    """``count`` seeded float32 inputs for ``model``: standard normal."""
    rng = np.random.default_rng(seed)
    shape = input_shape(model)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(count)]


def ort_module() -> Any:
    """``onnxruntime``, or an ``OnnxImportError`` saying how to install it."""
    try:
        import onnxruntime
    except ImportError:
        raise OnnxImportError("judging with ONNX Runtime needs the onnxruntime package: pip "
                              "install onnxruntime") from None
    return onnxruntime


#: the opset of the float models built here, and the ONNX IR version they are stamped with:
#: IR 8 is the first that carries opset 17 (onnx 1.12). ``onnx.helper.make_model`` stamps the
#: newest IR the installed onnx knows, which an older onnxruntime refuses to load ("Unsupported
#: model IR version: 14, max supported IR version: 13", onnx and onnxruntime from pip on a fresh
#: GPU machine), so the version is fixed rather than the library's
FLOAT_OPSET = 17
FLOAT_IR_VERSION = 8


def float_model(g: Any) -> Any:
    """The ``ModelProto`` of graph ``g`` at ``FLOAT_OPSET`` and ``FLOAT_IR_VERSION``."""
    h = onnx_module().helper
    return h.make_model(g, opset_imports=[h.make_opsetid("", FLOAT_OPSET)],
                        ir_version=FLOAT_IR_VERSION)


def quantize(model: Any, fmt: Format, seed: int = 0, count: int = 8) -> Any:
    """``model`` quantized by ``quantize_static`` in format ``fmt`` (MinMax calibration on
    ``count`` seeded inputs)."""
    ort_module()
    from onnxruntime import quantization as q

    name = model.graph.input[0].name
    data = calibration_inputs(model, seed, count)

    class Reader(q.CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.it: Iterator[np.ndarray] = iter(data)

        def get_next(self) -> dict[str, np.ndarray] | None:
            x = next(self.it, None)
            return None if x is None else {name: x}

    act = q.QuantType.QUInt8 if fmt.types == "u8" else q.QuantType.QInt8
    sym = fmt.types == "s8"
    onnx = onnx_module()
    with tempfile.TemporaryDirectory() as d:
        src, dst = Path(d) / "f.onnx", Path(d) / "q.onnx"
        onnx.save(model, str(src))
        try:
            q.quantize_static(str(src), str(dst), Reader(),
                              quant_format=getattr(q.QuantFormat, fmt.layout),
                              activation_type=act, weight_type=q.QuantType.QInt8,
                              per_channel=fmt.per_channel,
                              extra_options={"ActivationSymmetric": sym,
                                             "WeightSymmetric": True})
        except Exception as e:  # ORT's own errors: a model it cannot load or calibrate
            raise OnnxImportError(
                f"onnxruntime {ort_module().__version__} could not quantize {model.graph.name} "
                f"({fmt.name}): {str(e).strip().splitlines()[0] if str(e).strip() else e!r}"
            ) from e
        return onnx.load(str(dst))


#: ORT's Level-2 (``ORT_ENABLE_EXTENDED``) transformers that rewrite float arithmetic (fusions
#: of float subgraphs into contrib kernels that compute them in another order or form): off in
#: the fused references, whose only change to a model is the fusion of its QDQ groups
#: (onnxruntime/core/optimizer/graph_transformer_utils.cc, ``TransformerLevel::Level2``)
FLOAT_FUSIONS: tuple[str, ...] = (
    "GemmActivationFusion", "MatMulIntegerToFloatFusion", "DynamicQuantizeMatMulFusion",
    "ConvActivationFusion", "GeluFusion", "LayerNormFusion", "SimplifiedLayerNormFusion",
    "AttentionFusion", "EmbedLayerNormFusion", "GatherToSplitFusion", "GatherToSliceFusion",
    "MatmulTransposeFusion", "BiasGeluFusion", "SkipLayerNormFusion", "FastGeluFusion",
    "QuickGeluFusion", "BiasSoftmaxFusion", "MatMulScaleFusion")


@dataclass(frozen=True)
class OrtReference:
    """A configuration of ONNX Runtime's CPU session that judges vta (module docstring):
    ``level`` a ``GraphOptimizationLevel`` name, ``config`` session config entries,
    ``disabled`` transformers switched off."""

    name: str
    level: str
    config: tuple[tuple[str, str], ...] = ()
    disabled: tuple[str, ...] = ()

    def describe(self, version: str) -> str:
        """``onnxruntime VERSION CPU, LEVEL[, key=value ...][, float fusions off]``."""
        parts = [f"onnxruntime {version} CPU, {self.level}",
                 *(f"{k}={v}" for k, v in self.config)]
        if self.disabled:
            parts.append("float fusions off")
        return ", ".join(parts)

    def session(self, model: Any, optimized: str | None = None) -> Any:
        """An ``InferenceSession`` of ``model`` (a ``ModelProto``) in this configuration
        (``optimized``: where ORT writes the graph it runs)."""
        ort = ort_module()
        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, self.level)
        so.log_severity_level = 3
        for k, v in self.config:
            so.add_session_config_entry(k, v)
        if optimized is not None:
            so.optimized_model_filepath = optimized
        return ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"],
                                    disabled_optimizers=list(self.disabled) or None)


#: the graph as written: ORT's kernels for the operators the model names
AS_WRITTEN = OrtReference("as written", "ORT_DISABLE_ALL")
#: a QDQ model with int8 activations: its groups fused into ORT's integer kernels, int8 kept
FUSED = OrtReference("fused", "ORT_ENABLE_EXTENDED", (("session.qdqisint8allowed", "1"),),
                     FLOAT_FUSIONS)
#: uint8 activations: fused, and x64's exact U8U8 kernels instead of the saturating U8S8 ones
FUSED_U8 = OrtReference("fused, U8U8", "ORT_ENABLE_EXTENDED",
                        (("session.x64quantprecision", "1"),), FLOAT_FUSIONS)


def activation_types(model: Any) -> set[str]:
    """The element types (``"int8"``, ``"uint8"``) of ``model``'s quantized activations: the
    outputs of its ``QuantizeLinear`` nodes (uint8 without a zero point, ONNX's default)."""
    onnx = onnx_module()
    inits = {t.name: t for t in model.graph.initializer}
    out = set()
    for n in model.graph.node:
        if n.op_type != "QuantizeLinear":
            continue
        z = inits.get(n.input[2]) if len(n.input) > 2 and n.input[2] else None
        elem = z.data_type if z is not None else onnx.TensorProto.UINT8
        out.add(onnx.helper.tensor_dtype_to_np_dtype(elem).name)
    return out


def reference_for(model: Any) -> OrtReference:
    """The configuration that judges ``model`` (module docstring): ``FUSED_U8`` for uint8
    activations, ``FUSED`` for a QDQ model (a DequantizeLinear feeding a float Conv / MatMul
    / Gemm), ``AS_WRITTEN`` otherwise (QOperator, float)."""
    types = activation_types(model)
    if types == {"uint8"}:
        return FUSED_U8
    return FUSED if types and qdq_form(model) else AS_WRITTEN


def optimized_ops(model: Any, reference: OrtReference) -> list[str]:
    """The operator types of the graph ORT runs for ``model`` in ``reference`` (its optimized
    model, saved through ``SessionOptions.optimized_model_filepath``), in graph order."""
    onnx = onnx_module()
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "optimized.onnx")
        reference.session(model, path)
        return [n.op_type for n in onnx.load(path).graph.node]


def exposed(model: Any) -> tuple[Any, set[str]]:
    """A copy of ``model`` with every int8 / uint8 tensor made a graph output (and every
    output shape inference cannot type: a com.microsoft operator's, or one computed from it),
    and the names of the int8 / uint8 tensors and original outputs among them (the others
    are kept by ``ort_tensors`` when ORT's value is int8 / uint8)."""
    onnx = onnx_module()
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inferred = contrib_inferred(onnx, m)  # tensors after com.microsoft operators too
    quant = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8}
    have = {o.name for o in m.graph.output}
    inits = {t.name for t in m.graph.initializer}
    for vi in inferred.graph.value_info:
        if vi.type.tensor_type.elem_type in quant and vi.name not in have | inits:
            m.graph.output.append(vi)
            have.add(vi.name)
    typed = {vi.name for vi in inferred.graph.value_info if vi.type.tensor_type.elem_type}
    known = set(have)
    for n in m.graph.node:
        for o in n.output:
            if o and o not in have | inits | typed:
                m.graph.output.append(onnx.helper.make_empty_tensor_value_info(o))
                have.add(o)
    return m, known


def ort_tensors(model: Any, feeds: Mapping[str, np.ndarray],
                reference: OrtReference | None = None) -> dict[str, np.ndarray]:
    """ONNX Runtime's value of every int8 / uint8 tensor of ``model`` (``exposed``: each made
    a graph output) and of its outputs, run in ``reference`` (``reference_for(model)`` when
    None). Asking for a fused group's int8 output keeps the fusion: that tensor is the Q
    node's output, which the integer kernel computes (tests/graph/test_ort_reference.py)."""
    m, known = exposed(model)
    sess = (reference_for(model) if reference is None else reference).session(m)
    names = [o.name for o in sess.get_outputs()]
    values = dict(zip(names, sess.run(names, dict(feeds)), strict=True))
    return {k: a for k, a in values.items()
            if k in known or np.asarray(a).dtype in (np.int8, np.uint8)}


@dataclass(frozen=True)
class Agreement:
    """vta's int8 tensors against ORT's: ``tensors`` compared by name, ``elements`` in all,
    ``equal`` of them bit-identical, ``max_diff`` the largest difference in units."""

    tensors: int
    elements: int
    equal: int
    max_diff: int

    @property
    def identical(self) -> bool:
        return self.tensors > 0 and self.equal == self.elements

    def __str__(self) -> str:
        share = self.equal / self.elements if self.elements else 0.0
        return (f"{self.equal}/{self.elements} int8 values equal ({share:.2%}) in "
                f"{self.tensors} tensors, max diff {self.max_diff}")


def agreement(graph: Graph, values: Mapping[Value, np.ndarray],
              ort: Mapping[str, np.ndarray]) -> Agreement:
    """Compare each int8 value of ``graph`` that ONNX Runtime also computed (same name, same
    number of elements) with ORT's; no common tensor is an ``OnnxImportError``."""
    tensors = elements = equal = worst = 0
    for v in graph.values():
        want = ort.get(v.name)
        if v.is_const or v.type.dtype != "int8" or want is None or v not in values:
            continue
        got = np.asarray(values[v]).reshape(-1).astype(np.int64)
        ref = _int8_form(want).reshape(-1)
        if ref.size != got.size:
            continue
        tensors += 1
        elements += got.size
        equal += int(np.count_nonzero(got == ref))
        worst = max(worst, int(np.abs(got - ref).max(initial=0)))
    if tensors == 0:
        raise OnnxImportError(f"graph {graph.name}: no int8 tensor in common with ONNX "
                              f"Runtime's")
    return Agreement(tensors, elements, equal, worst)


def run_fed(graph: Graph, inputs: Mapping[str, np.ndarray],
            ort: Mapping[str, np.ndarray]) -> dict[Value, np.ndarray]:
    """Every value of ``graph`` with each operator fed ONNX Runtime's value of its int8
    operands where ORT has them (same name and size): each output is then the operator's own
    answer to ORT's inputs, so ``agreement`` of these values measures each operator alone (an
    end-to-end run compounds a one-unit difference through every later layer)."""
    by_name = {v.name: v for v in graph.inputs}
    env: dict[Value, np.ndarray] = {by_name[k]: np.asarray(a) for k, a in inputs.items()}
    for v in graph.constants():
        env[v] = v.data  # type: ignore[assignment]
    fed: dict[Value, np.ndarray] = dict(env)
    for n in graph.nodes:
        nodes = n.nodes if isinstance(n, Fused) else (n,)
        for m in nodes:
            env[m.output] = interp.eval_node(m, fed)
            fed[m.output] = _ort_value(m.output, ort, env[m.output])
    return env


def _ort_value(v: Value, ort: Mapping[str, np.ndarray], own: np.ndarray) -> np.ndarray:
    want = ort.get(v.name)
    if v.type.dtype != "int8" or want is None or np.asarray(want).size != own.size:
        return own
    return _int8_form(want).reshape(own.shape).astype(np.int8)


def _int8_form(a: Any) -> np.ndarray:
    """ORT's tensor as the graph IR holds it (int64): a uint8 one minus 128."""
    a = np.asarray(a)
    return a.astype(np.int64) - (128 if a.dtype == np.uint8 else 0)


#: the requantization arithmetics ``requant_arithmetic`` compares with ORT's
ARITHMETICS = ("vta: 15-bit mult, half up", "15-bit mult, half even",
               "24-bit mult, 64-bit product, half even", "float32 in integers (ort_requantize)")


def requant_arithmetic(q: Any, inputs: list[np.ndarray]) -> dict[str, Any]:
    """How many values of ORT's QLinearConv / QGemm outputs in QOperator model ``q`` each of
    ``ARITHMETICS`` reproduces, each accumulator computed from ORT's own operands
    (``run_fed``), over the float ``inputs``: ``{"values": n, "equal": {arithmetic: n}}``.
    The arithmetics: the graph IR's requantize (a multiplier of at most 15 bits, round half
    up), the same multiplier rounding half to even, a 24-bit multiplier with a 64-bit product
    rounding half to even once (a requantize instruction's arithmetic), and
    ``quant.ort_requantize`` (ORT's float32 rounding, in integers)."""
    onnx = onnx_module()
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in q.graph.initializer}
    onnx_nodes = {n.output[0]: n for n in q.graph.node}
    g = load_onnx(q)
    v = g.inputs[0]
    equal = dict.fromkeys(ARITHMETICS, 0)
    total = 0
    for x in inputs:
        ort = ort_tensors(q, {v.name: x})
        env = run_fed(g, {v.name: quantize_linear(x, v.type.scale or 1.0, v.type.zero)}, ort)
        for n in g.nodes:
            on = onnx_nodes.get(n.output.name)
            if not isinstance(n, Requantize) or on is None or n.output.name not in ort \
                    or on.op_type not in ("QLinearConv", "QGemm"):
                continue
            f32 = np.float32
            sy = inits[on.input[6] if on.op_type == "QLinearConv" else on.input[7]]
            ratio = float(f32(f32(inits[on.input[1]]) * f32(inits[on.input[4]])) / f32(sy))
            acc = env[n.x].astype(np.int64)
            want = _int8_form(ort[n.output.name]).reshape(acc.shape)
            t = wrap32(acc * n.mult).astype(np.int64)
            m, sh = float32_parts(ratio)
            got = [env[n.output].astype(np.int64),
                   np.clip(np.rint(t / 2.0 ** n.shift) + n.zero, -128, 127),
                   np.clip(even_shift(acc * m, sh) + n.zero, -128, 127),
                   ort_requantize(acc, ratio, n.zero)]
            for name, y in zip(ARITHMETICS, got, strict=True):
                equal[name] += int(np.count_nonzero(y == want))
            total += acc.size
    return {"values": total, "equal": equal}


def ort_verdict(model: Any, graph: Graph, values: Mapping[Value, np.ndarray],
                feeds: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """What ``vta run --onnx`` reports beside its self-check: ONNX Runtime's agreement with
    ``values`` (vta's tensors, by graph value) on the float ``feeds`` in the model's reference
    configuration (``reference_for``; where that is not ``AS_WRITTEN``, the agreement with
    the graph as written too, ``as_written``: a QDQ model's float Conv), or why it was not
    judged (ONNX Runtime not installed, or it cannot run the model)."""
    try:
        ort = ort_module()
    except OnnxImportError:
        return {"judged": False, "reason": "onnxruntime is not installed (pip install "
                                           "onnxruntime)"}
    proto = read_model(model)
    ref = reference_for(proto)
    refs = (ref,) if ref == AS_WRITTEN else (ref, AS_WRITTEN)
    found = []
    for r in refs:
        try:
            found.append(agreement(graph, values, ort_tensors(proto, feeds, r)))
        except OnnxImportError:
            raise
        except Exception as e:  # ORT's own errors (a kernel it lacks, a type it refuses)
            return {"judged": False, "reason": f"ONNX Runtime cannot run the model: "
                                               f"{str(e).strip().splitlines()[0]}"}
    a = found[0]
    out: dict[str, Any] = {
        "judged": True, "reference": ref.describe(ort.__version__), "tensors": a.tensors,
        "elements": a.elements, "equal": a.equal, "max_diff": a.max_diff,
        "identical": a.identical, "text": str(a)}
    if len(found) > 1:
        w = found[1]
        out["as_written"] = {"reference": AS_WRITTEN.describe(ort.__version__),
                             "tensors": w.tensors, "elements": w.elements, "equal": w.equal,
                             "max_diff": w.max_diff, "identical": w.identical,
                             "text": str(w)}
    return out


# ---------------------------------------------------------------------------- MobileNet-V2

#: torchvision's inverted-residual settings: (expansion t, output channels c, repeats n,
#: first stride s) of each of the seven stages (17 blocks)
MOBILENET_V2_STAGES: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
    (6, 160, 3, 2), (6, 320, 1, 1))


def _divisible(v: float, divisor: int = 8) -> int:
    """torchvision's ``_make_divisible``: ``v`` rounded to a multiple of ``divisor``, never
    below 90 % of ``v``."""
    out = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return out + divisor if out < 0.9 * v else out


def mobilenet_v2(seed: int = 0, size: int = 224, classes: int = 1000, width: float = 1.0
                 ) -> Any:
    """A float MobileNet-V2 (Sandler et al. 2018; torchvision's layout, batch norm folded into
    each convolution's bias): a 3x3/2 stem to 32 channels + ReLU6, 17 inverted-residual
    blocks (``MOBILENET_V2_STAGES``: a 1x1 expansion + ReLU6 where ``t > 1``, a depthwise 3x3
    (``group`` = channels, stride 1 or 2) + ReLU6, a linear 1x1 projection, and the residual
    add where the stride is 1 and the channels are unchanged), a 1x1 convolution to 1280 +
    ReLU6, global average pool, flatten, Gemm to ``classes``. ReLU6 is ``Clip(x, 0, 6)`` with
    constant min / max inputs, as PyTorch exports it. Input (1, 3, ``size``, ``size``);
    He-initialized seeded weights; ``width`` is torchvision's width multiplier."""
    onnx = onnx_module()
    h = onnx.helper
    rng = np.random.default_rng(seed)
    inits: list[Any] = [_init("relu6_min", np.array(0.0, np.float32)),
                        _init("relu6_max", np.array(6.0, np.float32))]
    nodes: list[Any] = []

    def conv(x: str, name: str, cin: int, cout: int, k: int, stride: int, groups: int,
             relu6: bool) -> str:
        fan_in = cin // groups * k * k
        w = rng.normal(0, np.sqrt(2.0 / fan_in), (cout, cin // groups, k, k))
        inits.extend([_init(f"{name}_w", w.astype(np.float32)),
                      _init(f"{name}_b", rng.normal(0, 0.05, (cout,)).astype(np.float32))])
        nodes.append(h.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [name],
                                 kernel_shape=[k, k], strides=[stride, stride],
                                 pads=[k // 2] * 4, group=groups))
        if not relu6:
            return name
        nodes.append(h.make_node("Clip", [name, "relu6_min", "relu6_max"], [f"{name}_relu6"]))
        return f"{name}_relu6"

    cin = _divisible(32 * width)
    x = conv("x", "stem", 3, cin, 3, 2, 1, True)
    block = 0
    for t, c, n, s in MOBILENET_V2_STAGES:
        cout = _divisible(c * width)
        for i in range(n):
            stride = s if i == 0 else 1
            name, hidden = f"block{block}", cin * t
            y = conv(x, f"{name}_expand", cin, hidden, 1, 1, 1, True) if t != 1 else x
            y = conv(y, f"{name}_dw", hidden, hidden, 3, stride, hidden, True)
            y = conv(y, f"{name}_project", hidden, cout, 1, 1, 1, False)
            if stride == 1 and cin == cout:
                nodes.append(h.make_node("Add", [y, x], [f"{name}_add"]))
                y = f"{name}_add"
            x, cin, block = y, cout, block + 1
    last = _divisible(1280 * max(1.0, width))
    x = conv(x, "head", cin, last, 1, 1, 1, True)
    nodes.append(h.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(h.make_node("Flatten", ["gap"], ["flat"]))
    inits.extend([_init("fc_w", rng.normal(0, np.sqrt(1.0 / last), (classes, last))
                        .astype(np.float32)),
                  _init("fc_b", np.zeros(classes, np.float32))])
    nodes.append(h.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1))
    g = h.make_graph(nodes, "mobilenet_v2",
                     [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, size, size])],
                     [h.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, [1, classes])],
                     inits)
    return float_model(g)


# ------------------------------------------------------------------------------ BERT-tiny

#: BERT-tiny's sizes (Turc et al. 2019, "Well-Read Students Learn Better": L=2, H=128, A=2)
BERT_TINY = {"layers": 2, "hidden": 128, "heads": 2, "ffn": 512, "seq": 128}


def bert_tiny(seed: int = 0, layers: int = 2, hidden: int = 128, heads: int = 2,
              ffn: int = 512, seq: int = 128) -> Any:
    """A float transformer encoder (BERT's, post-norm) built with ``onnx.helper`` from seeded
    weights, opset 17: input the float token embeddings ``x`` [1, seq, hidden] (the embedding
    lookup, position and segment embeddings and their LayerNorm are outside the model); each
    layer: Q, K, V MatMul + Add (bias); Reshape to [1, seq, heads, head] and Transpose to
    [1, heads, seq, head] (K to [1, heads, head, seq]); scores MatMul(Q, K^T), Div by
    sqrt(head); Softmax(axis=-1); context MatMul(probs, V), Transpose + Reshape back; output
    MatMul + Add, residual Add, LayerNormalization; FFN MatMul + Add, GELU as PyTorch's
    exporter writes it (``x * 0.5 * (1 + Erf(x / sqrt(2)))``: Div, Erf, Add, Mul, Mul), MatMul
    + Add, residual Add, LayerNormalization. Output: the last layer's [1, seq, hidden].
    ``BERT_TINY``'s sizes by default; fewer layers or a shorter sequence for tests."""
    onnx = onnx_module()
    h = onnx.helper
    if hidden % heads:
        raise OnnxImportError(f"bert_tiny: hidden {hidden} is not a multiple of heads {heads}")
    head = hidden // heads
    rng = np.random.default_rng(seed)
    inits: list[Any] = [
        _init("shape_split", np.array([1, seq, heads, head], np.int64)),
        _init("shape_merge", np.array([1, seq, hidden], np.int64)),
        _init("sqrt_head", np.array(np.sqrt(head), np.float32)),
        _init("sqrt2", np.array(np.sqrt(2.0), np.float32)),
        _init("one", np.array(1.0, np.float32)),
        _init("half", np.array(0.5, np.float32))]
    nodes: list[Any] = []

    def linear(x: str, name: str, k: int, m: int) -> str:
        inits.extend([_init(f"{name}_w", rng.normal(0, np.sqrt(1.0 / k), (k, m))
                            .astype(np.float32)),
                      _init(f"{name}_b", rng.normal(0, 0.02, (m,)).astype(np.float32))])
        nodes.append(h.make_node("MatMul", [x, f"{name}_w"], [f"{name}_mm"]))
        nodes.append(h.make_node("Add", [f"{name}_mm", f"{name}_b"], [name]))
        return name

    def norm(x: str, name: str) -> str:
        inits.extend([_init(f"{name}_g", (1 + rng.normal(0, 0.05, (hidden,)))
                            .astype(np.float32)),
                      _init(f"{name}_beta", rng.normal(0, 0.02, (hidden,)).astype(np.float32))])
        nodes.append(h.make_node("LayerNormalization", [x, f"{name}_g", f"{name}_beta"], [name],
                                 axis=-1, epsilon=1e-12))
        return name

    x = "x"
    for i in range(layers):
        p = f"l{i}"
        q, k, v = (linear(x, f"{p}_{t}", hidden, hidden) for t in ("q", "k", "v"))
        for t, perm in ((q, [0, 2, 1, 3]), (k, [0, 2, 3, 1]), (v, [0, 2, 1, 3])):
            nodes.append(h.make_node("Reshape", [t, "shape_split"], [f"{t}_split"]))
            nodes.append(h.make_node("Transpose", [f"{t}_split"], [f"{t}_heads"], perm=perm))
        nodes.append(h.make_node("MatMul", [f"{q}_heads", f"{k}_heads"], [f"{p}_scores"]))
        nodes.append(h.make_node("Div", [f"{p}_scores", "sqrt_head"], [f"{p}_scaled"]))
        nodes.append(h.make_node("Softmax", [f"{p}_scaled"], [f"{p}_probs"], axis=-1))
        nodes.append(h.make_node("MatMul", [f"{p}_probs", f"{v}_heads"], [f"{p}_ctx"]))
        nodes.append(h.make_node("Transpose", [f"{p}_ctx"], [f"{p}_ctx_t"], perm=[0, 2, 1, 3]))
        nodes.append(h.make_node("Reshape", [f"{p}_ctx_t", "shape_merge"], [f"{p}_ctx_m"]))
        o = linear(f"{p}_ctx_m", f"{p}_o", hidden, hidden)
        nodes.append(h.make_node("Add", [o, x], [f"{p}_res1"]))
        y = norm(f"{p}_res1", f"{p}_ln1")
        f1 = linear(y, f"{p}_ffn1", hidden, ffn)
        nodes.append(h.make_node("Div", [f1, "sqrt2"], [f"{p}_g_div"]))
        nodes.append(h.make_node("Erf", [f"{p}_g_div"], [f"{p}_g_erf"]))
        nodes.append(h.make_node("Add", [f"{p}_g_erf", "one"], [f"{p}_g_add"]))
        nodes.append(h.make_node("Mul", [f1, f"{p}_g_add"], [f"{p}_g_mul"]))
        nodes.append(h.make_node("Mul", [f"{p}_g_mul", "half"], [f"{p}_gelu"]))
        f2 = linear(f"{p}_gelu", f"{p}_ffn2", ffn, hidden)
        nodes.append(h.make_node("Add", [f2, y], [f"{p}_res2"]))
        x = norm(f"{p}_res2", f"{p}_ln2")
    g = h.make_graph(nodes, "bert_tiny",
                     [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, seq, hidden])],
                     [h.make_tensor_value_info(x, onnx.TensorProto.FLOAT, [1, seq, hidden])],
                     inits)
    return float_model(g)


#: the format ``vta run mobilenet_v2`` quantizes with: the QOperator layout (ORT's QLinear
#: kernels are integer arithmetic, so ORT's reference is exact: in the QDQ layout ORT
#: convolves dequantized floats, one unit off the integers now and then, and end to end such
#: a unit propagates), ORT's default asymmetric int8 activations (its ReLU6 folded into the
#: quantized ranges; the average pool a QLinearGlobalAveragePool: the symmetric layout
#: leaves a float GlobalAveragePool whose float32 mean is one unit off now and then),
#: per-tensor weights
NETWORK_FORMAT = Format("QOperator", "a8", False)

#: the format ``vta run bert_tiny_qop`` quantizes BERT-tiny with: ORT's QOperator layout
#: (QLinearMatMul, QLinearAdd, QLinearMul, QLinearSoftmax: ORT's integer kernels), its default
#: asymmetric int8 activations, per-tensor weights
QOP_FORMAT = Format("QOperator", "a8", False)


def quantize_outputs(q: Any, model: Any, fmt: Format, seed: int = 0, count: int = 8) -> Any:
    """QOperator model ``q`` (``quantize(model, fmt, seed, count)``) with each float graph
    output ``y`` (ORT's QOperator form leaves a LayerNormalization at the end in float)
    quantized as ORT's QDQ form of the same model and calibration quantizes it: ``y`` renamed
    ``y_float``, then ``QuantizeLinear`` with that scale and zero point (``y_quantized``) and
    ``DequantizeLinear`` back to ``y``; every other node as ORT wrote it. The graph then ends
    in an int8 tensor that ORT computes too (the judge runs this model)."""
    onnx = onnx_module()
    made_by = {o: n.op_type for n in q.graph.node for o in n.output}
    floats = [o.name for o in q.graph.output
              if o.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
              and made_by.get(o.name) != "DequantizeLinear"]  # not quantized already
    if not floats:
        return q
    qdq = quantize(model, Format("QDQ", fmt.types, fmt.per_channel), seed, count)
    params = {n.input[0]: (n.input[1], n.input[2]) for n in qdq.graph.node
              if n.op_type == "QuantizeLinear"}
    producers = {o: n for n in qdq.graph.node for o in n.output}
    qdq_inits = {t.name: t for t in qdq.graph.initializer}
    m = onnx.ModelProto()
    m.CopyFrom(q)
    h = onnx.helper
    for out in m.graph.output:
        if out.name not in floats:
            continue
        dq = producers.get(out.name)  # QDQ: y = DequantizeLinear(QuantizeLinear(y_input))
        qn = producers.get(dq.input[0]) if dq is not None else None
        if qn is None or qn.input[0] not in params:
            raise OnnxImportError(f"quantize_outputs: ORT's QDQ form of {model.graph.name} "
                                  f"does not quantize its output {out.name}")
        sname, zname = params[qn.input[0]]
        y = out.name
        for n in m.graph.node:
            for k, o in enumerate(n.output):
                if o == y:
                    n.output[k] = f"{y}_float"
        names = {t.name for t in m.graph.initializer}
        for t in (sname, zname):
            if t not in names:
                m.graph.initializer.append(qdq_inits[t])
        m.graph.node.extend([
            h.make_node("QuantizeLinear", [f"{y}_float", sname, zname], [f"{y}_quantized"]),
            h.make_node("DequantizeLinear", [f"{y}_quantized", sname, zname], [y])])
    return m


@dataclass(frozen=True)
class OnnxNetwork:
    """A network ``vta run NAME`` builds as a float ONNX model from a seed and quantizes with
    ONNX Runtime's ``quantize_static``: ``build(seed)`` the float model, ``fmt`` the format it
    is quantized in, ``pow2`` whether an ALU without MUL runs it with every scale rounded to a
    power of two (``pow2_scales``: QDQ, symmetric int8 only; otherwise such an ALU refuses the
    model's multipliers by name)."""

    build: Callable[[int], Any]
    fmt: Format
    pow2: bool
    #: quantize the float outputs the QOperator form leaves (``quantize_outputs``)
    quantize_outputs: bool = False
    #: the format quantized for an ALU without MUL before ``pow2_scales`` (None: ``fmt``;
    #: ``pow2_scales`` takes the symmetric QDQ form only)
    shift_fmt: Format | None = None


#: what an ALU without MUL runs a network in when its own format has zero points: ORT's QDQ
#: symmetric int8 per-tensor, its scales then rounded to powers of two (``pow2_scales``)
SHIFT_FORMAT = Format("QDQ", "s8", False)

#: the networks ``vta run NAME`` builds and quantizes with ORT (``mobilenet_v2_32``: MobileNet-V2
#: on 32x32, for tests and quick runs)
ONNX_NETWORKS: dict[str, OnnxNetwork] = {
    "mobilenet_v2": OnnxNetwork(lambda seed: mobilenet_v2(seed, size=224), NETWORK_FORMAT, True,
                                shift_fmt=SHIFT_FORMAT),
    "mobilenet_v2_32": OnnxNetwork(lambda seed: mobilenet_v2(seed, size=32), NETWORK_FORMAT,
                                   True, shift_fmt=SHIFT_FORMAT),
    "bert_tiny": OnnxNetwork(bert_tiny, Format("QDQ", "s8", False), True),
    "bert_tiny_qop": OnnxNetwork(bert_tiny, QOP_FORMAT, False, quantize_outputs=True),
}


def quantized_network(name: str, pow2: bool = False, seed: int = 0) -> Any:
    """``ONNX_NETWORKS[name]`` quantized by ``quantize_static`` in its format (needs
    onnxruntime; an ``OnnxImportError`` saying how to install it otherwise), its scales rounded
    to powers of two when ``pow2`` and the network allows it (``OnnxNetwork.pow2``; then in its
    ``shift_fmt`` where it has one)."""
    net = ONNX_NETWORKS[name]
    model = net.build(seed)
    shifts = pow2 and net.pow2
    fmt = net.shift_fmt or net.fmt if shifts else net.fmt
    q = quantize(model, fmt, seed)
    if net.quantize_outputs:
        q = quantize_outputs(q, model, fmt, seed)
    return pow2_scales(q) if shifts else q


def pow2_scales(q: Any) -> Any:
    """A copy of QDQ model ``q`` (symmetric int8: zero points 0) with every scale rounded up
    to a power of two and each constant re-quantized to its new scale (``round(q * s /
    s')``, half to even: the same real values to within a step): every ratio of scales is
    then a power of two and every requantization a shift, which VTA's ALU (no MUL) runs, as
    TVM's ``round_for_shift`` quantizes. A Conv's or Gemm's int32 bias keeps ORT's rule, its
    scale the product of its input's and its weight's new scales (rounding it up on its own
    would break the rule when both round). A model with a non-zero zero point is refused."""
    onnx = onnx_module()
    m = onnx.ModelProto()
    m.CopyFrom(q)
    inits = {t.name: t for t in m.graph.initializer}
    dq_of = {n.output[0]: n for n in m.graph.node if n.op_type == "DequantizeLinear"}
    scales: dict[str, np.ndarray] = {}
    for n in m.graph.node:
        if n.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            continue
        if len(n.input) > 2 and n.input[2] in inits:
            z = onnx.numpy_helper.to_array(inits[n.input[2]])
            if np.any(z != 0):
                raise OnnxImportError(f"pow2_scales: {n.name or n.output[0]} has zero point "
                                      f"{z.reshape(-1)[:4].tolist()}: only symmetric models")
        scales.setdefault(n.input[1], onnx.numpy_helper.to_array(inits[n.input[1]])
                          .astype(np.float64))
    new = {k: np.exp2(np.ceil(np.log2(s))) for k, s in scales.items()}
    for n in m.graph.node:
        if n.op_type in ("Conv", "Gemm") and len(n.input) > 2 \
                and all(i in dq_of for i in n.input[:3]):
            x, w, b = (dq_of[i].input[1] for i in n.input[:3])
            new[b] = (new[x] * new[w]).reshape(scales[b].shape)
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in inits:
            t = inits[n.input[0]]
            data = onnx.numpy_helper.to_array(t)
            ratio = scales[n.input[1]] / new[n.input[1]]
            if np.ndim(ratio) and data.ndim:
                axis = next((int(a.i) for a in n.attribute if a.name == "axis"), 1)
                ratio = ratio.reshape([-1 if k == axis % data.ndim else 1
                                       for k in range(data.ndim)])
            info = np.iinfo(data.dtype)
            requant = np.clip(np.rint(data * ratio), info.min, info.max).astype(data.dtype)
            t.CopyFrom(onnx.numpy_helper.from_array(requant, t.name))
    for name, s in new.items():
        inits[name].CopyFrom(onnx.numpy_helper.from_array(
            s.astype(np.float32).reshape(scales[name].shape), name))
    return m


def tensor_kind(graph: Graph, v: Value) -> str:
    """What computed ``v``, for agreement by kind: the producing operator (``dense``,
    ``matmul``, ``add`` ...; a requantize is named after the operator it requantizes; a float
    island after its float operators, ``host_float:softmax``); ``input`` for a graph input."""
    n = graph.producer(v)
    if n is None:
        return "input"
    if isinstance(n, Fused):
        return tensor_kind(graph, n.anchor.output) if isinstance(n.anchor, HostFloat) else \
            n.anchor.op
    if isinstance(n, Requantize):
        inner = graph.producer(n.x)
        return inner.op if inner is not None else n.op
    if isinstance(n, HostFloat):
        return f"host_float:{n.name}"
    return n.op


def agreement_by_kind(graph: Graph, values: Mapping[Value, np.ndarray],
                      ort: Mapping[str, np.ndarray]) -> dict[str, Agreement]:
    """``agreement`` split by ``tensor_kind`` (only the kinds ORT also computed)."""
    kinds: dict[str, list[Value]] = {}
    for v in graph.values():
        if not v.is_const and v.type.dtype == "int8" and v.name in ort and v in values \
                and np.asarray(ort[v.name]).size == v.type.size:
            kinds.setdefault(tensor_kind(graph, v), []).append(v)
    out = {}
    for kind, vs in sorted(kinds.items()):
        tensors = elements = equal = worst = 0
        for v in vs:
            got = np.asarray(values[v]).reshape(-1).astype(np.int64)
            ref = _int8_form(ort[v.name]).reshape(-1)
            tensors += 1
            elements += got.size
            equal += int(np.count_nonzero(got == ref))
            worst = max(worst, int(np.abs(got - ref).max(initial=0)))
        out[kind] = Agreement(tensors, elements, equal, worst)
    return out
