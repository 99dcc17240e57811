"""Fixtures for the Pilot tests (async tests run on anyio's pytest plugin, asyncio backend)."""

from __future__ import annotations

import pytest
from apphelpers import app_factory, workspace  # noqa: F401 - fixtures


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
