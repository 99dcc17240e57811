"""The evaluation harness behind ``tui-search eval``.

Two dataset layouts:

* **BEIR**: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` and ``qrels.tsv``
  (``queries.train.jsonl`` / ``qrels.train.tsv`` for ``split="train"``). Every corpus document
  becomes a markdown file ``# {title}\\n\\n{text}`` in a generated workspace kept in a cache
  folder, which is indexed exactly like a user's workspace (same chunking, same indexes).
* **Workspace**: ``workspace/`` (a markdown tree, may be a symlink), ``queries.jsonl`` and
  ``qrels.tsv`` whose corpus ids are workspace-relative file paths or section ids
  (``<doc>:<section-slug>``).

Each query is searched as plain text (not the query language) through ``SearchEngine.rank``,
the ranking ``search`` pages through; chunks collapse to the judged unit (a document, or a
section when the query is judged by section) by their best chunk. Reported per mode: nDCG@10,
MRR@10, Recall@100, hit@1 (the first judged unit is relevant) and the latency of ranking a query (plan, both arms, fusion, record lookup).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tui_search.config import Settings, user_cache_dir
from tui_search.core.errors import DatasetError, IndexBusyError
from tui_search.core.index import WriterLock
from tui_search.core.plan import MODES, as_mode, plan_plain
from tui_search.core.ranking.policy import MODES as POLICIES
from tui_search.core.results import Progress
from tui_search.eval.metrics import hit_at_k, mrr_at_k, ndcg_at_k, percentile, recall_at_k

if TYPE_CHECKING:
    from tui_search.core.ranking.fusion import Scored

#: Bump when the BEIR -> markdown conversion changes (forces the generated workspace to be redone).
CONVERSION_VERSION = "1"
NDCG_K = 10
MRR_K = 10
RECALL_K = 100

ProgressFn = Callable[[Progress], None]


@dataclass(frozen=True)
class QueryTrace:
    """One judged question's ranking as the harness scored it (``run_evaluation``'s
    ``on_query``): the fused candidates with their arm scores, and the judged unit (file or
    section id) each candidate counts as. Lets weights be judged offline
    (``signals.refuse``, ``research/fusion_weights.py``)."""

    mode: str
    qid: str
    relevant: dict[str, float]
    ranked: list[Scored]
    units: dict[str, str]


def judged_units(keys: Iterable[str], units: Mapping[str, str], limit: int) -> list[str]:
    """The distinct judged units of a ranking, in order, at most ``limit``: a unit counts
    where its best chunk ranks."""
    out: list[str] = []
    seen: set[str] = set()
    for key in keys:
        unit = units.get(key)
        if unit is not None and unit not in seen:
            seen.add(unit)
            out.append(unit)
            if len(out) >= limit:
                break
    return out


@dataclass(frozen=True)
class ModeResult:
    mode: str
    ndcg_at_10: float
    mrr_at_10: float
    recall_at_100: float
    p50_ms: float
    p95_ms: float
    #: Share of the questions whose first result (judged unit) is relevant.
    hit_at_1: float = 0.0
    #: Per query id: nDCG@10 (for paired comparisons between modes).
    per_query: Mapping[str, float] = field(default_factory=dict, compare=False, repr=False)
    #: A set judged by file: the files of a grouped search (``find_documents``), scored the
    #: same way (a copy folded under a file counts right after it). None otherwise.
    grouped: GroupedResult | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ndcg@10": round(self.ndcg_at_10, 4),
            "mrr@10": round(self.mrr_at_10, 4),
            "recall@100": round(self.recall_at_100, 4),
            "hit@1": round(self.hit_at_1, 4),
            "p50_ms": round(self.p50_ms, 2),
            "p95_ms": round(self.p95_ms, 2),
        }
        if self.grouped is not None:
            out["grouped"] = self.grouped.to_json()
        return out


@dataclass(frozen=True)
class GroupedResult:
    """The files of a grouped search, judged by file: nDCG@10, hit@1 and Recall@100."""

    ndcg_at_10: float
    hit_at_1: float
    recall_at_100: float

    def to_json(self) -> dict[str, float]:
        return {
            "ndcg@10": round(self.ndcg_at_10, 4),
            "hit@1": round(self.hit_at_1, 4),
            "recall@100": round(self.recall_at_100, 4),
        }


@dataclass(frozen=True)
class EvalReport:
    dataset: str
    kind: str  # "beir" | "workspace"
    split: str
    queries: int
    documents: int
    chunks: int
    model: str
    index_dir: str
    modes: dict[str, ModeResult]
    warnings: tuple[str, ...] = ()
    #: What making the re-ranker's missing vectors before the questions took (``made``,
    #: ``runtime``, ``cpu_s``, ``took_s``); None when no mode re-ranks.
    rerank_fill: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "kind": self.kind,
            "split": self.split,
            "queries": self.queries,
            "documents": self.documents,
            "chunks": self.chunks,
            "model": self.model,
            "modes": {m: r.to_json() for m, r in self.modes.items()},
            "warnings": list(self.warnings),
            **({"rerank_fill": self.rerank_fill} if self.rerank_fill is not None else {}),
        }

    def table(self) -> str:
        head = f"{self.dataset} ({self.kind}, {self.split} split): {self.queries} queries, "
        head += f"{self.documents} documents, {self.chunks} chunks; model {Path(self.model).name}"
        cols = ("mode", "nDCG@10", "MRR@10", "Recall@100", "hit@1", "p50 ms", "p95 ms")
        rows = [
            (
                r.mode,
                f"{r.ndcg_at_10:.3f}",
                f"{r.mrr_at_10:.3f}",
                f"{r.recall_at_100:.3f}",
                f"{r.hit_at_1:.3f}",
                f"{r.p50_ms:.1f}",
                f"{r.p95_ms:.1f}",
            )
            for r in self.modes.values()
        ]
        widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(cols)]
        lines = [head, ""]
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(cols, widths, strict=True))
            )
        )
        lines.append("  ".join("-" * w for w in widths))
        for row in rows:
            lines.append(
                "  ".join(
                    v.ljust(w) if i == 0 else v.rjust(w)
                    for i, (v, w) in enumerate(zip(row, widths, strict=True))
                )
            )
        lines.extend(f"warning: {w}" for w in self.warnings)
        return "\n".join(lines)


# -- dataset files -----------------------------------------------------------------------------
def _iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    try:
        with path.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"{path}:{n}: not valid JSON ({exc.msg})") from exc
                if not isinstance(obj, dict) or "_id" not in obj:
                    raise DatasetError(f"{path}:{n}: expected an object with an _id")
                yield obj
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc.strerror or exc}") from exc


def load_queries(path: Path) -> dict[str, str]:
    return {str(o["_id"]): str(o.get("text") or "") for o in _iter_jsonl(path)}


def load_qrels(path: Path) -> dict[str, dict[str, float]]:
    """query id -> {corpus id: grade}; only grades > 0 are kept. The first line is a header."""
    out: dict[str, dict[str, float]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc.strerror or exc}") from exc
    for n, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        parts = line.rstrip("\n").split("\t")
        if len(parts) < 3:
            raise DatasetError(f"{path}:{n}: expected query-id<TAB>corpus-id<TAB>score")
        try:
            grade = float(parts[2])
        except ValueError as exc:
            raise DatasetError(f"{path}:{n}: the score {parts[2]!r} is not a number") from exc
        if grade > 0:
            out.setdefault(parts[0].strip(), {})[parts[1].strip()] = grade
    return out


def split_files(dataset: Path, split: str) -> tuple[Path, Path]:
    if split == "test":
        return dataset / "queries.jsonl", dataset / "qrels.tsv"
    if split == "train":
        return dataset / "queries.train.jsonl", dataset / "qrels.train.tsv"
    raise DatasetError(f"unknown split {split!r}; use test or train")


def dataset_kind(dataset: Path) -> str:
    if not dataset.is_dir():
        raise DatasetError(f"{dataset} is not a folder")
    if (dataset / "workspace").is_dir() or (dataset / "workspace").is_file():
        return "workspace"
    if (dataset / "corpus.jsonl").is_file():
        return "beir"
    raise DatasetError(
        f"{dataset} is neither a BEIR folder (corpus.jsonl) nor a workspace evaluation (workspace/)"
    )


# -- workspace pointers ------------------------------------------------------------------------
#: Longest chain of ``workspace`` pointer files followed before giving up (a loop).
MAX_POINTER_HOPS = 4


def read_pointer(pointer: Path) -> tuple[str, str | None]:
    """A ``workspace`` pointer file: the first line that is not blank or a ``#`` comment is a
    path (a folder, or a ``.tar.gz`` archive of the workspace); an optional ``sha256 HEX``
    line pins an archive's content."""
    try:
        lines = pointer.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read the workspace pointer {pointer}: {exc}") from exc
    target: str | None = None
    digest: str | None = None
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.lower().startswith("sha256 "):
            digest = line.split(None, 1)[1].strip().lower()
        elif target is None:
            target = line
    if not target:
        raise DatasetError(f"the workspace pointer {pointer} names no path")
    return target, digest


