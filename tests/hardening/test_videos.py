"""Damaged and unusual videos through `livecam video` (in-process, the real command line): each
one either works (a complete, decodable output) or fails with exit 2 and a clear last line;
never a traceback, never an output or temporary file left behind after a failure."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from click.testing import CliRunner

from livecam.cli import cli
from tests.hardening.fuzz import invoke
from tests.videos import count_frames, make_audio_only, make_clip, probe


@pytest.fixture
def face(faces_dir: Path, tmp_path: Path) -> Path:
    import cv2

    path = tmp_path / "face.png"
    image = cv2.imread(str(faces_dir / "biden.jpg"))
    cv2.imwrite(str(path), cv2.resize(image, (200, round(image.shape[0] * 200 / image.shape[1]))))
    return path


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LIVECAM_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LIVECAM_OFFLINE", "1")


def run_video(src: Path, face: Path, out_dir: Path, *extra: str) -> tuple[int, str, Path]:
    out_dir.mkdir(exist_ok=True)
    out = out_dir / "out.mp4"
    result, stderr = invoke(CliRunner(), cli, ["video", str(src), str(out), "-s", str(face), "--swap-model", "mesh",
                                               *extra])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert result.exit_code in (0, 2), (result.exit_code, stderr)
    files = sorted(p.name for p in out_dir.iterdir())
    if result.exit_code == 0:
        assert files == ["out.mp4"], files
        assert count_frames(out) > 0
    else:
        assert files == [], files
        last = [line for line in stderr.splitlines() if line.strip()][-1]
        assert last.startswith("livecam: error: ") and src.name in last, stderr
    return result.exit_code, stderr, out



def zero_frames(path: Path) -> Path:
    with av.open(str(path), "w", format="matroska") as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
    return path


def ten_bit(path: Path, frames: int = 12) -> Path | None:
    for codec, fmt in (("libx264", "yuv420p10le"), ("libx265", "yuv420p10le"), ("ffv1", "yuv420p10le")):
        try:
            with av.open(str(path), "w") as out:
                stream = out.add_stream(codec, rate=30)
                stream.width, stream.height, stream.pix_fmt = 96, 64, fmt
                if codec == "libx265":
                    stream.codec_context.options = {"x265-params": "log-level=error"}
                for i in range(frames):
                    img = np.full((64, 96, 3), (i * 20) % 256, np.uint8)
                    frame = av.VideoFrame.from_ndarray(img, format="bgr24").reformat(format=fmt)
                    frame.pts, frame.time_base = i, Fraction(1, 30)
                    for packet in stream.encode(frame):
                        out.mux(packet)
                for packet in stream.encode(None):
                    out.mux(packet)
            with av.open(str(path)) as c:
                if "10" in c.streams.video[0].codec_context.pix_fmt:
                    return path
        except (av.error.FFmpegError, ValueError):
            continue
    return None


@pytest.mark.parametrize("container", [".mp4", ".mkv"])
@pytest.mark.parametrize("fraction", [0.05, 0.3, 0.6, 0.95])
def test_truncated_videos(tmp_path: Path, face: Path, container: str, fraction: float) -> None:
    clip = make_clip(tmp_path / f"clip{container}", frames=30, size=(96, 64))
    data = clip.read_bytes()
    cut = tmp_path / f"cut{container}"
    cut.write_bytes(data[: int(len(data) * fraction)])
    code, stderr, out = run_video(cut, face, tmp_path / "out")
    if code == 0:  # a streamable container keeps what arrived before the cut
        assert 0 < count_frames(out) <= 30


def test_corrupt_packets_mid_file_are_skipped(tmp_path: Path, face: Path) -> None:
    clip = make_clip(tmp_path / "c.mp4", frames=40, size=(96, 64), audio=False, stamp=True)
    data = bytearray(clip.read_bytes())
    for at in (0.4, 0.6):  # two damaged places inside frame data (the index is intact)
        start = int(len(data) * at)
        data[start:start + 48] = bytes(48)
    damaged = tmp_path / "damaged.mp4"
    damaged.write_bytes(bytes(data))
    code, stderr, out = run_video(damaged, face, tmp_path / "out")
    assert code == 0, stderr
    assert count_frames(out) >= 20  # the rest of the video was processed (frames that depend on a
    assert "warning" in stderr  # broken one are lost with it, and a warning says so)


def test_damaged_matroska_that_ends_early_says_so(tmp_path: Path, face: Path) -> None:
    """Found by this suite: FFmpeg's Matroska demuxer loses sync in damaged block data and just
    ends, so a 40-frame clip came out with 11 frames and no word; now a warning says so."""
    clip = make_clip(tmp_path / "c.mkv", frames=40, size=(96, 64), audio=False, stamp=True)
    data = bytearray(clip.read_bytes())
    start = int(len(data) * 0.4)
    data[start:start + 48] = bytes(48)
    damaged = tmp_path / "damaged.mkv"
    damaged.write_bytes(bytes(data))
    code, stderr, out = run_video(damaged, face, tmp_path / "out")
    assert code == 0, stderr
    frames = count_frames(out)
    if frames < 38:
        assert "ended at" in stderr and "damaged or cut short" in stderr, stderr


@pytest.mark.parametrize("case", ["audio-only", "zero-frames", "text", "empty", "photo"])
def test_files_without_usable_video_fail_clearly(tmp_path: Path, face: Path, case: str) -> None:
    if case == "audio-only":
        src = make_audio_only(tmp_path / "tone.m4a")
    elif case == "zero-frames":
        src = zero_frames(tmp_path / "nothing.mkv")
    elif case == "text":
        src = tmp_path / "notes.mp4"
        src.write_text("not a video\n" * 20)
    elif case == "empty":
        src = tmp_path / "empty.mp4"
        src.write_bytes(b"")
    else:
        src = tmp_path / "photo.mp4"
        src.write_bytes(face.read_bytes())
    code, stderr, _ = run_video(src, face, tmp_path / "out")
    assert code == 2, stderr


def test_odd_size_rotation_vfr_and_single_frame_work(tmp_path: Path, face: Path) -> None:
    odd = make_clip(tmp_path / "odd.mp4", frames=6, size=(641, 479), audio=False, codec="mpeg4")
    code, stderr, out = run_video(odd, face, tmp_path / "o1")
    assert code == 0, stderr
    assert probe(out)["size"] == (640, 478)  # 4:2:0 needs even sizes: the odd row and column go

    rotated = make_clip(tmp_path / "rot.mp4", frames=6, size=(96, 64), audio=False, rotation=90)
    code, stderr, out = run_video(rotated, face, tmp_path / "o2")
    assert code == 0, stderr
    assert probe(out)["size"] == (64, 96)  # upright

    times = [0.0, 0.05, 0.2, 0.21, 0.5, 0.9]
    vfr = make_clip(tmp_path / "vfr.mkv", frames=6, size=(96, 64), audio=False, timestamps=times)
    code, stderr, out = run_video(vfr, face, tmp_path / "o3")
    assert code == 0, stderr
    assert probe(out)["times"] == pytest.approx(times, abs=0.002)

    one = make_clip(tmp_path / "one.mp4", frames=1, size=(96, 64))
    code, stderr, out = run_video(one, face, tmp_path / "o4")
    assert code == 0, stderr
    assert count_frames(out) == 1


def test_ten_bit_video(tmp_path: Path, face: Path) -> None:
    src = ten_bit(tmp_path / "deep.mkv")
    if src is None:
        pytest.skip("no 10-bit encoder in this FFmpeg build")
    code, stderr, out = run_video(src, face, tmp_path / "out")
    assert code == 0, stderr
    assert count_frames(out) == 12


@pytest.mark.parametrize("codec_id, works", [(b"V_MPEG4/ISO/AVC", False), (b"A_AAC", True)])
def test_a_damaged_codec_id_is_handled(tmp_path: Path, face: Path, codec_id: bytes, works: bool) -> None:
    """Found by tests/hardening/fuzz_inputs.py: a flipped byte in a stream's codec id left PyAV without a
    codec context and livecam failed with an internal error (AttributeError). Now an unknown
    video codec is a clear exit 2 and an unknown audio codec means a video without audio."""
    clip = make_clip(tmp_path / "c.mkv", frames=10, size=(96, 64))
    data = clip.read_bytes()
    assert data.count(codec_id) == 1
    damaged = tmp_path / "damaged.mkv"
    damaged.write_bytes(data.replace(codec_id, codec_id[:2] + b"Z" * (len(codec_id) - 2)))
    code, stderr, out = run_video(damaged, face, tmp_path / "out")
    if works:
        assert code == 0 and count_frames(out) == 10 and probe(out)["audio_duration"] is None, stderr
    else:
        assert code == 2 and "codec is unknown" in stderr, stderr


def test_a_damaged_codec_id_as_camera_is_a_usage_error(tmp_path: Path, face: Path) -> None:
    clip = make_clip(tmp_path / "c.mkv", frames=10, size=(96, 64), audio=False)
    damaged = tmp_path / "damaged.mkv"
    damaged.write_bytes(clip.read_bytes().replace(b"V_MPEG4/ISO/AVC", b"V_ZZZZZZZZZZZZZ"))
    result, stderr = invoke(CliRunner(), cli, ["run", "--camera", str(damaged), "--output", "none", "--no-realtime",
                                               "-s", str(face), "--swap-model", "mesh"])
    assert result.exit_code == 2, stderr
    assert "Traceback" not in stderr and "codec is unknown" in stderr.strip().splitlines()[-1]


def test_tags_in_broken_utf8_do_not_stop_a_video(tmp_path: Path, face: Path) -> None:
    """Found by tests/hardening/fuzz_inputs.py: a damaged byte in a title tag made PyAV's metadata
    decoding raise UnicodeDecodeError (an internal error); tags are now decoded leniently."""
    clip = tmp_path / "tagged.mkv"
    with av.open(str(clip), "w") as out:
        out.metadata["title"] = "TITLEMARK"
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 96, 64, "yuv420p"
        stream.metadata["title"] = "STREAMMARK"
        for i in range(6):
            frame = av.VideoFrame.from_ndarray(np.full((64, 96, 3), 40 * i, np.uint8), format="bgr24")
            frame.pts, frame.time_base = i, Fraction(1, 30)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    data = clip.read_bytes()
    assert data.count(b"TITLEMARK") == 1 and data.count(b"STREAMMARK") == 1
    damaged = tmp_path / "damaged.mkv"
    damaged.write_bytes(data.replace(b"TITLEMARK", b"\xff\xfeTLEMARK").replace(b"STREAMMARK", b"\xc3\x28REAMMARK"))
    code, stderr, out = run_video(damaged, face, tmp_path / "out")
    assert code == 0 and count_frames(out) == 6, stderr


def test_audio_timestamps_that_go_backwards_are_dropped_not_fatal(tmp_path: Path) -> None:
    """Found by tests/hardening/fuzz_inputs.py: a damaged WebM whose Opus timestamps jumped backwards made
    the muxer fail at the very end ("finishing ... failed: Invalid argument", exit 1)."""
    from livecam.media.video_writer import OutputSpec, VideoWriter

    clip = make_clip(tmp_path / "in.mkv", frames=30, size=(96, 64))
    spec = OutputSpec(path=tmp_path / "out.mkv", format="matroska", width=96, height=64, rate=Fraction(30),
                      time_base=Fraction(1, 30), audio_from=clip)
    writer = VideoWriter(spec)
    for i in range(20):
        writer.write(np.zeros((64, 96, 3), np.uint8), i / 30)
    with av.open(str(clip)) as c:  # an early audio packet arriving again, as damaged input can make it
        early = next(p for p in c.demux(c.streams.audio[0]) if p.dts is not None and p.size)
        writer._audio.tracks[0]._mux(early)  # type: ignore[union-attr]
    writer.close()
    assert count_frames(spec.path) == 20 and probe(spec.path)["audio_duration"] > 0.5
