"""Named workloads: ResNet-18's convolutions (as VTA benchmarked them), matmul and dense.

``resolve`` builds one from a name, positional sizes and shape options (the ``vta run`` flags
of the same names) and refuses, naming it, anything that does not apply to the workload: sizes
given to a convolution, a convolution's shape option given to a matmul, a stride beyond the
padded input. A workload carries its calibrated epilogue (``Workload.epilogue``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue, calibrated_epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.errors import ShapeError, UnknownWorkload

__all__ = ["CONV_OPTIONS", "LAYER_SHAPE_OPTIONS", "NETWORKS", "RESNET18", "RESNET18_REPEATS",
           "Network", "UnknownWorkload",
           "WORKLOAD_NAMES", "Workload", "resolve", "resolve_network"]


#: ResNet-18 convolutions: H=W (input), IC, OC, kernel, pad, stride (VTA_REFERENCE.md).
RESNET18: dict[str, tuple[int, int, int, int, int, int]] = {
    "C1": (224, 3, 64, 7, 3, 2),
    "C2": (56, 64, 64, 3, 1, 1),
    "C3": (56, 64, 128, 3, 1, 2),
    "C4": (56, 64, 128, 1, 0, 2),
    "C5": (28, 128, 128, 3, 1, 1),
    "C6": (28, 128, 256, 3, 1, 2),
    "C7": (28, 128, 256, 1, 0, 2),
    "C8": (14, 256, 256, 3, 1, 1),
    "C9": (14, 256, 512, 3, 1, 2),
    "C10": (14, 256, 512, 1, 0, 2),
    "C11": (7, 512, 512, 3, 1, 1),
}

#: How often each of those shapes occurs among ResNet-18's 20 convolutions (stem; four 3x3 convs
#: at 56x56; per later stage a strided 3x3, its 1x1 strided shortcut and three 3x3 convs).
RESNET18_REPEATS: dict[str, int] = {"C1": 1, "C2": 4, "C3": 1, "C4": 1, "C5": 3, "C6": 1,
                                    "C7": 1, "C8": 3, "C9": 1, "C10": 1, "C11": 3}

WORKLOAD_NAMES = ("conv2d", *(f"resnet18:{k}" for k in RESNET18), "matmul", "dense", "resnet18")


@dataclass(frozen=True)
class Workload:
    name: str
    spec: Conv2dSpec | MatmulSpec

    @property
    def kind(self) -> str:
        return "conv2d" if isinstance(self.spec, Conv2dSpec) else "matmul"

    @property
    def reduction(self) -> int:
        """Products summed into each output: ``IC*KH*KW`` (conv2d) or ``K`` (matmul)."""
        s = self.spec
        return s.ic * s.kh * s.kw if isinstance(s, Conv2dSpec) else s.k

    @property
    def epilogue(self) -> Epilogue:
        """The layer's calibrated requantizing epilogue (``ops.epilogue``)."""
        return calibrated_epilogue(self.reduction)


@dataclass(frozen=True)
class Network:
    """A whole network as its distinct layers, each with how often it occurs."""

    name: str
    layers: tuple[tuple[Workload, int], ...]

    @property
    def ops(self) -> int:
        return sum(w.spec.ops * n for w, n in self.layers)


def _resnet18(batch: int = 1, layers: list[str] | None = None) -> Network:
    names = layers or list(RESNET18)
    for k in names:
        if k not in RESNET18:
            raise UnknownWorkload(f"unknown ResNet-18 layer {k!r}; expected one of "
                                  f"{', '.join(RESNET18)}")
    return Network("resnet18", tuple((Workload(f"resnet18:{k}", resnet18_layer(k, batch)),
                                      RESNET18_REPEATS[k]) for k in names))


#: Whole networks ``vta run`` knows (``resolve_network``).
NETWORKS = {"resnet18": _resnet18}


def resolve_network(name: str, *, batch: int | None = None, layers: list[str] | None = None,
                    sizes: list[int] | None = None, **over: int | None) -> Network | None:
    """The network called ``name`` (optionally only ``layers`` of it), or None when ``name``
    is not a network. A network takes only ``batch``: positional ``sizes`` or another shape
    option are an error naming them."""
    make = NETWORKS.get(name)
    if make is None:
        return None
    if sizes:
        raise ShapeError(f"{name} takes no sizes, got {' '.join(map(str, sizes))} (it is a "
                         f"whole network; --layers picks some of its layers)")
    given = sorted(k for k, v in over.items() if v is not None)
    if given:
        raise ShapeError(f"{_opt(given[0])} does not apply to the network {name} (its layers "
                         f"have fixed shapes; only --batch changes them)")
    return make(_positive("batch", batch) if batch is not None else 1, layers)


def resnet18_layer(layer: str, batch: int = 1) -> Conv2dSpec:
    hw_, ic, oc, k, p, s = RESNET18[layer]
    return Conv2dSpec(n=batch, ic=ic, h=hw_, w=hw_, oc=oc, kh=k, kw=k, stride=s, pad=p)


#: The options that change a convolution's shape, as ``vta run`` spells them.
CONV_OPTIONS = ("batch", "height", "width", "in_channels", "out_channels", "kernel", "stride",
                "pad")
