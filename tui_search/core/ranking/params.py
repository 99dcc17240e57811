"""Every ranking knob, once: its default, its meaning and where ``docs/ranking.md`` explains it.

``RankingParams`` is what the keyword arm, the semantic arm, the fusion, the signals and the
re-ranker read. It is a leaf: it imports nothing of the package, so every stage (the keyword
arm included) may read it. The user sets any field in ``config.toml``, at the top level or in
a ``[ranking]`` table (``tui_search.config``); each field's ``meaning`` and ``doc`` metadata
feed the documentation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar, cast

T = TypeVar("T")

#: The document every ``doc`` anchor points into.
DOC = "docs/ranking.md"


def knob(default: T, meaning: str, anchor: str) -> T:
    """A field of :class:`RankingParams`: its default, a one-line meaning, and the section of
    ``docs/ranking.md`` that says what it does and what it was chosen on."""
    return cast(T, field(default=default, metadata={"meaning": meaning, "doc": f"{DOC}#{anchor}"}))


@dataclass(frozen=True)
class RankingParams:
    """The ranking's knobs. The defaults are what ships (each chosen as its anchor says)."""

    # -- candidates ----------------------------------------------------------------------
    candidate_depth: int = knob(
        200, "how many candidates each arm contributes before fusion", "candidates"
    )
    one_result_per_section: bool = knob(
        True, "each section is one result, at its best chunk", "one-result-per-section"
    )
    match_floor: float = knob(0.4, "a semantic neighbour is a match from this cosine on", "matches")
    match_rerank_floor: float = knob(
        0.5, "a section the re-ranker read is a match from this encoder cosine on", "matches"
    )
    match_min_words: int = knob(
        2,
        "a keyword hit is a match when it holds this many of the query's words (or all)",
        "matches",
    )
    match_partial_floor: float = knob(
        0.2, "a keyword hit with fewer words is a match from this cosine on", "matches"
    )
    # -- the keyword arm (BM25F) -----------------------------------------------------------
    k1: float = knob(1.2, "BM25F term-frequency saturation", "bm25f")
    b: float = knob(0.75, "BM25F length normalisation", "bm25f")
    title_boost: float = knob(
        0.25, "weight of a match in the document title (the body weighs 1)", "field-weights"
    )
    heading_boost: float = knob(
        0.25, "weight of a match in the heading path (the body weighs 1)", "field-weights"
    )
    tags_boost: float = knob(1.0, "weight of a match in the tags", "field-weights")
    ident_boost: float = knob(
        1.0, "weight of an identifier matched exactly (the ident field)", "field-weights"
    )
    query_term_frequency: bool = knob(
        True, "a word the query says n times weighs 1 + ln n", "query-term-frequency"
    )
    long_query_words: int = knob(
        12,
        "from this many words a query leaves English function words out (0 = never)",
        "long-queries",
    )
    drop_question_words: bool = knob(
        True,
        "the words that frame a question weigh nothing (keyword arm; semantic soft match)",
        "question-words",
    )
    file_weight: float = knob(
        0.2, "share of a chunk's BM25F taken from its whole file's BM25F", "file-weight"
    )
    # -- the semantic arm ------------------------------------------------------------------
    file_vector_weight: float = knob(
        0.1, "share of a chunk's cosine taken from its file's mean vector", "file-vector"
    )
    soft_match_share: float = knob(
        0.6,
        "share of the semantic side given to soft term matching (0 = cosine only)",
        "soft-match",
    )
    semantic_centering: bool = knob(
        True, "semantic mode: cosines without the index's common direction", "centering"
    )
    soft_match_piece_exponent: float = knob(
        0.6,
        "semantic mode: each of a word's n pieces weighs n^-this in the soft match",
        "word-pieces",
    )
    # -- fusion ----------------------------------------------------------------------------
    keyword_weight: float | None = knob(
        None, "hybrid weight of the keyword arm (None = the tuned default below)", "fusion"
    )
    keyword_weight_soft: float = knob(
        0.36, "the default keyword weight when the semantic side has soft matching", "fusion"
    )
    keyword_weight_cosine: float = knob(
        0.8, "the default keyword weight when the semantic side is the cosine alone", "fusion"
    )
    adaptive_min_hits: int = knob(
        3, "a keyword arm with fewer hits than this leans on the semantic arm", "adaptive-weight"
    )
    adaptive_keyword_weight: float = knob(
        0.4, "the keyword weight at most, when the keyword arm found so few", "adaptive-weight"
    )
    # -- signals ---------------------------------------------------------------------------
    exact_boost: float = knob(
        1.5, "score multiplier per identifier of the query found case-sensitively", "exact-boost"
    )
    document_weight: float = knob(
        0.4,
        "share of a section's score taken from its document's best section",
        "document-blend",
    )
    document_file_share: float = knob(
        0.0,
        "grouped results: share of a file's score taken from the file as a whole",
        "files-in-grouped-results",
    )
    fold_copies: bool = knob(
        True,
        "grouped results: the same page in several places is one row, its copies listed on it",
        "copies-of-a-page",
    )
    link_list_damping: float = knob(
        0.3, "a link list keeps 1 - this x its link share of its score (0 = off)", "link-lists"
    )
    link_list_share: float = knob(
        0.5, "a chunk is a link list from this share of link text on", "link-lists"
    )
    heading_match_boost: float = knob(
        0.6,
        "a section whose headings cover the query gains x(1 + this x coverage²)",
        "heading-match",
    )
    title_match_boost: float = knob(
        1.2,
        "the sections of a document whose title names the query gain x(1 + this x match²)",
        "title-match",
    )
    title_match_floor: float = knob(0.3, "a title match below this names nothing", "title-match")
    name_match_boost: float = knob(
        0.5,
        "the sections of a document whose title is a name the query says gain x(1 + this)",
        "name-match",
    )
    name_match_words: int = knob(
        8, "the name match holds for a query of at most this many words", "name-match"
    )
    title_answer_share: float = knob(
        0.8,
        "a name counts for a document whose best cosine is this share of the best",
        "name-match",
    )
    reference_prior: float = knob(
        1.0,
        "a short query's results in a page others refer to gain x(1 + this x its share)",
        "references",
    )
    reference_cap: int = knob(
        10, "a page referred to by this many documents takes the whole prior", "references"
    )
    # -- long questions (hybrid mode) --------------------------------------------------------
    long_question_from: int = knob(
        12,
        "from this many words a question also takes semantic mode's rules (0 = off)",
        "long-questions",
    )
    long_question_full: int = knob(
        16, "at this many words a question is ranked by those rules alone", "long-questions"
    )
    long_question_centering: float = knob(
        0.5,
        "share of the centred cosine in the long-question ranking's cosines",
        "long-questions",
    )
    long_question_likelihood: float = knob(
        0.2,
        "share of the long-question ranking's score taken from query likelihood",
        "query-likelihood",
    )
    likelihood_mu: float = knob(
        100.0, "the Dirichlet prior of the query likelihood, in words", "query-likelihood"
    )
    # -- the re-ranker (hybrid mode) ---------------------------------------------------------
    rerank_depth: int = knob(
        20, "how many of the best sections the sentence encoder re-reads (0 = off)", "re-ranker"
    )
    rerank_weight: float = knob(
        0.3, "share of a re-read section's score taken from the encoder's cosine", "re-ranker"
    )
    rerank_semantic_depth: int = knob(
        30,
        "a short query's head also re-reads the sections the semantic arm ranks within this "
        "many (0 = none)",
        "deep-answers",
    )
    rerank_encoder_depth: int = knob(
        5,
        "a short query's head also re-reads the candidates the encoder ranks within this many "
        "over every section (0 = none; rerank_encoder_words)",
        "deep-answers",
    )
    rerank_encoder_words: int = knob(
        7,
        "the encoder's own candidates join the head of a query of at most this many words",
        "deep-answers",
    )
    rerank_encoder_place: int = knob(
        15,
        "an encoder candidate's score before the head is mixed is at least the static order's "
        "at this place (0 = its own)",
        "deep-answers",
    )

    def replace(self, **changes: Any) -> RankingParams:
        return dataclasses.replace(self, **changes)

    def with_weights(self, keyword_weight: float, soft_share: float) -> RankingParams:
        """These knobs with the user's two fusion weights (the app's f5-f8, a saved choice)."""
        return self.replace(keyword_weight=keyword_weight, soft_match_share=soft_share)

    def hybrid_keyword_weight(self, soft: bool) -> float:
        """The configured keyword weight, else the tuned default for the semantic side in
        use (with or without soft matching)."""
        if self.keyword_weight is not None:
            return self.keyword_weight
        return self.keyword_weight_soft if soft else self.keyword_weight_cosine


#: The field names (what a config file may set).
FIELDS = frozenset(f.name for f in fields(RankingParams))