def locate(target: str, start: Path) -> Path:
    """Resolve a pointer's path: absolute as is; relative from ``start``, then from each of
    its parent folders (so ``shared/corpora/x.tar.gz`` is found from any checkout below the
    folder that holds ``shared/``)."""
    path = Path(target).expanduser()
    if path.is_absolute():
        if path.exists():
            return path
        raise DatasetError(f"the workspace pointer names {path}, which does not exist")
    start = start.absolute()
    for base in (start, *start.parents):
        candidate = base / path
        if candidate.exists():
            return candidate
    raise DatasetError(f"{target} (named by {start / 'workspace'}) is not found from {start}")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_stamp(source: Path, extra: str = "") -> str:
    """What a generated workspace came from: path, size, mtime (and ``extra``); a changed
    source makes the stamp differ, so the workspace is made again."""
    try:
        st = source.stat()
    except OSError as exc:
        raise DatasetError(f"cannot read {source}: {exc.strerror or exc}") from exc
    stamp = f"{source.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    return f"{stamp}:{extra}" if extra else stamp


#: Longest an evaluation waits for another one unpacking the same archive (seconds).
UNPACK_WAIT = 600.0


def unpack_archive(archive: Path, digest: str | None, target: Path, progress: ProgressFn) -> Path:
    """Unpack a ``.tar.gz`` workspace once into ``target`` (a stamp records what it came
    from); members that would land outside ``target`` are refused (tarfile's data filter).
    Two evaluations of the same archive at once (by section and by file, say) take turns: the
    second waits for the first's unpacking and then finds it done, instead of deleting the
    tree the first is writing."""
    stamp_value = source_stamp(archive, digest or "")
    stamp = target.parent / "workspace.stamp"

    def unpacked() -> bool:
        return (
            target.is_dir() and stamp.is_file() and stamp.read_text(encoding="utf-8") == stamp_value
        )

    if unpacked():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with WriterLock(target.parent / "workspace.lock").hold(timeout=UNPACK_WAIT):
            if unpacked():
                return target
            return _unpack(archive, digest, target, stamp, stamp_value, progress)
    except IndexBusyError:
        raise DatasetError(
            f"another evaluation has been unpacking {archive.name} into {target.parent} for "
            f"{UNPACK_WAIT:.0f} s; try again when it ends"
        ) from None


