"""PyAV video reader and writer: input checks, rotation, timestamps, encoders, audio, metadata."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path
from typing import Generator

import av
import numpy as np
import pytest

from livecam.errors import InputError
from livecam.media.join import EncodedPart, join_parts
from livecam.media.video_reader import DecodedFrame, VideoReader, held_until_next
from livecam.media.video_writer import (
    OutputSpec,
    VideoWriter,
    available_encoders,
    check_encoder,
    container_format,
    encoder_available,
)
from livecam.media.provenance import CONTAINER_METADATA
from tests.conftest import REPO_ROOT
from tests.videos import as_displayed, make_audio_only, make_clip, probe, read_index, set_display_matrix


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_clip(tmp_path_factory.mktemp("clip") / "in.mp4", frames=12, size=(96, 64), fps=24, stamp=True)


def test_reader_info_and_frames_in_order(clip: Path) -> None:
    with VideoReader(clip) as reader:
        info = reader.info
        assert (info.width, info.height) == (96, 64)
        assert info.rate == 24
        assert info.expected_frames == 12
        assert info.audio_codec == "aac"
        assert info.rotation == 0
        frames = list(reader.frames())
    assert [read_index(f.image) for f in frames] == list(range(12))
    assert [round(f.time * 24) for f in frames] == list(range(12))
    assert frames[0].image.shape == (64, 96, 3) and frames[0].image.dtype == np.uint8


def _decoded(times: list[float], events: list[str], fail: Exception | None = None,
             ) -> Generator[DecodedFrame, None, None]:
    """A decode loop's frames at `times` (then `fail`), saying in `events` how its read ended."""
    try:
        for t in times:
            yield DecodedFrame(t, lambda: np.zeros((2, 2, 3), np.uint8))
    except GeneratorExit:
        events.append("stopped")
        raise
    if fail is not None:
        raise fail
    events.append("ended")


def _end_asked(events: list[str]) -> float:
    events.append("asked")
    return 0.9


def test_each_frame_lasts_until_the_next_and_the_last_until_the_end_known_once_the_read_ended() -> None:
    events: list[str] = []
    frames = list(held_until_next(_decoded([0.0, 0.1, 0.4], events), lambda: _end_asked(events)))
    assert [f.time for f in frames] == [0.0, 0.1, 0.4]
    assert [f.duration for f in frames] == pytest.approx([0.1, 0.3, 0.5])
    assert events == ["ended", "asked"]  # asked after the read ended: it may weigh its damage


def test_a_failed_read_hands_on_the_frame_read_before_the_failure_then_raises() -> None:
    """What --keep-partial keeps: every frame decoded before the error, the held one too."""
    events: list[str] = []
    got: list[float] = []
    with pytest.raises(InputError, match="too damaged"):
        for frame in held_until_next(_decoded([0.0, 0.1], events, InputError("too damaged")),
                                     lambda: _end_asked(events)):
            got.append(frame.time)
    assert got == [0.0, 0.1] and events == []


def test_a_consumer_that_stops_early_stops_the_read_at_once_and_gets_no_held_frame() -> None:
    events: list[str] = []
    source = _decoded([0.0, 0.1, 0.2], events)
    frames = held_until_next(source, lambda: 0.9)
    assert next(frames).time == 0.0
    frames.close()  # (a frame handed on here would be "generator ignored GeneratorExit")
    assert events == ["stopped"]  # now, though `source` is still referenced: its damage is said then


def test_rotation_metadata_is_applied(tmp_path: Path) -> None:
    plain = make_clip(tmp_path / "plain.mp4", frames=3, size=(96, 64), audio=False, stamp=True)
    turned = make_clip(tmp_path / "turned.mp4", frames=3, size=(96, 64), audio=False, stamp=True, rotation=90)
    with VideoReader(plain) as a, VideoReader(turned) as b:
        assert (b.info.width, b.info.height, b.info.rotation) == (64, 96, 90)
        stored = next(a.frames()).image
        upright = next(b.frames()).image
    assert upright.shape == (96, 64, 3)
    # Displayed = stored turned 90 degrees counterclockwise (FFmpeg's display-matrix convention).
    assert np.abs(upright.astype(int) - np.rot90(stored).astype(int)).mean() < 2



@pytest.mark.parametrize("matrix", [(-1, 0, 0, 1), (1, 0, 0, -1), (0, 1, 1, 0), (0, -1, -1, 0), (0, -1, 1, 0)],
                         ids=["mirror", "upside-down mirror", "mirror and quarter turn", "the other diagonal",
                              "turn"])
