"""What a new user or agent meets first, as whole processes, beside qmd and ripgrep.

Two checkouts of tui-search run in turn in the same run, ``old`` (``--old``, e.g. a worktree of
the main branch) and ``new`` (this one), with this virtualenv's interpreter, each with its own
index; qmd (``@tobilu/qmd``, installed with ``npm install node@22 @tobilu/qmd bun`` under
``--qmd-prefix``; its BM25 path, the one that runs offline) and ``rg -l`` are timed between
them. Each timing is a whole process tree: wall seconds, and the CPU seconds of every process
it started, forked servers and their workers included (this process adopts them as a child
subreaper and waits for all of them).

Rows, on the Obsidian help vault and the English tldr pages:

- ``search --json``, a repeat question: questions whose head already has its re-ranker
  vectors (each asked once first), asked again; peak RSS of the search process; the same
  with the re-ranker off; ``qmd search --json -n 10``.
- the first question on a fresh index (every section lacks its re-ranker vector): one
  process, on an index ``index`` has just built (the background fill kept out of the timing:
  it runs on the other core; the old checkout makes the head's vectors in the search).
- ``eval`` on a fresh index: hybrid p50 per question (tests/data/sample_eval; this checkout
  makes every vector before the first question and says how long that took).
- re-ranker vectors (``index --rerank``): CPU seconds per section made, on the first
  ``--rerank-files`` notes of the vault.
- cold ``index``: wall and CPU seconds beside ``qmd collection add``; on the vault beside the
  floor of bare Whoosh writing plus static encoding of the same sections (a process of its
  own, same run); on tldr, the cores the tree kept busy (CPU / wall).
- an exact identifier (``authorized_keys``) on tldr beside ``rg -l``.

Usage:
    python benchmarks/bench_first_contact.py --old /work/wt-old \\
        --vault /tmp/corpora/obsidian-help/obsidian-help-en \\
        --tldr /tmp/corpora/tldr-pages/tldr-en --qmd-prefix /tmp/qmd-prefix
The processes run as on a user's machine, with Python's bytecode cache on.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from common import ROOT, pct

VAULT_QUESTIONS = [
    "how do I link to a heading",
    "embed a file in a note",
    "sync my vault between devices",
    "keyboard shortcut for the command palette",
    "change the default folder for new notes",
    "what are properties",
]
TLDR_QUESTIONS = [
    "copy my public key to a remote server",
    "list open network ports",
    "compress a folder into a tar archive",
    "show disk usage of a directory",
    "find files by name recursively",
    "follow the end of a log file",
]
IDENTIFIER = "authorized_keys"
#: No background fill of re-ranker vectors (``core.rerank_fill``): a run waits for every
#: process its command leaves behind (the fill too), so a command whose own cost is measured runs
#: without it. The old checkout ignores it.
NO_FILL = {"TUI_SEARCH_RERANK_FILL": "0"}
CLI = "import sys; sys.argv[0] = 'tui-search'; from tui_search.cli import run; run()"
PR_SET_CHILD_SUBREAPER = 36


@dataclass
class Timing:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)

    def add(self, wall: float, cpu: float, rss: float) -> None:
        self.wall.append(wall)
        self.cpu.append(cpu)
        self.rss.append(rss)

    @property
    def w(self) -> float:
        return pct(self.wall, 0.5)

    @property
    def c(self) -> float:
        return pct(self.cpu, 0.5)


def adopt_orphans() -> None:
    """Become the child subreaper: processes our children leave behind (a fork server and
    its workers) are re-parented here, so their CPU time is counted when they are waited for."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


