"""The loader: defaults, then the user's config file, then environment, then flags.

UI-free: the CLI, the app and the agent server load settings here and hand them to the core
(``tui_search.core.options.CoreSettings``); the core never imports this module.

Config file: ``$XDG_CONFIG_HOME/tui-search/config.toml`` (platformdirs), keys as the field
names of ``Settings`` and of ``RankingParams`` (docs/ranking.md). A ranking knob may sit at
the top level (``document_weight = 0.3``) or in a ``[ranking]`` table; the table wins when
both set one. Environment: ``TUI_SEARCH_<FIELD>`` (e.g. ``TUI_SEARCH_INDEX_DIR``,
``TUI_SEARCH_DOCUMENT_WEIGHT``).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import platformdirs

from tui_search.core.cache_dir import APP_NAME, user_cache_dir
from tui_search.core.errors import ConfigError
from tui_search.core.options import CoreSettings, default_index_dir, workspace_key
from tui_search.core.ranking.params import RankingParams

__all__ = [
    "APP_NAME",
    "CoreSettings",
    "RankingParams",
    "Settings",
    "default_index_dir",
    "load_settings",
    "save_config_values",
    "user_cache_dir",
    "user_config_dir",
    "user_data_dir",
    "workspace_key",
]


def user_config_dir() -> Path:
    return Path(os.environ.get("TUI_SEARCH_CONFIG_DIR") or platformdirs.user_config_dir(APP_NAME))


def user_data_dir() -> Path:
    """Where the app keeps what it remembers per workspace (query history, weights)."""
    return Path(os.environ.get("TUI_SEARCH_DATA_DIR") or platformdirs.user_data_dir(APP_NAME))


@dataclass(frozen=True)
class Settings(CoreSettings):
    """The core's settings and the app's own: everything a user can set."""

    #: Watcher debounce in milliseconds.
    debounce_ms: int = 250
    #: Theme name for the app.
    theme: str = "tui-dark"
    #: Collapse near-duplicate results (the same text in several files) into one "+N similar".
    collapse_duplicates: bool = True
    #: Remapped keys: binding id -> keys (``[keymap]`` table, e.g. ``explain = "f9"``); see the
    #: help screen (f1) for the ids.
    keymap: tuple[tuple[str, str], ...] = ()


_PATH_FIELDS = {"workspace", "index_dir"}
_OPTIONAL_FLOAT_FIELDS = {"keyword_weight"}
#: The tables a config file may hold (anything else at the top level is a setting).
_TABLES = {"ranking", "keymap"}


def _coerce(name: str, raw: Any, default: Any) -> Any:
    if name in _PATH_FIELDS:
        return Path(str(raw)).expanduser()
    if name in _OPTIONAL_FLOAT_FIELDS:
        return float(raw)
    if isinstance(default, bool):
        return str(raw).lower() in {"1", "true", "yes", "on"}
    if isinstance(default, int):
        return int(raw)
    if isinstance(default, float):
        return float(raw)
    return str(raw)


def _keymap(raw: Any, source: Path) -> tuple[tuple[str, str], ...]:
    """The ``[keymap]`` table: binding ids to comma-separated keys."""
    if not isinstance(raw, dict):
        raise ConfigError(f'{source}: [keymap] must be a table of binding id = "keys"')
    pairs: list[tuple[str, str]] = []
    for ident, keys in raw.items():
        if not isinstance(keys, str) or not keys.strip():
            raise ConfigError(f'{source}: [keymap] {ident} must be a key string, e.g. "f9"')
        pairs.append((str(ident), keys.strip()))
    return tuple(pairs)


def _ranking_table(raw: Any, source: Path) -> dict[str, Any]:
    """The ``[ranking]`` table: ranking knobs by field name (an unknown one is an error)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: [ranking] must be a table of ranking settings")
    known = {f.name for f in fields(RankingParams)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(
            f"{source}: [ranking] has no setting {', '.join(unknown)} (see docs/ranking.md)"
        )
    return dict(raw)


def _read_values(
    names: list[str], base: Any, found: dict[str, Any], env: dict[str, str]
) -> dict[str, Any]:
    """Each of ``names`` from the file's ``found`` values, then the environment, coerced to
    the type of its default on ``base``."""
    values: dict[str, Any] = {}
    for name in names:
        default = getattr(base, name)
        try:
            if name in found:
                values[name] = _coerce(name, found[name], default)
            env_key = f"TUI_SEARCH_{name.upper()}"
            if env.get(env_key):
                values[name] = _coerce(name, env[env_key], default)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"bad value for setting {name!r}: {exc}") from exc
    return values


def load_settings(
    overrides: dict[str, Any] | None = None, *, env: dict[str, str] | None = None
) -> Settings:
    """Defaults < config file < environment < explicit ``overrides`` (flags; a ranking
    field's name sets that field of ``ranking``)."""
    env = dict(os.environ) if env is None else env
    base = Settings()
    config_file = user_config_dir() / "config.toml"
    file_values: dict[str, Any] = {}
    if config_file.is_file():
        import tomllib  # (~3 ms of a search: read only with a config file)

        try:
            file_values = tomllib.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {config_file}: {exc}") from exc
    flat = {k: v for k, v in file_values.items() if k not in _TABLES}
    own = [f.name for f in fields(Settings) if f.name not in _TABLES]
    values = _read_values(own, base, flat, env)
    if "keymap" in file_values:
        values["keymap"] = _keymap(file_values["keymap"], config_file)
    knobs = {**flat, **_ranking_table(file_values.get("ranking", {}), config_file)}
    ranking = _read_values([f.name for f in fields(RankingParams)], base.ranking, knobs, env)
    values["ranking"] = dataclasses.replace(base.ranking, **ranking)
    return dataclasses.replace(base, **values).replace(**(overrides or {}))


def save_config_values(values: dict[str, float | int | str]) -> Path:
    """Set keys of the user's config file, keeping every other line as it is.

    A key already set before the first ``[table]``, or in the ``[ranking]`` table, is
    replaced where it is; a new one is added above the first table. Returns the file written.
    """
    config_file = user_config_dir() / "config.toml"
    try:
        lines = config_file.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = []
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {config_file}: {exc}") from exc
    first_table = next(
        (i for i, line in enumerate(lines) if line.lstrip().startswith("[")), len(lines)
    )
    pending = dict(values)
    table = ""
    for i, line in enumerate(lines):
        if line.lstrip().startswith("["):
            table = line.strip().strip("[]").strip()
            continue
        key = line.split("=", 1)[0].strip()
        if "=" in line and key in pending and table in ("", "ranking"):
            lines[i] = f"{key} = {_toml_value(pending.pop(key))}"
    added = [f"{key} = {_toml_value(value)}" for key, value in pending.items()]
    lines[first_table:first_table] = added
    text = "\n".join(lines) + "\n"
    import tomllib

    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{config_file} would not be valid TOML after the change: {exc}") from exc
    try:
        config_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = config_file.with_name(config_file.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, config_file)
    except OSError as exc:
        raise ConfigError(f"cannot write config file {config_file}: {exc}") from exc
    return config_file


def _toml_value(value: float | int | str) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)