def test_a_mirroring_display_matrix_is_shown_as_players_show_it(tmp_path: Path, matrix: tuple[int, ...]) -> None:
    # FFmpeg reads a mirror as a turn by 180 degrees: a selfie app's mirrored clip came out upside down
    plain = make_clip(tmp_path / "plain.mp4", frames=2, size=(96, 64), audio=False, stamp=True)
    shown = tmp_path / "shown.mp4"  # the same encoded pictures, only the matrix differs
    shown.write_bytes(plain.read_bytes())
    set_display_matrix(shown, *matrix)
    with VideoReader(plain) as a, VideoReader(shown) as b:
        stored = next(a.frames()).image
        upright = next(b.frames()).image
    assert np.array_equal(upright, as_displayed(stored, *matrix))

def test_variable_frame_rate_timestamps_are_kept(tmp_path: Path) -> None:
    times = [0.0, 0.04, 0.1, 0.3, 0.31, 0.5]
    path = make_clip(tmp_path / "vfr.mkv", frames=6, size=(64, 48), audio=False, timestamps=times)
    with VideoReader(path) as reader:
        got = [f.time for f in reader.frames()]
    assert got == pytest.approx(times, abs=1e-3)


@pytest.mark.parametrize("case", ["missing", "empty", "text", "folder", "truncated", "audio_only", "image"])
def test_reader_rejects_bad_input(tmp_path: Path, clip: Path, case: str) -> None:
    path = tmp_path / "bad.mp4"
    if case == "empty":
        path.write_bytes(b"")
    elif case == "text":
        path.write_text("this is not a video\n" * 50)
    elif case == "folder":
        path.mkdir()
    elif case == "truncated":
        data = clip.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif case == "audio_only":
        path = make_audio_only(tmp_path / "tone.m4a")
    elif case == "image":
        import cv2

        path = tmp_path / "photo.png"
        cv2.imwrite(str(path), np.zeros((32, 32, 3), np.uint8))
    with pytest.raises(InputError) as err:
        with VideoReader(path) as reader:
            list(reader.frames())
    message = err.value.message
    assert "\n" not in message and str(path.name) in message
    expected = {"missing": "does not exist; check the path", "empty": "empty", "text": "not a video", "folder": "folder",
                "truncated": "cut short", "audio_only": "no video stream", "image": "livecam image"}[case]
    assert expected in message


def test_an_animated_gif_is_read_as_a_video(tmp_path: Path) -> None:
    """A GIF with several frames is a clip (what `livecam video` is for), not a still image."""
    path = tmp_path / "anim.gif"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("gif", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "rgb8"
        for i in range(5):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), i * 50, np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    with VideoReader(path) as reader:
        frames = list(reader.frames())
    assert len(frames) == 5 and frames[0].image.shape == (48, 64, 3)
    assert [round(f.time, 2) for f in frames] == [0.0, 0.1, 0.2, 0.3, 0.4]


def test_a_corrupt_packet_mid_file_is_skipped(tmp_path: Path) -> None:
    path = make_clip(tmp_path / "c.mp4", frames=30, size=(96, 64), audio=False, stamp=True)
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(64)  # zero a run of bytes inside one frame's data
    path.write_bytes(bytes(data))
    with VideoReader(path) as reader:
        frames = list(reader.frames())
    assert len(frames) == 30  # decoding went on past the damage
    assert frames[-1].time == pytest.approx(29 / 30)  # (pixels after the damage may be smeared)


def test_encoder_checks(tmp_path: Path) -> None:
    assert encoder_available("libx264")
    assert not encoder_available("no_such_encoder")
    assert not encoder_available("aac")  # an audio encoder is no video encoder
    available = available_encoders()
    assert "libx264" in available
    check_encoder("libx264", tmp_path / "a.mp4")
    check_encoder("libvpx-vp9", tmp_path / "a.webm")
    with pytest.raises(InputError, match="not available.*available: .*libx264"):
        check_encoder("no_such_encoder", tmp_path / "a.mp4")
    with pytest.raises(InputError, match="webm files cannot hold h264.*libvpx-vp9"):
        check_encoder("libx264", tmp_path / "a.webm")
    with pytest.raises(InputError, match="extension"):
        container_format(tmp_path / "a.avi")


def _write(path: Path, frames: int = 6, audio_from: Path | None = None, encoder: str = "libx264") -> VideoWriter:
    spec = OutputSpec(path=path, format=container_format(path), width=96, height=64, rate=Fraction(24),
                      time_base=Fraction(1, 24), encoder=encoder, quality=23, metadata=dict(CONTAINER_METADATA),
                      audio_from=audio_from)
    writer = VideoWriter(spec)
    for i in range(frames):
        writer.write(np.full((64, 96, 3), i * 20, np.uint8), i / 24)
    writer.close()
    return writer


def _x264_settings(path: Path) -> str:
    """The settings x264 writes into its first keyframe (an SEI: "... threads=N ... sliced_threads=B ...")."""
    found = re.search(rb"x264 - core .*? options: ([^\x00]*)", path.read_bytes())
    assert found is not None, "no x264 settings in the output"
    return found.group(1).decode("ascii", "replace")


