"""What ``vta run`` of a whole network on the accelerator loads: no module of the GPU back end
(not even its counters' report), nor the executor's modules until a pool starts, the TC
front end, the ONNX importer, the plots, the layer runs or ``rich``'s tables (each is loaded
by the run that needs it), nor simpy (the reference engine), ``importlib.metadata`` (where
no package lists a ``vta.intrinsics`` entry point) or ``numpy.ma`` (reading a compiled
program from its bytes), ``numpy.random`` (a warm run reads its seeded input from the
compile cache); and the ONNX networks' names the command line knows are those
``onnx_ort`` builds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from vta.graph.models import ONNX_MODELS

ROOT = Path(__file__).resolve().parents[2]

#: what the whole graph's run imports (``vta.cli.main`` loads ``vta.cli.run`` for ``run``)
_GRAPH_RUN = ("vta.cli", "vta.cli.run", "vta.cli.cached", "vta.run.graph", "vta.run.report",
              "vta.run.compile_pool", "vta.tune.compile_cache", "vta.graph.models")
#: what it must not load
_NOT_LOADED = ("vta.gpu", "vta.gpu.profile", "concurrent.futures", "vta.gpu.cuda",
               "vta.gpu.emulator", "vta.gpu.lower_gpu", "vta.gpu.runtime",
               "vta.gpu.kernels.conv2d", "vta.graph.gpu_place", "vta.run.gpu_targets",
               "vta.run.graph_gpu", "vta.compiler.tc", "vta.run.tc", "vta.graph.onnx_import",
               "vta.graph.onnx_ort", "vta.run.plot", "vta.run.layer", "vta.run.network",
               "vta.cli.run_tc", "vta.cli.run_layers", "vta.tune.tuner", "multiprocessing",
               "concurrent.futures.process", "rich", "simpy", "importlib.metadata", "email",
               "numpy.ma", "numpy.random")


def test_a_whole_graph_run_loads_only_what_it_uses() -> None:
    """The modules imported and the installed entry points looked for (there are none
    here)."""
    code = (f"import importlib, json, sys\nfor m in {list(_GRAPH_RUN)!r}: "
            f"importlib.import_module(m)\n"
            f"from vta.intrinsics import load_entry_points\nassert load_entry_points() == []\n"
            f"print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    loaded = set(json.loads(out))
    assert [m for m in _NOT_LOADED if m in loaded] == []


def test_reading_a_compiled_kernel_back_loads_no_masked_arrays(tmp_path: Path) -> None:
    """A warm run's compile: every kernel's bytes from the compile cache, its instructions
    decoded (``vta.run.codec``); numpy 2's ``np.unique`` would import ``numpy.ma``."""
    from vta.compiler.accel import driver
    from vta.compiler.ops.workloads import resolve
    from vta.config import HwConfig
    from vta.run.codec import pack_compiled

    hw = HwConfig.load(ROOT / "hwconfigs" / "pynq.yaml")
    c = driver.compile_workload(resolve("resnet18:C11", [], height=7, in_channels=64,
                                        out_channels=64), hw)
    blob = pack_compiled(c, hw)
    assert blob is not None
    (tmp_path / "kernel").write_bytes(blob)
    code = ("import json, sys\nfrom pathlib import Path\nfrom vta.config import HwConfig\n"
            "from vta.run.codec import unpack_compiled\n"
            "hw = HwConfig.load('hwconfigs/pynq.yaml')\n"
            f"c = unpack_compiled(Path({str(tmp_path / 'kernel')!r}).read_bytes(), hw)\n"
            "print(json.dumps([len(c.program.instructions), 'numpy.ma' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out) == [len(c.program.instructions), False]


def test_the_gpu_names_still_come_from_the_targets_module() -> None:
    from vta.run import gpu_targets, targets

    assert targets.CudaEmuTarget is gpu_targets.CudaEmuTarget
    assert targets.CompiledKernel is gpu_targets.CompiledKernel
    assert isinstance(targets.get_target("cuda-emu"), gpu_targets.CudaEmuTarget)


def test_the_command_lines_onnx_names_are_the_networks_onnx_ort_builds() -> None:
    from vta.graph.onnx_ort import ONNX_NETWORKS

    assert ONNX_MODELS == tuple(ONNX_NETWORKS)
