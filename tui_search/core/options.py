"""What the core is told: the workspace, where its index lives, the model, the limits of
indexing, the shape of results, and the ranking's knobs (``RankingParams``).

The core reads this record and nothing else; ``tui_search.config`` loads it (defaults, the
user's config file, the environment, flags) together with the app's own settings.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from tui_search.core.cache_dir import user_cache_dir
from tui_search.core.ranking.params import RankingParams


def workspace_key(workspace: Path) -> str:
    """A file-name-safe key for a workspace: its folder name and a hash of its absolute path."""
    absolute = workspace.expanduser().resolve()
    digest = hashlib.sha256(str(absolute).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    safe_name = "".join(c if c.isalnum() or c in "-_" else "_" for c in absolute.name)[:40]
    return f"{safe_name or 'root'}-{digest}"


def default_index_dir(workspace: Path) -> Path:
    """Per-user cache folder keyed by the workspace's absolute path."""
    return user_cache_dir() / "indexes" / workspace_key(workspace)


@dataclass(frozen=True)
class CoreSettings:
    """Everything the core is configured with. Defaults are what ships."""

    workspace: Path = field(default_factory=Path.cwd)
    #: Where index data lives; ``None`` means the per-user cache dir for this workspace.
    index_dir: Path | None = None
    #: A model2vec model path or hub id; ``None`` means the model shipped in the package.
    model: str | None = None
    #: Sections longer than this many tokens are split into chunks.
    max_chunk_tokens: int = 512
    #: Overlap between consecutive chunks of one section (at least this many tokens, ~10%).
    min_overlap_tokens: int = 50
    #: Files larger than this are indexed up to this size, cut at a line break; the skip
    #: report says so. Indexing costs about 2 s of CPU a megabyte (parse, Whoosh, vectors); the
    #: largest page of the PowerShell docs is 84 KB, of the Rust RFCs 172 KB.
    max_file_bytes: int = 2_000_000
    #: Headings past this many in one file no longer start sections: their text is indexed
    #: as part of the section before them, and the skip report says so.
    max_sections_per_file: int = 2000
    #: Snippet length in characters.
    snippet_chars: int = 220
    #: Passages shown per document in grouped results.
    passages_per_document: int = 3
    #: The ranking's knobs (``docs/ranking.md``); a config file sets them at the top level
    #: or in a ``[ranking]`` table.
    ranking: RankingParams = field(default_factory=RankingParams)

    @property
    def resolved_index_dir(self) -> Path:
        if self.index_dir is not None:
            return self.index_dir.expanduser().resolve()
        return default_index_dir(self.workspace)

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (``None`` values left out); a ranking field's name sets
        that field of ``ranking``."""
        changes = {k: v for k, v in changes.items() if v is not None}
        ranking = {k: changes.pop(k) for k in list(changes) if k in _RANKING_FIELDS}
        if ranking:
            changes["ranking"] = dataclasses.replace(
                changes.get("ranking", self.ranking), **ranking
            )
        return dataclasses.replace(self, **changes)


_RANKING_FIELDS = {f.name for f in dataclasses.fields(RankingParams)}