@pytest.mark.parametrize("live,expected", [(False, "threads=4 lookahead_threads=1 sliced_threads=0"),
                                           (True, "sliced_threads=1")])
def test_a_file_output_encodes_with_a_frame_thread_per_core_and_a_live_one_with_slices(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, live: bool, expected: str) -> None:
    # Slices (PyAV's default) encode each frame inside the call: 10 ms a 720p frame on 16 cores
    # capped `livecam video` near 90 FPS on the GPU; frame threads hand it on. Live keeps the
    # low latency of slices (zerolatency).
    monkeypatch.setattr("livecam.machine.cores", lambda: 4)
    path = tmp_path / "out.mp4"
    spec = OutputSpec(path=path, format="mp4", width=320, height=240, rate=Fraction(24),
                      time_base=Fraction(1, 24), live=live)
    writer = VideoWriter(spec)
    for i in range(8):
        writer.write(np.full((240, 320, 3), i * 20, np.uint8), i / 24)
    writer.close()
    assert expected in _x264_settings(path)


@pytest.mark.parametrize("suffix,encoder,audio_mode,audio_codec", [
    (".mp4", "libx264", "copy", "aac"),
    (".mov", "libx264", "copy", "aac"),
    (".mkv", "libx264", "copy", "aac"),
    (".webm", "libvpx-vp9", "reencode", "opus"),
])
def test_writer_audio_and_synthetic_metadata(tmp_path: Path, clip: Path, suffix: str, encoder: str,
                                             audio_mode: str, audio_codec: str) -> None:
    out = tmp_path / f"out{suffix}"
    writer = _write(out, frames=12, audio_from=clip, encoder=encoder)
    assert writer.audio_mode == audio_mode
    info = probe(out)
    assert info["frames"] == 12
    assert info["audio_codec"] == audio_codec
    assert info["audio_duration"] == pytest.approx(probe(clip)["audio_duration"], abs=1 / 24)
    tags = {k.lower(): v for k, v in info["metadata"].items()}
    assert tags["comment"] == CONTAINER_METADATA["comment"]
    assert tags["synthetic"] == "true"


@pytest.mark.parametrize("suffix,audio_mode,audio_codec", [
    (".mov", "reencode", "aac"),  # FFmpeg's codec query says yes to Opus in MOV; its header says no
    (".mp4", "copy", "opus"),
    (".mkv", "copy", "opus"),
])
def test_writer_audio_the_container_refuses_is_reencoded(tmp_path: Path, suffix: str, audio_mode: str,
                                                        audio_codec: str) -> None:
    clip = make_clip(tmp_path / "opus.mkv", frames=12, size=(96, 64), fps=24, audio_codec="libopus",
                     audio_rate=48000)
    out = tmp_path / f"out{suffix}"
    writer = _write(out, frames=12, audio_from=clip)
    assert writer.audio_mode == audio_mode
    info = probe(out)
    assert info["frames"] == 12
    assert info["audio_codec"] == audio_codec
    assert info["audio_duration"] == pytest.approx(probe(clip)["audio_duration"], abs=0.05)


def test_writer_drops_an_odd_last_row_and_column(tmp_path: Path) -> None:
    spec = OutputSpec(path=tmp_path / "odd.mp4", format="mp4", width=97, height=65, rate=Fraction(24),
                      time_base=Fraction(1, 24))
    writer = VideoWriter(spec)
    writer.write(np.zeros((65, 97, 3), np.uint8), 0.0)
    writer.close()
    assert probe(tmp_path / "odd.mp4")["size"] == (96, 64)




def test_the_output_extensions_offered_are_the_ones_written_everywhere(tmp_path: Path) -> None:
    # `.avi` was offered by `run --output`'s message and the README, then refused by the writer.
    from livecam.media.sinks import make_sink
    from livecam.media.video_writer import CONTAINERS

    with pytest.raises(InputError) as refused:
        make_sink(str(tmp_path / "out.gif"))
    offered = set(re.findall(r"\.[a-z0-9]+", refused.value.message.split("ending in")[1]))
    assert offered == set(CONTAINERS)
    readme = (REPO_ROOT / "README.md").read_text()
    listed = re.search(r"`--output FILE\.mp4` records \(also ([^)]*)\)", readme)
    assert listed is not None and set(re.findall(r"\.[a-z0-9]+", listed.group(1))) <= set(CONTAINERS)
    for suffix in offered:  # each one opens in the writer
        container_format(tmp_path / f"a{suffix}")


