"""The files of a ranking, for grouped results and the agents' ``find_documents``: each file
ranked once, and near-identical copies of a page folded under the first.

A file ranks by its best section's score, which takes ``document_file_share`` of its value from
the file as a whole (``whole_file_scores``: its whole-file BM25F and the cosine of its mean
chunk vector, fused with the ranking's own arm weights). The flat section ranking is left as
it is: only the order of files changes.

Two files are copies when their bytes are the same, or when their titles are the same and
their mean chunk vectors nearly so (``COPY_COSINE``): the same page kept in several guides
(the EC2 guide for Linux and the one for Windows). The first copy in the order keeps the row;
the others are listed on it ("also in"), so they neither take the rows below nor go unseen.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tui_search.core.ranking.fusion import minmax

#: The cosine of two files' mean chunk vectors from which two files of the same title are
#: copies of one page.
COPY_COSINE = 0.95

_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class FileSignature:
    """What tells copies apart: a file's content hash, its title and its mean chunk vector."""

    hash: str
    title: str
    vector: np.ndarray | None

    @property
    def title_key(self) -> str:
        return _SPACE.sub(" ", self.title).strip().casefold()


def whole_file_scores(
    keyword: Mapping[str, float],
    cosine: Mapping[str, float],
    weights: tuple[float, float],
    docs: Sequence[str],
) -> dict[str, float]:
    """Each of ``docs`` scored as a whole file (0-1): its whole-file BM25F and its mean
    vector's cosine, each min-max scaled over ``docs`` (as the arms are fused), mixed by the ranking's arm weights
    (keyword mode: the BM25F alone; semantic mode: the cosine alone)."""
    kw_w, sem_w = weights
    total = kw_w + sem_w
    if total <= 0:
        return {}
    kw = minmax({d: keyword.get(d, 0.0) for d in docs}) if kw_w > 0 else {}
    cos = minmax({d: cosine[d] for d in docs if d in cosine}) if sem_w > 0 else {}
    return {d: (kw_w * kw.get(d, 0.0) + sem_w * cos.get(d, 0.0)) / total for d in docs}


def file_order(
    best: Sequence[tuple[str, float]], whole: Mapping[str, float], share: float
) -> list[str]:
    """The files of ``best`` ((document, its best section's score), best first) re-ordered by
    ``(1 - share) x best (scaled to the best file's) + share x whole``; ties keep their order."""
    if share <= 0 or not best:
        return [d for d, _ in best]
    top = max(score for _, score in best) or 1.0
    scored = [
        ((1 - share) * score / top + share * whole.get(d, 0.0), -i, d)
        for i, (d, score) in enumerate(best)
    ]
    scored.sort(reverse=True)
    return [d for _, _, d in scored]


def are_copies(a: FileSignature, b: FileSignature) -> bool:
    """Whether two files are the same page: the same bytes, or the same title and mean
    chunk vectors at least ``COPY_COSINE`` alike."""
    if a.hash == b.hash:
        return True
    if a.title_key != b.title_key or not a.title_key or a.vector is None or b.vector is None:
        return False
    return float(a.vector @ b.vector) >= COPY_COSINE


def fold_copies(
    order: Sequence[str], signatures: Mapping[str, FileSignature], rows: int
) -> list[tuple[str, list[str]]]:
    """The first ``rows`` rows of ``order``: each file, with every later file of ``order``
    that is its copy folded under it (in their order), so a copy ranked far below is not a
    row of a later page either. A file without a signature is its own row."""
    out: list[tuple[str, list[str]]] = []
    # the rows so far by content hash and by title: a copy shares one of them with its row
    by_hash: dict[str, list[str]] = {}
    by_title: dict[str, list[tuple[FileSignature, list[str]]]] = {}
    for doc in order:
        sig = signatures.get(doc)
        home = None
        if sig is not None:
            home = by_hash.get(sig.hash)
            if home is None:
                same_title = by_title.get(sig.title_key, ())
                home = next((c for lead, c in same_title if are_copies(lead, sig)), None)
        if home is not None:
            home.append(doc)
        elif len(out) < rows:
            copies: list[str] = []
            out.append((doc, copies))
            if sig is not None:
                by_hash.setdefault(sig.hash, copies)
                if sig.title_key:
                    by_title.setdefault(sig.title_key, []).append((sig, copies))
    return out