class CoresAsked:
    """How many cores this process's children (the tree being timed, orphans included) ask
    for: every ``STEP`` s, how many of their threads are in state R (on a core, or ready and
    waiting for one), at most the host's cores; the mean over the run. Other work on the host
    does not lower it, as it lowers CPU / wall: a thread waiting for a core still asks for it,
    one waiting for another process does not."""

    STEP = 0.01
    #: The process tree is listed again every this many samples (a read of all of /proc).
    RESCAN = 10

    def __init__(self) -> None:
        self.cores = os.cpu_count() or 1
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CoresAsked:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mean(self) -> float:
        return sum(self.samples) / len(self.samples) if self.samples else 0.0

    @staticmethod
    def _stat(path: str) -> list[str] | None:
        try:
            with open(f"{path}/stat") as fh:
                return fh.read().rpartition(")")[2].split()
        except OSError:
            return None

    def _states(self, pid: int) -> list[str]:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return []
        return [f[0] for tid in tids if (f := self._stat(f"/proc/{pid}/task/{tid}")) is not None]

    def _tree(self) -> list[int]:
        parents: dict[int, int] = {}
        for name in os.listdir("/proc"):
            if name.isdigit() and (fields := self._stat(f"/proc/{name}")) is not None:
                parents[int(name)] = int(fields[1])
        tree, grew = {os.getpid()}, True
        while grew:
            grew = False
            for pid, parent in parents.items():
                if parent in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        tree.discard(os.getpid())
        return list(tree)

    def _run(self) -> None:
        pids: list[int] = []
        n = 0
        while not self._stop.wait(self.STEP):
            if n % self.RESCAN == 0:
                pids = self._tree()
            n += 1
            states = [state for pid in pids for state in self._states(pid)]
            if states:
                self.samples.append(min(self.cores, states.count("R")))


