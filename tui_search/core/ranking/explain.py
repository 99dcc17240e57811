"""Why a result ranks where it does: its working score record and the rules of its search.

``Explanation`` is built once per explained hit from the retriever's ``Scored`` row (every
figure the stages wrote on it) and the ranking's weights and steps. The app's explain view
reads it; ``to_json`` is what ``search --explain`` prints and ``Hit.scores`` holds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tui_search.core.ranking.fusion import Scored


def _r(value: float) -> float:
    return round(value, 4)


@dataclass(frozen=True)
class Explanation:
    """One hit's score record (a copy) with its search's fusion weights and rules."""

    record: Scored
    #: The arms' (keyword, semantic) weights in the fusion.
    weights: tuple[float, float]
    #: Share of the semantic side given to the soft match (0 = the cosine alone).
    soft_share: float
    #: The steps the search took, in words (``Steps.describe``); "fixed" for a listing.
    fusion: str

    @classmethod
    def of(
        cls, scored: Scored, weights: tuple[float, float], soft_share: float, fusion: str
    ) -> Explanation:
        return cls(dataclasses.replace(scored), weights, soft_share, fusion)

    @property
    def keyword_weight(self) -> float:
        return self.weights[0]

    @property
    def semantic_weight(self) -> float:
        return self.weights[1]

    @property
    def relevance(self) -> float:
        return self.record.score

    def to_json(self) -> dict[str, object]:
        """The figures, rounded, by name (``search --explain``, ``Hit.scores``)."""
        s = self.record
        return {
            "keyword": _r(s.keyword),
            "keyword_norm": _r(s.keyword_norm),
            "keyword_rank": s.keyword_rank,
            "semantic": _r(s.semantic),
            "semantic_norm": _r(s.semantic_norm),
            "semantic_rank": s.semantic_rank,
            "soft_match": _r(s.soft),
            "soft_match_norm": _r(s.soft_norm),
            "boost": _r(s.boost),
            "document_best": _r(s.document),
            "link_share": _r(s.link_share),
            "link_factor": _r(s.link_factor),
            "heading_match": _r(s.heading_match),
            "heading_factor": _r(s.heading_factor),
            "title_match": _r(s.title_match),
            "title_factor": _r(s.title_factor),
            "title_said": _r(s.title_said),
            "name_factor": _r(s.name_factor),
            "references": s.references,
            "reference_factor": _r(s.reference_factor),
            "long_question_share": _r(s.long_share),
            "plain_score": _r(s.plain_score),
            "rules_score": _r(s.rules_score),
            "query_likelihood": _r(s.likelihood),
            "query_likelihood_share": _r(s.likelihood_share),
            "matched_identifiers": list(s.matched_identifiers),
            "rerank_cosine": None if s.rerank_cosine is None else _r(s.rerank_cosine),
            "before_rerank": None if s.before_rerank is None else _r(s.before_rerank),
            "weights": {
                "keyword": round(self.weights[0], 3),
                "semantic": round(self.weights[1], 3),
            },
            "fusion": self.fusion,
            "relevance": _r(s.score),
        }


def brief_scores(scored: Scored) -> dict[str, object]:
    """The figures of a hit not explained: each arm's raw score and the exact boost."""
    return {
        "keyword": _r(scored.keyword),
        "semantic": _r(scored.semantic),
        "boost": _r(scored.boost),
    }
