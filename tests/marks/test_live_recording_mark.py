"""`livecam run --output FILE` hands the live pipeline a watermark step and the recorder a C2PA
signing step (--no-c2pa: none); the window, the
virtual camera and `none` get none unless --watermark, and --no-watermark turns it off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livecam.commands import live as live_command
from livecam.settings import C2paSettings
from tests.commands.test_live_setup import captured, job  # noqa: F401 - the fixture is used by name
from tests.videos import make_clip


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path / "cache"))


def test_recording_frames_are_all_marked(tmp_path: Path, faces_dir: Path, env: None,
                                                  captured: dict[str, Any]) -> None:  # noqa: F811
    clip = make_clip(tmp_path / "c.mp4", frames=2, audio=False, fps=30)
    source = faces_dir / "obama.jpg"
    live_command.run_live(job(tmp_path, source, clip, output=str(tmp_path / "rec.mp4")))
    mark = captured["options"].watermark
    assert mark is not None and captured["options"].watermark_slower is not None  # the governor's step
    frame = np.full((120, 160, 3), 128, np.uint8)
    frame[:, :80] = 40
    first, second = mark(0, frame), mark(1, frame)  # every frame, the first with its own change
    assert not np.array_equal(first, frame) and not np.array_equal(second, frame)
    assert captured["sink"].sign is not None  # C2PA over the finished recording
    live_command.run_live(job(tmp_path, source, clip, output=str(tmp_path / "rec2.mp4"), watermark=False,
                              c2pa=C2paSettings(enabled=False)))
    assert captured["options"].watermark is None  # --no-watermark
    assert captured["sink"].sign is None  # --no-c2pa
    live_command.run_live(job(tmp_path, source, clip, output="none"))
    assert captured["options"].watermark is None  # not a file
    live_command.run_live(job(tmp_path, source, clip, output="none", watermark=True))
    assert captured["options"].watermark is not None  # --watermark: any output (the virtual camera)