@pytest.mark.skipif(not encoder_available("libx265"), reason="this FFmpeg has no libx265")
@pytest.mark.parametrize("suffix", [".mp4", ".mov"])
def test_hevc_is_tagged_hvc1_so_apple_players_play_it(tmp_path: Path, suffix: str) -> None:
    # FFmpeg's default 'hev1' tag: QuickTime, iOS and Safari refuse the file. A cluster run joins
    # parts through a template stream, which starts untagged: the joined file needs it too.
    parts = []
    for first in (0, 6):
        path = tmp_path / f"part{first}{suffix}"
        writer = VideoWriter(OutputSpec(path=path, format=container_format(path), width=96, height=64,
                                        rate=Fraction(24), time_base=Fraction(1, 24), encoder="libx265"))
        for i in range(first, first + 6):
            writer.write(np.full((64, 96, 3), i * 20, np.uint8), i / 24)
        writer.close()
        parts.append(EncodedPart(data=path.read_bytes(), format=container_format(path),
                                 time_base=Fraction(1, 24), times=tuple(writer.packet_times)))
    part = tmp_path / f"part0{suffix}"
    joined = tmp_path / f"joined{suffix}"
    join_parts(parts, joined, fmt=container_format(joined), metadata={}, audio_from=None, shown=joined)
    for path, frames in ((part, 6), (joined, 12)):
        with av.open(str(path)) as c:
            assert c.streams.video[0].codec_context.codec_tag == "hvc1"
        assert probe(path)["frames"] == frames


def _error_at(path: Path, encoder: str, quality: int, image: np.ndarray) -> float:
    """Mean absolute error of `image` written by `encoder` at `quality` and read back."""
    h, w = image.shape[:2]
    writer = VideoWriter(OutputSpec(path=path, format=container_format(path), width=w, height=h, rate=Fraction(10),
                                    time_base=Fraction(1, 10), encoder=encoder, quality=quality))
    for i in range(3):
        writer.write(image, i / 10)
    writer.close()
    return float(np.mean([np.abs(f.astype(int) - image).mean() for f in probe(path)["images"]]))


@pytest.mark.parametrize("encoder", ["mpeg4", "mpeg2video"])
def test_video_quality_sets_the_mpeg_encoders_quantiser(tmp_path: Path, encoder: str) -> None:
    # FFmpeg's MPEG encoders take no CRF; left at their 200 kb/s default, --video-quality did nothing.
    if not encoder_available(encoder):
        pytest.skip(f"{encoder} is not in this FFmpeg build")
    y, x = np.mgrid[0:240, 0:320]  # fine detail in every channel, which a coarse quantiser loses
    image = np.stack([128 + 60 * np.sin(x / 3) * np.cos(y / 5), 128 + 50 * np.sin((x + y) / 4),
                      128 + 40 * np.cos(x / 7 - y / 2.5)], -1).astype(np.uint8)
    best, worst = (_error_at(tmp_path / f"q{q}.mkv", encoder, q, image) for q in (0, 51))
    assert worst > 2 * best, (best, worst)


def test_a_live_mpeg4_recording_keeps_its_quality(tmp_path: Path) -> None:
    # At FFmpeg's 200 kb/s default a 640x480 30 fps recording lost detail frame after frame
    # (its rate control tightening: 5.5 -> 8.2 levels of error in 10 frames).
    y, x = np.mgrid[0:480, 0:640]
    image = np.stack([128 + 60 * np.sin(x / 3) * np.cos(y / 5), 128 + 50 * np.sin((x + y) / 4),
                      128 + 40 * np.cos(x / 7 - y / 2.5)], -1).astype(np.uint8)
    path = tmp_path / "live.mkv"
    writer = VideoWriter(OutputSpec(path=path, format="matroska", width=640, height=480, rate=Fraction(30),
                                    time_base=Fraction(1, 30), encoder="mpeg4", live=True))
    frames = [np.roll(image, i, 1) for i in range(10)]  # moving, as a camera's are
    for i, frame in enumerate(frames):
        writer.write(frame, i / 30)
    writer.close()
    errors = [np.abs(got.astype(int) - frame).mean() for got, frame in zip(probe(path)["images"], frames)]
    assert len(errors) == 10 and errors[-1] < 1.2 * errors[0], errors


def test_a_refused_encoder_is_offered_only_encoders_that_pass_every_check(tmp_path: Path) -> None:
    # a 90 kHz input (a phone's, a TS): mpeg4 cannot time it, so offering it wasted the next try
    phone = (Fraction(30), Fraction(1, 90000))
    assert "mpeg4" in available_encoders() and not encoder_available("mpeg4", *phone)
    with pytest.raises(InputError) as refused:
        check_encoder("png", tmp_path / "a.mkv", (64, 64), phone)
    offered = refused.value.message.split("use --video-encoder ")[1].split(" or another")[0].split(" or ")
    assert "libx264" in offered and "mpeg4" not in offered
    assert all(encoder_available(e, *phone) for e in offered)