def _unpack(
    archive: Path,
    digest: str | None,
    target: Path,
    stamp: Path,
    stamp_value: str,
    progress: ProgressFn,
) -> Path:
    import shutil
    import tarfile

    if digest is not None:
        actual = sha256_of(archive)
        if actual != digest:
            raise DatasetError(
                f"{archive} has sha256 {actual[:16]}…, the dataset was judged on {digest[:16]}…"
            )
    progress(Progress("scan", 0, 0, f"unpacking {archive.name}"))
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    try:
        with tarfile.open(archive, "r:*") as tar:
            tar.extractall(target, filter="data")
    except (OSError, tarfile.TarError) as exc:
        shutil.rmtree(target, ignore_errors=True)
        raise DatasetError(f"cannot unpack {archive}: {exc}") from exc
    stamp.write_text(stamp_value, encoding="utf-8")
    return target


def resolve_workspace(
    dataset: Path, cache: Path | None, progress: ProgressFn
) -> tuple[Path, Path | None]:
    """The markdown tree of a workspace evaluation: ``workspace/`` itself (folder or symlink),
    or what a ``workspace`` pointer file names (a folder, or an archive unpacked into
    ``cache/workspace`` or the per-user cache). The second value is the folder an unpacked
    archive's index belongs in (``None``: the workspace's usual index folder)."""
    entry = dataset / "workspace"
    for _ in range(MAX_POINTER_HOPS):
        if entry.is_dir():
            return entry, None
        target, digest = read_pointer(entry)
        found = locate(target, entry.parent)
        if found.is_file() and found.name.endswith((".tar.gz", ".tgz", ".tar")):
            base = cache if cache is not None else dataset_cache_dir(found)
            return unpack_archive(found, digest, base / "workspace", progress), base / "index"
        entry = found
    raise DatasetError(f"{dataset / 'workspace'}: more than {MAX_POINTER_HOPS} pointers in a row")


