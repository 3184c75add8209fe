"""`livecam video` end to end in subprocesses: bad input, interrupts, the mesh swapper on a real face."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.conftest import REPO_ROOT, run_cli, unwritable_folder, wait_for_file
from tests.videos import (cover_first, make_audio_only, make_clip, make_empty_recording, make_icon, make_timed_clip,
                          make_vfr_clip, probe, read_index, shorten_edit_lists, video_end)

# Runs the real CLI with the engine replaced by a slow one that touches MARKER at frame 10, so a
# test can interrupt it halfway through without any model (and asks for 3 GB at frame HOG_AT).
_PATCHED_CLI = """
import os, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
import numpy as np
import livecam.commands.video as video

from tests.doubles import NoModels

class SlowEngine(NoModels):  # contracts.FileEngine: model_names, providers
    tracks = False  # contracts.FileEngine: no ordered tracking step
    def analyse(self, packet, track):
        packet.faces = []
    def process(self, packet):
        if packet.index == 10:
            Path({marker!r}).touch()
        if packet.index == int(os.environ.get("HOG_AT", -1)):
            np.empty(3 << 30, np.uint8)  # 3 GB of address space (untouched)
        # after the marker, slow enough that a signal sent on seeing it lands mid-run even on a
        # loaded machine (a prompt one ends the run at once)
        time.sleep({delay} if packet.index < 10 else {tail_delay})
        packet.image[100:108, :8] = 255 - packet.image[100:108, :8]  # away from the index stamp

