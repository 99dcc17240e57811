"""What the app remembers per workspace: query history, fusion weights and the results view
(compact or wide, and the results pane's share of the width).

One small JSON file per workspace in the user's data dir (``config.user_data_dir()``), written
atomically. A missing or unreadable file is an empty memory: remembering is a convenience and
never stops the app.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from tui_search.config import user_data_dir, workspace_key
from tui_search.core.results import FusionWeights

#: Queries kept per workspace (oldest dropped first).
HISTORY_SIZE = 200


class WorkspaceMemory:
    def __init__(self, workspace: Path, base: Path | None = None) -> None:
        self.workspace = workspace
        self._base = base
        self._data: dict[str, Any] | None = None

    @property
    def path(self) -> Path:
        base = self._base if self._base is not None else user_data_dir()
        return base / "workspaces" / f"{workspace_key(self.workspace)}.json"

    def _load(self) -> dict[str, Any]:
        if self._data is None:
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = {}
            self._data = data if isinstance(data, dict) else {}
        return self._data

    def _save(self) -> None:
        data = self._load()
        path = self.path
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".memory-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, ensure_ascii=False, indent=1)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    # -- weights --------------------------------------------------------------------------
    def weights(self) -> FusionWeights | None:
        raw = self._load().get("weights")
        if not isinstance(raw, dict):
            return None
        try:
            kw, soft = float(raw["keyword_weight"]), float(raw["soft_share"])
        except (TypeError, KeyError, ValueError):
            return None
        if not (0.0 <= kw <= 1.0 and 0.0 <= soft <= 1.0):
            return None
        return FusionWeights(keyword_weight=kw, soft_share=soft)

    def set_weights(self, weights: FusionWeights | None) -> None:
        data = self._load()
        if weights is None:
            data.pop("weights", None)
        else:
            data["weights"] = {
                "keyword_weight": weights.keyword_weight,
                "soft_share": weights.soft_share,
            }
        self._save()

    # -- the results view -----------------------------------------------------------------
    def compact(self) -> bool:
        """One line per hit (True) or the wide view (False, the default)."""
        return self._load().get("compact") is True

    def set_compact(self, compact: bool) -> None:
        self._load()["compact"] = bool(compact)
        self._save()

    def split(self) -> int | None:
        """The results pane's width in percent of the screen (None: the stylesheet's)."""
        raw = self._load().get("split")
        return (
            raw if isinstance(raw, int) and not isinstance(raw, bool) and 10 <= raw <= 90 else None
        )

    def set_split(self, percent: int) -> None:
        self._load()["split"] = int(percent)
        self._save()

    # -- query history --------------------------------------------------------------------
    def history(self) -> list[str]:
        raw = self._load().get("history")
        return [q for q in raw if isinstance(q, str)] if isinstance(raw, list) else []

    def add_query(self, query: str) -> None:
        query = query.strip()
        if not query:
            return
        history = [q for q in self.history() if q != query]
        history.append(query)
        self._load()["history"] = history[-HISTORY_SIZE:]
        self._save()
