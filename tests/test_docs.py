"""The user documents stay true to the code: every setting is on docs/configuration.md, and the
page lists no setting the code does not have."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

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


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub makes for a page's headings (fenced code skipped)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced or not (m := re.match(r"#+\s+(.*)", line)):
            continue
        base = re.sub(r"[^\w\- ]", "", m.group(1).replace("`", "").strip().lower())
        base = base.replace(" ", "-")
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def test_links_between_the_documents_lead_somewhere() -> None:
    """Every relative link in the README, docs/, the changelog and the benchmark and research
    READMEs names a file that exists, and a ``#anchor`` a heading of that page."""
    pages = [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        ROOT / "benchmarks" / "README.md",
        ROOT / "research" / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
    ]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            dest = (page.parent / path) if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_every_benchmark_and_experiment_has_its_readme_line() -> None:
    """benchmarks/README.md names each benchmark (and the results table it feeds);
    research/README.md names each experiment."""
    for folder, pattern in (("benchmarks", "bench_*.py"), ("research", "*.py")):
        readme = (ROOT / folder / "README.md").read_text(encoding="utf-8")
        missing = [
            p.name for p in sorted((ROOT / folder).glob(pattern)) if f"`{p.name}`" not in readme
        ]
        assert not missing, f"{folder}/README.md does not name {missing}"