video.create_engine = lambda job: SlowEngine()
from livecam.cli import main
sys.argv = ["livecam", *sys.argv[1:]]
main()
"""


@pytest.fixture(scope="module")
def small_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_clip(tmp_path_factory.mktemp("cli") / "in.mp4", frames=60, size=(160, 120), fps=30, stamp=True)


def _no_outputs(folder: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize("case", ["missing", "truncated", "not_a_video", "no_video_stream", "unwritable_folder",
                                  "output_exists", "bad_encoder", "webm_with_h264", "mkv_with_png", "mpeg2_timing", "output_is_a_folder",
                                  "output_is_the_input", "one_pixel_wide", "too_wide_for_libx264", "icon",
                                  "no_frames.mkv", "no_frames.mp4"])
def test_bad_input_exits_nonzero_with_one_line_and_no_output(tmp_path: Path, small_clip: Path, case: str,
                                                             isolated_env: dict[str, str]) -> None:
    src, out = small_clip, tmp_path / "out.mp4"
    extra: list[str] = []
    expect_code, expect_text = 2, ""
    if case == "missing":
        src, expect_text = tmp_path / "nope.mp4", "does not exist; check the path"
    elif case == "truncated":
        data = small_clip.read_bytes()
        src = tmp_path / "cut.mp4"
        src.write_bytes(data[: len(data) // 2])
        expect_text = "its index (the moov box a recorder writes last) is missing"
    elif case == "not_a_video":
        src = tmp_path / "notes.mp4"
        src.write_text("hello\n" * 100)
        expect_text = "not a video"
    elif case == "no_video_stream":
        src = make_audio_only(tmp_path / "tone.m4a")
        expect_text = "no video stream"
    elif case.startswith("no_frames"):  # said "(End of file)" (MKV) and "it holds: nothing" (MP4)
        src = make_empty_recording(tmp_path / case)
        why = " (nor any other stream)" if case.endswith("mp4") else \
            ": it ends before the first one (an empty recording, or one cut short)"
        expect_text = f"{src} has no video frames{why}; give a video with frames"
        checked = run_cli(["verify", str(src)], env=isolated_env)
        assert checked.returncode == 2 and checked.stdout == f"{src}: UNREADABLE: {expect_text}\n", checked.stdout
    elif case == "unwritable_folder":
        out = unwritable_folder(tmp_path) / "out.mp4"
        expect_text = "is not writable"  # a usage problem, found before any model loads
    elif case == "output_exists":
        out.write_bytes(b"precious")
        expect_text = "--force"
    elif case == "bad_encoder":
        extra, expect_text = ["--video-encoder", "h263_fantasy"], "available: libx264"
    elif case == "webm_with_h264":
        out, expect_text = tmp_path / "out.webm", "cannot hold h264"
        extra = ["--video-encoder", "libx264"]
    elif case == "mkv_with_png":  # Matroska's muxer refuses png: an internal error once the models had loaded
        out, expect_text = tmp_path / "out.mkv", ".mkv files cannot hold png video from 'png'; use --video-encoder libx264"
        extra = ["--video-encoder", "png"]
    elif case == "mpeg2_timing":  # MPEG-2 takes ticks of one frame: "Invalid argument", exit 1, after the models loaded
        out, expect_text = tmp_path / "out.mkv", "mpeg2video does not encode this video's timing (30 fps, in ticks of"
        extra = ["--video-encoder", "mpeg2video"]
    elif case == "output_is_a_folder":
        out = tmp_path / "outdir"
        out.mkdir()
        expect_text = "is a folder; give a file name such as"
    elif case == "one_pixel_wide":
        src = make_clip(tmp_path / "dot.mkv", frames=3, size=(1, 1), audio=False, codec="ffv1")
        expect_text = "is 1x1 pixels, too small to encode"
    elif case == "too_wide_for_libx264":  # was "out of memory", exit 1, once the models had loaded
        src = make_clip(tmp_path / "wide.mkv", frames=2, size=(16400, 16), audio=False, codec="ffv1")
        expect_text = "libx264 encodes frames of at most 16384 pixels a side, and this video is 16400x16; use --video-encoder libx265"
    elif case == "icon":  # FFmpeg reads it as a one-frame video: it came out as one, where a PNG is refused
        src = make_icon(tmp_path / "favicon.ico", np.full((48, 64, 3), 90, np.uint8))
        expect_text = "favicon.ico is a still image (an icon), not a video; save it as a PNG and use `livecam image`"
    elif case == "output_is_the_input":
        src = tmp_path / "in.mp4"
        src.write_bytes(small_clip.read_bytes())
        out = tmp_path / "link.mp4"
        out.symlink_to(src)  # another name for the same file
        extra, expect_text = ["--force"], "is the input"
    before = set(p.name for p in tmp_path.iterdir())
    proc = run_cli(["video", str(src), str(out), "--source", "face.jpg", *extra], env=isolated_env)
    assert proc.returncode == expect_code, proc.stderr
    line = _one_line(proc.stderr)
    assert line.startswith("livecam: error:") and expect_text in line
    if case == "output_exists":
        assert out.read_bytes() == b"precious"
    elif case == "output_is_the_input":
        assert src.read_bytes() == small_clip.read_bytes()
    elif case == "output_is_a_folder":
        assert not any(out.iterdir())
    else:
        assert not out.exists()
    assert set(p.name for p in tmp_path.iterdir()) == before


def _start_patched(args: list[str], tmp_path: Path, env: dict[str, str], delay: float = 0.05,
                   tail_delay: float | None = None) -> tuple[subprocess.Popen[str], Path]:
    marker = tmp_path / "halfway"
    script = _PATCHED_CLI.format(root=str(REPO_ROOT), marker=str(marker), delay=delay,
                                 tail_delay=delay if tail_delay is None else tail_delay)
    proc = subprocess.Popen([sys.executable, "-c", script, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return proc, marker


def _run_patched(args: list[str], tmp_path: Path, env: dict[str, str], timeout: float = 120) -> str:
    """The patched CLI run to its end without delays; asserts it succeeded, returns its stderr."""
    proc, _ = _start_patched(args, tmp_path, env, delay=0.0)
    _, stderr = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, stderr
    return stderr



@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_halfway_leaves_no_output(tmp_path: Path, small_clip: Path, isolated_env: dict[str, str],
                                            sig: int) -> None:
    work = tmp_path / "work"
    work.mkdir()
    out = work / "out.mp4"
    proc, marker = _start_patched(["video", str(small_clip), str(out), "--source", "face.jpg"], tmp_path, isolated_env,
                                  tail_delay=0.3)
    wait_for_file(marker, proc)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert os.listdir(work) == []


def test_interrupt_with_keep_partial_leaves_a_valid_shorter_video(tmp_path: Path, small_clip: Path,
                                                                  isolated_env: dict[str, str]) -> None:
    out = tmp_path / "out.mkv"
    proc, marker = _start_patched(["video", str(small_clip), str(out), "--source", "face.jpg", "--keep-partial",
                                   "--execution-threads", "2"], tmp_path, isolated_env, tail_delay=0.3)
    wait_for_file(marker, proc)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    kept = [line for line in stderr.splitlines() if "kept" in line]  # once: it was a warning, then the error again
    assert len(kept) == 1 and kept[0].startswith("livecam: error: interrupted after "), stderr
    info = probe(out)
    assert 0 < info["frames"] < 60
    assert [read_index(img) for img in info["images"]] == list(range(info["frames"]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["halfway", "out.mkv"]


def test_patched_cli_run_completes_with_progress_lines(tmp_path: Path, small_clip: Path,
                                                       isolated_env: dict[str, str]) -> None:
    """Not a terminal: a summary line instead of a bar; -q would hide everything but errors."""
    out = tmp_path / "out.mp4"
    stderr = _run_patched(["video", str(small_clip), str(out), "--source", "face.jpg", "--no-label",
                           "--max-memory", "1", "--execution-threads", "3"], tmp_path, isolated_env, timeout=60)
    assert "wrote" in stderr and "60 frames" in stderr and "\r" not in stderr
    assert probe(out)["frames"] == 60
    assert _run_patched(["-q", "video", str(small_clip), str(out), "--source", "face.jpg", "--force"],
                        tmp_path, isolated_env, timeout=60) == ""


def test_force_onto_a_link_writes_the_linked_file_and_keeps_the_link(tmp_path: Path, small_clip: Path,
                                                                      isolated_env: dict[str, str]) -> None:
    # the link became a plain file and the file it led to kept the old video (ffmpeg -y writes through it)
    work = tmp_path / "work"  # tmp_path holds isolated_env's folders
    edits = work / "edits"
    edits.mkdir(parents=True)
    linked = edits / "cut.mp4"
    linked.write_bytes(b"the old cut")
    link = work / "latest.mp4"
    link.symlink_to(Path("edits") / "cut.mp4")
    _run_patched(["video", str(small_clip), str(link), "--source", "face.jpg", "--force", "--no-watermark"],
                 tmp_path, isolated_env)
    assert link.is_symlink() and os.readlink(link) == str(Path("edits") / "cut.mp4")
    assert probe(linked)["frames"] == 60
    assert sorted(p.name for p in work.iterdir()) == ["edits", "latest.mp4"]
    assert sorted(p.name for p in edits.iterdir()) == ["cut.mp4"]


def test_webm_output_works_without_an_encoder_option(tmp_path: Path, small_clip: Path,
                                                     isolated_env: dict[str, str]) -> None:
    """--video-encoder auto picks what the container holds: VP9 (and Opus audio) for .webm."""
    out = tmp_path / "out.webm"
    _run_patched(["video", str(small_clip), str(out), "--source", "face.jpg"], tmp_path, isolated_env)
    info = probe(out)
    assert info["codec"] == "vp9" and info["audio_codec"] == "opus" and info["frames"] == 60


def test_a_ts_recording_starting_at_10_hours_with_non_square_pixels(tmp_path: Path,
                                                                    isolated_env: dict[str, str]) -> None:
    """The whole `video` path: the MP4 of a 2 s TS that starts at 10 h was declared 10 h long
    (an empty edit-list lead), and its 8:9 pixels came out square (stretched)."""
    import av

    from tests.videos import make_timed_clip

    source = make_timed_clip(tmp_path / "rec.ts", start=36000.0, frames=60, fmt="mpegts",
                             sample_aspect=Fraction(8, 9))
    out = tmp_path / "out.mp4"
    _run_patched(["video", str(source), str(out), "--source", "face.jpg"], tmp_path, isolated_env)
    with av.open(str(out)) as c:
        assert (c.duration or 0) / av.time_base == pytest.approx(2.0, abs=0.15)
        assert c.streams.video[0].sample_aspect_ratio == Fraction(8, 9)
    info = probe(out)
    assert info["frames"] == 60 and info["times"][0] < 0.1 and info["audio_duration"] == pytest.approx(2.0, abs=0.1)


def test_a_raw_h264_stream_plays_at_the_rate_it_declares(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    """A dashcam's or Raspberry Pi camera's .h264 has no timestamps, only the rate in its SPS:
    a 10 fps one came out at FFmpeg's 25 fps default, 2.5 times too fast."""
    from tests.videos import make_raw_h264

    source = make_raw_h264(tmp_path / "cam.h264", frames=12, fps=10)
    out_path = tmp_path / "out.mp4"
    _run_patched(["video", str(source), str(out_path), "--source", "face.jpg"], tmp_path, isolated_env)
    info = probe(out_path)
    assert info["frames"] == 12 and info["rate"] == 10
    assert info["times"][-1] == pytest.approx(1.1, abs=0.01)


