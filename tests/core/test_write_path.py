"""The write path on real trees: ids a writer would refuse, odd file names, replacements that
keep size and mtime, error paths. Each file that cannot be written is skipped with a reason;
the rest lands."""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tui_search.cli import main
from tui_search.config import Settings
from tui_search.core import indexer as indexer_module
from tui_search.core.engine import SearchEngine
from tui_search.core.errors import IndexReadOnlyError
from tui_search.core.index import LOCK_FILE, damaged
from tui_search.core.store import Store
from tui_search.core.vectors import VectorIndex


def engine_for(ws: Path, index_dir: Path, embedder) -> SearchEngine:  # type: ignore[no-untyped-def]
    return SearchEngine(Settings(workspace=ws, index_dir=index_dir), embedder=embedder)


def test_repeated_headings_index_under_distinct_ids(tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "conditions.md").write_text(
        "# Conditions\n\n## Example\n\nalpha\n\n## Example\n\nbravo\n\n## Example 1\n\ncharlie\n"
    )
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    r = e.sync()
    assert r.chunks == 4 and not r.skipped
    ids = {h.section_id for w in ("alpha", "bravo", "charlie") for h in e.search(w).hits[:1]}
    assert ids == {"conditions:example", "conditions:example-1", "conditions:example-1-1"}
    e.close()


