"""The explain view: why the selected result ranks where it does, as aligned figures and bars.

Each arm's raw score and rank, its normalised score as a bar (0-1), the weight it gets in the
fusion, the exact-identifier boost, the final relevance, and the rules of the search's mode
(the core's fusion description: document blend, centring, word pieces, title match, ...).
Colours are theme variables, so the view reads the same in every theme; the bars carry the
figures too, never colour alone.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from tui_search.core.results import Explanation, Hit
from tui_search.core.textsafe import sanitize_terminal

BAR_WIDTH = 10


def bar(value: float, style: str, width: int = BAR_WIDTH) -> Content:
    """A horizontal bar for a 0-1 value, in eighths of a cell."""
    value = min(1.0, max(0.0, value))
    eighths = round(value * width * 8)
    full, part = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[part] if part else ""
    filled = "█" * full + partial
    return Content.assemble((filled, style), ("·" * (width - len(filled)), "$text-muted"))


def _rank(rank: int | None) -> str:
    return f"#{rank}" if rank is not None else "—"


def explain_content(hit: Hit, why: Explanation | None, position: int | None) -> Content:
    """The explain view of one hit (``why`` None: the search was not explained)."""
    where = sanitize_terminal(f"{hit.file_path}:{hit.line_start}").replace("\n", " ")
    title = f"Why result {position + 1} ranks" if position is not None else "Why it ranks"
    head = Content.assemble((title, "bold $accent"), "  ", (where, "$text-muted"))
    if why is None:
        return Content("\n").join([head, Content.styled("No scores for this result.", "$warning")])
    if why.fusion == "fixed":
        return Content("\n").join(
            [
                head,
                Content.styled(
                    "Listed by a graph or filter operator, not scored: relevance "
                    f"{why.relevance:.2f}",
                    "$text-muted",
                ),
            ]
        )
    sem = why.semantic_weight
    cosine_w = sem * (1.0 - why.soft_share)
    soft_w = sem * why.soft_share
    r = why.record
    rows: list[Content] = [head]

    def row(label: str, raw: str, rank: str, norm: float, style: str, weight: str) -> None:
        rows.append(
            Content.assemble(
                (f"{label:<10}", "bold"),
                f"{raw:>7}",
                (f" {rank:>4} ", "$text-muted"),
                bar(norm, style),
                f" {norm:4.2f}",
                (f" {weight}", "$text-muted"),
            )
        )

    row(
        "keyword",
        f"{r.keyword:.2f}",
        _rank(r.keyword_rank),
        r.keyword_norm,
        "$primary",
        f"× {why.keyword_weight:.2f}",
    )
    row(
        "cosine",
        f"{r.semantic:.3f}",
        _rank(r.semantic_rank),
        r.semantic_norm,
        "$secondary",
        f"× {cosine_w:.2f}",
    )
    if why.soft_share > 0:
        row(
            "soft match",
            f"{r.soft:.3f}",
            "",
            r.soft_norm,
            "$accent",
            f"× {soft_w:.2f}",
        )
    boost = (
        f"×{r.boost:.2f}  exact: " + ", ".join(sanitize_terminal(i) for i in r.matched_identifiers)
        if r.matched_identifiers
        else "none"
    )
    rows.append(Content.assemble(("boost     ", "bold"), (f"{boost}", "$text-muted")))
    if r.heading_match > 0:
        rows.append(
            Content.assemble(
                ("headings  ", "bold"),
                (
                    f"×{r.heading_factor:.2f}  {r.heading_match:.0%} of the query is in its "
                    "title and headings",
                    "$text-muted",
                ),
            )
        )
    if r.title_factor > 1.0:  # a match under the floor names nothing
        rows.append(
            Content.assemble(
                ("title     ", "bold"),
                (
                    f"×{r.title_factor:.2f}  it names the query: {r.title_match:.0%}",
                    "$text-muted",
                ),
            )
        )
    if r.link_share > 0:
        rows.append(
            Content.assemble(
                ("link list ", "bold"),
                (
                    f"×{r.link_factor:.2f}  {r.link_share:.0%} of its text is link text",
                    "$text-muted",
                ),
            )
        )
    if r.long_share > 0:
        share = r.long_share
        said = (
            "all of it from semantic mode's rules"
            if share >= 1
            else f"{share:.0%} from semantic mode's rules: plain {r.plain_score:.2f}, "
            f"rules {r.rules_score:.2f} (the figures above are the plain ranking's)"
        )
        if r.likelihood_share > 0:
            said += (
                f"; the rules' score takes {r.likelihood_share:.0%} from query "
                f"likelihood, {r.likelihood:.2f} here"
            )
        rows.append(
            Content.assemble(("long q.   ", "bold"), (f"a long question, {said}", "$text-muted"))
        )
    fused = why.keyword_weight * r.keyword_norm + cosine_w * r.semantic_norm + soft_w * r.soft_norm
    factors = r.boost * r.link_factor * r.heading_factor * r.title_factor
    if (
        fused > 0
        and factors > 0
        and not 0 < r.long_share < 1
        and r.likelihood_share == 0
        and r.before_rerank is None
    ):
        # the fusion scales the weighted sum by how sure the arms are for this query
        scale = why.relevance / (fused * factors)
        rows.append(
            Content.assemble(
                ("fused     ", "bold"),
                (f"{fused:.2f} × confidence {scale:.2f}", "$text-muted"),
            )
        )
    if r.rerank_cosine is not None and r.before_rerank is not None:
        rows.append(
            Content.assemble(
                ("re-ranker ", "bold"),
                (
                    f"{r.before_rerank:.2f} → {why.relevance:.2f}: the sentence encoder reads "
                    f"it at cosine {r.rerank_cosine:.2f} to the question",
                    "$text-muted",
                ),
            )
        )
    rows.append(
        Content.assemble(
            (f"{'final':<10}", "bold"),
            " " * 13,
            bar(why.relevance, "$success"),
            (f" {why.relevance:4.2f}", "bold"),
        )
    )
    weights = f"weights: keyword {why.keyword_weight:.2f} · semantic {sem:.2f}"
    if why.soft_share > 0:
        weights += f" (cosine {1 - why.soft_share:.2f} / soft {why.soft_share:.2f})"
    rows.append(Content.styled(weights, "$text-muted"))
    # the rules the search applied in this mode (the core's own description, as in --explain)
    rows.append(Content.assemble(("rules  ", "bold"), (why.fusion, "$text-muted")))
    return Content("\n").join(rows)


class ExplainPanel(Static):
    """Shown under the results when the explain view is on."""

    def show(self, hit: Hit | None, why: Explanation | None, position: int | None) -> None:
        if hit is None:
            self.update(Content.styled("Select a result to see why it ranks.", "$text-muted"))
        else:
            self.update(explain_content(hit, why, position))
