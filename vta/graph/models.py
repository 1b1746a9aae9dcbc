"""Quantized networks built in the graph IR, weights and scales from a seed (no downloads).

``resnet18`` is ResNet-18 (He et al. 2016, torchvision's layout) with batch norm folded into
the convolutions, quantized to int8 activations and weights with int32 biases:

* stem: conv 7x7/2 (pad 3) + requantize + ReLU, max-pool 3x3/2 (pad 1);
* four stages of two basic blocks (64, 128, 256, 512 channels; the first block of stages 2-4
  has stride 2 and a 1x1/2 convolution on the shortcut): ``relu(add(requantize(conv(relu(
  requantize(conv(x))))), shortcut))``, the add requantizing both branches;
* global average pool, dense 512 -> 1000 and a requantize to int8 logits.

Weights are drawn from a normal distribution (He initialisation in real terms: the int8 values
have standard deviation ``WEIGHT_STD`` and the scale makes ``sqrt(2 / fan_in)`` of them),
biases small (drawn ahead in a thread while the build calibrates the layers before them:
``_Draws``; ``vta run`` starts them while it imports its modules, ``draw_early``); every
activation scale is calibrated on a seeded calibration image (``GraphBuilder(calibrate=...)``:
the 99.99 % quantile of each tensor's magnitudes maps to 127), so activations use their int8
range through all 20 convolutions. ``width``, ``image`` and ``classes`` shrink the network
for tests (same structure).

``requant`` (``quant.SCALE_MODES``) picks how it requantizes. ``"shift"`` (``resnet18``, what VTA's
hardware runs): the weight scales are rounded to powers of two (the image's is one) and every
calibrated scale up to a power-of-two multiple of its input's (``GraphBuilder``), as TVM's
VTA flow quantizes (``round_for_shift``): every requantize is a rounding shift, every add's
multipliers are powers of two, and the network runs on ALU MIN, MAX, ADD and SHR alone.
``"fixed"`` (``resnet18_fixed``): the calibrated scales as they come, fixed-point multipliers,
which need ALU MUL (``hwconfigs/pynq_mul.yaml``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator

import numpy as np

from vta.errors import GraphError
from vta.graph.builder import GraphBuilder
from vta.graph.ir import Graph, Value

__all__ = ["resnet18", "resnet18_fixed", "random_image", "draw_early", "drop_early", "WEIGHT_STD",
           "IMAGE_SCALE", "MODELS", "ONNX_MODELS", "LAYERS_OF"]

#: standard deviation of the int8 weights
WEIGHT_STD = 24.0
#: the input image's scale: int8 pixels are real values in [-1, 1)
IMAGE_SCALE = 1.0 / 128


def random_image(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """A seeded int8 input image: smooth random fields plus noise, over the whole int8 range
    (what a normalised photograph's pixels look like more than uniform noise does); an input
    of another rank is uniform int8."""
    rng = np.random.default_rng(seed)
    if len(shape) != 4:
        return rng.integers(-128, 128, shape, dtype=np.int8)
    n, c, h, w = shape
    coarse = rng.normal(0, 1, (n, c, max(1, h // 8) + 1, max(1, w // 8) + 1))
    ys = np.linspace(0, coarse.shape[2] - 1, h)
    xs = np.linspace(0, coarse.shape[3] - 1, w)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, coarse.shape[2] - 1), np.minimum(x0 + 1, coarse.shape[3] - 1)
    fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
    field = (coarse[:, :, y0][:, :, :, x0] * (1 - fy) * (1 - fx)
             + coarse[:, :, y1][:, :, :, x0] * fy * (1 - fx)
             + coarse[:, :, y0][:, :, :, x1] * (1 - fy) * fx
             + coarse[:, :, y1][:, :, :, x1] * fy * fx)
    img = 48 * field + rng.normal(0, 12, shape)
    return np.clip(np.rint(img), -128, 127).astype(np.int8)


#: ResNet-18's kernel sizes: the stem's, a basic block's convolutions', the shortcut's
STEM_KERNEL, BLOCK_KERNEL, SHORTCUT_KERNEL = 7, 3, 1
#: the input image's channels
_CHANNELS = 3
#: the standard deviation of a bias's real-valued draws
BIAS_STD = 0.05


class _Draws:
    """The seeded normal draws of a network's weights and biases, in the order the build takes
    them (``plan``: each weight's shape, each followed by its bias's draws: ``oc`` of them),
    drawn ahead in a thread of their own while the build calibrates the layers before them:
    numpy's generator and rounding release the GIL, so ResNet-18's 11.7 M draws (about
    0.2 s of a 0.4 s build) run on the core the build leaves idle. The same generator
    consumed in the same order as drawing each when asked: the same values. ``take``
    returns the next draw, checking it is the one asked for (a plan that disagreed with the
    build would be a bug here, not a different network)."""

    def __init__(self, rng: np.random.Generator, plan: list[tuple[int, ...]]) -> None:
        self.rng = rng
        self.asks: list[tuple[str, tuple[int, ...]]] = []
        for shape in plan:
            self.asks += [("weights", shape), ("bias", shape[:1])]
        self.got: list[np.ndarray | None] = [None] * len(self.asks)
        self.ready = [threading.Event() for _ in self.asks]
        self.next = 0
        self.error: BaseException | None = None
        self.cancelled = False
        self.thread = threading.Thread(target=self._draw_all, name="resnet18-draws",
                                       daemon=True)
        self.thread.start()

    def _draw_all(self) -> None:
        try:
            for k, (kind, shape) in enumerate(self.asks):
                if self.cancelled:
                    return
                self.got[k] = _rounded(self.rng, shape) if kind == "weights" \
                    else self.rng.normal(0, BIAS_STD, shape)
                self.ready[k].set()
        except BaseException as e:  # given to the build at its next take
            self.error = e
            for r in self.ready:
                r.set()

    def take(self, kind: str, shape: tuple[int, ...]) -> np.ndarray:
        """The next draw, which must be ``kind``'s (``"weights"``, ``"bias"``) of ``shape``."""
        k = self.next
        if k >= len(self.asks) or self.asks[k] != (kind, shape):
            raise AssertionError(f"draw {k}: the build asks for {(kind, shape)}, the plan "
                                 f"drew {self.asks[k] if k < len(self.asks) else 'nothing'}")
        self.ready[k].wait()
        got = self.got[k]
        if got is None:
            assert self.error is not None
            raise self.error
        self.got[k] = None  # the build owns it now
        self.next = k + 1
        return got

    def close(self) -> None:
        """Wait for the thread (every draw made: none is left running)."""
        self.thread.join()

    def cancel(self) -> None:
        """Stop drawing (after the draw under way) and wait for the thread: draws no build
        will take (``drop_early``)."""
        self.cancelled = True
        self.thread.join()


#: how many weights ``_rounded`` draws and rounds at a time (512 KiB of float64: in cache)
_CHUNK = 1 << 16


def _rounded(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """int8 weights of ``shape``: normal draws of ``WEIGHT_STD`` rounded and clipped to
    +-127, ``_CHUNK`` at a time through one float64 buffer into the int8 array (ResNet-18's
    11.7 M draws: no float64 array of a layer's weights, its pages and three passes over it).
    The same values as ``rint(clip(rng.normal(0, WEIGHT_STD, shape)))``: the generator's
    normal draws are ``0 + WEIGHT_STD * z`` of its standard normal draws, one after another
    in the same order however many are asked at once; the clip before the rounding keeps
    what rounding then clipping keeps (both bounds are integers), and it puts every value in
    int8's range before the cast."""
    out = np.empty(shape, np.int8)
    flat = out.reshape(-1)
    buf = np.empty(min(_CHUNK, flat.size))
    for a in range(0, flat.size, _CHUNK):
        z = buf[:min(_CHUNK, flat.size - a)]
        rng.standard_normal(out=z)
        z *= WEIGHT_STD
        np.clip(z, -127, 127, out=z)
        np.rint(z, out=flat[a:a + z.size], casting="unsafe")
    return out


class _Init:
    """Seeded weights and biases (drawn ahead by ``_Draws`` when given its plan)."""

    def __init__(self, b: GraphBuilder, rng: np.random.Generator,
                 draws: _Draws | None = None) -> None:
        self.b, self.rng, self.draws = b, rng, draws

    def scale(self, s: float) -> float:
        """A weight scale: ``s``, or in a shift-only graph the nearest power of two."""
        return 2.0 ** round(math.log2(s)) if self.b.requant == "shift" else s

    def weights(self, shape: tuple[int, ...]) -> np.ndarray:
        """int8 weights of ``shape`` (``_rounded``)."""
        if self.draws is not None:
            return self.draws.take("weights", shape)
        return _rounded(self.rng, shape)

    def bias_draws(self, n: int) -> np.ndarray:
        """``n`` real-valued bias draws."""
        if self.draws is not None:
            return self.draws.take("bias", (n,))
        return self.rng.normal(0, BIAS_STD, n)

    def conv(self, name: str, oc: int, ic: int, k: int, x: Value) -> tuple[Value, Value]:
        fan_in = ic * k * k
        w = self.weights((oc, ic, k, k))
        sw = self.scale(math.sqrt(2.0 / fan_in) / WEIGHT_STD)
        assert x.type.scale is not None
        bias_real = self.bias_draws(oc)
        bias = np.rint(bias_real / (x.type.scale * sw)).astype(np.int64)
        bias = np.clip(bias, -(1 << 20), 1 << 20).astype(np.int32)
        return (self.b.const(f"{name}_w", w, sw),
                self.b.const(f"{name}_b", bias))

    def dense(self, name: str, m: int, k: int, x: Value) -> tuple[Value, Value]:
        w = self.weights((m, k))
        sw = self.scale(math.sqrt(1.0 / k) / WEIGHT_STD)
        assert x.type.scale is not None
        bias = np.rint(self.bias_draws(m) / (x.type.scale * sw)).astype(np.int32)
        return self.b.const(f"{name}_w", w, sw), self.b.const(f"{name}_b", bias)


def _blocks(width: int) -> Iterator[tuple[str, int, int]]:
    """ResNet-18's basic blocks in order: name, output channels, stride."""
    for stage in range(4):
        for blk in range(2):
            yield f"layer{stage + 1}_{blk}", width << stage, 2 if stage > 0 and blk == 0 else 1


def _has_shortcut_conv(ic: int, oc: int, stride: int) -> bool:
    """Whether a block's shortcut is a convolution (it changes the shape) or the identity."""
    return stride != 1 or ic != oc


def _weight_shapes(channels: int, width: int, classes: int) -> list[tuple[int, ...]]:
    """The shapes of ``resnet18``'s weights in the order it draws them (each drawn just before
    its bias): what ``_Draws`` draws ahead."""
    shapes: list[tuple[int, ...]] = [(width, channels, STEM_KERNEL, STEM_KERNEL)]
    ic = width
    for _, oc, stride in _blocks(width):
        if _has_shortcut_conv(ic, oc, stride):
            shapes.append((oc, ic, SHORTCUT_KERNEL, SHORTCUT_KERNEL))
        shapes += [(oc, ic, BLOCK_KERNEL, BLOCK_KERNEL), (oc, oc, BLOCK_KERNEL, BLOCK_KERNEL)]
        ic = oc
    return [*shapes, (classes, ic)]


def _conv_q(b: GraphBuilder, init: _Init, name: str, x: Value, oc: int, k: int, stride: int,
            pad: int, relu: bool) -> Value:
    w, bias = init.conv(name, oc, x.type.shape[1], k, x)
    acc = b.conv2d(x, w, bias, stride, pad, name=name)
    q = b.requantize(acc, name=f"{name}_q")
    return b.relu(q, name=f"{name}_relu") if relu else q


def _block(b: GraphBuilder, init: _Init, name: str, x: Value, oc: int, stride: int) -> Value:
    shortcut = x
    if _has_shortcut_conv(x.type.shape[1], oc, stride):
        shortcut = _conv_q(b, init, f"{name}_down", x, oc, SHORTCUT_KERNEL, stride, 0,
                           relu=False)
    pad = BLOCK_KERNEL // 2
    y = _conv_q(b, init, f"{name}_conv1", x, oc, BLOCK_KERNEL, stride, pad, relu=True)
    y = _conv_q(b, init, f"{name}_conv2", y, oc, BLOCK_KERNEL, 1, pad, relu=False)
    s = b.add(y, shortcut, name=f"{name}_add")
    return b.relu(s, name=f"{name}_relu")


#: weight draws started before their build (``draw_early``), by what fixes them: the seed and
#: the plan (``_weight_shapes``); the build of that network takes them (``_draws_for``)
_EARLY: dict[tuple[int, tuple[tuple[int, ...], ...]], _Draws] = {}


def draw_early(seed: int = 0, width: int = 64, classes: int = 1000) -> None:
    """Start drawing the weights of ``resnet18(seed, width=width, classes=classes)`` (any
    batch, image and requantization: they draw the same weights) now, in ``_Draws``'s
    thread: ``vta run`` calls it as soon as its command line is read when it will build the
    model, so that the draws (the graph phase's longest path) use the core left idle while
    the command's modules are imported. The next such build takes them: the same generator,
    seeded alike and consumed in the same order, so the same values."""
    plan = _weight_shapes(_CHANNELS, width, classes)
    key = (seed, tuple(plan))
    if key not in _EARLY:
        _EARLY[key] = _Draws(np.random.default_rng(seed), plan)


def drop_early() -> None:
    """Stop and forget the draws ``draw_early`` started that no build took (a run that ended
    before its build): no thread is left drawing after the command."""
    while _EARLY:
        _EARLY.popitem()[1].cancel()


def _draws_for(seed: int, rng: np.random.Generator, plan: list[tuple[int, ...]]) -> _Draws:
    """The draws of ``plan`` from ``seed``: those ``draw_early`` started, else started now
    from ``rng`` (seeded with ``seed``, nothing drawn yet)."""
    early = _EARLY.pop((seed, tuple(plan)), None)
    return early if early is not None else _Draws(rng, plan)


def resnet18(seed: int = 0, batch: int = 1, image: int = 224, width: int = 64,
             classes: int = 1000, requant: str = "shift", draw_ahead: bool = True) -> Graph:
    """Quantized ResNet-18 (module docstring); weights, biases and the calibration image
    from ``seed``; ``requant`` ``"shift"`` (every requantization a shift: VTA's ALU) or
    ``"fixed"`` (fixed-point multipliers: ALU MUL). ``draw_ahead``: the weights drawn in a
    thread beside the calibration (``_Draws``; False: each when the build asks, in this
    thread alone); the same graph either way."""
    for k, v in (("batch", batch), ("image", image), ("width", width), ("classes", classes)):
        if not isinstance(v, int) or v < 1:
            raise GraphError(f"resnet18: {k} must be a positive integer, got {v!r}")
    if image < 32:
        raise GraphError(f"resnet18: image must be at least 32 pixels (five stride-2 steps), "
                         f"got {image}")
    shape = (batch, _CHANNELS, image, image)
    name = "resnet18" if requant == "shift" else f"resnet18_{requant}"
    rng = np.random.default_rng(seed)
    # the weights drawn ahead in a thread (from now on, or since ``draw_early``), while the
    # calibration image is made and the layers before them are calibrated
    draws = _draws_for(seed, rng, _weight_shapes(shape[1], width, classes)) if draw_ahead \
        else None
    try:
        b = GraphBuilder(name, calibrate={"image": random_image(seed + 1, shape)},
                         requant=requant)
        init = _Init(b, rng, draws)
        x = b.input("image", shape, IMAGE_SCALE)
        y = _conv_q(b, init, "conv1", x, width, STEM_KERNEL, 2, STEM_KERNEL // 2, relu=True)
        y = b.max_pool2d(y, 3, 2, 1, name="maxpool")
        for block, oc, stride in _blocks(width):
            y = _block(b, init, block, y, oc, stride)
        y = b.global_avg_pool(y, name="avgpool")
        w, bias = init.dense("fc", classes, y.type.shape[1], y)
        logits = b.requantize(b.dense(y, w, bias, name="fc"), name="logits")
    finally:
        if draws is not None:
            draws.close()
    return b.build([logits])


def resnet18_fixed(seed: int = 0, batch: int = 1, image: int = 224, width: int = 64,
                   classes: int = 1000) -> Graph:
    """``resnet18`` requantized by fixed-point multipliers (``requant="fixed"``): needs ALU
    MUL, so it runs on a config that has it (``hwconfigs/pynq_mul.yaml``), not on VTA's."""
    return resnet18(seed, batch, image, width, classes, requant="fixed")


#: networks ``vta run`` builds by name
MODELS = {"resnet18": resnet18, "resnet18_fixed": resnet18_fixed}

#: the networks ``vta run NAME`` builds as float ONNX models and quantizes with ONNX Runtime,
#: by name: ``vta.graph.onnx_ort.ONNX_NETWORKS`` defines each under these names (a test holds
#: the two equal); named here so that the command line knows them without loading ONNX's side
ONNX_MODELS = ("mobilenet_v2", "mobilenet_v2_32", "bert_tiny", "bert_tiny_qop")
#: the per-layer network (``vta.compiler.ops.workloads.NETWORKS``) of each model's convolutions
LAYERS_OF = {"resnet18": "resnet18", "resnet18_fixed": "resnet18"}
