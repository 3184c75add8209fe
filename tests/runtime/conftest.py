"""Fixtures of the runtime tests."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from livecam.runtime import sessions


@pytest.fixture
def fresh_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An empty session pool before and after the test, and a cache folder of its own (the
    TensorRT caches a GPU choice names)."""
    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path / "cache"))
    sessions.clear_pool()
    yield
    sessions.clear_pool()