def test_an_odd_sized_video_says_the_output_loses_its_last_column_and_row(tmp_path: Path,
                                                                           isolated_env: dict[str, str]) -> None:
    """A 97x65 input came out 96x64 without a word (4:2:0 needs even sides)."""
    import av

    source = tmp_path / "odd.mkv"
    with av.open(str(source), "w") as out:
        vs = out.add_stream("ffv1", rate=10)
        vs.width, vs.height, vs.pix_fmt = 97, 65, "yuv444p"
        for i in range(3):
            out.mux(vs.encode(av.VideoFrame.from_ndarray(np.full((65, 97, 3), 40 * i, np.uint8), format="bgr24")))
        out.mux(vs.encode())
    out_path = tmp_path / "out.mp4"
    stderr = _run_patched(["video", str(source), str(out_path), "--source", "face.jpg"], tmp_path, isolated_env)
    assert probe(out_path)["size"] == (96, 64)
    assert ("note: the output is 96x64, the input 97x65: video is encoded with even sides (4:2:0 colour), so its "
            "last column and row of pixels are left out") in stderr, stderr


def test_a_full_range_clip_keeps_its_grey_and_its_colour_tags(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    """The whole `video` path: a full-range BT.709 grey came out darker, with no colour tags."""
    from tests.videos import colour_tags, make_flat_clip

    source = make_flat_clip(tmp_path / "full.mkv", luma=100, colour=(2, 1, 1, 1), frames=10)
    out = tmp_path / "out.mp4"
    _run_patched(["video", str(source), str(out), "--source", "face.jpg", "--no-label", "--no-watermark"],
                 tmp_path, isolated_env)
    assert colour_tags(out) == (2, 1, 1, 1)
    images = probe(out)["images"]
    assert len(images) == 10 and all(np.abs(image.astype(int) - 100).max() <= 1 for image in images)


@pytest.mark.parametrize("colour, pix_fmt", [((1, 1, 1, 1), "yuv420p"),  # limited-range BT.709, as HD video is
                                           ((2, 6, 6, 6), "yuvj420p")])  # full-range BT.601, as a webcam's
def test_a_lossless_run_gives_back_the_inputs_brightness(tmp_path: Path, isolated_env: dict[str, str],
                                                         colour: tuple[int, int, int, int], pix_fmt: str) -> None:
    """`video --video-quality 0` (lossless) on a clip of varied colour came back 1.1 levels darker
    in luma: decoding to BGR truncated (swscale's fast path) where it should round."""
    from tests.videos import luma_planes, make_colour_clip

    source = make_colour_clip(tmp_path / "in.mkv", colour=colour, pix_fmt=pix_fmt)
    out = tmp_path / "out.mkv"
    _run_patched(["video", str(source), str(out), "--source", "face.jpg", "--video-quality", "0", "--no-label",
                  "--no-watermark"], tmp_path, isolated_env)  # (96 rows: the stand-in engine's mark is below them)
    before, after = luma_planes(source), luma_planes(out)
    assert len(after) == len(before) == 6
    shift = np.mean([a.astype(float) - b for a, b in zip(after, before)])
    assert abs(shift) < 0.25, shift
    assert max(int(np.abs(a.astype(int) - b).max()) for a, b in zip(after, before)) <= 1


def test_piped_input_is_refused_saying_what_to_do(tmp_path: Path, small_clip: Path,
                                                 isolated_env: dict[str, str]) -> None:
    """`cat clip.mp4 | livecam video /dev/stdin out.mp4` said "is empty (0 bytes)"."""
    out = tmp_path / "out.mp4"
    proc = subprocess.run([sys.executable, "-m", "livecam", "video", "/dev/stdin", str(out), "--source", "face.jpg"],
                          input=small_clip.read_bytes(), env=isolated_env, capture_output=True, timeout=120)
    stderr = proc.stderr.decode()
    assert proc.returncode == 2, stderr
    line = _one_line(stderr)
    assert "is a pipe" in line and "save it to a file first" in line and "empty" not in line
    assert not out.exists()


def test_frame_range_counts_the_frames_written_at_the_fps_asked(tmp_path: Path, small_clip: Path,
                                                               isolated_env: dict[str, str]) -> None:
    """60 frames at 30 fps become 120 at --fps 60, and --frame-range 80:100 is inside them."""
    out = tmp_path / "out.mp4"
    stderr = _run_patched(["video", str(small_clip), str(out), "--source", "face.jpg", "--fps", "60",
                           "--frame-range", "80:100", "--no-label"], tmp_path, isolated_env)
    assert "120 frames (20 processed" in stderr
    assert probe(out)["frames"] == 120


@pytest.mark.parametrize("fps, refused", [("0.01", True), ("0.4", True), ("1", False)])
def test_an_fps_whose_one_frame_outlasts_the_input_is_refused(tmp_path: Path, fps: str, refused: bool, faces_dir: Path,
                                                              isolated_env: dict[str, str]) -> None:
    # a 1 s clip at --fps 0.01 gave one frame shown for 100 s: a file a hundred times the input's length
    clip = make_clip(tmp_path / "one_second.mp4", frames=30, fps=30, audio=False)
    out = tmp_path / "out.mp4"
    proc = run_cli(["video", str(clip), str(out), "-s", str(faces_dir / "obama.jpg"), "--no-watermark", "--no-c2pa", "--fps", fps],
                   env=isolated_env)
    if not refused:  # one frame of 1 s for a 1 s clip: as long as the input
        assert proc.returncode == 0, proc.stderr
        assert probe(out)["frames"] == 1
        return
    assert proc.returncode == 2, proc.stderr
    assert _one_line(proc.stderr) == (f"livecam: error: --fps {fps} would show one frame of one_second.mp4 (1 s "
                                      f"long) for {1 / float(fps):.3g} s; give --fps 1 or more (one over its length)")
    assert not out.exists()


def test_a_one_frame_clip_keeps_its_frame_at_any_fps(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    clip = make_clip(tmp_path / "one.mp4", frames=1, fps=30, audio=False)
    out = tmp_path / "out.mp4"
    proc = run_cli(["video", str(clip), str(out), "-s", str(faces_dir / "obama.jpg"), "--no-watermark", "--no-c2pa", "--fps", "24"],
                   env=isolated_env)
    assert proc.returncode == 0, proc.stderr
    assert probe(out)["frames"] == 1


def test_a_one_frame_clip_is_counted_as_one_frame(tmp_path: Path, faces_dir: Path,
                                                  isolated_env: dict[str, str]) -> None:
    # "wrote out.mp4: 1 frames", "no face was found in any of the 1 processed frames", "has about 1 frames"
    clip = make_clip(tmp_path / "one.mp4", frames=1, audio=False)  # a gradient, no face
    out = tmp_path / "out.mp4"
    args = ["video", str(clip), str(out), "-s", str(faces_dir / "biden.jpg"), "--no-watermark", "--no-c2pa"]
    proc = run_cli(args, env=isolated_env)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}: 1 frame (1 processed, 0 with a face, 0 faces swapped)" in proc.stderr, proc.stderr
    assert "warning: no face was found in the one processed frame; the video was copied" in proc.stderr
    refused = run_cli([*args, "--force", "--frame-range", "1:2"], env=isolated_env)
    assert refused.returncode == 2
    # and says what to give instead
    assert refused.stderr.endswith("--frame-range starts at frame 1 but one.mp4 has about 1 frame; give a START "
                                   "under 1 (frames count from 0)\n"), refused.stderr


def test_a_frame_range_end_past_the_last_frame_is_noted_once(tmp_path: Path, faces_dir: Path,
                                                             isolated_env: dict[str, str]) -> None:
    # --frame-range 2:500 on 10 frames was taken silently; END at the end exactly, or before, says nothing
    clip = make_clip(tmp_path / "ten.mp4", frames=10, audio=False)
    out = tmp_path / "out.mp4"
    args = ["video", str(clip), str(out), "-s", str(faces_dir / "biden.jpg"), "--swap-model", "mesh",
            "--no-watermark", "--no-c2pa", "--force", "--frame-range"]
    past = run_cli([*args, "2:500"], env=isolated_env)
    assert past.returncode == 0, past.stderr
    notes = [line for line in past.stderr.splitlines() if "--frame-range" in line]
    assert notes == ["livecam: note: --frame-range ends at frame 500 but ten.mp4 has about 10 frames, so the range "
                     "was clipped to the last frame, 9"], past.stderr
    assert "(8 processed," in past.stderr and not past.stdout
    exact = run_cli([*args, "2:10"], env=isolated_env)
    assert exact.returncode == 0 and "--frame-range" not in exact.stderr, exact.stderr


def test_a_frame_range_past_the_end_of_a_cut_short_file_says_nothing_was_swapped(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # The header announces 60 frames, so --frame-range 40:50 passed the check before the run; the
    # file held about 15: "wrote out.mp4: 15 frames (0 processed, ...)", exit 0, not a word more.
    whole = make_clip(tmp_path / "whole.mkv", frames=60, audio=False)
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(whole.read_bytes()[:whole.stat().st_size // 4])
    out = tmp_path / "out.mp4"
    proc = run_cli(["video", str(cut), str(out), "-s", str(faces_dir / "biden.jpg"), "--frame-range", "40:50",
                    "--no-watermark", "--no-c2pa"], env=isolated_env)
    assert proc.returncode == 0, proc.stderr
    written = probe(out)["frames"]
    assert 0 < written < 40
    assert (f"warning: --frame-range starts at frame 40 but cut.mkv ended after {written} frames, so no frame was "
            f"processed; the video was copied without swaps") in proc.stderr, proc.stderr


def _embedded_models_present() -> bool:
    default = REPO_ROOT / "src" / "livecam" / "models" / "default"
    return all((default / f"{name}.onnx").is_file() for name in ("blazeface_short_range", "face_landmark"))


@pytest.mark.skipif(not _embedded_models_present(), reason="embedded BlazeFace/FaceMesh models not present")
def test_mesh_swapper_end_to_end(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    src = make_clip(tmp_path / "biden.mp4", frames=60, size=(640, 480), fps=30, audio=True,
                    source_image=faces_dir / "biden.jpg", moving_crop=True)
    out = tmp_path / "swapped.mp4"
    proc = run_cli(["video", str(src), str(out), "--source", str(faces_dir / "obama.jpg"), "--swap-model", "mesh",
                    "--execution-threads", "2", "--no-label"], env=isolated_env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    a, b = probe(src), probe(out)
    assert b["frames"] == a["frames"] == 60
    assert b["rate"] == a["rate"] == 30
    assert b["audio_duration"] == pytest.approx(a["audio_duration"], abs=1 / 30)
    assert b["times"][-1] == pytest.approx(a["times"][-1], abs=1 / 30)
    for i in (0, 30, 59):
        x, y = a["images"][i].astype(int), b["images"][i].astype(int)
        face = np.abs(x[200:330, 320:460] - y[200:330, 320:460]).mean()  # eyes to mouth, all clip long
        background = np.abs(x[:, :150] - y[:, :150]).mean()  # the left strip never holds the face
        assert background < 4, (i, background)  # re-encoding noise only
        assert face > 8 and face > 3 * background, (i, face, background)


def test_progress_bar_on_a_terminal(tmp_path: Path, small_clip: Path, isolated_env: dict[str, str]) -> None:
    pty = pytest.importorskip("pty")
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    script = _PATCHED_CLI.format(root=str(REPO_ROOT), marker=str(tmp_path / "m"), delay=0.005, tail_delay=0.005)
    proc = subprocess.Popen([sys.executable, "-c", script, "video", str(small_clip), str(tmp_path / "o.mp4"),
                             "--source", "face.jpg"], stdin=slave, stdout=slave, stderr=slave, env=isolated_env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0
    text = out.decode("utf-8", "replace")
    assert "60/60" in text and "frame/s" in text and "\r" in text


def test_max_memory_caps_growth_after_warm_up(tmp_path: Path, small_clip: Path, isolated_env: dict[str, str]) -> None:
    if not Path("/proc/self/statm").exists():
        pytest.skip("the address-space cap needs Linux")
    out = tmp_path / "out.mp4"
    env = dict(isolated_env, HOG_AT="50")
    proc, _ = _start_patched(["video", str(small_clip), str(out), "--source", "face.jpg", "--max-memory", "0.5",
                              "--execution-threads", "3",
                              "--no-watermark", "--no-c2pa"], tmp_path, env, delay=0.0)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, stderr
    assert _one_line(stderr) == (f"livecam: error: writing {out} failed: out of memory within --max-memory 0.5; "
                                 "raise it or use fewer --execution-threads")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["halfway"]  # no output, no temporary file


def test_no_face_of_the_reference_person_says_so(tmp_path: Path, faces_dir: Path,
                                                isolated_env: dict[str, str]) -> None:
    from tests.standins.arcface import build_arcface

    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir()
    build_arcface(models / "w600k_r50.onnx")
    clip = make_clip(tmp_path / "in.mp4", frames=4, size=(320, 240), audio=False, source_image=faces_dir / "obama.jpg")
    out = tmp_path / "out.mp4"
    proc = run_cli(["--unverified-models", "video", str(clip), str(out), "-s", str(faces_dir / "biden.jpg"),
                    "--swap-model", "mesh", "--reference", str(faces_dir / "biden.jpg"), "--reference-distance", "0"],
                   env=isolated_env)
    assert proc.returncode == 0, proc.stderr
    # The frames hold a face, just not the reference person's: the warning says which was missing.
    assert "no face of the --reference person (within --reference-distance 0) was found in any of the 4" in proc.stderr


def test_faces_all_too_small_to_change_are_said_so(tmp_path: Path, faces_dir: Path,
                                                   isolated_env: dict[str, str]) -> None:
    # The group's faces at 400x276 are found but are under 24 px between the eyes: the neural
    # swapper left every frame as it was while the summary said "4 with a face", without a word.
    from tests.standins.arcface import build_arcface
    from tests.standins.inswapper import build_inswapper

    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir()
    build_arcface(models / "w600k_r50.onnx")
    build_inswapper(models / "inswapper_128.onnx")
    clip = make_clip(tmp_path / "in.mp4", frames=4, size=(400, 276), audio=False,
                     source_image=faces_dir / "group6.jpg", moving_crop=False)
    out = tmp_path / "out.mp4"
    proc = run_cli(["--unverified-models", "video", str(clip), str(out), "-s", str(faces_dir / "biden.jpg"),
                    "--swap-model", "inswapper_128", "--many-faces", "--no-label"], env=isolated_env)
    assert proc.returncode == 0, proc.stderr
    assert "(4 processed, 4 with a face, 0 faces swapped)" in proc.stderr
    assert ("warning: the faces found in 4 of the 4 processed frames are all too small to change (under 24 px "
            "between the eyes), so none was changed; use a video where they are larger") in proc.stderr


def test_the_summary_counts_the_faces_too_small_to_change(tmp_path: Path, faces_dir: Path,
                                                          isolated_env: dict[str, str]) -> None:
    # The group at 640 px wide: some faces are large enough, the others under 24 px between the eyes.
    # `image` said "2 faces swapped, 4 too small to change"; `video` said only "8 faces swapped",
    # leaving a --many-faces user to guess why four of six faces kept theirs.
    clip = make_clip(tmp_path / "in.mp4", frames=4, size=(640, 442), audio=False,
                     source_image=faces_dir / "group6.jpg", moving_crop=False)
    out = tmp_path / "out.mp4"
    proc = run_cli(["video", str(clip), str(out), "-s", str(faces_dir / "biden.jpg"), "--swap-model", "mesh",
                    "--many-faces", "--no-label", "--no-watermark"], env=isolated_env)
    assert proc.returncode == 0, proc.stderr
    counts = re.search(r"\(4 processed, 4 with a face, (\d+) faces swapped, (\d+) too small to change\)", proc.stderr)
    assert counts is not None, proc.stderr
    assert int(counts[1]) >= 4 and int(counts[2]) >= 4  # per frame: at least one of each


def test_a_swap_too_faint_to_change_a_pixel_is_not_counted(tmp_path: Path, faces_dir: Path,
                                                           isolated_env: dict[str, str]) -> None:
    # Faces 24.8 px between the eyes fade in at a fifth of the swap (no popping at the size
    # limit); at --blend 0.01 not a pixel moved, and the summary said "3 faces swapped".
    photo = cv2.imread(str(faces_dir / "obama.jpg"))
    small_face = tmp_path / "small.png"
    cv2.imwrite(str(small_face), cv2.resize(photo, None, fx=0.235, fy=0.235, interpolation=cv2.INTER_AREA))
    clip = make_clip(tmp_path / "in.mp4", frames=3, size=(192, 240), audio=False, source_image=small_face,
                     moving_crop=False)
    out = tmp_path / "out.mp4"
    proc = run_cli(["video", str(clip), str(out), "-s", str(faces_dir / "biden.jpg"), "--swap-model", "mesh",
                    "--blend", "0.01", "--no-label", "--no-watermark"], env=isolated_env)
    assert proc.returncode == 0, proc.stderr
    assert "(3 processed, 3 with a face, 0 faces swapped)" in proc.stderr
    assert ("warning: --blend 0.01 is too faint to change a pixel of the faces found in 3 of the 3 processed "
            "frames; give a larger --blend") in proc.stderr


def test_a_video_whose_face_masks_left_every_face_says_none_was_swapped(tmp_path: Path, faces_dir: Path,
                                                                        isolated_env: dict[str, str]) -> None:
    # --face-mask-regions glasses on faces without glasses (the stand-in parser: hair above, skin
    # below): the swapper left every face as it was, while the summary counted faces by size
    # only and said nothing. Now it counts the faces swapped and warns once, as `image` does.
    from tests.standins import build_swap_models

    build_swap_models(Path(isolated_env["LIVECAM_MODELS_DIR"]), face_parser=True)
    clip = make_clip(tmp_path / "in.mp4", frames=4, size=(320, 240), audio=False, source_image=faces_dir / "obama.jpg")
    args = ["--unverified-models", "video", str(clip), "-s", str(faces_dir / "biden.jpg"), "--swap-model",
            "inswapper_128", "--no-label", "--no-watermark", "--no-c2pa", "--face-mask", "box", "region"]
    proc = run_cli([*args[:3], str(tmp_path / "out.mp4"), *args[3:], "--face-mask-regions", "glasses"],
                   env=isolated_env)
    assert proc.returncode == 0, proc.stderr
    assert "(4 processed, 4 with a face, 0 faces swapped)" in proc.stderr
    warning = ("warning: --face-mask left nothing to swap of the faces found in 4 of the 4 processed frames: none "
               "of the parts it keeps is there; choose other --face-mask types, regions or areas")
    assert proc.stderr.count(warning) == 1, proc.stderr
    skin = run_cli([*args[:3], str(tmp_path / "skin.mp4"), *args[3:], "--face-mask-regions", "skin"], env=isolated_env)
    assert skin.returncode == 0, skin.stderr
    assert "(4 processed, 4 with a face, 4 faces swapped)" in skin.stderr and "left nothing" not in skin.stderr


@pytest.mark.parametrize("args,text", [
    (["video", "in.mp4", "out.mp4"], "missing --source PATH"),
    # each names its one problem: -1:5 said "expected START:END frame numbers with END > START"
    (["video", "in.mp4", "out.mp4", "-s", "f.jpg", "--frame-range", "9:3"],
     "Invalid value for --frame-range: END must be more than START (END is excluded), got '9:3'"),
    (["video", "in.mp4", "out.mp4", "-s", "f.jpg", "--frame-range", "5:5"],
     "Invalid value for --frame-range: END must be more than START (END is excluded), got '5:5'"),
    (["video", "in.mp4", "out.mp4", "-s", "f.jpg", "--frame-range", "-1:5"],
     "Invalid value for --frame-range: START must be 0 or more, got '-1:5'"),
    (["video", "in.mp4", "out.mp4", "-s", "f.jpg", "--frame-range", "a:b"],
     "Invalid value for --frame-range: expected START:END frame numbers, such as 10:250, got 'a:b'"),
    # two words said only "Got unexpected extra argument (5)"
    (["video", "in.mp4", "out.mp4", "-s", "f.jpg", "--frame-range", "2", "5"],
     "Invalid value for --frame-range: expected START:END frame numbers, in one word (2:END), got '2'"),
    (["video", "in.mp4", "out.mp4", "-s", "f.jpg", "--keep-fps", "--fps", "25"], "exclude each other"),
    # nan and inf passed click's range and failed mid-run as internal errors; a rate under 1/2002
    # became a division by zero
    (["video", "in.mp4", "out.mp4", "-s", "f.jpg", "--fps", "nan"], "Invalid value for '--fps'"),
    (["video", "in.mp4", "out.mp4", "-s", "f.jpg", "--fps", "0.0001"], "Invalid value for '--fps'"),
    (["video", "in.mp4", "out.mp4", "-s", "f.jpg", "--max-memory", "inf"], "Invalid value for '--max-memory'"),
    (["image", "in.jpg"], "Missing argument 'OUTPUT'"),
    # an empty --pattern (an unset shell variable) ran every video of the folder
    (["video", "in", "out", "-s", "f.jpg", "--pattern", ""], "Invalid value for '--pattern': the pattern is empty"),
])
def test_usage_errors_are_one_line_too(args: list[str], text: str, isolated_env: dict[str, str]) -> None:
    proc = run_cli(args, env=isolated_env)
    assert proc.returncode == 2
    line = _one_line(proc.stderr)
    assert line.startswith("livecam: error: ") and text in line
    assert line.endswith(f"(see `livecam {args[0]} --help`)")


@pytest.mark.parametrize("keep_partial", [False, True])
def test_an_output_that_appears_during_the_run_is_not_overwritten(tmp_path: Path, small_clip: Path,
                                                                   isolated_env: dict[str, str],
                                                                   keep_partial: bool) -> None:
    """Someone (or a second run) writes OUTPUT while livecam works on it: their file stays, the
    result is kept beside it under the name the error gives (exit 1), also for a kept partial."""
    work = tmp_path / "work"  # the output folder alone (caches live in tmp_path)
    work.mkdir()
    out = work / "out.mp4"
    extra = ["--keep-partial"] if keep_partial else []
    proc, marker = _start_patched(["video", str(small_clip), str(out), "--source", "face.jpg", *extra], tmp_path,
                                  isolated_env, tail_delay=0.3 if keep_partial else 0.02)
    wait_for_file(marker, proc)
    out.write_bytes(b"someone else's file")
    if keep_partial:
        proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    kept = work / "out.livecam-1.mp4"
    assert out.read_bytes() == b"someone else's file"
    assert sorted(p.name for p in work.iterdir()) == ["out.livecam-1.mp4", "out.mp4"]
    assert "Traceback" not in stderr and f"kept as {kept}" in stderr
    frames = probe(kept)["frames"]
    if keep_partial:
        assert proc.returncode == 130, stderr
        assert 0 < frames < 60 and f"kept in {kept}" in stderr
    else:
        assert proc.returncode == 1, stderr  # as when --force cannot replace the old file (it was 2)
        assert frames == 60
        assert stderr.splitlines()[-1].startswith(f"livecam: error: {out} appeared while livecam was writing it")


def test_a_truncated_faststart_input_passes_the_checks_before_the_models(tmp_path: Path) -> None:
    """Its frames before the cut are read (one warning, at the end of the read); check_job refused
    it ("cut short ... give --keep-partial"), where a cut Matroska file went through."""
    from livecam.commands.video import check_job
    from tests.pipeline.test_file import _opts, _truncated_faststart

    job = _opts(_truncated_faststart(tmp_path), tmp_path / "out.mp4")
    assert check_job(job)[0] == job


def test_the_summary_counts_the_audio_and_subtitle_tracks(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    from tests.pipeline.test_file import _two_audio_tracks, _with_subtitles

    one = make_clip(tmp_path / "one.mkv", frames=30, size=(96, 64))
    clip = _with_subtitles(_two_audio_tracks(one, tmp_path / "two.mkv"), tmp_path / "all.mkv", tmp_path, 0.0)
    out = tmp_path / "out.mkv"
    stderr = _run_patched(["video", str(clip), str(out), "--source", "face.jpg", "--no-watermark"], tmp_path,
                          isolated_env)
    assert "2 audio tracks copied, 1 subtitle track" in stderr, stderr


def test_an_mp4_with_its_cover_art_first_is_swapped_from_its_video(tmp_path: Path,
                                                                   isolated_env: dict[str, str]) -> None:
    # the cover is stream 0 (its metadata before its tracks): the run reads the 10 frames of the
    # video, never the picture, and the one note names the cover the MP4 output leaves out
    src = cover_first(make_timed_clip(tmp_path / "covered.mp4", frames=10, cover=(256, 256)))
    out = tmp_path / "out.mp4"
    stderr = _run_patched(["video", str(src), str(out), "--source", "face.jpg", "--no-watermark"], tmp_path,
                          isolated_env)
    info = probe(out)
    assert info["streams"] == ["video", "audio"] and info["size"] == (96, 64)
    assert [read_index(image) for image in info["images"]] == list(range(10))
    assert f"wrote {out}: 10 frames (10 processed" in stderr, stderr
    notes = [line for line in stderr.splitlines() if "not copied" in line]
    assert len(notes) == 1 and notes[0].endswith("not copied: 1 attached file (cover.jpg): MP4 outputs leave them "
                                                 "out; write a .mkv output to keep them"), stderr


def test_video_quality_for_an_encoder_without_a_quality_setting_is_said(tmp_path: Path, small_clip: Path,
                                                                        isolated_env: dict[str, str]) -> None:
    """--video-quality with an encoder livecam has no quality setting for (FFV1) was silently ignored."""
    from livecam.media.video_writer import encoder_available, quality_ignored

    if not encoder_available("ffv1"):
        pytest.skip("ffv1 is not in this FFmpeg build")
    out = tmp_path / "out.mkv"
    base = ["video", str(small_clip), str(out), "--source", "face.jpg", "--video-encoder", "ffv1", "--force"]
    warned = _run_patched([*base, "--video-quality", "30"], tmp_path, isolated_env)
    assert "warning: --video-quality has no setting in the ffv1 encoder, so it is ignored" in warned
    assert probe(out)["codec"] == "ffv1"
    assert "--video-quality" not in _run_patched(base, tmp_path, isolated_env)  # not given: nothing to say
    assert not any(quality_ignored(e) for e in ("libx264", "libx265", "libvpx-vp9", "libsvtav1", "mpeg4"))


def _timecodes(path: Path) -> tuple[str | None, list[str]]:
    """The video stream's timecode tag (Matroska's TIMECODE) and the timecode of each of
    `path`'s timecode (tmcd) tracks, as FFmpeg reads them back."""
    import av

    def tag(metadata: dict[str, str]) -> str | None:
        return next((v for k, v in metadata.items() if k.lower() == "timecode"), None)

    with av.open(str(path)) as c:
        tracks = [tag(dict(s.metadata)) for s in c.streams if s.type == "data"]
        return tag(dict(c.streams.video[0].metadata)), [t for t in tracks if t is not None]


@pytest.mark.parametrize("source, fps, timecode, args, output, expected", [
    # an editor's MOV: its tmcd track kept as one, whatever --frame-range swaps (it cuts nothing)
    ("in.mov", 25, "01:00:00:00", ["--frame-range", "5:10"], "out.mov", "01:00:00:00"),
    # NTSC drop-frame, kept as it is, into an MP4 (whose muxer writes tmcd tracks too)
    ("in.mp4", 29.97, "00:59:59;29", [], "out.mp4", "00:59:59;29"),
    # --fps 50 counts 50 frames a second: frame 12 of 25 is frame 24 of 50 (Matroska: a TIMECODE tag)
    ("in.mov", 25, "10:00:00:12", ["--fps", "50"], "out.mkv", "10:00:00:24"),
])
def test_the_output_keeps_the_inputs_start_timecode(tmp_path: Path, isolated_env: dict[str, str], source: str,
                                                    fps: float, timecode: str, args: list[str], output: str,
                                                    expected: str) -> None:
    """An editor lines clips up by the timecode of their first frame (a MOV/MP4 tmcd track);
    it was left out, said only as 'not copied: 1 data stream'."""
    clip = make_clip(tmp_path / source, frames=20, size=(96, 64), fps=fps, timecode=timecode)
    assert _timecodes(clip) == (timecode, [timecode])  # FFmpeg wrote the input's tmcd track
    out = tmp_path / output
    stderr = _run_patched(["video", str(clip), str(out), "--source", "face.jpg", "--no-watermark", *args],
                          tmp_path, isolated_env)
    assert "not copied" not in stderr, stderr
    assert _timecodes(out) == (expected, [] if out.suffix == ".mkv" else [expected])


def test_a_timecode_the_output_cannot_hold_is_said_left_out(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    """At --fps 0.4 (on a 2 s clip: a shorter one is refused) a timecode counts no whole frame a
    second (FFmpeg's muxer refuses it): the note names the track as a timecode, not as '1 data stream'."""
    clip = make_clip(tmp_path / "in.mov", frames=50, size=(96, 64), fps=25, timecode="01:00:00:00")
    out = tmp_path / "out.mov"
    stderr = _run_patched(["video", str(clip), str(out), "--source", "face.jpg", "--no-watermark", "--fps", "0.4"],
                          tmp_path, isolated_env)
    assert "not copied: 1 timecode stream\n" in stderr, stderr
    assert _timecodes(out) == (None, [])


# A screen recording's timing: uneven steps, a gap before the last frame, which lasts 0.3 s
VFR_TIMES, VFR_LAST = [0.0, 0.033, 0.066, 0.133, 0.166, 0.233, 0.6], 0.3


@pytest.mark.parametrize("ext", ["mp4", "mkv", "webm"])
def test_a_variable_rate_clips_video_ends_where_the_inputs_does(tmp_path: Path, faces_dir: Path, ext: str,
                                                                isolated_env: dict[str, str]) -> None:
    # its last frame lasted one frame at the average rate: the video ended at 0.63 s of 0.9 s, its sound at 0.9 s
    clip = make_vfr_clip(tmp_path / "screen.mkv", VFR_TIMES, VFR_LAST)
    out = tmp_path / f"out.{ext}"
    proc = run_cli(["video", str(clip), str(out), "-s", str(faces_dir / "obama.jpg"), "--no-watermark", "--no-c2pa"],
                   env=isolated_env)
    assert proc.returncode == 0, proc.stderr
    assert probe(out)["times"] == pytest.approx(VFR_TIMES, abs=0.002)
    assert video_end(out) == pytest.approx(VFR_TIMES[-1] + VFR_LAST, abs=0.002)


@pytest.mark.parametrize("name", ["screen.mkv", "phone.mp4"])
def test_fps_on_a_variable_rate_clip_covers_its_last_frame(tmp_path: Path, faces_dir: Path, name: str,
                                                           isolated_env: dict[str, str]) -> None:
    # the last frame (0.6 s, for 0.3 s) was taken to last 1/30 s: 6 ticks, and the last frame never shown;
    # an MP4 with B-frames gives its packets' durations in decode order, so the last frame had another's
    clip = make_vfr_clip(tmp_path / name, VFR_TIMES, VFR_LAST, bframes=name.endswith(".mp4"))
    out = tmp_path / "out.mp4"
    proc = run_cli(["video", str(clip), str(out), "-s", str(faces_dir / "obama.jpg"), "--no-watermark", "--no-c2pa",
                    "--fps", "10"], env=isolated_env)
    assert proc.returncode == 0, proc.stderr
    info = probe(out)
    assert info["frames"] == 9 and [read_index(image) for image in info["images"][-3:]] == [6, 6, 6]
    assert video_end(out) == pytest.approx(0.9, abs=0.002)


@pytest.mark.parametrize("tracks, audio_end", [(1, 3.0), (2, 2.0)])
def test_an_mp4_whose_edit_list_ends_before_its_samples_ends_where_players_stop(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], tracks: int, audio_end: float) -> None:
    # An editor's trim that keeps the samples: the video's edit list shows 2 s of the 3 s it
    # holds (1: the sound plays on to 3 s, as in the input; 2: the sound is trimmed too). The
    # frames past 2 s are shown by no player, and the header's 30 frames are not a truncation.
    clip = shorten_edit_lists(make_clip(tmp_path / "trimmed.mp4", frames=30, size=(96, 64), fps=10, stamp=True),
                              2.0, tracks)
    out = tmp_path / "out.mp4"
    proc = run_cli(["video", str(clip), str(out), "-s", str(faces_dir / "obama.jpg"), "--no-watermark", "--no-c2pa",
                    "--swap-model", "mesh"], env=isolated_env)
    assert proc.returncode == 0, proc.stderr
    assert "20 frames" in proc.stderr and "header" not in proc.stderr and "truncated" not in proc.stderr, proc.stderr
    info = probe(out)
    assert info["frames"] == 20 and [read_index(image) for image in info["images"][-2:]] == [18, 19]
    assert video_end(out) == pytest.approx(2.0, abs=0.002)
    # the sound, to within the AAC frame (23 ms) it ends in
    assert info["audio_start"] + info["audio_duration"] == pytest.approx(audio_end, abs=0.03)