#: ... less the batch: the options that shape one layer (a whole network takes a batch too)
LAYER_SHAPE_OPTIONS = tuple(k for k in CONV_OPTIONS if k != "batch")
#: Options that set a dense layer's M, N and K when no sizes are given.
DENSE_OPTIONS = {"batch": 0, "out_channels": 1, "in_channels": 2}


def _opt(key: str) -> str:
    """The command-line spelling of shape option ``key``."""
    return "--" + key.replace("_", "-")


def _positive(key: str, value: int) -> int:
    if value < (0 if key == "pad" else 1):
        raise ShapeError(f"{_opt(key)} must be >= {0 if key == 'pad' else 1}, got {value}")
    return value


def _conv(name: str, layer: str, args: list[int], given: dict[str, int]) -> Workload:
    if args:
        raise ShapeError(f"{name} takes no sizes, got {' '.join(map(str, args))} (change its "
                         f"shape with {', '.join(_opt(k) for k in CONV_OPTIONS)})")
    spec = resnet18_layer(layer)
    spec_field = {"batch": "n", "height": "h", "width": "w", "in_channels": "ic",
                  "out_channels": "oc", "stride": "stride", "pad": "pad"}
    changes = {spec_field[k]: v for k, v in given.items() if k in spec_field}
    if "kernel" in given:
        changes["kh"] = changes["kw"] = given["kernel"]
    if "height" in given and "width" not in given:
        changes["w"] = given["height"]
    spec = replace(spec, **changes) if changes else spec
    extent = min(spec.h, spec.w) + 2 * spec.pad
    if spec.stride > extent:
        raise ShapeError(f"--stride {spec.stride} is larger than the padded input "
                         f"({spec.h}x{spec.w}, pad {spec.pad}): the window could not move")
    if spec == resnet18_layer(layer):
        return Workload(f"resnet18:{layer}", spec)
    return Workload(shape_name(spec), spec)  # a custom shape is not the ResNet-18 layer


def shape_name(spec: Conv2dSpec) -> str:
    """A convolution named by its shape (``conv2d(64x14x14->64,k3,s1,p1)``; ``N=4,`` first
    for a batch): how a layer whose shape was changed from the command line is labelled."""
    k = f"{spec.kh}" if spec.kh == spec.kw else f"{spec.kh}x{spec.kw}"
    batch = f"N={spec.n}," if spec.n != 1 else ""
    return (f"conv2d({batch}{spec.ic}x{spec.h}x{spec.w}->{spec.oc},k{k},s{spec.stride},"
            f"p{spec.pad})")


def _matmul(name: str, args: list[int], given: dict[str, int]) -> Workload:
    if args and len(args) != 3:
        raise ShapeError(f"{name} takes three sizes M N K, got {len(args)}: "
                         f"{' '.join(map(str, args))}")
    allowed = DENSE_OPTIONS if name == "dense" and not args else {}
    for opt in given:
        if opt not in allowed:
            why = ("the sizes M N K set its shape" if name == "matmul" or args else
                   f"dense takes {', '.join(_opt(o) for o in DENSE_OPTIONS)} or sizes M N K")
            raise ShapeError(f"{_opt(opt)} does not apply to {name} ({why})")
    if name == "dense" and not args:  # ResNet-18's classifier: 1 x 512 -> 1000
        m, n, k = (given.get("batch", 1), given.get("out_channels", 1000),
                   given.get("in_channels", 512))
    else:
        m, n, k = args or (128, 128, 128)
    return Workload(name, MatmulSpec(int(m), int(n), int(k)))


def resolve(name: str, args: list[int] | None = None, **over: int | None) -> Workload:
    """A workload by name, with shape overrides (``batch``, ``height``, ``width``,
    ``in_channels``, ``out_channels``, ``kernel``, ``stride``, ``pad``: a convolution's; M N K
    as ``args`` for matmul and dense, or ``batch``/``out_channels``/``in_channels`` for dense).
    An override or size that does not apply to the workload is a ``ShapeError`` naming it."""
    args = list(args or [])
    unknown = sorted(set(over) - set(CONV_OPTIONS))
    if unknown:
        raise ShapeError(f"unknown shape option {unknown[0]!r}; expected one of "
                         f"{', '.join(CONV_OPTIONS)}")
    given: dict[str, int] = {k: _positive(k, v) for k, v in over.items() if v is not None}
    if name == "conv2d":
        return _conv(name, "C2", args, given)
    if name.startswith("resnet18:"):
        layer = name.split(":", 1)[1].upper()
        if layer not in RESNET18:
            raise UnknownWorkload(f"unknown ResNet-18 layer {layer!r}; expected one of "
                                  f"{', '.join(RESNET18)}")
        return _conv(name, layer, args, given)
    if name in ("matmul", "dense"):
        return _matmul(name, args, given)
    if name in NETWORKS:
        raise UnknownWorkload(f"{name} is a network, not one workload (vta run runs it "
                              f"layer by layer: resolve_network)")
    raise UnknownWorkload(f"unknown workload {name!r}; expected one of: "
                          f"{', '.join(WORKLOAD_NAMES)}")
