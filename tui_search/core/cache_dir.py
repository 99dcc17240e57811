"""The per-user cache folder: index data and what a process keeps for the next one."""

import os
from pathlib import Path

import platformdirs

APP_NAME = "tui-search"


def user_cache_dir() -> Path:
    return Path(os.environ.get("TUI_SEARCH_CACHE_DIR") or platformdirs.user_cache_dir(APP_NAME))
