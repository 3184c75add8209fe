#!/usr/bin/env python3
"""Measure how live marks read back: a change computed on one frame, added to later frames
(marks.live_marker reuses the newest change on every frame until the next refresh).

On a clip made from the bundled grace_hopper sample (bench's GeneratedClip: the whole frame
drifting along a small circle, about 3.4 px a frame at 720p, a camera shake) and on the same
clip with the background still and only the middle third moving (a face before a webcam):
- bits off when frame 0's change is added to frame k, for several k;
- a 60-frame clip marked as LiveMarker does (a change refreshed every 30 frames, added to every
  frame), recorded with the live encoder settings (x264 veryfast/zerolatency, CRF 18), then
  re-encoded at CRF 23 and 28: how many of every 3rd frame read as marked, and the verdict of
  `livecam verify`'s reading (marks.evidence).

Usage: PYTHONPATH=src python scripts/live_mark_reuse.py [--width 1280 --height 720]
"""

from __future__ import annotations

import argparse
import tempfile
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np

from livecam.commands.bench import GeneratedClip
from livecam.marks import watermark as wm
from livecam.marks.evidence import examine
from livecam.media.video_reader import VideoReader
from livecam.media.video_writer import OutputSpec, VideoWriter
from livecam.models.store import ModelStore
from livecam.runtime.providers import resolve_providers
from livecam.samples import sample_path
from livecam.settings import RuntimeSettings

FPS = 30
FRAMES = 60
REFRESH = 30  # frames between changes (LiveMarker's REFRESH_S at 30 FPS)


def clips(size: tuple[int, int]) -> dict[str, list[np.ndarray]]:
    clip = GeneratedClip(cv2.imread(str(sample_path("grace_hopper"))), size, FRAMES)
    shake = [clip.image(i) for i in range(FRAMES)]
    w, h = size
    still = []
    for image in shake:
        frame = shake[0].copy()
        frame[h // 4:3 * h // 4, w // 3:2 * w // 3] = image[h // 4:3 * h // 4, w // 3:2 * w // 3]
        still.append(frame)
    return {"whole frame drifting": shake, "still background, moving middle": still}


def write(images: list[np.ndarray], path: Path, crf: int, live: bool) -> None:
    h, w = images[0].shape[:2]
    writer = VideoWriter(OutputSpec(path=path, format="mp4", width=w, height=h, rate=Fraction(FPS),
                                    time_base=Fraction(1, 1000), quality=crf, live=live))
    for i, image in enumerate(images):
        writer.write(image, i / FPS)
    writer.close()


def decoded(path: Path) -> list[np.ndarray]:
    with VideoReader(path) as reader:
        return [f.image for f in reader.frames()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=720)
    args = parser.parse_args()
    marker = wm.Watermarker.open(ModelStore(RuntimeSettings(), progress=False), resolve_providers(["cpu"]), 1)

    def read(images: list[np.ndarray]) -> str:
        sample = images[::3]
        return f"{sum(marker.read(image).marked for image in sample)} of {len(sample)}"

    with tempfile.TemporaryDirectory() as tmp:
        for name, frames in clips((args.width, args.height)).items():
            change = marker.residual(frames[0])
            gaps = {k: marker.read(change.add_to(frames[k])).errors for k in (1, 2, 3, 4, 6, 12)}
            print(f"{name}: bits off, frame 0's change on frame k: {gaps}")
            marked = []
            for i, image in enumerate(frames):
                if i % REFRESH == 0:
                    change = marker.residual(image)
                marked.append(change.add_to(image))
            recording = Path(tmp) / "recording.mp4"
            write(marked, recording, 18, live=True)
            result = [f"recorded {read(decoded(recording))} (verify: {examine(recording, marker).watermark.found})"]
            for crf in (23, 28):
                again = Path(tmp) / f"crf{crf}.mp4"
                write(decoded(recording), again, crf, live=False)
                result.append(f"CRF {crf} {read(decoded(again))} (verify: {examine(again, marker).watermark.found})")
            print(f"{name}: every 3rd frame read as marked: " + "; ".join(result), flush=True)


if __name__ == "__main__":
    main()