def run_tree(
    cmd: Sequence[str],
    env: dict[str, str],
    out: Path | None = None,
    asked: list[float] | None = None,
) -> tuple[float, float, float]:
    """(wall s, CPU s of the whole process tree, peak RSS MB of the first process); the
    cores it asked for (``CoresAsked``) appended to ``asked`` when given."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sink = open(out, "wb") if out is not None else subprocess.DEVNULL  # noqa: SIM115
    sampler = CoresAsked() if asked is not None else contextlib.nullcontext()
    t0 = time.perf_counter()
    try:
        with sampler:
            proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.DEVNULL, env=env)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
            while True:  # the orphans: a fork server ends when its parent does
                try:
                    os.wait4(-1, 0)
                except ChildProcessError:
                    break
    finally:
        if out is not None:
            sink.close()  # type: ignore[union-attr]
    if isinstance(sampler, CoresAsked):
        asked.append(sampler.mean)  # type: ignore[union-attr]
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise subprocess.CalledProcessError(code, list(cmd))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, usage.ru_maxrss / 1024


class Side:
    """One checkout of tui-search, run as ``tui-search`` from its own folder."""

    def __init__(self, name: str, root: Path, scratch: Path) -> None:
        self.name, self.root = name, root
        self.scratch = scratch / name
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.env["PYTHONPATH"] = str(root)
        for var, sub in (("XDG_CACHE_HOME", "cache"), ("XDG_CONFIG_HOME", "config")):
            self.env[var] = str(self.scratch / sub)
        self.env["XDG_DATA_HOME"] = str(self.scratch / "data")

    def cmd(self, *args: str) -> list[str]:
        # -P: ``python -c`` would put the working folder first on the path, so that run from
        # a checkout's root, every side would import that checkout
        return [sys.executable, "-P", "-c", CLI, *args]

    def index_dir(self, tree: str) -> Path:
        return self.scratch / f"index-{tree}"

    def run(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        out: Path | None = None,
        asked: list[float] | None = None,
    ) -> tuple[float, float, float]:
        return run_tree(self.cmd(*args), {**self.env, **(env or {})}, out, asked)


class Qmd:
    """qmd from its npm prefix, with its home (and index) under the scratch folder."""

    def __init__(self, prefix: Path, scratch: Path) -> None:
        self.home = scratch / "qmd-home"
        self.env = dict(os.environ)
        self.env["PATH"] = f"{prefix / 'node_modules' / '.bin'}:{self.env.get('PATH', '')}"
        self.env["HOME"] = str(self.home)
        self.env["XDG_CACHE_HOME"] = str(self.home / ".cache")
        self.env["XDG_CONFIG_HOME"] = str(self.home / ".config")
        self.exe = shutil.which("qmd", path=self.env["PATH"])

    def reset(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.mkdir(parents=True)

    def add(self, folder: Path, name: str) -> tuple[float, float, float]:
        assert self.exe
        cmd = [self.exe, "collection", "add", str(folder), "--name", name, "--mask", "**/*.md"]
        return run_tree(cmd, self.env)

    def search(self, name: str, query: str) -> tuple[float, float, float]:
        assert self.exe
        return run_tree([self.exe, "search", query, "--json", "-n", "10", "-c", name], self.env)


def alternate(runs: list[Callable[[], None]], rounds: int) -> None:
    """Each of ``runs`` once a round, the order reversed every other round."""
    for i in range(rounds):
        for run in runs if i % 2 == 0 else list(reversed(runs)):
            run()


def line(name: str, t: Timing, ref: Timing | None = None, ref_name: str = "") -> str:
    text = f"  {name:<34} wall {t.w:7.3f} s  CPU {t.c:7.3f} s"
    if t.rss and max(t.rss) > 0:
        text += f"  RSS {pct(t.rss, 0.5):5.0f} MB"
    if ref is not None:
        text += f"  | {t.w / ref.w:5.2f}x {ref_name} wall, {t.c / ref.c:5.2f}x its CPU"
    return text


def floor_of(index_dir: Path, workspace: Path) -> tuple[float, float, float]:
    """Wall seconds of bare Whoosh writing and of static encoding (model2vec's ``encode``) of
    the sections of ``index_dir``, and the CPU seconds of both, measured in a process of its own (this one stays small: a
    child's peak RSS counts what it inherits at fork)."""
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import bench_first_contact as b; "
        "print(json.dumps(b.measure_floor(b.Path(sys.argv[2]), b.Path(sys.argv[3]))))"
    )
    here = str(Path(__file__).resolve().parent)
    out = subprocess.run(
        [sys.executable, "-c", code, here, str(index_dir), str(workspace)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    whoosh_s, encode_s, cpu_s = json.loads(out.strip().splitlines()[-1])
    return float(whoosh_s), float(encode_s), float(cpu_s)


def measure_floor(index_dir: Path, workspace: Path) -> tuple[float, float, float]:
    """``floor_of``, in the process that calls it."""
    from model2vec import StaticModel
    from whoosh import index as whoosh_index

    from tui_search.config import Settings
    from tui_search.core.engine import SearchEngine
    from tui_search.core.keyword.schema import document_fields, make_schema

    with SearchEngine(Settings(workspace=workspace, index_dir=index_dir)) as engine:
        records = list(engine.all_sections())
    texts = [r.embedding_text for r in records]
    model = StaticModel.from_pretrained(str(ROOT / "tui_search" / "models" / "default"))
    with tempfile.TemporaryDirectory() as tmp:
        c0, t0 = time.process_time(), time.perf_counter()
        ix = whoosh_index.create_in(tmp, make_schema())
        writer = ix.writer(limitmb=256)
        for r in records:
            writer.add_document(**document_fields(r))
        writer.commit()
        whoosh_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    model.encode(texts, batch_size=1024)
    return whoosh_s, time.perf_counter() - t0, time.process_time() - c0


def repeat_searches(
    sides: list[Side],
    qmd: Qmd,
    tree: str,
    questions: list[str],
    ws: Callable[[str, Side], list[str]],
    rounds: int,
) -> tuple[dict[str, Timing], dict[str, Timing], Timing]:
    """Each question on each side (re-ranker on, then off) and on qmd, ``rounds`` times."""
    found = {s.name: Timing() for s in sides}
    off = {s.name: Timing() for s in sides}
    q = Timing()
    runs: list[Callable[[], None]] = []

    def ours(side: Side, question: str, into: Timing, env: dict[str, str]) -> Callable[[], None]:
        return lambda: into.add(*side.run("search", *ws(tree, side), "--json", question, env=env))

    for question in questions:
        for s in sides:
            runs.append(ours(s, question, found[s.name], {}))
            runs.append(ours(s, question, off[s.name], {"TUI_SEARCH_RERANK_DEPTH": "0"}))
        runs.append(lambda question=question: q.add(*qmd.search(tree, question)))
    alternate(runs, rounds)
    return found, off, q


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--old", type=Path, required=True, help="the checkout to compare with")
    ap.add_argument("--vault", type=Path, required=True)
    ap.add_argument("--tldr", type=Path, required=True)
    ap.add_argument("--qmd-prefix", type=Path, required=True)
    ap.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "first-contact")
    ap.add_argument("--rounds", type=int, default=4, help="rounds of the search rows")
    ap.add_argument("--index-rounds", type=int, default=3, help="rounds of the vault's cold index")
    ap.add_argument("--tldr-index-rounds", type=int, default=1)
    ap.add_argument("--rerank-files", type=int, default=12)
    ap.add_argument(
        "--only", default="", help="comma-separated rows: search,fresh,eval,rerank,index,exact"
    )
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the floor as the product runs
    only = {r for r in args.only.split(",") if r}
    want = lambda row: not only or row in only  # noqa: E731
    adopt_orphans()
    shutil.rmtree(args.scratch, ignore_errors=True)
    args.scratch.mkdir(parents=True)
    sides = [Side("old", args.old.resolve(), args.scratch), Side("new", ROOT, args.scratch)]
    qmd = Qmd(args.qmd_prefix, args.scratch)
    trees = {"vault": args.vault.resolve(), "tldr": args.tldr.resolve()}
    print(f"old {args.old} | new {ROOT} | qmd {qmd.exe} | rg {shutil.which('rg')}")

    def ws(tree: str, side: Side) -> list[str]:
        return ["-w", str(trees[tree]), "--index-dir", str(side.index_dir(tree))]

    # -- cold index ----------------------------------------------------------------------
    if want("index"):
        for tree, rounds in (("vault", args.index_rounds), ("tldr", args.tldr_index_rounds)):
            cold = {s.name: Timing() for s in sides}
            asked: dict[str, list[float]] = {s.name: [] for s in sides}
            q = Timing()

            def index_run(
                side: Side,
                tree: str = tree,
                cold: dict[str, Timing] = cold,
                asked: dict[str, list[float]] = asked,
            ) -> None:
                shutil.rmtree(side.index_dir(tree), ignore_errors=True)
                where = ws(tree, side)
                cold[side.name].add(*side.run("index", *where, env=NO_FILL, asked=asked[side.name]))

            def qmd_run(tree: str = tree, q: Timing = q) -> None:
                qmd.reset()
                q.add(*qmd.add(trees[tree], tree))

            alternate([*(lambda s=s: index_run(s) for s in sides), qmd_run], rounds)
            print(f"cold index, {tree} ({rounds} rounds, p50)")
            print(line("qmd collection add", q))
            for s in sides:
                t = cold[s.name]
                print(line(f"{s.name} index", t, q, "qmd"))
                print(
                    f"    cores kept busy: CPU / wall = {t.c / t.w:.2f}; cores asked for "
                    f"(running or ready, p50): {pct(asked[s.name], 0.5):.2f} of {os.cpu_count()}"
                )
            if tree == "vault":
                whoosh_s, encode_s, floor_cpu = floor_of(sides[1].index_dir(tree), trees[tree])
                floor = whoosh_s + encode_s
                print(
                    f"  floor: bare Whoosh {whoosh_s:.3f} s + static encoding {encode_s:.3f} s "
                    f"= {floor:.3f} s wall, {floor_cpu:.3f} s CPU"
                )
                for s in sides:
                    print(
                        f"    {s.name} index / floor: {cold[s.name].w / floor:.2f}x wall, "
                        f"{cold[s.name].c / floor_cpu:.2f}x CPU"
                    )

    # -- the indexes the search rows use (qmd's collections too) -------------------------
    qmd.reset()
    for tree in trees:
        qmd.add(trees[tree], tree)
        for s in sides:
            built = (s.index_dir(tree) / "manifest.sqlite").exists()
            if (want("search") or want("exact")) and not built:
                s.run("index", *ws(tree, s))

    # -- search, a repeat question -------------------------------------------------------
    if want("search"):
        for tree, questions in (("vault", VAULT_QUESTIONS), ("tldr", TLDR_QUESTIONS)):
            # each question once: its head's re-ranker vectors are made (the old checkout), or the
            # background fill is started and waited for (this one: it makes every vector)
            for s in sides:
                for question in questions:
                    s.run("search", *ws(tree, s), "--json", question)
            found, off, q = repeat_searches(sides, qmd, tree, questions, ws, args.rounds)
            print(
                f"search --json, a repeat question, {tree} ({args.rounds} x {len(questions)}, p50)"
            )
            print(line("qmd search", q))
            for s in sides:
                print(line(f"{s.name} search", found[s.name], q, "qmd"))
                print(line(f"{s.name} search, re-ranker off", off[s.name], q, "qmd"))

    # -- an exact identifier -------------------------------------------------------------
    if want("exact"):
        rg = shutil.which("rg")
        exact = {s.name: Timing() for s in sides}
        r = Timing()
        runs = [
            *(
                lambda s=s: exact[s.name].add(
                    *s.run("search", *ws("tldr", s), "--json", IDENTIFIER)
                )
                for s in sides
            )
        ]
        if rg:
            runs.append(
                lambda: r.add(
                    *run_tree([rg, "-l", IDENTIFIER, str(trees["tldr"])], dict(os.environ))
                )
            )
        alternate(runs, args.rounds * 2)
        print(f"exact identifier {IDENTIFIER!r}, tldr ({args.rounds * 2} rounds, p50)")
        if rg:
            print(line("rg -l", r))
        for s in sides:
            print(line(f"{s.name} search", exact[s.name], r if rg else None, "rg"))

    # -- the first question on a fresh index ---------------------------------------------
    if want("fresh"):
        q = Timing()
        for _ in range(args.rounds):
            q.add(*qmd.search("tldr", TLDR_QUESTIONS[0]))
        print("the first question on a fresh index, tldr (one process each)")
        print(line("qmd search", q))
        for s in sides:
            fresh = s.scratch / "index-fresh"
            shutil.rmtree(fresh, ignore_errors=True)
            where = ["-w", str(trees["tldr"]), "--index-dir", str(fresh)]
            s.run("index", *where, env=NO_FILL)
            t = Timing()
            out = s.scratch / "fresh.json"
            # the search's own cost (the background fill it would start runs on the other core)
            t.add(*s.run("search", *where, "--json", TLDR_QUESTIONS[0], env=NO_FILL, out=out))
            reranked = json.loads(out.read_text()).get("reranked")
            print(line(f"{s.name} first search (re-ranked: {reranked})", t, q, "qmd"))

    # -- eval on a fresh index -----------------------------------------------------------
    if want("eval"):
        dataset = ROOT / "tests" / "data" / "sample_eval"
        print("eval, hybrid, fresh index (tests/data/sample_eval): ms per question")
        for s in sides:
            fresh = s.scratch / "index-eval"
            shutil.rmtree(fresh, ignore_errors=True)
            out = s.scratch / "eval.json"
            s.run(
                "eval",
                "--dataset",
                str(dataset),
                "--modes",
                "hybrid,keyword",
                "--index-dir",
                str(fresh),
                "--json",
                out=out,
            )
            report = json.loads(out.read_text())
            modes = report["modes"]
            fill = report.get("rerank_fill")
            made = (
                f" | vectors first: {fill['cpu_s']:.1f} s CPU, {fill['took_s']:.1f} s"
                if fill
                else ""
            )
            print(
                f"  {s.name:<5} hybrid p50 {modes['hybrid']['p50_ms']:8.1f}  "
                f"p95 {modes['hybrid']['p95_ms']:8.1f} | keyword p50 "
                f"{modes['keyword']['p50_ms']:6.1f}{made}"
            )

    # -- re-ranker vectors ---------------------------------------------------------------
    if want("rerank"):
        part = args.scratch / "vault-part"
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir()
        notes = sorted(p for p in trees["vault"].rglob("*.md"))[: args.rerank_files]
        for p in notes:
            shutil.copy(p, part / p.name)
        print(f"re-ranker vectors, index --rerank on {len(notes)} notes of the vault")
        for s in sides:
            where = ["-w", str(part), "--index-dir", str(s.scratch / "index-part")]
            s.run("index", *where, env=NO_FILL)
            out = s.scratch / "rerank.json"
            wall, cpu, _ = s.run("index", *where, "--rerank", "--json", out=out)
            made = json.loads(out.read_text())["rerank"]["made"]
            print(
                f"  {s.name:<5} {made} sections: wall {wall:6.1f} s, CPU {cpu:6.1f} s, "
                f"{1000 * cpu / max(made, 1):6.1f} ms CPU per section"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
