"""`livecam video` on frames holding something the detector takes for a face: each new track is
confirmed by FaceMesh once (faces/tracking.py), as a picture's faces are on every detection, so
that a letterboxed table's whisky glass (BlazeFace 0.57) is left alone in video too, while a
real face is still swapped."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from tests.commands.test_image_faces import EXACT, _no_face, _standins
from tests.conftest import run_cli
from tests.videos import luma_planes, make_still_clip


def _swap(clip: Path, out: Path, source: Path, env: dict[str, str]) -> str:
    result = run_cli(["--unverified-models", "video", str(clip), str(out), "-s", str(source),
                      "--video-quality", "0", *EXACT], env=env)
    assert result.returncode == 0, result.stderr
    return result.stderr


def test_a_glass_the_detector_takes_for_a_face_is_not_swapped_in_a_video(tmp_path: Path, faces_dir: Path,
                                                                        isolated_env: dict[str, str]) -> None:
    # The neural swapper pasted a face onto the glass in every frame ("4 faces swapped").
    _standins(isolated_env)
    table = cv2.imread(str(_no_face(faces_dir, tmp_path)))
    boxed = cv2.copyMakeBorder(table, 200, 200, 200, 200, cv2.BORDER_CONSTANT, value=(0, 0, 0))
    clip, out = make_still_clip(tmp_path / "table.mkv", boxed), tmp_path / "out.mkv"
    stderr = _swap(clip, out, faces_dir / "biden.jpg", isolated_env)
    assert "0 faces swapped" in stderr, stderr
    before, after = luma_planes(clip), luma_planes(out)
    assert len(after) == len(before) == 4
    # (decoding to BGR and encoding again moves a level or two: a pasted face moves dozens)
    assert max(int(np.abs(a.astype(int) - b).max()) for a, b in zip(after, before)) <= 3


def test_a_real_face_is_still_swapped_in_a_video(tmp_path: Path, faces_dir: Path,
                                                 isolated_env: dict[str, str]) -> None:
    _standins(isolated_env)
    photo = cv2.imread(str(faces_dir / "obama.jpg"))
    photo = cv2.resize(photo, (photo.shape[1] // 4 * 2, photo.shape[0] // 4 * 2), interpolation=cv2.INTER_AREA)
    clip, out = make_still_clip(tmp_path / "face.mkv", photo), tmp_path / "out.mkv"
    stderr = _swap(clip, out, faces_dir / "biden.jpg", isolated_env)
    assert "4 faces swapped" in stderr, stderr
    before, after = luma_planes(clip), luma_planes(out)
    assert all(int(np.abs(a.astype(int) - b).max()) > 20 for a, b in zip(after, before))