def test_a_file_whose_ids_are_taken_is_skipped_and_the_rest_lands(
    tmp_path: Path, fake_embedder
) -> None:  # type: ignore[no-untyped-def]
    """``a.MD`` and ``a.Md`` both read as document ``a`` (no ``a.md`` beside them): the one
    written second is skipped with a reason, the other files are searchable."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.MD").write_text("# Same\n\nfirst copy words\n")
    (ws / "a.Md").write_text("# Same\n\nsecond copy words\n")
    (ws / "b.md").write_text("# Bee\n\nhoneycomb\n")
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    r = e.sync()
    reasons = {s.path: s.reason for s in r.skipped}
    assert len(reasons) == 1
    [(path, reason)] = reasons.items()
    assert path in ("a.MD", "a.Md") and "document id a" in reason
    assert r.documents == 2
    assert e.search("honeycomb", mode="keyword").hits[0].section_id == "b:bee"
    assert e.search("copy", mode="keyword").hits[0].file_path != path
    # the next sync keeps both the reason and the index as they are
    r2 = e.sync()
    assert r2.documents == 2 and {s.path for s in r2.skipped} == {path}
    e.close()


def test_a_key_given_twice_to_the_vector_index_keeps_its_last_vector(tmp_path: Path) -> None:
    vi = VectorIndex(tmp_path / "v", 4)
    keys = np.array([7, 8, 7], dtype=np.uint64)
    vecs = np.eye(4, dtype=np.float32)[:3]
    vi.upsert(keys, vecs)
    assert len(vi) == 2
    assert vi.search(np.eye(4, dtype=np.float32)[2], 1)[0][0] == 7


def _write_bytes_name(folder: Path, name: bytes, text: str) -> None:
    with open(os.fsencode(folder) + b"/" + name, "wb") as fh:
        fh.write(text.encode())


def test_a_name_that_is_not_utf8_is_skipped_with_a_reason(
    tmp_path: Path, fake_embedder, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    _write_bytes_name(ws, b"caf\xe9.md", "# Cafe\n\nlatte\n")
    os.mkdir(os.fsencode(ws) + b"/dossier-\xff")
    _write_bytes_name(ws / os.fsdecode(b"dossier-\xff"), b"inner.md", "# Inner\n\nespresso\n")
    (ws / "ok.md").write_text("# Ok\n\nfine words\n")
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    r = e.sync()
    assert r.documents == 1
    assert {s.path for s in r.skipped} == {"caf\\xe9.md", "dossier-\\xff"}
    assert {p for p, _ in e.stats().skipped} == {"caf\\xe9.md", "dossier-\\xff"}
    assert "not valid UTF-8" in dict(e.stats().skipped)["caf\\xe9.md"]
    # the watcher's path: a change to that file is skipped too, and the rest still lands
    (ws / "ok.md").write_text("# Ok\n\nfine words, more\n")
    bad = os.fsdecode(b"caf\xe9.md")
    r = e.apply_paths([bad, "ok.md", os.fsdecode(b"dossier-\xff/inner.md")])
    assert {s.path for s in r.skipped} == {"caf\\xe9.md", "dossier-\\xff/inner.md"}
    assert "more" in e.search("fine", mode="keyword").hits[0].content
    e.close()
    # the command line: index and search both work and say what was skipped
    idx = str(tmp_path / "cli-idx")
    assert main(["index", "--workspace", str(ws), "--index-dir", idx]) == 0
    out, err = capsys.readouterr()
    assert "caf\\xe9.md" in out + err
    assert main(["search", "fine", "--workspace", str(ws), "--index-dir", idx]) == 0
    assert "ok.md" in capsys.readouterr().out


@pytest.mark.parametrize("how", ["cp -p", "mv", "watcher cp -p", "watcher mv"])
def test_a_replacement_with_the_same_size_and_mtime_is_indexed(
    tmp_path: Path, fake_embedder, how: str
) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    note = ws / "note.md"
    note.write_text("# Note\n\nalpha words\n")
    (ws / "other.md").write_text("# Other\n\nunrelated\n")
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    e.sync()
    before = note.stat()
    new = tmp_path / "new.md"
    new.write_text("# Note\n\nbravo words\n")  # the same size
    os.utime(new, ns=(before.st_atime_ns, before.st_mtime_ns))
    if how.endswith("cp -p"):
        shutil.copy2(new, note)  # in place: the same inode, a new ctime
    else:
        os.replace(new, note)  # another inode
    after = note.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    r = e.apply_paths(["note.md"]) if how.startswith("watcher") else e.sync()
    assert r.changed == ("note.md",)
    assert e.search("bravo", mode="keyword").hits[0].section_id == "note:note"
    assert not e.search("alpha", mode="keyword").hits
    # a file touched but not changed is hashed, not parsed or embedded again
    os.utime(note, ns=(after.st_atime_ns, after.st_mtime_ns))
    r = e.sync()
    assert r.embedded == 0 and not r.changed
    assert e.sync().changed == ()
    e.close()


# -- opening while another process writes ---------------------------------------------------


def _hold_writer_lock(index_dir: Path) -> int:
    """Take the writer lock as another process would (flock on a file description of our
    own: another description in this process waits for it like another process does)."""
    fd = os.open(index_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def test_a_disagreement_seen_while_another_process_writes_is_left_to_it(
    tmp_path: Path, fake_embedder
) -> None:  # type: ignore[no-untyped-def]
    """Counts read while another process commits can disagree for a moment. Opening then
    neither rebuilds anything nor waits for the lock nor gives up; a disagreement still there
    once nobody writes (a crash) is repaired by the next opening."""
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(3):
        (ws / f"n{i}.md").write_text(f"# Note {i}\n\nword{i} common\n")
    idx = tmp_path / "idx"
    e = engine_for(ws, idx, fake_embedder)
    e.sync()
    e.close()
    store = Store(idx / "manifest.sqlite")
    with store.transaction() as conn:  # the manifest one chunk behind the full-text index
        conn.execute("DELETE FROM chunks WHERE path = 'n2.md'")
    store.close()
    fd = _hold_writer_lock(idx)
    try:
        e = engine_for(ws, idx, fake_embedder)  # no wait, no IndexBusyError
        assert e.indexer.repaired == []
        assert e.indexer.lexical.doc_count() == 3  # nothing rebuilt, nothing emptied
        assert e.search("common", mode="keyword").hits
        e.close()
    finally:
        os.close(fd)
    e = engine_for(ws, idx, fake_embedder)
    assert any("full-text index had 3 chunks, manifest 2" in r for r in e.indexer.repaired)
    assert e.indexer.lexical.doc_count() == 2
    e.close()


def test_index_waits_for_another_writer_instead_of_giving_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.md").write_text("# A\n\nalpha\n")
    idx = tmp_path / "idx"
    idx.mkdir()
    fd = _hold_writer_lock(idx)
    release = threading.Timer(3.0, os.close, (fd,))
    release.start()
    try:
        code = main(["index", "--workspace", str(ws), "--index-dir", str(idx)])
    finally:
        release.join()
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "waiting for it" in err and "indexed 1 documents" in out


# -- error paths ----------------------------------------------------------------------------


def test_an_error_opening_the_manifest_is_not_damage(tmp_path: Path, fake_embedder) -> None:  # type: ignore[no-untyped-def]
    """SQLite cannot make its shared-memory file (here a folder stands in its place): the
    index is searched as it is, read-only, and never deleted."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.md").write_text("# A\n\nalpha words\n")
    idx = tmp_path / "idx"
    e = engine_for(ws, idx, fake_embedder)
    e.sync()
    e.close()
    (idx / "manifest.sqlite-shm").mkdir()
    e = engine_for(ws, idx, fake_embedder)
    assert e.indexer.repaired == []
    report, note = e.try_sync()
    assert report is None and note is not None and "cannot be written" in note
    assert e.search("alpha", mode="keyword").hits[0].section_id == "a:a"
    with pytest.raises(IndexReadOnlyError):
        e.sync()
    e.close()
    assert (idx / "manifest.sqlite").stat().st_size > 0


