"""Each Whoosh segment's docnum -> key table is kept on disk once read, and read back equal."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tui_search.core.lexical import LexicalIndex
from tui_search.core.store import ChunkRecord, vector_key


def _record(i: int) -> ChunkRecord:
    key = f"notes/n{i}:part-{i}#0"
    return ChunkRecord(
        key=key,
        vkey=vector_key(key),
        section_id=f"notes/n{i}:part-{i}",
        chunk_index=0,
        doc=f"notes/n{i}",
        file_path=f"notes/n{i}.md",
        title=f"N{i}",
        heading=f"Part {i}",
        heading_path=(f"N{i}", f"Part {i}"),
        level=2,
        line_start=1,
        line_end=3,
        content=f"raccoon number {i} climbs",
        tags=(),
        content_hash=f"h{i}",
    )


def test_segment_keys_survive_a_new_process(tmp_path: Path) -> None:
    lex = LexicalIndex(tmp_path / "whoosh")
    lex.write([], [_record(i) for i in range(30)])
    lex.write([], [_record(i) for i in range(30, 40)])  # a second segment
    keys, vkeys = lex._doc_keys(lex.searcher())
    files = sorted(p.name for p in (tmp_path / "segment-keys").iterdir())
    assert files and all(f.endswith((".keys", ".vkeys")) for f in files)

    again = LexicalIndex(tmp_path / "whoosh")  # another process: nothing in memory
    keys2, vkeys2 = again._doc_keys(again.searcher())
    assert keys2 == keys and np.array_equal(vkeys2, vkeys)
    assert sorted(k for k in keys2 if k) == sorted(_record(i).key for i in range(40))
    assert [vector_key(k) for k in keys2] == vkeys2.tolist()

    # a damaged file is not trusted: the segment is read again (and the file rewritten)
    victim = next((tmp_path / "segment-keys").glob("*.keys"))
    victim.write_bytes(b"garbage")
    third = LexicalIndex(tmp_path / "whoosh")
    assert third._doc_keys(third.searcher())[0] == keys
