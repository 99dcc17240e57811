"""The loader: a user's config file, flat or with a ``[ranking]`` table, and the environment."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tui_search.config import Settings, load_settings, save_config_values, user_config_dir
from tui_search.core.errors import ConfigError
from tui_search.core.options import CoreSettings
from tui_search.core.ranking.params import DOC, RankingParams


def _config(text: str) -> Path:
    path = user_config_dir() / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_flat_ranking_keys_still_load() -> None:
    """A config file written before the ``[ranking]`` table: ranking knobs at the top level."""
    _config(
        'theme = "tui-light"\n'
        "keyword_weight = 0.5\n"
        "soft_match_share = 0.4\n"
        "document_weight = 0.25\n"
        "rerank_depth = 0\n"
        "one_result_per_section = false\n"
        "snippet_chars = 300\n"
    )
    s = load_settings(env={})
    assert s.theme == "tui-light" and s.snippet_chars == 300
    assert s.ranking.keyword_weight == 0.5
    assert s.ranking.soft_match_share == 0.4
    assert s.ranking.document_weight == 0.25
    assert s.ranking.rerank_depth == 0
    assert s.ranking.one_result_per_section is False
    assert s.ranking.title_match_boost == RankingParams().title_match_boost  # untouched


def test_a_ranking_table_loads_and_wins_over_a_flat_key() -> None:
    _config(
        "document_weight = 0.1\n"
        "heading_match_boost = 0.2\n"
        "\n[ranking]\n"
        "document_weight = 0.3\n"
        "exact_boost = 2.0\n"
        "title_match_floor = 0.5\n"
        "keyword_weight = 0.7\n"
    )
    r = load_settings(env={}).ranking
    assert r.document_weight == 0.3  # the table wins
    assert r.heading_match_boost == 0.2  # a flat key the table does not set
    assert (r.exact_boost, r.title_match_floor, r.keyword_weight) == (2.0, 0.5, 0.7)


def test_the_environment_overrides_the_file_and_flags_override_both() -> None:
    _config("[ranking]\nlink_list_damping = 0.1\ncandidate_depth = 50\n")
    s = load_settings(
        {"candidate_depth": 30},
        env={"TUI_SEARCH_LINK_LIST_DAMPING": "0.2", "TUI_SEARCH_EXACT_BOOST": "1.25"},
    )
    assert s.ranking.link_list_damping == 0.2
    assert s.ranking.exact_boost == 1.25
    assert s.ranking.candidate_depth == 30


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[ranking]\nno_such_knob = 1\n", "no_such_knob"),
        ("ranking = 3\n", r"\[ranking\]"),
        ("[ranking]\ndocument_weight = 'heavy'\n", "document_weight"),
    ],
)
def test_a_bad_ranking_table_is_a_clear_error(text: str, match: str) -> None:
    _config(text)
    with pytest.raises(ConfigError, match=match):
        load_settings(env={})


def test_saving_weights_keeps_them_where_the_file_has_them() -> None:
    """The app saves its two weights as flat keys; a file that holds them in ``[ranking]``
    has them replaced there (a flat key would lose to the table)."""
    path = _config('theme = "tui-dark"\n\n[ranking]\nkeyword_weight = 0.4\n')
    save_config_values({"keyword_weight": 0.55, "soft_match_share": 0.5})
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    assert data["ranking"]["keyword_weight"] == 0.55
    assert "keyword_weight" not in data and data["soft_match_share"] == 0.5
    s = load_settings(env={})
    assert (s.ranking.keyword_weight, s.ranking.soft_match_share) == (0.55, 0.5)


def test_settings_are_the_cores_settings_and_the_apps() -> None:
    """One definition of each field: the core's record holds the ranking's knobs, the loaded
    type adds the app's own."""
    core = {f.name for f in dataclasses.fields(CoreSettings)}
    own = {f.name for f in dataclasses.fields(Settings)} - core
    assert own == {"debounce_ms", "theme", "collapse_duplicates", "keymap"}
    assert "ranking" in core and not core & {f.name for f in dataclasses.fields(RankingParams)}
    moved = Settings().replace(document_weight=0.2, theme="tui-light")
    assert moved.ranking.document_weight == 0.2 and moved.theme == "tui-light"


def test_every_ranking_knob_has_a_meaning_and_a_documented_anchor() -> None:
    doc = (ROOT / DOC).read_text(encoding="utf-8")
    # the anchors GitHub gives the headings: lower case, punctuation out, spaces as hyphens
    anchors = {
        re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in doc.splitlines()
        if line.startswith("#")
    }
    for f in dataclasses.fields(RankingParams):
        assert f.metadata.get("meaning"), f.name
        page, _, anchor = str(f.metadata["doc"]).partition("#")
        assert page == DOC and anchor in anchors, f"{f.name}: {f.metadata['doc']}"
