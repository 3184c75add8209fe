"""2,000 frames through the live pipeline with the mesh swapper: no memory growth after warm-up,
and every thread and file descriptor the pipeline opened is gone when it stops."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hardening.soak import run_soak

pytest.importorskip("psutil")


def test_soak_2000_frames(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path / "cache"))
    result = run_soak(2000, checkpoint=500, replay=True, models_dir=tmp_path / "models")
    print(result.line())
    assert result.swapped_first_frame  # the soak does real swaps, not empty frames
    assert result.frames == 2000  # --no-realtime: nothing dropped
    assert result.rss_end <= result.rss_checkpoint * 1.05, result.line()
    assert result.threads_after == result.threads_before, result.line()
    assert result.fds_after == result.fds_before, result.line()
