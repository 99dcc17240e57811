"""The user documents stay true to the code: every setting is on docs/configuration.md, and the
page lists no setting the code does not have."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

from tests.conftest import ROOT
from tui_search.config import Settings

CONFIGURATION = ROOT / "docs" / "configuration.md"


def setting_names(obj: object) -> Iterator[str]:
    """The names of every leaf field, walking nested dataclasses (a ``[table]`` of settings
    such as the ranking parameters): the names a user writes in the config file."""
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            yield from setting_names(value)
        else:
            yield f.name


def documented_names() -> list[str]:
    """The first cell of every row of the page's settings tables (those headed ``| setting``)."""
    names: list[str] = []
    in_table = False
    for line in CONFIGURATION.read_text(encoding="utf-8").splitlines():
        if line.startswith("| setting"):
            in_table = True
        elif not line.startswith("|"):
            in_table = False
        elif in_table and (m := re.match(r"\|\s*`([a-z][a-z0-9_]*)`\s*\|", line)):
            names.append(m.group(1))
    return names


def test_the_walk_finds_nested_settings() -> None:
    @dataclasses.dataclass(frozen=True)
    class Inner:
        depth: int = 2

    @dataclasses.dataclass(frozen=True)
    class Outer:
        name: str = "x"
        inner: Inner = dataclasses.field(default_factory=Inner)

    assert list(setting_names(Outer())) == ["name", "depth"]


def test_every_setting_is_documented() -> None:
    missing = sorted(set(setting_names(Settings())) - set(documented_names()))
    assert not missing, f"settings missing from docs/configuration.md: {missing}"


def test_the_page_documents_only_real_settings_once() -> None:
    names = documented_names()
    assert names, "no settings table found in docs/configuration.md"
    unknown = sorted(set(names) - set(setting_names(Settings())))
    assert not unknown, f"docs/configuration.md lists settings the code lacks: {unknown}"
    assert len(names) == len(set(names)), "a setting is listed twice"


def test_the_readme_is_short_and_its_test_command_is_one_line() -> None:
    """``.ci/run`` runs the line after the marker's ```bash fence; the README stays a page a
    user reads, not a notebook."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines"
    at = lines.index("<!-- ci:test-command -->")
    assert lines[at + 1] == "```bash" and lines[at + 3] == "```", lines[at : at + 4]
    assert "pytest" in lines[at + 2] and "ruff check" in lines[at + 2]