# -- BEIR corpus -> markdown workspace ---------------------------------------------------------
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def file_name_for(corpus_id: str) -> str:
    """A safe, unique file name for a corpus id (ids that need escaping get a hash suffix)."""
    safe = _UNSAFE.sub("_", corpus_id)[:80]
    if safe != corpus_id or not safe:
        safe = f"{safe}-{hashlib.sha1(corpus_id.encode()).hexdigest()[:10]}"
    return f"{safe}.md"


def beir_markdown(title: str, text: str) -> str:
    title = " ".join(title.split())
    body = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    return f"# {title}\n\n{body}\n" if title else f"{body}\n"


def dataset_cache_dir(dataset: Path) -> Path:
    absolute = dataset.expanduser().resolve()
    digest = hashlib.sha256(str(absolute).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in absolute.name)[:40] or "dataset"
    return user_cache_dir() / "eval" / f"{name}-{digest}"


def materialize_beir(corpus: Path, workspace: Path, progress: ProgressFn) -> dict[str, str]:
    """Write the corpus as markdown files (once; a stamp records the corpus it came from).

    Returns file path (workspace-relative) -> corpus id.
    """
    stamp_value = f"{CONVERSION_VERSION}:{source_stamp(corpus)}"
    stamp = workspace.parent / "workspace.stamp"
    id_map_file = workspace.parent / "ids.json"
    if (
        stamp.is_file()
        and id_map_file.is_file()
        and workspace.is_dir()
        and stamp.read_text(encoding="utf-8") == stamp_value
    ):
        return dict(json.loads(id_map_file.read_text(encoding="utf-8")))
    workspace.mkdir(parents=True, exist_ok=True)
    progress(Progress("scan", 0, 0, "converting the corpus to markdown"))
    id_map: dict[str, str] = {}
    wanted: set[str] = set()
    for n, obj in enumerate(_iter_jsonl(corpus)):
        cid = str(obj["_id"])
        name = file_name_for(cid)
        if name in id_map and id_map[name] != cid:
            raise DatasetError(f"corpus ids {id_map[name]!r} and {cid!r} map to the same file")
        id_map[name] = cid
        wanted.add(name)
        content = beir_markdown(str(obj.get("title") or ""), str(obj.get("text") or ""))
        target = workspace / name
        data = content.encode("utf-8")
        try:
            if not target.is_file() or target.read_bytes() != data:
                target.write_bytes(data)
        except OSError as exc:
            raise DatasetError(f"cannot write {target}: {exc.strerror or exc}") from exc
        if n % 500 == 0:
            progress(Progress("scan", n, 0, f"converting the corpus to markdown ({n} documents)"))
    for old in workspace.iterdir():
        if old.name not in wanted and old.suffix == ".md":
            old.unlink()
    id_map_file.write_text(json.dumps(id_map), encoding="utf-8")
    stamp.write_text(stamp_value, encoding="utf-8")
    return id_map


