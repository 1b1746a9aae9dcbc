"""vta's dataclass methods compiled once, their bytecode kept where Python keeps vta's.

Python's ``dataclasses`` (3.10 to 3.12) writes each method it generates (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, a frozen class's ``__setattr__`` and ``__delattr__``)
as source text and compiles it each time a class is decorated (``dataclasses._create_fn``).
vta defines about two hundred dataclasses; compiling their ~900 methods was about 40% of the
CPU that importing what ``vta run`` uses took (0.08 s of 0.25 s at load 3), on every start,
since Python's bytecode cache keeps a module's own code, not code made while it runs.

``install()`` (run when this module is imported, which ``vta/__init__.py`` does first, before
any vta dataclass exists) wraps ``_create_fn`` so that, for the classes of vta's own modules
only, the code of each method's source text is read from a file beside vta's bytecode
(``code_path``: in ``__pycache__``, or under ``PYTHONPYCACHEPREFIX``, where
``importlib.util.cache_from_source`` puts it), keyed by the exact text and the interpreter's
bytecode magic number. A text not there is compiled as ``dataclasses`` compiles it (no future
features inherited) and the file is rewritten at exit with it (``save``; not where Python
writes no bytecode, ``sys.dont_write_bytecode``; atomically: a reader sees the old file or
the new; forked workers end without exit handlers and write nothing). The function is then
made from the code exactly as ``_create_fn`` makes it from the text: the classes are the
same. A file that cannot be read, or holds anything else, counts as empty. Where
``_create_fn`` is not the one reproduced here (Python 3.13 builds the methods otherwise),
nothing is installed: the classes are made as before, only slower.

vta's other generated source goes through the same table (``code_of``). This module imports
nothing of vta's (the base layer, docs/architecture.md): the ISA layer may use it.
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib.util
import inspect
import marshal
import os
import sys
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from types import CodeType
from typing import Any

__all__ = ["install", "code_path", "code_of", "save", "STATS", "MAX_ENTRIES"]

#: the parameters of the ``dataclasses._create_fn`` this module reproduces (3.10 to 3.12)
_KNOWN_PARAMETERS = ("name", "args", "body", "globals", "locals", "return_type")
#: at most this many texts are kept in the file (those used by the process that writes it
#: first): vta's own need about a thousand; texts of classes since changed are dropped
MAX_ENTRIES = 4096
#: this process's use: texts read from the file, texts compiled here
STATS = {"hits": 0, "compiled": 0}

_codes: dict[str, CodeType] = {}
_used: dict[str, CodeType] = {}
_fresh = False
_original: Callable[..., Any] | None = None


def code_path() -> Path | None:
    """The file of compiled dataclass methods: beside this module's bytecode, tagged with the
    interpreter (``cpython-311``); None where Python keeps no bytecode cache."""
    try:
        pyc = Path(importlib.util.cache_from_source(__file__))
    except (NotImplementedError, ValueError):  # no cache_tag: no bytecode cache
        return None
    return pyc.with_name(f"dataclass_methods.{sys.implementation.cache_tag}.marshal")


def _load(path: Path | None) -> dict[str, CodeType]:
    """The file's texts and their code; empty when it is missing, unreadable, of another
    interpreter's bytecode or not such a table."""
    if path is None:
        return {}
    try:
        magic, table = marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if magic != importlib.util.MAGIC_NUMBER or not isinstance(table, dict) or not all(
            isinstance(k, str) and isinstance(v, CodeType) for k, v in table.items()):
        return {}
    return table


def _code(txt: str) -> CodeType:
    """The code of ``txt``: from the file, else compiled as ``exec`` in ``dataclasses``
    compiles it (its module has no future imports: none inherited here)."""
    code = _codes.get(txt)
    if code is None:
        code = compile(txt, "<string>", "exec", dont_inherit=True)
        _codes[txt] = code
        global _fresh
        _fresh = True
        STATS["compiled"] += 1
    else:
        STATS["hits"] += 1
    _used[txt] = code
    return code


def code_of(text: str) -> CodeType:
    """The code of ``text``, source vta generates while it runs other than a dataclass's
    methods (the ISA's range checks, ``vta.isa.encoding``), compiled as ``exec`` with no
    future features inherited: read from and kept in the same file as the methods, so a
    process after the first compiles none of it either."""
    return _code(text)


def _create_fn(name: str, args: list[str], body: list[str], *,
               globals: dict[str, Any] | None = None, locals: dict[str, Any] | None = None,
               return_type: Any = dataclasses.MISSING) -> Any:
    """``dataclasses._create_fn`` (3.10 to 3.12, line for line) with the text's code from
    ``_code`` for a vta module's class; another module's class goes to the original."""
    assert _original is not None
    if globals is None or not str(globals.get("__name__", "")).startswith("vta."):
        return _original(name, args, body, globals=globals, locals=locals,
                         return_type=return_type)
    if locals is None:
        locals = {}
    return_annotation = ""
    if return_type is not dataclasses.MISSING:
        locals["_return_type"] = return_type
        return_annotation = "->_return_type"
    text_args = ",".join(args)
    text_body = "\n".join(f"  {b}" for b in body)
    txt = f" def {name}({text_args}){return_annotation}:\n{text_body}"
    local_vars = ", ".join(locals.keys())
    txt = f"def __create_fn__({local_vars}):\n{txt}\n return {name}"
    ns: dict[str, Any] = {}
    exec(_code(txt), globals, ns)
    return ns["__create_fn__"](**locals)


def _known(fn: Any) -> bool:
    """Whether ``fn`` is the ``_create_fn`` reproduced here (its parameters, Python < 3.13)."""
    try:
        params = tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return False
    return sys.version_info < (3, 13) and params == _KNOWN_PARAMETERS


def install() -> bool:
    """Wrap ``dataclasses._create_fn`` (once; module docstring); whether it is wrapped."""
    global _original, _codes
    current = getattr(dataclasses, "_create_fn", None)
    if current is _create_fn:
        return True
    if not _known(current):
        return False
    _codes = _load(code_path())
    _original = current
    dataclasses._create_fn = _create_fn  # type: ignore[attr-defined]
    atexit.register(save)
    return True


def save() -> None:
    """Rewrite the file when this process compiled a text it lacked: the texts this process
    used first, then the file's others, ``MAX_ENTRIES`` in all (not where Python writes no
    bytecode; a file that cannot be written is left as it is)."""
    global _fresh
    path = code_path()
    if not _fresh or path is None or sys.dont_write_bytecode:
        return
    table = dict(_used)
    for txt, code in _load(path).items():
        if len(table) >= MAX_ENTRIES:
            break
        table.setdefault(txt, code)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(marshal.dumps((importlib.util.MAGIC_NUMBER, table)))
        os.replace(tmp, path)
        _fresh = False
    except OSError:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)


install()
