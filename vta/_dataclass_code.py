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

The ``__init__`` of a vta class that is frozen and slotted fills each field through its slot's
own setter (the member descriptor's ``__set__``, bound in the function's closure once the class
exists: ``_process_class``) instead of ``object.__setattr__(self, name, value)``, which looks
the descriptor up by name at every call: the same slots set to the same values, about 40 %
less time per construction (vta's expression nodes, instructions, micro-ops, DMA timings and
decoded instructions are made by the hundred thousand per compile).

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import CodeType, FunctionType, MemberDescriptorType
from typing import Any

__all__ = ["install", "code_path", "code_of", "save", "forked", "STATS", "MAX_ENTRIES"]

#: the parameters of the ``dataclasses._create_fn`` this module reproduces (3.10 to 3.12)
_KNOWN_PARAMETERS = ("name", "args", "body", "globals", "locals", "return_type")
#: the parameters of the ``dataclasses._process_class`` wrapped to learn whether a class is
#: frozen and slotted (3.11 and 3.12)
_PROCESS_PARAMETERS = ("cls", "init", "repr", "eq", "order", "unsafe_hash", "frozen",
                       "match_args", "kw_only", "slots", "weakref_slot")
#: how a frozen class's ``__init__`` line setting a field begins
#: (``dataclasses._field_assign``: ``__dataclass_builtins_object__.__setattr__(self,'name',value)``)
_FROZEN_ASSIGN = "__dataclass_builtins_object__.__setattr__("
#: the closure variable of a rewritten ``__init__`` that holds a field's setter: the field's
#: name between these
_SETTER = ("__dataclass_set_", "__")
#: at most this many texts are kept in the file (those used by the process that writes it
#: first): vta's own need about a thousand; texts of classes since changed are dropped
MAX_ENTRIES = 4096
#: this process's use: texts read from the file, texts compiled here
STATS = {"hits": 0, "compiled": 0}

_codes: dict[str, CodeType] = {}
_used: dict[str, CodeType] = {}
_fresh = False
_original: Callable[..., Any] | None = None
_original_process: Callable[..., Any] | None = None
#: per class being made (innermost last): whether its ``__init__`` fills slots by setters
_slotted: list[bool] = []


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


def _code(txt: str, filename: str = "<string>") -> CodeType:
    """The code of ``txt``: from the file, else compiled as ``exec`` in ``dataclasses``
    compiles it (its module has no future imports: none inherited here), under ``filename``
    (what tracebacks and profiles name its functions' file)."""
    code = _codes.get(txt)
    if code is None:
        code = compile(txt, filename, "exec", dont_inherit=True)
        _codes[txt] = code
        global _fresh
        _fresh = True
        STATS["compiled"] += 1
    else:
        STATS["hits"] += 1
    _used[txt] = code
    return code


def code_of(text: str, filename: str = "<string>") -> CodeType:
    """The code of ``text``, source vta generates while it runs other than a dataclass's
    methods (the ISA's range checks, ``vta.isa.encoding``; the IR's rebuilders, copiers and
    integer evaluators, ``vta.compiler.ir``), compiled as ``exec`` with no future features
    inherited, under ``filename`` where it is compiled here: read from and kept in the same
    file as the methods, so a process after the first compiles none of it either."""
    return _code(text, filename)


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
    if name == "__init__" and _slotted and _slotted[-1]:
        body = _by_setters(body, locals)
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


def _by_setters(body: list[str], locals: dict[str, Any]) -> list[str]:
    """A frozen class's ``__init__`` lines with each field set through a closure variable
    (``_SETTER``) instead of ``object.__setattr__``, filled once the class exists
    (``_bind_setters``: until then the class has no instances). Other lines
    (``__post_init__``) are kept."""
    out = []
    for line in body:
        parts = _assignment(line)
        if parts is None:
            out.append(line)
            continue
        self_name, field, value = parts
        setter = f"{_SETTER[0]}{field}{_SETTER[1]}"
        locals[setter] = None
        out.append(f"{setter}({self_name},{value})")
    return out


def _assignment(line: str) -> tuple[str, str, str] | None:
    """``(self name, field, value)`` of an ``__init__`` line
    ``__dataclass_builtins_object__.__setattr__(self,'field',value)``, else None."""
    if not line.startswith(_FROZEN_ASSIGN) or line[-1] != ")":
        return None
    self_name, sep, rest = line[len(_FROZEN_ASSIGN):-1].partition(",'")
    field, sep2, value = rest.partition("',")
    if not (sep and sep2 and self_name.isidentifier() and field.isidentifier()):
        return None
    return self_name, field, value


