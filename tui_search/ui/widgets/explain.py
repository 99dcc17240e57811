"""The explain view: why the selected result ranks where it does, one sentence per factor.

Each factor of the score reads as a plain sentence ("meaning close to the query: #2 by
meaning, cosine 0.62") with its figure beside it: the arms' normalised scores as 0-1 bars,
the multiplying factors as ``×1.40``; then the final relevance and the rules of the search's
mode (the core's fusion description).
Colours are theme variables, so the view reads the same in every theme; the bars carry the
figures too, never colour alone.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Factor:
    """One line of the explain view: a short label, a sentence, its figure, and an optional
    0-1 bar (with the theme variable it is drawn in)."""

    label: str
    sentence: str
    figure: str
    bar: float | None = None
    bar_style: str = "$primary"


def factors(why: Explanation) -> list[Factor]:
    """Each factor of a hit's score as a plain sentence with its figure (a thin reading of the
    ``Explanation`` record's fields)."""
    r = why.record
    sem = why.semantic_weight
    cosine_w = sem * (1.0 - why.soft_share)
    soft_w = sem * why.soft_share
    out: list[Factor] = []
    if r.keyword_rank is not None:
        out.append(
            Factor(
                "words",
                f"matches the query's words: #{r.keyword_rank} by keywords "
                f"(BM25 {r.keyword:.2f}), weight {why.keyword_weight:.2f}",
                f"{r.keyword_norm:.2f}",
                r.keyword_norm,
                "$primary",
            )
        )
    else:
        out.append(Factor("words", "none of the query's words are in it", "0.00", 0.0))
    rank = f"#{r.semantic_rank} by meaning, " if r.semantic_rank is not None else ""
    out.append(
        Factor(
            "meaning",
            f"meaning close to the query: {rank}cosine {r.semantic:.2f}, weight {cosine_w:.2f}",
            f"{r.semantic_norm:.2f}",
            r.semantic_norm,
            "$secondary",
        )
    )
    if why.soft_share > 0:
        out.append(
            Factor(
                "near words",
                f"words close in meaning to the query's: {r.soft:.2f}, weight {soft_w:.2f}",
                f"{r.soft_norm:.2f}",
                r.soft_norm,
                "$accent",
            )
        )
    if r.matched_identifiers:
        names = ", ".join(sanitize_terminal(i) for i in r.matched_identifiers)
        out.append(Factor("exact", f"names {names} exactly as written", f"×{r.boost:.2f}"))
    if r.heading_match > 0:
        out.append(
            Factor(
                "headings",
                f"{r.heading_match:.0%} of the query is in its title and headings",
                f"×{r.heading_factor:.2f}",
            )
        )
    if r.title_factor > 1.0:  # a match under the floor names nothing
        out.append(
            Factor(
                "title",
                f"the document's title names the query ({r.title_match:.0%})",
                f"×{r.title_factor:.2f}",
            )
        )
    if r.name_factor > 1.0:
        out.append(
            Factor("name", "the document's title is a name the query says", f"×{r.name_factor:.2f}")
        )
    if r.reference_factor > 1.0:
        out.append(
            Factor(
                "references",
                f"other documents refer to it: {r.references}, by a link or by name in code",
                f"×{r.reference_factor:.2f}",
            )
        )
    if r.link_share > 0:
        out.append(
            Factor(
                "link list",
                f"mostly links: {r.link_share:.0%} of its text is link text",
                f"×{r.link_factor:.2f}",
            )
        )
    if r.long_share > 0:
        share = r.long_share
        said = (
            "a long question: ranked by semantic mode's rules"
            if share >= 1
            else f"a long question: {share:.0%} of the score from semantic mode's rules "
            f"(plain {r.plain_score:.2f}, rules {r.rules_score:.2f})"
        )
        out.append(Factor("question", said, f"{r.rules_score:.2f}"))
        if r.likelihood_share > 0:
            out.append(
                Factor(
                    "likelihood",
                    f"how likely its words make the question: {r.likelihood:.2f}, "
                    f"{r.likelihood_share:.0%} of the rules' score from query likelihood",
                    f"{r.likelihood:.2f}",
                )
            )
    if r.rerank_cosine is not None and r.before_rerank is not None:
        out.append(
            Factor(
                "re-read",
                f"a sentence encoder read it next to the query: cosine {r.rerank_cosine:.2f}, "
                f"score {r.before_rerank:.2f} → {why.relevance:.2f}",
                f"{r.rerank_cosine:.2f}",
            )
        )
    return out


def _hanging(head: Content, text: Content, width: int | None) -> Content:
    """``head`` then ``text``, wrapped to ``width`` under the text's first line."""
    indent = head.cell_length
    if width is None or width - indent < 16:
        return head + text
    lines = text.wrap(width - indent)
    pad = Content(" " * indent)
    return Content("\n").join([head + lines[0], *(pad + line for line in lines[1:])])


def explain_content(
    hit: Hit, why: Explanation | None, position: int | None, width: int | None = None
) -> Content:
    """The explain view of one hit (``why`` None: the search was not explained); sentences
    wrap under themselves at ``width``."""
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
    rows: list[Content] = [head]
    for f in factors(why):
        shown = bar(f.bar, f.bar_style) if f.bar is not None else Content(" " * BAR_WIDTH)
        head = Content.assemble(
            (f"{f.label:<11}", "bold"),
            shown,
            (f" {f.figure:>5}  ", "bold" if f.bar is None else ""),
        )
        rows.append(_hanging(head, Content.styled(f.sentence, "$text-muted"), width))
    rows.append(
        Content.assemble(
            (f"{'relevance':<11}", "bold"),
            bar(why.relevance, "$success"),
            (f" {why.relevance:5.2f}", "bold"),
            ("  the final score, 0-1", "$text-muted"),
        )
    )
    weights = f"weights: keyword {why.keyword_weight:.2f} · semantic {why.semantic_weight:.2f}"
    if why.soft_share > 0:
        weights += f" (cosine {1 - why.soft_share:.2f} / near words {why.soft_share:.2f})"
    rows.append(Content.styled(weights, "$text-muted"))
    # the rules the search applied in this mode (the core's own description, as in --explain)
    rows.append(Content.assemble(("rules  ", "bold"), (why.fusion, "$text-muted")))
    return Content("\n").join(rows)


class ExplainPanel(Static):
    """Shown under the results when the explain view is on."""

    def show(self, hit: Hit | None, why: Explanation | None, position: int | None) -> None:
        self._shown = (hit, why, position)
        if hit is None:
            self.update(Content.styled("Select a result to see why it ranks.", "$text-muted"))
        else:
            self.update(explain_content(hit, why, position, self.content_region.width or None))

    def on_resize(self) -> None:
        shown = getattr(self, "_shown", None)
        if shown is not None and shown[0] is not None:
            hit, why, position = shown
            self.update(explain_content(hit, why, position, self.content_region.width or None))
