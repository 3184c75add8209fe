"""A handful of cases of the interrupt driver (tests/hardening/interrupts.py, which runs as many
as asked for): random SIGINT/SIGTERM, single or repeated, sent to the real `livecam` while Python
starts, while it loads and while it runs. Whatever the moment: exit 130 and one line with no
output left, or a finished output with exit 0; never a traceback or death by the signal."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.hardening.interrupts import campaign

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def test_interrupts_in_the_first_moments_of_image_runs(tmp_path: Path, faces_dir: Path) -> None:
    bad, counts = campaign(faces_dir, tmp_path, runs=4, seed=5, startup=0.6, only="image", report=False)
    assert bad == [], bad
    assert counts["signalled"] >= 1


def test_interrupts_anywhere_in_a_video_run(tmp_path: Path, faces_dir: Path) -> None:
    bad, counts = campaign(faces_dir, tmp_path, runs=3, seed=2, only="video-clip", report=False)
    assert bad == [], bad
