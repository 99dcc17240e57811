"""The methods ``dataclasses`` writes for the package's classes, compiled once, not by every
process that imports them.

``@dataclass`` writes a class's ``__init__``, ``__repr__`` and ``__eq__`` (a frozen class's
``__setattr__``, ``__delattr__`` and ``__hash__`` too) as source text and compiles each with
``exec`` while the class's module imports: ~0.6 ms a class, ~36 ms for the 62 classes a
command-line search imports, most of it compiling. A method's text depends only on its class's
fields and options, and the same text compiles to the same code, so after :func:`install`
each text is compiled once: its code is kept (``marshal``, as Python keeps a module's
bytecode) in the per-user cache, keyed by the text, and the next process executes the kept
code in the class's module, which makes the same function that executing the text makes.
Only methods written for classes of ``tui_search`` modules are kept; other libraries'
classes are made as before. The file names the interpreter's version (bytecode differs
between versions); a file of another version, or one that cannot be read, is ignored and
written again.
"""

# (no ``from __future__`` import here: the code compiled below must not inherit its flags,
# as the code ``dataclasses`` compiles inherits none of its module)

import contextlib
import dataclasses
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any

from tui_search.core.cache_dir import user_cache_dir

PACKAGE = "tui_search"
#: Past this many kept methods, a process that adds one keeps only those it used itself (the
#: file does not grow with every version of the package's classes).
MAX_KEPT = 4000


def cache_file() -> Path:
    tag = sys.implementation.cache_tag or sys.implementation.name
    return user_cache_dir() / "compiled" / f"dataclass-methods.{tag}.marshal"


class MethodCode:
    """The kept code of ``path``, and the ``exec`` that ``dataclasses`` calls instead of the
    builtin one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.codes: dict[str, CodeType] = self._read()
        self.used: set[str] = set()
        self.added = 0

    def _read(self) -> dict[str, CodeType]:
        try:
            with open(self.path, "rb") as f:
                version, codes = marshal.loads(f.read())  # (``load`` reads piece by piece)
        except (OSError, ValueError, EOFError, TypeError):
            return {}
        if version != sys.version or not isinstance(codes, dict):
            return {}
        return codes

    def exec(
        self,
        source: str | CodeType,
        globals: dict[str, Any] | None = None,  # noqa: A002 - the builtin's names
        locals: dict[str, Any] | None = None,  # noqa: A002
    ) -> None:
        if isinstance(source, str):
            module = str((globals or {}).get("__name__", ""))
            if module.partition(".")[0] != PACKAGE:
                source = compile(source, "<string>", "exec", dont_inherit=True)
            else:
                code = self.codes.get(source)
                if code is None:
                    code = compile(source, "<string>", "exec", dont_inherit=True)
                    self.codes[source] = code
                    self.added += 1
                self.used.add(source)
                source = code
        exec(source, globals, locals)  # noqa: S102 - what ``dataclasses`` executes

    def save(self) -> None:
        """Write the kept code when this process compiled any (not when Python is told not
        to write bytecode); a file another process writes meanwhile is replaced whole."""
        if not self.added or sys.dont_write_bytecode:
            return
        codes = self.codes
        if len(codes) > MAX_KEPT:
            codes = {text: codes[text] for text in self.used}
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                marshal.dump((sys.version, codes), f)
            os.replace(tmp, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
            return
        self.added = 0


_installed: MethodCode | None = None


def install() -> None:
    """Make ``dataclasses`` use the kept code (once a process); what it compiles is written
    by :func:`save`."""
    global _installed
    if _installed is not None:
        return
    _installed = MethodCode(cache_file())
    setattr(dataclasses, "exec", _installed.exec)  # noqa: B010 - shadows the builtin there only


def save() -> None:
    """Write what this process compiled. The command line calls it as it ends (``cli.run``);
    a program that imports the package as a library writes nothing to the cache."""
    if _installed is not None:
        _installed.save()