# -- judged units ------------------------------------------------------------------------------
def resolve_workspace_qrels(
    qrels: dict[str, dict[str, float]], files: Mapping[str, Any], sections: set[str]
) -> tuple[dict[str, dict[str, float]], list[str]]:
    """Accept file paths, doc ids (path without extension) and section ids; warn on unknown ids."""
    by_doc = {rec.doc: path for path, rec in files.items()}
    out: dict[str, dict[str, float]] = {}
    unknown: list[str] = []
    for qid, judged in qrels.items():
        fixed: dict[str, float] = {}
        for cid, grade in judged.items():
            cid_n = cid.lstrip("./") if cid.startswith("./") else cid
            if cid_n in files or cid_n in sections:
                fixed[cid_n] = grade
            elif cid_n in by_doc:
                fixed[by_doc[cid_n]] = grade
            else:
                unknown.append(cid)
        if fixed:
            out[qid] = fixed
    return out, unknown


# -- the run -----------------------------------------------------------------------------------
def run_evaluation(
    dataset: Path,
    *,
    settings: Settings,
    modes: list[str],
    split: str = "test",
    progress: ProgressFn | None = None,
    engine_factory: Callable[[Settings], Any] | None = None,
    on_query: Callable[[QueryTrace], None] | None = None,
) -> EvalReport:
    """Index the dataset (cached), search every judged query in every mode, and score it.
    ``on_query`` receives each question's ranking (``QueryTrace``) as it is scored."""
    from tui_search.core.engine import SearchEngine

    emit: ProgressFn = progress or (lambda p: None)
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise DatasetError(f"unknown mode {', '.join(bad) or '(none)'}; use {', '.join(MODES)}")
    dataset = dataset.expanduser()
    kind = dataset_kind(dataset)
    queries_file, qrels_file = split_files(dataset, split)
    for f in (queries_file, qrels_file):
        if not f.is_file():
            raise DatasetError(f"{dataset} has no {f.name} (needed for the {split} split)")
    queries = load_queries(queries_file)
    qrels = load_qrels(qrels_file)
    warnings: list[str] = []

    if kind == "beir":
        base = settings.index_dir.expanduser() if settings.index_dir else dataset_cache_dir(dataset)
        workspace = base / "workspace"
        id_map = materialize_beir(dataset / "corpus.jsonl", workspace, emit)
        run_settings = dataclasses.replace(settings, workspace=workspace, index_dir=base / "index")
    else:
        chosen = settings.index_dir.expanduser() if settings.index_dir else None
        workspace, archive_index = resolve_workspace(dataset, chosen, emit)
        id_map = {}
        run_settings = dataclasses.replace(settings, workspace=workspace.resolve())
        if archive_index is not None:  # an unpacked archive: its index sits beside it
            run_settings = dataclasses.replace(run_settings, index_dir=archive_index)

    factory = engine_factory or SearchEngine
    engine = factory(run_settings)
    try:
        engine.sync(emit)
        # the settled ranking: every re-ranker vector made before the first question
        fill = None
        reranks = any(POLICIES[as_mode(m)].rerank for m in modes)
        if getattr(engine, "reranker", None) is not None and reranks:
            emit(Progress("rerank", 0, 0, "making the re-ranker's vectors"))
            fill = engine.make_rerank_vectors()
        files = engine.files()
        if kind == "beir":
            path_to_id = {p: id_map[p] for p in files if p in id_map}
            known_ids = set(path_to_id.values())
            missing = {c for judged in qrels.values() for c in judged if c not in known_ids}
            if missing:
                warnings.append(f"{len(missing)} judged corpus ids are not in the corpus")
            section_level: set[str] = set()
        else:
            path_to_id = {p: p for p in files}
            section_level = engine.section_ids()
            qrels, unknown = resolve_workspace_qrels(qrels, files, section_level)
            if unknown:
                shown = ", ".join(sorted(set(unknown))[:5])
                warnings.append(f"{len(set(unknown))} judged ids are not in the workspace: {shown}")
        judged = [(qid, queries[qid]) for qid in queries if qid in qrels and queries[qid].strip()]
        no_text = [qid for qid in qrels if qid not in queries]
        if no_text:
            warnings.append(f"{len(no_text)} judged query ids have no query text")
        if not judged:
            raise DatasetError(f"{dataset}: no query has both text and relevance judgements")

        # a set judged by file also scores the files of a grouped search
        by_file = all(c in files or kind == "beir" for qid, _ in judged for c in qrels[qid])
        results: dict[str, ModeResult] = {}
        total = len(judged) * len(modes)
        done = 0
        for mode in modes:
            # warm up (searcher, query encoder) so the first query's latency is not an outlier
            engine.rank(plan_plain(judged[0][1]), mode)
            ndcgs: dict[str, float] = {}
            mrrs: list[float] = []
            recalls: list[float] = []
            hits: list[float] = []
            times: list[float] = []
            grouped: list[tuple[float, float, float]] = []
            for qid, text in judged:
                relevant = qrels[qid]
                by_section = kind == "workspace" and any(
                    c in section_level and c not in files for c in relevant
                )
                started = time.perf_counter()
                if by_file:
                    ranked, rows = engine.rank_files(plan_plain(text), mode)
                else:
                    ranked, _ = engine.rank(plan_plain(text), mode)
                records = engine.records(s.key for s in ranked)
                times.append((time.perf_counter() - started) * 1000)
                if by_file:
                    listed = [path_to_id.get(p) for row in rows for p in (row[0], *row[1])]
                    file_units = [u for u in listed if u is not None]
                    grouped.append(
                        (
                            ndcg_at_k(file_units, relevant, NDCG_K),
                            hit_at_k(file_units, relevant, 1),
                            recall_at_k(file_units, relevant, RECALL_K),
                        )
                    )
                unit_of: dict[str, str] = {}
                for key, rec in records.items():
                    doc_id = path_to_id.get(rec.file_path)
                    if doc_id is not None:
                        section_level_unit = by_section and doc_id not in relevant
                        unit_of[key] = rec.section_id if section_level_unit else doc_id
                units = judged_units((s.key for s in ranked), unit_of, RECALL_K)
                if on_query is not None:
                    on_query(QueryTrace(mode, qid, dict(relevant), ranked, unit_of))
                ndcgs[qid] = ndcg_at_k(units, relevant, NDCG_K)
                mrrs.append(mrr_at_k(units, relevant, MRR_K))
                recalls.append(recall_at_k(units, relevant, RECALL_K))
                hits.append(hit_at_k(units, relevant, 1))
                done += 1
                if done % 10 == 0 or done == total:
                    emit(Progress("search", done, total, mode))
            n = len(judged)
            results[mode] = ModeResult(
                mode=mode,
                ndcg_at_10=sum(ndcgs.values()) / n,
                mrr_at_10=sum(mrrs) / n,
                recall_at_100=sum(recalls) / n,
                hit_at_1=sum(hits) / n,
                p50_ms=percentile(times, 50),
                p95_ms=percentile(times, 95),
                per_query=ndcgs,
                grouped=GroupedResult(*(sum(col) / n for col in zip(*grouped, strict=True)))
                if grouped
                else None,
            )
        stats = engine.stats()
        docs, chunks, model = stats.documents, stats.chunks, stats.model
        emit(Progress("done", total, total))
        return EvalReport(
            dataset=dataset.name if kind == "beir" else str(dataset.name),
            kind=kind,
            split=split,
            queries=len(judged),
            documents=docs,
            chunks=chunks,
            model=str(model),
            index_dir=str(engine.index_dir),
            modes=results,
            warnings=tuple(warnings),
            rerank_fill=fill,
        )
    finally:
        engine.close()
