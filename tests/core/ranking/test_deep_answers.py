"""A section that answers a question one heading deep inside a long page on other things is
re-read by the encoder even when the question shares none of its words: the semantic arm's
best sections join the re-ranked head (``rerank_semantic_depth``, docs/ranking.md#deep-answers).
Real components: the shipped static model, Whoosh, usearch and the sentence encoder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui_search.config import Settings
from tui_search.core.engine import SearchEngine
from tui_search.core.plan import plan_plain
from tui_search.core.ranking.fusion import Scored
from tui_search.core.ranking.params import RankingParams
from tui_search.core.ranking.policy import Steps
from tui_search.core.sections import section_of

QUESTION = "make the text bigger"
ANSWER = "Settings:font-size"

#: A long settings page: one section answers (in the words of Obsidian's help), the others
#: are about other settings.
SETTINGS = {
    "Spellcheck": "Turn spellcheck on or off and pick the languages words are checked in.",
    "Readable line length": "Limit how wide a line of a note runs on a wide window.",
    "Default view for new tabs": "Choose whether new tabs open in reading view or editing view.",
    "Font size": "Font size in pixels that affects editing and reading views. Adjust using "
    "the slider.",
    "Quick font size adjustment": "Adjust the font size using Ctrl+Scroll, or using the "
    "trackpad pinch-zoom gesture.",
    "Theme": "Pick a light or dark base theme, or follow the system's setting.",
    "Accent color": "Choose the color of buttons, links and selections.",
    "Vim key bindings": "Edit notes with the keys of the vim editor.",
    "Show line numbers": "Number each line in the editor's gutter.",
    "Excluded files": "Leave folders out of the quick switcher, the graph and search.",
    "Attachment folder": "Where new attachments such as images and PDFs are saved.",
    "Auto pair brackets": "Type an opening bracket and the closing one is added for you.",
    "Strict line breaks": "Follow the Markdown rule that a single line break is ignored.",
    "Fold headings": "Collapse the content under a heading with the arrow beside it.",
    "Confirm file deletion": "Ask before a note is moved to the trash.",
}

#: Notes that say the question's words in other senses (messages, plans, builds): a few say
#: all three, the rest one or two.
NOTES = {
    "Team chat": "Make a group text for the team; bigger groups get a channel.",
    "Meeting notes": "Make the agenda's text short; bigger topics get a meeting of their own.",
    "Build scripts": "Make reads the text of the makefile; bigger projects split it up.",
    "Budget": "Make a text note of each expense; a bigger budget needs a spreadsheet.",
    "Recipes": "Do the dough first; the recipe's text says a larger bowl helps.",
    "Gardening": "Do a bed for the seedlings; the packet's copy says they grow larger in sun.",
    "Travel plans": "Do a booking by text message; larger groups book early.",
    "Reading list": "Do a list of books; the copy of each review is in its own note.",
    "Project plan": "Do milestones; the plan's text grows larger with each phase.",
    "Interview questions": "Do each question's copy short; larger questions come last.",
    "Newsletter": "Do the newsletter's text friendly; a larger audience reads it on phones.",
    "Marketing": "Do the ad's copy punchy; a larger campaign runs on radio.",
    "Release notes": "Do the release text list every change; larger changes come first.",
    "Customer support": "Do replies to a customer's copy within a day; larger issues escalate.",
    "Hiring": "Do the job ad's text clear; a larger team needs a recruiter.",
    "Moving house": "Do a copy list of boxes; a larger van saves a trip.",
    "Fitness log": "Do a text entry after each run; larger goals need a plan.",
    "Book club": "Do the invitation copy short; a larger club meets in the library.",
    "Podcast": "Do show notes from the episode's text; a larger studio is booked monthly.",
    "Wedding": "Do the invitation copy; a larger venue is needed for the guests.",
    "Photography": "Do a caption text for each photo; larger prints need more pixels.",
    "Language learning": "Do flashcards from the copy you read; larger decks take longer.",
}


def _workspace(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    body = "\n\n".join(f"## {h}\n\n{t}" for h, t in SETTINGS.items())
    (root / "Settings.md").write_text(f"# Settings\n\n{body}\n", encoding="utf-8")
    for title, text in NOTES.items():
        (root / f"{title}.md").write_text(f"# {title}\n\n{text}\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _workspace(tmp_path_factory.mktemp("vault"))


def _ranked(workspace: Path, index: Path, **knobs: object) -> list[Scored]:
    settings = Settings(workspace=workspace, index_dir=index).replace(**knobs)
    with SearchEngine(settings) as engine:
        engine.build()
        engine.make_rerank_vectors()  # (the background fill's work, in the foreground)
        return engine.rank(QUESTION, mode="hybrid")[0]


def _at(ranked: list[Scored]) -> int:
    return [section_of(s.key) for s in ranked].index(ANSWER)


def test_a_deep_answer_the_keyword_arm_misses_is_reread_and_rises(
    workspace: Path, tmp_path: Path
) -> None:
    # the shape: the answer shares no word with the question, so the notes that say
    # "make", "text" or "bigger" in other senses all rank above it, and the encoder's
    # head (the best 20) never reaches it
    static = _ranked(workspace, tmp_path / "static", rerank_depth=0)
    assert _at(static) >= 20
    # (the encoder's own candidates off: this is the semantic arm's union alone)
    head_only = _ranked(
        workspace, tmp_path / "head", rerank_semantic_depth=0, rerank_encoder_depth=0
    )
    assert _at(head_only) >= 20
    assert head_only[_at(head_only)].rerank_cosine is None
    # the semantic arm ranks it among its best: the encoder reads it, finds it as good an
    # answer as any it reads, and it rises past the notes it shares only words with
    ranked = _ranked(workspace, tmp_path / "deep", rerank_encoder_depth=0)
    answer = ranked[_at(ranked)]
    read = [s for s in ranked if s.rerank_cosine is not None]
    assert answer.rerank_cosine is not None
    assert answer.rerank_cosine >= max(s.rerank_cosine or 0.0 for s in read) - 0.05
    assert _at(ranked) <= _at(head_only) - 8, [section_of(s.key) for s in ranked[:15]]
    # the sections past the head keep their order, below every section re-read
    rest = [s for s in ranked if s.rerank_cosine is None]
    assert min(s.score for s in read) > max(s.score for s in rest)
    assert [s.key for s in rest] == [s.key for s in head_only if s.key in {r.key for r in rest}]


def test_only_a_short_query_reads_the_semantic_arms_best_too() -> None:
    params = RankingParams()
    short = Steps.resolve(plan_plain(QUESTION), "hybrid", params, soft_capable=True)
    assert short.rerank_semantic_depth == params.rerank_semantic_depth > 0
    assert "semantic arm's best" in short.describe(params)
    # a long question's words find its sections: its head is the best rerank_depth alone
    long = "which setting makes the text of every note bigger in the editor and reading view"
    steps = Steps.resolve(plan_plain(long), "hybrid", params, soft_capable=True)
    assert steps.rerank_semantic_depth == 0
    assert "semantic arm's best" not in steps.describe(params)


def _listed(workspace: Path, index: Path, **knobs: object) -> list[str]:
    settings = Settings(workspace=workspace, index_dir=index).replace(**knobs)
    with SearchEngine(settings) as engine:
        engine.build()
        engine.make_rerank_vectors()
        results = engine.search(QUESTION, mode="hybrid", limit=50)
        assert results.reranked
        return [h.section_id for h in results.hits]


def test_a_deep_answer_the_encoder_reads_as_one_is_listed(workspace: Path, tmp_path: Path) -> None:
    # no word of the question and a static cosine under the match floor: only the encoder's
    # cosine makes it a match (``match_rerank_floor``), so the app and the CLI list it
    assert ANSWER in _listed(workspace, tmp_path / "listed")
    assert ANSWER not in _listed(workspace, tmp_path / "off", match_rerank_floor=2.0)
