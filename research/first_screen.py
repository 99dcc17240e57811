"""What the first screen of flat results shows, file by file: as ranked, or with a file's
rows past the first ``--keep`` folded into one "+N more in this file" row.

A question often ranks several sections of one file first ("how do I restore a backup" fills
the first screen with ``restore-backup.md``). For each judged question of the file-level sets
this runs the harness (``run_evaluation``, hybrid), lays the ranking out as the app's flat
list would (a folded file takes ``--keep`` rows plus one "+N more" row, which gains nothing),
and prints per set and screen size: the distinct files on the first screen, the judged files
it shows (recall), and the file-level nDCG of its rows (a file counts once, where it first
shows).

Usage:
    python research/first_screen.py --index-root /tmp/idx --sets anthropic-file,rust-file,sample

Sets and ``--index-root`` as in ``fusion_weights.py`` (one index folder per corpus).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "research"))

from fusion_weights import SETS  # noqa: E402

from tui_search.config import load_settings  # noqa: E402
from tui_search.core.ranking.fusion import document_of  # noqa: E402
from tui_search.eval.harness import QueryTrace, run_evaluation  # noqa: E402
from tui_search.eval.metrics import ndcg_at_k  # noqa: E402

#: Rows of a first screen: the wide view at 48 lines (~8 hits), the compact view (~38).
SCREENS = (8, 38)


def screen_files(trace: QueryTrace, rows: int, keep: int | None) -> list[str]:
    """The files of the first ``rows`` rows, one entry per row ("" for a fold row or a row
    repeating a file shown above); ``keep`` None: as ranked, no folding."""
    out: list[str] = []
    shown: dict[str, int] = {}
    folded: set[str] = set()
    for s in trace.ranked:
        if len(out) >= rows:
            break
        doc = document_of(s.key)
        unit = trace.units.get(s.key, doc)
        count = shown.get(doc, 0)
        if keep is not None and count >= keep:
            if doc not in folded:  # the "+N more in this file" row
                folded.add(doc)
                out.append("")
            continue
        shown[doc] = count + 1
        out.append(unit if count == 0 else "")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--index-root", type=Path, required=True)
    ap.add_argument("--sets", default="anthropic-file,rust-file,sample")
    ap.add_argument("--keep", type=int, default=2, help="rows of a file before the fold")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "eval")
    args = ap.parse_args()
    print(
        "| set | screen rows | layout | distinct files | judged files shown (recall) | "
        "file nDCG of the rows |"
    )
    print("|---|---|---|---|---|---|")
    for name in args.sets.split(","):
        where, split, index_name = SETS[name]
        dataset = ROOT / where[5:] if where.startswith("repo:") else args.shared / where
        traces: list[QueryTrace] = []
        settings = load_settings({"index_dir": args.index_root / index_name})
        run_evaluation(
            dataset, settings=settings, modes=["hybrid"], split=split, on_query=traces.append
        )
        for rows in SCREENS:
            for keep in (None, args.keep):
                files, recall, ndcg = [], [], []
                for t in traces:
                    units = screen_files(t, rows, keep)
                    distinct = [u for u in units if u]
                    files.append(
                        len({document_of(k.key) for k in t.ranked[: len(units)]})
                        if keep is None
                        else len(distinct)
                    )
                    judged = {u for u, g in t.relevant.items() if g > 0}
                    if judged:
                        recall.append(len(judged & set(distinct)) / len(judged))
                    ndcg.append(ndcg_at_k(units, t.relevant, rows))
                layout = "as ranked" if keep is None else f"fold after {keep}"
                print(
                    f"| {name} | {rows} | {layout} | {statistics.fmean(files):.2f} | "
                    f"{statistics.fmean(recall):.3f} | {statistics.fmean(ndcg):.4f} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
