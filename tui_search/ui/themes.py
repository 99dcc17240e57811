"""Theme definitions: TOML files -> ``textual.theme.Theme``.

Where themes come from, in order (a later file with the same name replaces an earlier one):

1. the bundled themes: the top-level ``themes/`` folder of a source checkout, or, when the
   package is installed, ``tui_search/ui/themes`` (a symlink to ``../../themes`` in the
   repository, which setuptools copies as real files into the wheel);
2. the user's theme files in ``user_config_dir() / "themes"``.

A theme file that cannot be read or is invalid is reported (``ThemeLoad.errors``) and skipped.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import Theme

from tui_search.config import user_config_dir

DEFAULT_THEME = "tui-dark"

_COLOR_FIELDS = (
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)
_FLOAT_FIELDS = ("luminosity_spread", "text_alpha")


class ThemeFileError(ValueError):
    """A theme file is unreadable or invalid; the message names the file and the problem."""


@dataclass
class ThemeLoad:
    themes: dict[str, Theme] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    sources: dict[str, Path] = field(default_factory=dict)


def bundled_theme_dirs() -> list[Path]:
    """The shipped theme folders that exist (source checkout first, then the package copy)."""
    here = Path(__file__).resolve().parent
    candidates = [here.parent.parent / "themes", here / "themes"]
    seen: list[Path] = []
    for c in candidates:
        if c.is_dir() and c.resolve() not in {s.resolve() for s in seen}:
            seen.append(c)
    return seen


def user_theme_dir() -> Path:
    return user_config_dir() / "themes"


def _check_color(name: str, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ThemeFileError(f"{name}: {key} must be a colour string")
    try:
        Color.parse(value)
    except ColorParseError as exc:
        raise ThemeFileError(f"{name}: {key} = {value!r} is not a colour") from exc
    return value


def theme_from_mapping(data: dict[str, Any], *, source: str = "theme") -> Theme:
    """Validate one theme definition (the TOML document as a dict)."""
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ThemeFileError(f"{source}: a theme needs a 'name'")
    if "primary" not in data:
        raise ThemeFileError(f"{source}: theme {name!r} needs a 'primary' colour")
    unknown = set(data) - {"name", "dark", "variables", *_COLOR_FIELDS, *_FLOAT_FIELDS}
    if unknown:
        raise ThemeFileError(f"{source}: unknown keys {', '.join(sorted(unknown))}")
    kwargs: dict[str, Any] = {"name": name.strip()}
    for key in _COLOR_FIELDS:
        if key in data:
            kwargs[key] = _check_color(source, key, data[key])
    for key in _FLOAT_FIELDS:
        if key in data:
            value = data[key]
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise ThemeFileError(f"{source}: {key} must be a number")
            kwargs[key] = float(value)
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise ThemeFileError(f"{source}: 'dark' must be true or false")
    kwargs["dark"] = dark
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in variables.items()
    ):
        raise ThemeFileError(f"{source}: [variables] must map names to strings")
    kwargs["variables"] = dict(variables)
    return Theme(**kwargs)


def load_theme_file(path: Path) -> Theme:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ThemeFileError(f"{path.name}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ThemeFileError(f"{path.name}: not valid TOML: {exc}") from exc
    return theme_from_mapping(data, source=path.name)


def load_themes(dirs: list[Path] | None = None) -> ThemeLoad:
    """Every theme in ``dirs`` (default: bundled, then the user's); bad files are reported."""
    folders = dirs if dirs is not None else [*bundled_theme_dirs(), user_theme_dir()]
    out = ThemeLoad()
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            try:
                theme = load_theme_file(path)
            except ThemeFileError as exc:
                out.errors.append(str(exc))
                continue
            out.themes[theme.name] = theme
            out.sources[theme.name] = path
    return out
