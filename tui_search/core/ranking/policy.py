"""What each search mode does, declared once as data, and the steps one query takes.

``MODES`` says which arms a mode runs and which steps it takes; ``Steps.resolve`` turns a
mode, the ranking's knobs and the query into the steps the retriever runs, each with the
value it runs with (0 = not taken). The retriever reads every step from there, and
``Steps.describe`` names the same steps (the explanation's "rules"), so the description
cannot drift from what runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui_search.core.plan import Mode, QueryPlan
from tui_search.core.ranking.params import RankingParams


@dataclass(frozen=True)
class ModePolicy:
    """Which arms a mode runs and which steps it takes."""

    keyword_arm: bool
    semantic_arm: bool
    #: The arms' fixed (keyword, semantic) weights; None: hybrid weighting (``fuse``).
    weights: tuple[float, float] | None
    #: Semantic mode's rules on the semantic side: centred cosines, question words out of
    #: the soft match, word pieces weighed down (docs/ranking.md#semantic-rules).
    semantic_rules: bool
    #: A section whose headings name the query gains (docs/ranking.md#heading-match).
    heading_match: bool
    #: A document whose title is a name a short query says gains, when it answers: hybrid
    #: mode, which has the cosines that tell (docs/ranking.md#name-match).
    name_match: bool
    #: The results of a short query in a page other documents refer to gain: hybrid mode
    #: (docs/ranking.md#references).
    references: bool
    #: A long question is also ranked with semantic mode's rules and query likelihood
    #: (docs/ranking.md#long-questions).
    long_questions: bool
    #: The sentence encoder re-reads the head (docs/ranking.md#re-ranker).
    rerank: bool
    #: Only the query's matches are listed and counted (docs/ranking.md#matches); the floors
    #: are calibrated on hybrid mode's cosines, so semantic mode lists its neighbours by meaning.
    counts_matches: bool


MODES: dict[Mode, ModePolicy] = {
    "hybrid": ModePolicy(
        keyword_arm=True,
        semantic_arm=True,
        weights=None,
        semantic_rules=False,
        heading_match=True,
        name_match=True,
        references=True,
        long_questions=True,
        rerank=True,
        counts_matches=True,
    ),
    "keyword": ModePolicy(
        keyword_arm=True,
        semantic_arm=False,
        weights=(1.0, 0.0),
        semantic_rules=False,
        heading_match=True,
        name_match=False,
        references=False,
        long_questions=False,
        rerank=False,
        counts_matches=True,
    ),
    "semantic": ModePolicy(
        keyword_arm=False,
        semantic_arm=True,
        weights=(0.0, 1.0),
        semantic_rules=True,
        heading_match=False,
        name_match=False,
        references=False,
        long_questions=False,
        rerank=False,
        counts_matches=False,
    ),
}


def long_question_share(params: RankingParams, words: int) -> float:
    """The share of a hybrid question's score taken from its ranking under semantic mode's
    rules: 0 below ``long_question_from`` words (or with it 0), rising linearly to 1 at
    ``long_question_full`` words."""
    start, full = params.long_question_from, params.long_question_full
    if start <= 0 or words < start:
        return 0.0
    if full <= start:
        return 1.0
    return min(1.0, (words - start) / (full - start))


@dataclass(frozen=True)
class Rules:
    """How one fusion pass treats the semantic side: the share of the centred cosine in each
    cosine, whether question words weigh nothing in the soft match, the word-piece exponent,
    and the share of the score taken from query likelihood."""

    centering: float = 0.0
    question_words: bool = False
    pieces: float = 0.0
    likelihood: float = 0.0


#: The plain pass (hybrid and keyword mode): plain cosines, every query word and word piece
#: in the soft match.
PLAIN = Rules()


@dataclass(frozen=True)
class Steps:
    """The steps one query's ranking takes, each with the value it runs with (0 = not taken)."""

    policy: ModePolicy
    params: RankingParams
    #: Share of the semantic side given to the soft match (0 = the cosine alone).
    soft_share: float
    #: Share of a chunk's cosine taken from its file's mean vector.
    file_vector_weight: float
    #: The heading match's weight (0 in semantic mode).
    heading_match_boost: float
    #: The name match's boost (0 outside hybrid mode and for a query of more than
    #: ``name_match_words`` words).
    name_match_boost: float
    #: The reference prior's weight (0 outside hybrid mode and for a query of more than
    #: ``name_match_words`` words).
    reference_prior: float
    #: The fusion passes: one, or for a long question the plain one and semantic mode's.
    passes: tuple[Rules, ...]
    #: Share of the score taken from the long-question pass (0 = one plain pass).
    long_share: float
    #: Only filters: the matching sections listed, not scored.
    listing: bool = False
    #: The re-ranker re-reads the head: hybrid mode, and a search by meaning (``similar:``,
    #: ``like:``) in any mode that runs the semantic arm.
    rerank: bool = False
    #: The semantic arm's best this many join the re-read head (0 for a query of more than
    #: ``name_match_words`` words; ``rerank.head_positions``).
    rerank_semantic_depth: int = 0
    #: The encoder's best this many over every section join the re-read head (hybrid mode;
    #: 0 for a query of more than ``rerank_encoder_words`` words; ``core.ranking.encoder_arm``).
    rerank_encoder_depth: int = 0

    @classmethod
    def resolve(
        cls, plan: QueryPlan, mode: Mode, params: RankingParams, *, soft_capable: bool
    ) -> Steps:
        """The steps of ``plan`` in ``mode``; ``soft_capable``: the embedder can soft-match."""
        policy = MODES[mode]
        semantic = policy.semantic_arm
        soft = params.soft_match_share if semantic and soft_capable else 0.0
        rules = Rules(
            centering=1.0 if params.semantic_centering else 0.0,
            question_words=params.drop_question_words,
            pieces=params.soft_match_piece_exponent,
        )
        words = len(plan.semantic_text.split()) if plan.semantic_text else 0
        short = 0 < words <= params.name_match_words
        named = policy.name_match and short
        long_share = 0.0
        if policy.long_questions and plan.semantic_text:
            long_share = long_question_share(params, len(plan.semantic_text.split()))
        passes: tuple[Rules, ...] = (rules if policy.semantic_rules else PLAIN,)
        if long_share > 0:
            long_rules = Rules(
                centering=params.long_question_centering,
                question_words=rules.question_words,
                pieces=rules.pieces,
                likelihood=params.long_question_likelihood,
            )
            passes = (PLAIN, long_rules) if long_share < 1 else (long_rules,)
        return cls(
            policy=policy,
            params=params,
            soft_share=soft,
            file_vector_weight=params.file_vector_weight if semantic else 0.0,
            heading_match_boost=params.heading_match_boost if policy.heading_match else 0.0,
            name_match_boost=params.name_match_boost if named else 0.0,
            reference_prior=params.reference_prior if policy.references and short else 0.0,
            passes=passes,
            long_share=long_share,
            listing=plan.listing,
            rerank=policy.rerank or (semantic and bool(plan.similar or plan.like)),
            rerank_semantic_depth=params.rerank_semantic_depth if short else 0,
            rerank_encoder_depth=params.rerank_encoder_depth
            if policy.rerank and 0 < words <= params.rerank_encoder_words
            else 0,
        )

    def describe(self, reranked_with: RankingParams | None = None) -> str:
        """The steps in words (the explanation's rules): the fusion, then each step taken.
        ``reranked_with``: the re-ranker re-read the head, with these knobs."""
        if self.listing:
            return "fixed"
        p = self.params
        semantic_rules = self.passes[0] if self.policy.semantic_rules else None
        said = ["convex(min-max)"]
        if self.soft_share > 0:
            said.append(
                f"semantic side {1 - self.soft_share:g} cosine + {self.soft_share:g} soft match"
            )
        said.append(f"exact x{p.exact_boost}")
        if p.document_weight > 0:
            said.append(f"document best x{p.document_weight:g}")
        if self.file_vector_weight > 0:
            said.append(f"cosine {self.file_vector_weight:g} from the file's mean vector")
        if semantic_rules is not None and semantic_rules.centering > 0:
            said.append("cosines without the index's common direction")
        if p.link_list_damping > 0:
            said.append(f"link lists x(1 - {p.link_list_damping:g} x link share)")
        if self.heading_match_boost > 0:
            said.append(f"heading match x(1 + {self.heading_match_boost:g} x coverage²)")
        if p.title_match_boost > 0:
            said.append(f"title match x(1 + {p.title_match_boost:g} x match²)")
        if self.name_match_boost > 0:
            said.append(f"a title the query says x{1 + self.name_match_boost:g}")
        if self.name_match_boost > 0 and p.title_answer_share > 0:
            said.append(f"names count from {p.title_answer_share:g} of the best cosine")
        if self.reference_prior > 0:
            said.append(
                f"pages others refer to x(1 + {self.reference_prior:g} x "
                f"log(1 + references) / log(1 + {p.reference_cap}))"
            )
        if semantic_rules is not None and self.soft_share > 0:
            if semantic_rules.question_words:
                said.append("question words out of the soft match")
            if semantic_rules.pieces > 0:
                said.append(f"word pieces x n^-{semantic_rules.pieces:g} in the soft match")
        if self.long_share > 0:
            rules = self.passes[-1]
            likelihood = (
                f", {rules.likelihood:g} from query likelihood" if rules.likelihood > 0 else ""
            )
            said.append(
                f"{self.long_share:.0%} of the score from semantic mode's rules (a long "
                f"question: cosines {rules.centering:g} centred{likelihood})"
            )
        if reranked_with is not None:
            deep = self.rerank_semantic_depth
            also = f" with the semantic arm's best {deep} below them" if deep > 0 else ""
            if self.rerank_encoder_depth > 0:
                also += f" and the encoder's best {self.rerank_encoder_depth} of every section"
            said.append(
                f"the best {reranked_with.rerank_depth}{also} re-read by a sentence encoder "
                f"({reranked_with.rerank_weight:g} of their score from its cosine)"
            )
        return ", ".join(said)
