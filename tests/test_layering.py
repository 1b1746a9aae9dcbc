"""The package layering (docs/architecture.md): every import in vta/ runs one way.

Each module belongs to a layer by its package; a layer may import itself and the layers listed
for it, nothing above or beside. Imports under ``if TYPE_CHECKING:`` are annotations only (no
import at run time) and are exempt. No module imports another vta module inside a function
(that is how circles hide); the command line loads a command's module by name instead
(``vta.cli.main``). A fixture tree checks that the check catches both.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: layer -> the package prefixes in it (the longest prefix decides)
LAYER_OF: dict[str, str] = {
    "vta.errors": "base", "vta.version": "base", "vta.dtypes": "base", "vta.words": "base",
    "vta.float_scale": "base", "vta._dataclass_code": "base", "vta._collector": "base",
    "vta.resources": "resources",
    "vta.config": "config",
    "vta.isa": "isa",
    "vta.sim": "sim",
    "vta.compiler.ir": "ir",
    "vta.compiler.ops": "ops",
    "vta.compiler.tc": "tc",
    "vta.compiler.accel": "accel",
    "vta.intrinsics": "intrinsics",
    "vta.gpu": "gpu",
    "vta.graph": "graph",
    "vta.run": "run",
    "vta.testing": "testing",
    "vta.tune": "tune",
    "vta.cli": "cli",
    "vta.compiler": "api",
    "vta": "api",
}

_BELOW_IR = {"base", "resources", "config"}
#: layer -> the layers it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "base": set(),
    "resources": {"base"},
    "config": {"base", "resources"},
    "isa": _BELOW_IR,
    "sim": _BELOW_IR | {"isa"},
    "ir": _BELOW_IR,
    "ops": _BELOW_IR | {"ir"},
    "tc": _BELOW_IR | {"ir"},
    "accel": _BELOW_IR | {"isa", "ir", "ops", "tc"},
    "intrinsics": _BELOW_IR | {"isa", "sim", "ir", "ops", "accel"},
    "gpu": _BELOW_IR | {"ir", "ops", "tc"},
    "graph": _BELOW_IR | {"isa", "ir", "ops", "accel", "gpu"},
    "run": _BELOW_IR | {"isa", "sim", "ir", "ops", "tc", "accel", "intrinsics", "gpu", "graph"},
    "testing": _BELOW_IR | {"isa", "sim", "ir", "ops", "tc", "accel", "gpu", "graph", "run"},
    "tune": _BELOW_IR | {"isa", "sim", "ir", "ops", "tc", "accel", "gpu", "graph", "run"},
    "cli": _BELOW_IR | {"isa", "sim", "ir", "ops", "tc", "accel", "intrinsics", "gpu", "graph",
                        "run", "tune"},
    "api": set(LAYER_OF.values()),
}


def layer_of(module: str) -> str:
    best = max((p for p in LAYER_OF if module == p or module.startswith(p + ".")), key=len)
    return LAYER_OF[best]


def module_of(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_only(tree: ast.Module) -> set[int]:
    """Line numbers of imports under ``if TYPE_CHECKING:``."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    lines.add(sub.lineno)
    return lines


def _in_functions(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines |= {sub.lineno for sub in ast.walk(node)
                      if isinstance(sub, (ast.Import, ast.ImportFrom))}
    return lines


def _targets(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    # ``from vta.compiler.ir import expr`` imports vta.compiler.ir.expr
    return [f"{base}.{a.name}" for a in node.names]


def violations(root: Path) -> list[str]:
    """Every import in the package under ``root`` (a folder holding ``vta/``) that breaks the
    layering or hides in a function, as ``file:line: what``."""
    out = []
    for path in sorted((root / "vta").rglob("*.py")):
        me = module_of(path, root)
        mine = layer_of(me)
        tree = ast.parse(path.read_text())
        exempt, hidden = _type_only(tree), _in_functions(tree)
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in exempt:
                continue
            if isinstance(node, ast.ImportFrom) and node.level:
                out.append(f"{path.relative_to(root)}:{node.lineno}: a relative import")
                continue
            for target in _targets(node):
                if target != "vta" and not target.startswith("vta."):
                    continue
                if node.lineno in hidden:
                    out.append(f"{path.relative_to(root)}:{node.lineno}: imports {target} "
                               f"inside a function")
                    continue
                theirs = layer_of(target)
                if theirs != mine and theirs not in ALLOWED[mine]:
                    out.append(f"{path.relative_to(root)}:{node.lineno}: {me} ({mine}) "
                               f"imports {target} ({theirs})")
    return out


def test_imports_run_one_way() -> None:
    assert violations(ROOT) == []


def test_every_layer_is_known() -> None:
    assert set(ALLOWED) == set(LAYER_OF.values())
    for layer, below in ALLOWED.items():
        assert below <= set(ALLOWED), layer


def test_argparse_only_in_the_cli() -> None:
    users = [str(p.relative_to(ROOT)) for p in (ROOT / "vta").rglob("*.py")
             if "argparse" in {n.name for node in ast.walk(ast.parse(p.read_text()))
                               if isinstance(node, ast.Import) for n in node.names}
             | {node.module for node in ast.walk(ast.parse(p.read_text()))
                if isinstance(node, ast.ImportFrom)}]
    assert users and all(u.startswith("vta/cli/") for u in users), users


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "vta/__init__.py": "",
        "vta/compiler/__init__.py": "",
        "vta/compiler/ir/__init__.py": "",
        "vta/compiler/ir/expr.py": "from vta.run.layer import run_layer\n",
        "vta/run/__init__.py": "",
        "vta/run/layer.py": "from vta.compiler.ir import expr\n",
        "vta/gpu/cuda.py": "from vta.compiler.accel import driver\n",
    })
    assert violations(root) == [
        "vta/compiler/ir/expr.py:1: vta.compiler.ir.expr (ir) imports "
        "vta.run.layer.run_layer (run)",
        "vta/gpu/cuda.py:1: vta.gpu.cuda (gpu) imports vta.compiler.accel.driver (accel)",
    ]


def test_the_check_catches_a_hidden_import_and_spares_annotations(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "vta/sim/machine.py": ("from typing import TYPE_CHECKING\n"
                               "if TYPE_CHECKING:\n"
                               "    from vta.run.layer import LayerRun\n"
                               "def f():\n"
                               "    from vta.isa import Program\n"),
    })
    assert violations(root) == [
        "vta/sim/machine.py:5: imports vta.isa.Program inside a function"]

