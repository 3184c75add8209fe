"""`livecam run --camera N` end to end with a camera that misbehaves: OpenCV's VideoCapture is
replaced in the child process by a fake whose reads follow a plan (no camera is needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import av
import pytest

# The run with cv2.VideoCapture replaced. FAKE_CAMERA: "raise:N" (reads raise cv2.error after N
# frames, as a camera unplugged under some backends), "blip:N" (five reads raise after N frames,
# then frames again), "sizes" (the frame size changes every 10 frames), "bgra" (4 channels), "silent"
# (every read fails, as a camera another application holds), "blocked" (the first read never returns).
FAKE_CAMERA = r"""
import os, sys, time
import cv2
import numpy as np
import livecam.commands.live as live_command
import livecam.media.camera as camera
from livecam.__main__ import main

kind, _, after = os.environ["FAKE_CAMERA"].partition(":")
after = int(after or 0)
SIZES = [(320, 240), (640, 480), (160, 90), (240, 320)]

class Capture:
    def __init__(self, index, backend):
        self.reads = 0
    def isOpened(self):
        return True
    def set(self, prop, value):
        return True
    def get(self, prop):
        return {cv2.CAP_PROP_FRAME_WIDTH: 320, cv2.CAP_PROP_FRAME_HEIGHT: 240, cv2.CAP_PROP_FPS: 30}.get(prop, 0)
    def read(self):
        self.reads += 1
        time.sleep(3600 if kind == "blocked" else 1 / 30)
        if kind == "silent":
            return False, None
        if (kind == "raise" and self.reads > after) or (kind == "blip" and after < self.reads <= after + 5):
            raise cv2.error("OpenCV(4.10.0) /io/opencv/modules/videoio/src/cap_v4l.cpp:1: error: "
                            "(-2:Unspecified error) VIDIOC_DQBUF: No such device in function 'read'\n")
        w, h = SIZES[(self.reads // 10) % len(SIZES)] if kind == "sizes" else (320, 240)
        return True, np.full((h, w, 4 if kind == "bgra" else 3), 90, np.uint8)
    def release(self):
        pass

cv2.VideoCapture = Capture
camera.camera_backends = lambda: [("V4L2", cv2.CAP_V4L2)]
live_command.camera_device_problem = lambda index: None  # no /dev/video0 here
sys.argv[0] = "livecam"
main()
"""


def run_fake_camera(plan: str, args: list[str], faces_dir: Path, env: dict[str, str],
                    cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", FAKE_CAMERA, "run", "--camera", "0", "--swap-model", "mesh",
                           "--source", str(faces_dir / "obama.jpg"), *args],
                          env={**env, "FAKE_CAMERA": plan}, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_a_camera_whose_reads_raise_ends_in_one_line_and_keeps_the_recording(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # A read raising cv2.error (not returning False) ended the run with "internal error: error: ...".
    rec = tmp_path / "rec.mp4"
    proc = run_fake_camera("raise:15", ["--output", str(rec)], faces_dir, isolated_env, tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("livecam: error:")]
    assert len(errors) == 1, proc.stderr
    assert "camera 0 (V4L2) stopped delivering frames" in errors[0]
    assert "VIDIOC_DQBUF: No such device" in errors[0] and "check the cable" in errors[0]
    with av.open(str(rec)) as container:  # what came before is kept
        assert 1 <= sum(1 for _ in container.decode(video=0)) <= 15


@pytest.mark.parametrize("plan", ["silent", "blocked"])
def test_a_camera_that_opens_but_never_gives_a_frame_is_bad_input_in_one_line(
        plan: str, tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # a camera another application holds (it opens, every read fails) or whose first read never
    # returns ended "stopped delivering frames", exit 1, as a camera unplugged mid-run: another
    # --camera (or closing the other application) fixes it, as for a camera that does not open
    proc = run_fake_camera(plan, ["--output", "none"], faces_dir, isolated_env, tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("livecam: error:")]
    assert lines == proc.stderr.strip().splitlines()[-1:] and len(lines) == 1, proc.stderr
    assert lines[0].startswith("livecam: error: camera 0 (V4L2) opened but gave no frame in "), proc.stderr
    assert "no other application is using it, or give --camera another index" in lines[0]
    assert "Traceback" not in proc.stderr and "stopped" not in proc.stderr


@pytest.mark.parametrize("plan", ["blip:10", "sizes", "bgra"])
def test_a_camera_that_falters_or_changes_its_frames_runs_on(
        plan: str, tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # blip: a camera whose reads raise for a moment and come back goes on; sizes: frames of another
    # size are letterboxed into the camera's first size; bgra: 4 channels are taken as BGR.
    rec = tmp_path / "rec.mp4"
    proc = run_fake_camera(plan, ["--output", str(rec), "--max-frames", "45"], faces_dir, isolated_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "error" not in proc.stderr
    assert "45 frames" in proc.stderr and "(max frames)" in proc.stderr
    with av.open(str(rec)) as container:
        stream = container.streams.video[0]
        assert (stream.codec_context.width, stream.codec_context.height) == (320, 240)
        assert sum(1 for _ in container.decode(video=0)) == 45


def test_a_gif_of_one_frame_as_the_camera_is_refused_as_a_photo_is_and_a_two_frame_one_plays(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # `run --camera still.gif` played its one frame "at 100 FPS", where `--camera photo.jpg`
    # and `livecam video still.gif` are refused with a pointer to `livecam image`
    from PIL import Image

    from tests.commands.test_image import only_error_line
    from tests.conftest import run_cli

    still, anim = tmp_path / "still.gif", tmp_path / "anim.gif"
    Image.new("RGB", (64, 48), (90, 120, 150)).save(still)
    Image.new("RGB", (64, 48), (90, 120, 150)).save(anim, save_all=True, duration=100,
                                                    append_images=[Image.new("RGB", (64, 48), (150, 90, 60))])
    args = ["--swap-model", "mesh", "-s", str(faces_dir / "obama.jpg"), "--no-realtime", "--no-watermark", "--no-c2pa"]
    refused = run_cli(["run", "--camera", str(still), "--output", str(tmp_path / "still.mp4"), *args],
                      env=isolated_env)
    line = only_error_line(refused.stderr)
    assert refused.returncode == 2 and f"{still} is a still image (a GIF of one frame)" in line, line
    assert "`livecam image`" in line and not (tmp_path / "still.mp4").exists()
    # the refusal comes first: not after the C2PA note of a new signing identity, nor after the
    # warning that a file has no use for --resolution
    first = run_cli(["run", "--camera", str(still), "--output", str(tmp_path / "still.mp4"), "--resolution", "320x240",
                     *args[:-1]], env=isolated_env)
    assert first.returncode == 2 and "is a still image" in only_error_line(first.stderr)
    played = run_cli(["run", "--camera", str(anim), "--output", str(tmp_path / "anim.mp4"), *args], env=isolated_env)
    assert played.returncode == 0, played.stderr
    with av.open(str(tmp_path / "anim.mp4")) as recording:
        assert sum(1 for _ in recording.decode(video=0)) == 2


def test_a_tiny_duration_records_the_first_frame(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # --duration 1e-9 stopped the run before its first frame: "no frame was recorded", no file, exit 0.
    rec = tmp_path / "rec.mp4"
    proc = run_fake_camera("plain", ["--output", str(rec), "--duration", "1e-9", "--no-c2pa"], faces_dir,
                           isolated_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"recorded 1 frame to {rec}" in proc.stderr and "(duration)" in proc.stderr
    with av.open(str(rec)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 1
