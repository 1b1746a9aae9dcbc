"""vta as a user installs it: a wheel built from this checkout, installed in a fresh virtual
environment, run from a directory outside the checkout. The shipped hardware configs are
package data (``vta run conv2d`` needs no ``hwconfigs/`` folder; ``--hw pynq`` names one) and
nothing reads the working directory.

The fresh environment gets vta from the wheel alone; its dependencies (numpy, islpy, ...)
come from this environment's site-packages, added as a plain path, so the test needs no
network and the checkout's editable install (a ``.pth`` hook there) is not loaded."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(argv: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A wheel freshly built from this checkout, and the build's log (``-v``: the build
    backend's own output, its warnings included)."""
    tmp = tmp_path_factory.mktemp("wheel")
    build = _run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                  "-v", "-w", str(tmp / "dist"), str(ROOT)], tmp)
    assert build.returncode == 0, build.stderr
    [wheel] = (tmp / "dist").glob("vta-*.whl")
    return wheel, build.stdout + build.stderr


@pytest.fixture(scope="module")
def installed(built: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin/ folder of a fresh venv holding vta from the freshly built wheel."""
    tmp = tmp_path_factory.mktemp("venv")
    wheel = built[0]
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp)
    assert made.returncode == 0, made.stderr
    py = venv / "bin" / "python"
    site = _run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                tmp).stdout.strip()
    # the dependencies: this environment's site-packages, as a path (its .pth files unread)
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    inst = _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps",
                 "--no-index", "-q", str(wheel)], tmp)
    if inst.returncode != 0 and "--python" in inst.stderr:  # an old pip: install by target
        inst = _run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                     "--target", site, str(wheel)], tmp)
        shutil.copy(Path(site) / "bin" / "vta", venv / "bin" / "vta")
    assert inst.returncode == 0, inst.stderr
    return venv / "bin"


def test_the_build_uses_no_deprecated_metadata(built: tuple[Path, str]) -> None:
    """pyproject's metadata is in the form setuptools keeps building: the license an SPDX
    expression (PEP 639), not the ``{ text = ... }`` table setuptools 77+ deprecates (its
    warning says builds stop being supported after 2027-02-18)."""
    wheel, log = built
    assert "SetuptoolsDeprecationWarning" not in log, log[-4000:]
    with zipfile.ZipFile(wheel) as z:
        [meta] = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        lines = z.read(meta).decode().splitlines()
    assert "License-Expression: Apache-2.0" in lines


def test_the_wheel_carries_the_configs_and_no_checkout_is_read(installed: Path,
                                                              tmp_path: Path) -> None:
    where = _run([str(installed / "python"), "-c",
                  "import vta, vta.config as c; print(vta.__file__); "
                  "print(' '.join(c.shipped_configs()))"], tmp_path)
    assert where.returncode == 0, where.stderr
    path, names = where.stdout.splitlines()
    assert not Path(path).resolve().is_relative_to(ROOT), path
    assert {"pynq", "ultra96", "zcu104", "de10nano", "research_32x32"} <= set(names.split())


def test_vta_run_from_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    r = _run([str(installed / "vta"), "run", "conv2d"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "574,906" in r.stdout  # C2 on pynq: the same cycles as from the checkout
    assert r.stdout.rstrip().endswith("PASS: bit-exact against numpy (0.03% of outputs saturated)")
    r = _run([str(installed / "vta"), "run", "--hw", "ultra96", "matmul", "16", "16", "16"],
             tmp_path)
    assert r.returncode == 0 and "on ultra96" in r.stdout, r.stderr
    r = _run([str(installed / "vta"), "run", "--hw", "pynk", "conv2d"], tmp_path)
    assert r.returncode == 2 and "shipped: " in r.stderr and "pynq" in r.stderr


def test_vta_run_tc_from_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    shutil.copy(ROOT / "examples" / "tc" / "matmul.tc", tmp_path / "mm.tc")
    r = _run([str(installed / "vta"), "run", "--tc", "mm.tc", "--size", "M=16,N=16,K=32"],
             tmp_path)
    assert r.returncode == 0, r.stderr
    assert "PASS: bit-exact against the TC interpreter" in r.stdout
