"""OpenCV must be loaded before PyAV: PyAV's wheel bundles its own libxcb, and when it loads
first OpenCV's Qt window livelocks at 100% CPU in namedWindow (PyAV-Org/PyAV#978, #1050); the
X11 window test shows the hang where Xvfb exists, this one checks the order everywhere."""

from __future__ import annotations

import subprocess
import sys

import pytest

MODULES_THAT_LOAD_PYAV = ["livecam.media.containers", "livecam.media.camera", "livecam.media.video_reader",
                          "livecam.media.video_writer", "livecam.media.sinks", "livecam.commands.demo",
                          "livecam.commands.live", "livecam.cli"]


@pytest.mark.parametrize("module", MODULES_THAT_LOAD_PYAV)
def test_opencv_is_loaded_before_pyav(module: str) -> None:
    probe = (f"import sys, {module}\n"
             "names = list(sys.modules)\n"  # insertion order: the order of first import
             "print(names.index('cv2') if 'cv2' in names else -1, names.index('av') if 'av' in names else -1)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    cv2_at, av_at = map(int, out.stdout.split())
    assert av_at == -1 or 0 <= cv2_at < av_at, f"importing {module} loads PyAV before OpenCV"


def test_only_media_imports_pyav() -> None:
    # One reader and one writer in media/: commands/demo.py had its own PyAV clip writer.
    import re
    from pathlib import Path

    package = Path(__file__).resolve().parents[2] / "src" / "livecam"
    pattern = re.compile(r"^\s*(import av\b|from av\b)", re.MULTILINE)
    outside = [str(p.relative_to(package)) for p in package.rglob("*.py")
               if "media" not in p.relative_to(package).parts[:1] and pattern.search(p.read_text(encoding="utf-8"))]
    assert outside == []
