"""The methods ``dataclasses`` writes for the package's classes are compiled once and kept:
the kept code makes the same methods as compiling their text, and a later process compiles
none of them (``core.dataclass_code``)."""

from __future__ import annotations

import dataclasses
import json
import marshal
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from tui_search.core.dataclass_code import MethodCode

#: Classes of every kind ``@dataclass`` writes methods for: frozen with a default factory and
#: keyword-only fields, plain with ``__post_init__`` and an ``InitVar``, ordered, unsafe_hash,
#: slots, a subclass, and one whose own ``__eq__`` is kept.
CLASSES = """
from __future__ import annotations
import dataclasses
from dataclasses import InitVar, dataclass, field

@dataclass(frozen=True)
class Frozen:
    name: str
    tags: tuple[str, ...] = ()
    extra: tuple[int, ...] = field(default_factory=tuple)
    note: str = field(default="", kw_only=True)

@dataclass
class Plain:
    a: int
    scale: InitVar[int] = 2
    b: int = field(init=False, default=0)
    hidden: str = field(default="x", repr=False, compare=False)

    def __post_init__(self, scale: int) -> None:
        self.b = self.a * scale

@dataclass(order=True, unsafe_hash=True)
class Ordered:
    rank: float
    key: str = "k"

@dataclass(slots=True)
class Slotted:
    x: int
    y: int = 1

@dataclass(frozen=True)
class Child(Frozen):
    level: int = 0

@dataclass(eq=True)
class OwnEq:
    v: int
    def __eq__(self, other: object) -> bool:
        return True
"""

GENERATED = ("__init__", "__repr__", "__eq__", "__lt__", "__setattr__", "__delattr__", "__hash__")


def make_classes(module: str) -> dict[str, type]:
    """The classes above, defined in a module of that name."""
    mod = types.ModuleType(module)
    sys.modules[module] = mod
    try:
        exec(CLASSES, mod.__dict__)  # noqa: S102
    finally:
        del sys.modules[module]
    return {
        k: v for k, v in vars(mod).items() if isinstance(v, type) and dataclasses.is_dataclass(v)
    }


def methods(cls: type) -> dict[str, types.CodeType]:
    out = {}
    for name in GENERATED:
        fn = cls.__dict__.get(name)
        if isinstance(fn, types.FunctionType) and fn.__code__.co_filename == "<string>":
            out[name] = fn.__code__
    return out


@pytest.fixture(autouse=True)
def _bytecode_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)


@pytest.fixture
def kept(tmp_path: Path) -> Iterator[MethodCode]:
    """The hook with a file of its own under ``tmp_path``."""
    code = MethodCode(tmp_path / "methods.marshal")
    before = dataclasses.__dict__.get("exec")
    dataclasses.exec = code.exec  # type: ignore[attr-defined]
    try:
        yield code
    finally:
        if before is None:
            del dataclasses.exec  # type: ignore[attr-defined]
        else:
            dataclasses.exec = before  # type: ignore[attr-defined]


def _shipped() -> dict[str, type]:
    hook = dataclasses.__dict__.pop("exec", None)
    try:
        return make_classes("tui_search._probe_shipped")
    finally:
        if hook is not None:
            dataclasses.exec = hook  # type: ignore[attr-defined]


def test_kept_code_makes_the_methods_compiling_makes(kept: MethodCode) -> None:
    shipped = _shipped()
    first = make_classes("tui_search._probe")  # compiled, and kept
    assert kept.added > 0
    kept.save()
    again = MethodCode(kept.path)  # a later process: everything read back from the file
    dataclasses.exec = again.exec  # type: ignore[attr-defined]
    second = make_classes("tui_search._probe")
    assert again.added == 0 and again.used
    for name, cls in shipped.items():
        want = methods(cls)
        assert want, name
        for made in (first[name], second[name]):
            got = methods(made)
            assert got == want, name  # code objects compare by their whole content
            for method in got:
                fn, ref = getattr(made, method), getattr(cls, method)
                assert fn.__annotations__ == ref.__annotations__
                assert fn.__defaults__ == ref.__defaults__
                assert fn.__kwdefaults__ == ref.__kwdefaults__
                assert fn.__qualname__.replace("_probe", "") == ref.__qualname__.replace(
                    "_probe_shipped", ""
                )
    # and they behave alike
    f = second["Frozen"]("a", ("t",), note="n")
    assert repr(f) == "Frozen(name='a', tags=('t',), extra=(), note='n')"
    assert f == second["Frozen"]("a", ("t",), note="n") and hash(f) == hash(
        second["Frozen"]("a", ("t",), note="n")
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.name = "b"
    p = second["Plain"](3, 5)
    assert (p.b, repr(p)) == (15, "Plain(a=3, b=15)")
    assert second["Ordered"](1.0) < second["Ordered"](2.0)
    assert second["OwnEq"](1) == second["OwnEq"](2)
    assert second["Child"]("c", level=2).level == 2


def test_other_modules_classes_are_not_kept(kept: MethodCode) -> None:
    shipped = _shipped()
    other = make_classes("someone_else")
    assert kept.added == 0 and not kept.codes
    for name, cls in shipped.items():
        assert methods(other[name]) == methods(cls)


def test_an_unreadable_or_foreign_file_is_ignored_and_written_again(tmp_path: Path) -> None:
    path = tmp_path / "methods.marshal"
    for content in (b"not marshal", marshal.dumps(("2.7.18 (another python)", {"x": 1}))):
        path.write_bytes(content)
        code = MethodCode(path)
        assert code.codes == {}
        before = dataclasses.__dict__.get("exec")
        dataclasses.exec = code.exec  # type: ignore[attr-defined]
        try:
            make_classes("tui_search._probe")
        finally:
            dataclasses.exec = before  # type: ignore[attr-defined]
        code.save()
        assert MethodCode(path).codes.keys() == code.codes.keys() != set()


def test_nothing_is_written_when_nothing_was_compiled_or_bytecode_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "methods.marshal"
    MethodCode(path).save()
    assert not path.exists()
    code = MethodCode(path)
    code.exec("def f(): pass", {"__name__": "tui_search.x"}, {})
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    code.save()
    assert not path.exists()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    code.save()
    assert path.exists()


def test_a_second_command_line_process_compiles_no_method(tmp_path: Path) -> None:
    """The CLI keeps what its first run compiled; the next search compiles nothing and
    answers the same."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("# Deploy\n\nRoll back a release with `deploy --undo`.\n")
    cache = tmp_path / "cache"
    code = textwrap.dedent(
        """
        import sys
        sys.argv[0] = "tui-search"
        from tui_search.cli import main
        from tui_search.core import dataclass_code
        main(sys.argv[1:])
        print("compiled", dataclass_code._installed.added, file=sys.stderr)
        dataclass_code.save()
        """
    )
    args = ["search", "-w", str(ws), "--index-dir", str(tmp_path / "i"), "--json", "roll back"]
    env = {"TUI_SEARCH_CACHE_DIR": str(cache), "PATH": "/usr/bin:/bin"}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=True,
        )
        for _ in range(2)
    ]
    compiled = [int(r.stderr.split("compiled ")[1].split()[0]) for r in runs]
    assert compiled[0] > 20 and compiled[1] == 0, compiled
    pages = [json.loads(r.stdout) for r in runs]
    for page in pages:
        page.pop("took_ms")
    assert pages[0] == pages[1] and pages[0]["results"][0]["file_path"] == "notes.md"
    assert (cache / "compiled").is_dir()
