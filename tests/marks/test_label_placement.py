"""The visible label keeps off the faces in what `livecam image` writes (the label was always
drawn bottom-right, over a face there)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from livecam.media import provenance
from livecam.media.images import read_image
from tests.conftest import run_cli


def test_image_label_goes_bottom_left_when_the_face_is_bottom_right(tmp_path: Path, faces_dir: Path,
                                                                    isolated_env: dict[str, str]) -> None:
    # obama.jpg's face is in the upper middle; cropped close around it and placed in the
    # bottom-right corner of a grey canvas, the face reaches into that corner.
    face = cv2.imread(str(faces_dir / "obama.jpg"))
    face = cv2.resize(face, (face.shape[1] // 2, face.shape[0] // 2), interpolation=cv2.INTER_AREA)
    h, w = face.shape[:2]
    part = face[int(h * 0.15): int(h * 0.37), int(w * 0.37): int(w * 0.63)]  # brow to chin
    canvas = np.full((part.shape[0] * 2, part.shape[1] * 2, 3), 128, np.uint8)
    canvas[-part.shape[0]:, -part.shape[1]:] = part
    target = tmp_path / "corner.png"
    cv2.imwrite(str(target), canvas)
    labelled, plain = tmp_path / "l.png", tmp_path / "p.png"
    for out, flag in ((labelled, []), (plain, ["--no-label"])):
        result = run_cli(["image", str(target), str(out), "-s", str(faces_dir / "biden.jpg"), "--swap-model", "mesh",
                          "--no-watermark", "--no-c2pa", *flag], env=isolated_env)
        assert result.returncode == 0, result.stderr
        assert "1 face swapped" in result.stderr
    changed = np.any(read_image(labelled) != read_image(plain), axis=2)
    ch, cw = canvas.shape[:2]
    assert changed.any()
    assert not changed[ch // 2:, cw // 2:].any()  # nothing in the quarter the face is in
    x1, y1, x2, y2 = provenance.label_box(canvas.shape, "bottom-left")
    assert changed[y1:y2, x1:x2].any() and not changed[:y1].any()
