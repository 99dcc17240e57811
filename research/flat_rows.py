"""What a user sees in the first ten rows of the flat list, against what the harness measures.

``tui-search eval`` counts a judged unit once, where its best chunk ranks. The flat list shows
rows: with ``one_result_per_section`` off, every matching chunk is a row, so a long section can
fill several of the first ten. For each judged question this runs the harness
(``run_evaluation``) with the setting off and on, takes the ranking's first ten rows, gives a
row that repeats a section shown above it no gain, and prints per set and mode: the rows that
repeat a section, the distinct sections in the first ten rows, and the nDCG@10 of those rows
beside the harness's nDCG@10 (docs/tried.md, "One row per section").

Usage:
    python research/flat_rows.py --index-root /tmp/idx --sets anthropic,rust,sample \\
        [--modes hybrid,keyword,semantic]

Sets and ``--index-root`` as in ``fusion_levers.py`` (one index folder per corpus).
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
from tui_search.core.sections import section_of  # noqa: E402
from tui_search.eval.harness import QueryTrace, run_evaluation  # noqa: E402
from tui_search.eval.metrics import ndcg_at_k  # noqa: E402

ROWS = 10


def row_units(trace: QueryTrace) -> tuple[list[str], int, int]:
    """(the first rows' judged units, a repeat of a section shown above as a unit of its own
    that gains nothing; distinct sections; repeated rows)."""
    rows = trace.ranked[:ROWS]
    seen: set[str] = set()
    units: list[str] = []
    for i, s in enumerate(rows):
        section = section_of(s.key)
        units.append(f"\0repeat{i}" if section in seen else trace.units.get(s.key, f"\0{i}"))
        seen.add(section)
    return units, len(seen), len(rows) - len(seen)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--index-root", type=Path, required=True)
    ap.add_argument("--sets", default="anthropic,rust,sample")
    ap.add_argument("--modes", default="hybrid")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "eval")
    args = ap.parse_args()
    modes = args.modes.split(",")
    print(
        "| set | mode | one result per section | repeated rows | distinct sections "
        "in the first ten rows | nDCG@10 of the rows | harness nDCG@10 |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in args.sets.split(","):
        where, split, index_name = SETS[name]
        dataset = ROOT / where[5:] if where.startswith("repo:") else args.shared / where
        for on in (False, True):
            traces: list[QueryTrace] = []
            settings = load_settings({"index_dir": args.index_root / index_name}).replace(
                one_result_per_section=on
            )
            report = run_evaluation(
                dataset, settings=settings, modes=modes, split=split, on_query=traces.append
            )
            for mode in modes:
                ndcgs: list[float] = []
                distinct: list[int] = []
                repeated = 0
                for t in traces:
                    if t.mode != mode:
                        continue
                    units, n_sections, n_repeats = row_units(t)
                    ndcgs.append(ndcg_at_k(units, t.relevant, ROWS))
                    distinct.append(n_sections)
                    repeated += n_repeats
                print(
                    f"| {name} | {mode} | {'on' if on else 'off'} | {repeated} / "
                    f"{ROWS * len(ndcgs)} | {statistics.fmean(distinct):.2f} | "
                    f"{statistics.fmean(ndcgs):.4f} | {report.modes[mode].ndcg_at_10:.4f} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
