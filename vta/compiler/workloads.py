"""Named workloads: ResNet-18's convolutions (as VTA benchmarked them), matmul and dense."""

from __future__ import annotations

from dataclasses import dataclass, replace

from vta.compiler.ops.conv2d import Conv2dSpec, ShapeError
from vta.compiler.ops.matmul import MatmulSpec
from vta.errors import VtaError

__all__ = ["NETWORKS", "RESNET18", "RESNET18_REPEATS", "Network", "UnknownWorkload",
           "WORKLOAD_NAMES", "Workload", "resolve", "resolve_network"]


class UnknownWorkload(VtaError):
    pass


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


def resolve_network(name: str, *, batch: int | None = None,
                    layers: list[str] | None = None) -> Network | None:
    """The network called ``name`` (optionally only ``layers`` of it), or None when ``name``
    is not a network."""
    make = NETWORKS.get(name)
    return None if make is None else make(batch or 1, layers)


def resnet18_layer(layer: str, batch: int = 1) -> Conv2dSpec:
    hw_, ic, oc, k, p, s = RESNET18[layer]
    return Conv2dSpec(n=batch, ic=ic, h=hw_, w=hw_, oc=oc, kh=k, kw=k, stride=s, pad=p)


def resolve(name: str, args: list[int] | None = None, **over: int | None) -> Workload:
    """A workload by name, with shape overrides (``batch``, ``height``, ``width``,
    ``in_channels``, ``out_channels``, ``kernel``, ``stride``, ``pad``; M N K for matmul)."""
    args = args or []
    given: dict[str, int] = {k: v for k, v in over.items() if v is not None}
    if name == "conv2d":
        name = "resnet18:C2"
    if name.startswith("resnet18:"):
        layer = name.split(":", 1)[1].upper()
        if layer not in RESNET18:
            raise UnknownWorkload(f"unknown ResNet-18 layer {layer!r}; expected one of "
                                  f"{', '.join(RESNET18)}")
        spec = resnet18_layer(layer)
        spec_field = {"batch": "n", "height": "h", "width": "w", "in_channels": "ic",
                      "out_channels": "oc", "stride": "stride", "pad": "pad"}
        changes = {spec_field[k]: v for k, v in given.items() if k in spec_field}
        if "kernel" in given:
            changes["kh"] = changes["kw"] = given["kernel"]
        if "height" in given and "width" not in given:
            changes["w"] = given["height"]
        spec = replace(spec, **changes) if changes else spec
        return Workload(f"resnet18:{layer}", spec)
    if name in ("matmul", "dense"):
        if args and len(args) != 3:
            raise ShapeError(f"{name} takes three sizes M N K, got {len(args)}")
        if name == "dense":  # ResNet-18's classifier: 1 x 512 -> 1000
            m, n, k = args or (given.get("batch", 1), given.get("out_channels", 1000),
                               given.get("in_channels", 512))
        else:
            m, n, k = args or (128, 128, 128)
        return Workload(name, MatmulSpec(int(m), int(n), int(k)))
    raise UnknownWorkload(f"unknown workload {name!r}; expected one of: "
                          f"{', '.join(WORKLOAD_NAMES)}")