def test_damaged_means_bad_bytes_only(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database at all" * 100)
    with pytest.raises(sqlite3.DatabaseError) as caught:
        Store(bad)
    assert damaged(caught.value)
    (tmp_path / "folder.sqlite").mkdir()
    with pytest.raises(sqlite3.DatabaseError) as caught:
        Store(tmp_path / "folder.sqlite")
    assert not damaged(caught.value)


def test_a_path_over_the_system_limit_is_skipped_with_a_reason(
    tmp_path: Path, fake_embedder
) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "top.md").write_text("# Top\n\nshallow words\n")
    fd = os.open(ws, os.O_RDONLY)
    try:  # made relative to an open folder: the whole path is never named at once
        for i in range(22):
            name = f"d{i:02d}" + "x" * 200
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with open(os.open("deep.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as fh:
            fh.write("# Deep\n\ndeep words\n")
    finally:
        os.close(fd)
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    r = e.sync()
    assert r.documents == 1
    [skip] = r.skipped
    assert "over 4,095 bytes" in skip.reason and len(skip.path) < 4096
    assert e.search("shallow", mode="keyword").hits
    e.close()


def _private_mounts() -> bool:
    """Can this test mount file systems of its own (root, in a private mount namespace)?"""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


CLI = f"{sys.executable} -c 'from tui_search.cli import run; run()'"


@pytest.mark.skipif(not _private_mounts(), reason="needs a private mount namespace (root)")
@pytest.mark.parametrize("disk", ["read-only", "full"])
def test_search_on_a_read_only_or_full_disk_uses_the_index_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], disk: str
) -> None:
    """The real file systems, mounted in a namespace of the test's own: a read-only bind mount
    of the index folder, and a tmpfs filled to the last byte. ``search`` prints its results
    and one note; ``index`` one error line; no traceback; the index is left as it was."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.md").write_text("# A\n\nalpha words\n")
    idx = tmp_path / "idx"
    assert main(["index", "--workspace", str(ws), "--index-dir", str(idx)]) == 0
    capsys.readouterr()
    (ws / "b.md").write_text("# B\n\nbravo words\n")  # a change it cannot write
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if disk == "read-only":
        setup = f"mount --bind {idx} {idx} && mount -o remount,ro,bind {idx} && D={idx}"
    else:
        setup = (
            f"mount -t tmpfs -o size=8m tmpfs {mnt} && cp -a {idx} {mnt}/idx && "
            f"(dd if=/dev/zero of={mnt}/fill bs=4k 2>/dev/null; true) && D={mnt}/idx"
        )
    script = (
        f"{setup} && cd {tmp_path} && "
        f'{CLI} search alpha --workspace {ws} --index-dir "$D"; echo "search=$?"; '
        f'{CLI} index --workspace {ws} --index-dir "$D"; echo "index=$?"; '
        f'ls "$D"'
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, env=env, timeout=600
    )
    out, err = done.stdout, done.stderr
    assert "Traceback" not in err, err
    assert "a.md:" in out and "search=0" in out and "index=1" in out
    reason = "read-only file system" if disk == "read-only" else "the disk is full"
    assert err.count("\n") == 2, err  # one note, one error
    assert f"note: the index cannot be written ({reason}); using the index as it is" in err
    assert f"error: the index cannot be written ({reason})" in err
    assert "manifest.sqlite" in out


# -- the one-shot search's freshness check ----------------------------------------------------


def _settle(root: Path) -> None:
    """Every folder and file of ``root`` dated ten seconds back: no longer too recent to be
    trusted (``RACY_NS``)."""
    past = time.time_ns() - 10_000_000_000
    for p in [root, *root.rglob("*")]:
        os.utime(p, ns=(past, past))


def test_the_quick_freshness_check_sees_every_kind_of_change(
    tmp_path: Path, fake_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "a.md").write_text("# A\n\nalpha\n")
    (ws / "sub" / "b.md").write_text("# B\n\nbravo\n")
    (ws / "sub" / "bin.md").write_bytes(b"\x00binary")
    _settle(ws)
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    e.sync()
    listed = []
    walk = e.workspace.discover

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        listed.append(1)
        return walk(*args, **kwargs)

    monkeypatch.setattr(e.workspace, "discover", counting)

    def hits(word: str) -> list[str]:
        report, note = e.try_sync()
        assert note is None and report is not None
        return [h.file_path for h in e.search(word, mode="keyword").hits]

    assert hits("alpha") == ["a.md"] and listed == []  # nothing changed: no folder listed
    (ws / "a.md").write_text("# A\n\ncharlie\n")  # an edit in place
    assert hits("charlie") == ["a.md"] and listed == []
    (ws / "sub" / "bin.md").write_text("# Bin\n\ndelta\n")  # an unreadable file made readable
    assert hits("delta") == ["sub/bin.md"] and len(listed) == 1
    _settle(ws)
    e.sync()
    listed.clear()
    (ws / "sub" / "new.md").write_text("# New\n\necho\n")  # added
    assert hits("echo") == ["sub/new.md"] and len(listed) == 1
    _settle(ws)
    e.sync()
    (ws / "sub" / "b.md").unlink()  # removed
    assert hits("bravo") == []
    _settle(ws)
    e.sync()
    (ws / ".gitignore").write_text("sub/\n")  # the ignore rules changed
    assert hits("echo") == []
    _settle(ws)
    e.sync()
    (ws / ".gitignore").write_text("a.md\n")  # an ignore file edited in place
    assert hits("charlie") == [] and hits("echo") == ["sub/new.md"]
    e.close()


def test_a_folder_changed_just_before_the_scan_is_listed_again(
    tmp_path: Path, fake_embedder
) -> None:  # type: ignore[no-untyped-def]
    """A folder whose mtime is too recent may change again within the same clock tick: the
    scan does not trust it, and the next check lists the folders."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.md").write_text("# A\n\nalpha\n")
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    e.sync()
    past = (ws / "a.md").stat().st_mtime_ns
    (ws / "b.md").write_text("# B\n\nbravo\n")
    os.utime(ws, ns=(past, past))  # as if in the same tick as the scan
    report, _ = e.try_sync()
    assert report is not None and report.changed == ("b.md",)
    e.close()


