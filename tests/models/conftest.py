"""Fixtures for the model store tests: a loopback server and settings pointing at tmp folders."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from livecam.models.download import DownloadPolicy
from livecam.settings import RuntimeSettings
from tests.models.helpers import LoopbackServer

FAST = DownloadPolicy(attempts=3, backoff_s=0.01, max_backoff_s=0.02, timeout_s=10)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with LoopbackServer() as srv:
        yield srv


@pytest.fixture
def models_dir(tmp_path: Path) -> Path:
    return tmp_path / "models"


@pytest.fixture
def online(models_dir: Path) -> RuntimeSettings:
    return RuntimeSettings(models_dir=models_dir, quiet=True)