def _setter_field(var: str) -> str | None:
    """The field whose setter closure variable ``var`` is (``_SETTER``), else None."""
    head, tail = _SETTER
    if var.startswith(head) and var.endswith(tail) and len(var) > len(head) + len(tail):
        return var[len(head):-len(tail)]
    return None


def _setattr_of(name: str) -> Callable[[Any, Any], None]:
    """``object.__setattr__(obj, name, value)`` as a function of ``(obj, value)``: what a
    rewritten ``__init__`` line does where no slot's setter replaces it."""
    def set_field(obj: Any, value: Any) -> None:
        object.__setattr__(obj, name, value)
    return set_field


def _bind_setters(cls: type) -> None:
    """Fill the setter variables of ``cls``'s rewritten ``__init__``: the ``__set__`` of the
    member descriptor ``object.__setattr__`` finds for the field (the first along the MRO, as
    the type lookup finds it: a field's slot, its own or a base's), or ``object.__setattr__``
    of the field (``_setattr_of``) where it finds anything else."""
    init = vars(cls).get("__init__")
    if not isinstance(init, FunctionType) or init.__closure__ is None:
        return
    found: dict[str, Any] = {}  # the class's attributes, a base's shadowed by its subclass's
    for k in reversed(cls.__mro__):
        found.update(vars(k))
    for var, cell in zip(init.__code__.co_freevars, init.__closure__, strict=True):
        name = _setter_field(var)
        if name is None:
            continue
        desc = found.get(name)
        cell.cell_contents = (desc.__set__ if type(desc) is MemberDescriptorType
                              else _setattr_of(name))


def _process_class(cls: type, init: bool, repr: bool, eq: bool, order: bool,
                   unsafe_hash: bool, frozen: bool, match_args: bool, kw_only: bool,
                   slots: bool, weakref_slot: bool) -> type:
    """``dataclasses._process_class`` (3.11, 3.12), telling ``_create_fn`` whether the
    class's ``__init__`` is to fill slots by setters (a vta class, frozen and slotted), then
    binding those setters on the class made (``_bind_setters``)."""
    assert _original_process is not None
    _slotted.append(frozen and slots and cls.__module__.startswith("vta."))
    try:
        made: type = _original_process(cls, init, repr, eq, order, unsafe_hash, frozen,
                                       match_args, kw_only, slots, weakref_slot)
    finally:
        bind = _slotted.pop()
    if bind:
        _bind_setters(made)
    return made


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
    _wrap_process_class()
    atexit.register(save)
    return True


def _wrap_process_class() -> None:
    """Wrap ``dataclasses._process_class`` where it is the one ``_process_class`` reproduces
    (its parameters); elsewhere every ``__init__`` is ``dataclasses``' own."""
    global _original_process
    current = getattr(dataclasses, "_process_class", None)
    code = getattr(current, "__code__", None)  # its parameters, without inspect.signature's work
    if code is not None and code.co_varnames[:code.co_argcount] == _PROCESS_PARAMETERS:
        _original_process = current
        dataclasses._process_class = _process_class  # type: ignore[attr-defined]


def save() -> None:
    """Rewrite the file when this process compiled a text it lacked: the texts this process
    used first, then the file's others, ``MAX_ENTRIES`` in all (not where Python writes no
    bytecode; a file that cannot be written is left as it is). The file is read and rewritten
    under a lock (``_locked``): processes ending together (a pool's workers) each add their
    texts instead of the last one dropping what another had just written."""
    global _fresh
    path = code_path()
    if not _fresh or path is None or sys.dont_write_bytecode:
        return
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _locked(path):
            table = dict(_used)
            for txt, code in _load(path).items():
                if len(table) >= MAX_ENTRIES:
                    break
                table.setdefault(txt, code)
            tmp.write_bytes(marshal.dumps((importlib.util.MAGIC_NUMBER, table)))
            os.replace(tmp, path)
        _fresh = False
    except OSError:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``'s lock file (beside it) while the block runs; no lock
    where the platform has none (``fcntl``): the file is still replaced atomically."""
    try:
        import fcntl
    except ImportError:  # (not POSIX)
        yield
        return
    with open(path.with_name(f"{path.name}.lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def forked() -> None:
    """In a forked worker, at its start: only what it compiles itself makes its ``save``
    rewrite the file (the parent keeps its own texts, written by its exit handler)."""
    global _fresh
    _fresh = False


install()