# -- a killed index -------------------------------------------------------------------------


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    ppid = int(fh.read().rpartition(b")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rpartition(b")")[2].split()[0] != b"Z"
    except OSError:
        return False


def test_workers_end_with_a_killed_index(tmp_path: Path) -> None:
    """``index`` parses a large read in worker processes; killed (SIGKILL), it leaves none
    running: each ends on its own within a fraction of a second."""
    ws = tmp_path / "ws"
    ws.mkdir()
    para = " ".join(f"word{i} [link](x{i}.md) *em*" for i in range(40)) + "\n\n"
    for n in range(80):  # 16 MB: parsed by workers (``PARALLEL_MIN_BYTES``) for seconds
        (ws / f"n{n}.md").write_text(
            "".join(f"## Part {k}\n\n{para * 4}" for k in range(60)), encoding="utf-8"
        )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from tui_search.cli import run; run()", "index"]
        + ["--workspace", str(ws), "--index-dir", str(tmp_path / "idx")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        tree: set[int] = set()
        while time.monotonic() < deadline and proc.poll() is None:
            tree = _descendants(proc.pid)
            if len(tree) >= 3:  # the fork server and its workers
                break
            time.sleep(0.05)
        assert len(tree) >= 3, "no workers seen"
        time.sleep(0.5)
        tree |= _descendants(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 60  # a safety bound (each ends within ~0.3 s idle)
    while time.monotonic() < deadline and any(_running(p) for p in tree):
        time.sleep(0.05)
    assert not [p for p in tree if _running(p)]


class _FailingAfter:
    """The fake embedder, failing from its ``n``-th call on: a run that dies part way."""

    name = "failing"

    def __init__(self, inner, n: int) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.left = inner, n
        self.dim, self.fingerprint = inner.dim, inner.fingerprint

    def encode(self, texts: list[str]) -> np.ndarray:
        self.left -= 1
        if self.left < 0:
            raise RuntimeError("killed")
        return self.inner.encode(texts)


def test_a_long_read_is_written_as_it_goes(
    tmp_path: Path, fake_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """Past ``INDEX_BATCH_SECONDS`` of reading a batch is written whatever its size (here: 0 s,
    so every file): a run that dies part way keeps what it wrote, the next one does the rest."""
    monkeypatch.setattr(indexer_module, "INDEX_BATCH_SECONDS", 0.0)
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(6):
        (ws / f"n{i}.md").write_text(f"# Note {i}\n\nword{i}\n")
    e = engine_for(ws, tmp_path / "idx", _FailingAfter(fake_embedder, 3))
    with pytest.raises(RuntimeError, match="killed"):
        e.sync()
    e.close()
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    assert e.stats().documents == 3
    r = e.sync()
    assert r.embedded == 3 and r.documents == 6
    e.close()


def test_the_keyword_tables_are_stored_on_a_thread_after_a_bulk_write(
    tmp_path: Path, fake_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """After a bulk write, a sync stores what is left of the new segments' keyword tables on
    a thread while it finishes (after a small one, in its own thread afterwards): it returns
    once both are done, and a failure of either is the sync's."""
    from tui_search.core.keyword.index import LexicalIndex

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.md").write_text("# Alpha\n\nhoneycomb words\n")
    threads: list[str] = []
    real = LexicalIndex.store_postings

    def store_postings(self: LexicalIndex, only: set[str] | None = None) -> int:
        threads.append(threading.current_thread().name)
        return real(self, only)

    monkeypatch.setattr(LexicalIndex, "store_postings", store_postings)
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    e.sync()
    assert threads == ["MainThread"]
    monkeypatch.setattr(indexer_module, "BULK_WRITE", 1)
    (ws / "c.md").write_text("# Sea\n\nhoneycomb coral\n")
    e.sync()
    assert threads == ["MainThread", "postings"]
    assert len(e.search("honeycomb").hits) == 2

    def broken(self: LexicalIndex, only: set[str] | None = None) -> int:
        raise RuntimeError("decoding failed")

    monkeypatch.setattr(LexicalIndex, "store_postings", broken)
    (ws / "b.md").write_text("# Bee\n\nhoneycomb\n")
    with pytest.raises(RuntimeError, match="decoding failed"):
        e.sync()
    e.close()


def test_a_bulk_writes_manifest_rows_wait_for_its_full_text_commit(
    tmp_path: Path, fake_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """A bulk write's manifest rows are written while its writer processes work, and
    committed only once the full-text index has the batch: when that fails, the manifest is
    as it was (the batch's paths dirty) and the next sync writes everything."""
    import json

    from tui_search.core.errors import IndexError_
    from tui_search.core.keyword import index as lexical_module
    from tui_search.core.keyword.writing import IsolatedMpWriter
    from tui_search.core.write_batch import IndexWrite

    monkeypatch.setattr(lexical_module, "BULK_WRITE", 2)
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(5):
        (ws / f"n{i}.md").write_text(f"# Note {i}\n\nhoneycomb word{i}\n")
    e = engine_for(ws, tmp_path / "idx", fake_embedder)
    rows_done = threading.Event()
    seen: list[int] = []
    real_lexical = IndexWrite.lexical

    def lexical(self: IndexWrite) -> None:
        rows_done.set()
        real_lexical(self)

    def failing_commit(self: IsolatedMpWriter, *args: object, **kwargs: object) -> None:
        assert rows_done.wait(60), "the rows are written meanwhile"
        other = sqlite3.connect(tmp_path / "idx" / "manifest.sqlite")
        try:
            seen.append(other.execute("SELECT count(*) FROM files").fetchone()[0])
        finally:
            other.close()
        raise IndexError_("a full-text writer process ended")

    with monkeypatch.context() as mp:
        mp.setattr(IndexWrite, "lexical", lexical)
        mp.setattr(IsolatedMpWriter, "commit", failing_commit)
        with pytest.raises(IndexError_, match="writer process ended"):
            e.sync()
    assert seen == [0]  # (not committed while the full-text write ran)
    store = e.indexer.store
    assert store.counts() == (0, 0)
    assert json.loads(store.get_meta("dirty") or "[]") == [f"n{i}.md" for i in range(5)]
    assert e.sync().documents == 5
    assert len(e.search("honeycomb", mode="keyword").hits) == 5
    e.close()
