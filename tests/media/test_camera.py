"""Frame sources: synthetic numbered frames, video files (PyAV), cameras, --camera parsing."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from livecam.errors import DeviceError, InputError
from livecam.media.camera import (
    CameraSource,
    VideoFileSource,
    camera_device_problem,
    open_source,
)
from livecam.media.video_reader import VideoReader
from tests.doubles import SyntheticSource, read_index, stamp_index
from tests.videos import make_audio_only, make_clip, stalling_server
from tests.videos import read_index as read_clip_index


def test_stamped_index_round_trips() -> None:
    image = np.zeros((8, 8, 3), np.uint8)
    for i in (0, 1, 255, 256, 70_000):
        stamp_index(image, i)
        assert read_index(image) == i


def test_synthetic_source_numbers_frames_and_ends() -> None:
    src = SyntheticSource(32, 24, frames=3, realtime=False)
    src.open()
    frames = [src.read() for _ in range(4)]
    assert frames[-1] is None
    assert [read_index(f) for f in frames[:3]] == [0, 1, 2]  # type: ignore[arg-type]
    assert frames[0].shape == (24, 32, 3)  # type: ignore[union-attr]


def test_video_file_source_reads_every_frame_as_bgr(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "clip.mp4", frames=12, size=(96, 64), fps=30, audio=False, stamp=True)
    for realtime in (False, True):
        src = VideoFileSource(str(clip), realtime=realtime)
        assert src.live is realtime
        src.open()
        frames = []
        while (frame := src.read()) is not None:
            frames.append(frame.image)  # (a file's frames are converted when asked for)
        src.close()
        assert src.fps == pytest.approx(30)
        assert [read_clip_index(f) for f in frames] == list(range(12))
        assert src.last_pts == pytest.approx(11 / 30)
        assert frames[0].shape == (64, 96, 3) and frames[0].dtype == np.uint8


def test_a_gap_in_a_real_time_files_timestamps_is_a_pause_then_its_own_rate_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # A VFR recording that paused 4.5 s: each frame after the gap came 1 s after the last (the
    # wait's cap) until they were due, so the run showed seconds of one-frame-a-second slow motion
    import logging
    import time

    times = [i / 30 for i in range(10)] + [5 + i / 30 for i in range(20)]
    clip = make_clip(tmp_path / "gap.mp4", frames=30, size=(96, 64), audio=False, stamp=True, timestamps=times)
    src = VideoFileSource(str(clip), realtime=True)
    src.open()
    read_at = []
    with caplog.at_level(logging.INFO, logger="livecam"):
        while src.read() is not None:
            read_at.append(time.perf_counter())
    src.close()
    assert len(read_at) == 30
    assert 0.8 < read_at[10] - read_at[9] < 2.5  # the gap, played as a pause of a second
    assert read_at[29] - read_at[10] < 8.0  # 19 frames at 30 FPS (0.63 s; load may slow it), not 1 s apart (19 s)
    assert "a 4.7 s gap in its timestamps at 5.00 s is played as 1 s" in caplog.text


def test_a_phone_clip_recorded_sideways_is_shown_upright_as_livecam_video_reads_it(tmp_path: Path) -> None:
    from livecam.media.video_reader import VideoReader

    turned = make_clip(tmp_path / "turned.mp4", frames=3, size=(96, 64), audio=False, stamp=True, rotation=90)
    src = VideoFileSource(str(turned), realtime=False)
    src.open()
    try:
        frame = src.read()
        live = frame.image if frame is not None else None
    finally:
        src.close()
    with VideoReader(turned) as reader:
        upright = next(reader.frames()).image
    assert live is not None and live.shape == upright.shape == (96, 64, 3)
    assert np.array_equal(live, upright)


def test_a_sideways_clip_is_announced_at_the_size_it_is_shown(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    # `run --camera turned.mp4` said "96x64" (the coded size) and recorded 64x96 frames
    turned = make_clip(tmp_path / "turned.mp4", frames=3, size=(96, 64), audio=False, rotation=90)
    src = VideoFileSource(str(turned), realtime=False)
    with caplog.at_level("INFO", logger="livecam"):
        src.open()
        try:
            src.read()
        finally:
            src.close()
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("turned.mp4: ")]
    assert said == ["turned.mp4: 64x96 at 30 FPS, as fast as possible"], said


def test_camera_argument_picks_the_right_source(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "c.mp4", frames=2, audio=False)
    assert isinstance(open_source("0", (640, 480), 30, None), CameraSource)
    file_source = open_source(str(clip), (640, 480), 30, None)
    assert isinstance(file_source, VideoFileSource) and file_source.realtime is True
    assert open_source(str(clip), (640, 480), 30, False).live is False
    with pytest.raises(InputError, match="no such camera index, file or URL"):
        open_source(str(tmp_path / "missing.mp4"), (640, 480), 30, None)
    with pytest.raises(InputError, match="is a folder; give a video file in it"):  # once "no such ... file"
        open_source(str(tmp_path), (640, 480), 30, None)
    # both were "no such camera index, file or URL", a file: URL even when its file is there
    with pytest.raises(InputError, match="to read a video from a pipe give --camera /dev/stdin"):
        open_source("-", (640, 480), 30, None)
    with pytest.raises(InputError, match="give the file's path itself, not a file: URL"):
        open_source(clip.as_uri(), (640, 480), 30, None)
    # a scheme is any case (RFC 3986), FFmpeg's protocols lower case only: "HTTP://host/x" was
    # taken for a URL, loaded the models, then failed "Protocol not found"
    url = open_source("HTTP://Example.com/Live?Key=A", (640, 480), 30, None)
    assert isinstance(url, VideoFileSource) and url.location == "http://Example.com/Live?Key=A"


def test_a_file_that_is_not_a_video_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "notes.mp4"
    bad.write_text("not a video")
    with pytest.raises(InputError, match="cannot read .*notes.mp4 as a video"):
        VideoFileSource(str(bad)).open()


def test_a_file_without_video_gets_the_message_livecam_video_gives(tmp_path: Path) -> None:
    # `run --camera audio_only.mp4` said "could not read a video stream from it (tuple index out of
    # range)" while `video` said "has no video stream (it holds: audio)": one function says it now.
    tone = make_audio_only(tmp_path / "tone.mp4")
    with pytest.raises(InputError) as from_camera:
        VideoFileSource(str(tone)).open()
    with pytest.raises(InputError) as from_video:
        VideoReader(tone)
    assert from_camera.value.message == from_video.value.message
    assert "has no video stream (it holds: audio)" in from_camera.value.message


def test_a_camera_that_does_not_open_is_an_input_error_naming_it() -> None:
    with pytest.raises(InputError, match="camera 97 could not be opened"):
        CameraSource(97, (640, 480), 30).open()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="device nodes are checked on Linux")
def test_a_missing_camera_device_is_named_with_the_cameras_that_exist(tmp_path: Path) -> None:
    assert "no camera is connected" in (camera_device_problem(2, dev=tmp_path) or "")
    for name in ("video0", "video1", "video10", "vhci"):
        (tmp_path / name).touch()
    assert camera_device_problem(0, dev=tmp_path) is None
    problem = camera_device_problem(2, dev=tmp_path) or ""
    assert f"there is no {tmp_path / 'video2'} (cameras here: 0, 1, 10)" in problem


def test_a_corrupt_packet_in_a_camera_file_is_skipped_not_fatal(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    # A damaged file or a lossy stream: one broken packet used to end the whole live run.
    import av

    clip = make_clip(tmp_path / "clip.mp4", frames=30, size=(96, 64), fps=30, audio=False, stamp=True)
    with av.open(str(clip)) as container:
        packets = [(p.pos, p.size) for p in container.demux(video=0) if p.size]
    data = bytearray(clip.read_bytes())
    pos, _ = packets[10]
    data[pos:pos + 4] = b"\xff\xff\xff\xff"  # an impossible NAL length: the decoder rejects the packet
    damaged = tmp_path / "damaged.mp4"
    damaged.write_bytes(data)
    src = VideoFileSource(str(damaged), realtime=False)
    src.open()
    seen = []
    with caplog.at_level("WARNING", logger="livecam"):
        while (frame := src.read()) is not None:
            seen.append(read_clip_index(frame.image))
    src.close()
    assert src.bad_packets == 1
    assert len(seen) >= 28 and seen[-1] == 29  # it read on to the end
    assert any("corrupt video packet" in r.getMessage() and "damaged.mp4" in r.getMessage() for r in caplog.records)


def test_a_camera_file_that_changes_size_and_restarts_its_timestamps_reads_as_livecam_video_does(
        tmp_path: Path) -> None:
    # `run --camera` had its own decode loop: later frames came in another size (the recorder
    # rescaled them, stretched) and timestamps that ran back (tracking and pacing saw time reverse).
    from tests.videos import make_timed_clip

    first = make_timed_clip(tmp_path / "a.ts", start=36000.0, frames=20, size=(96, 64), fmt="mpegts")
    second = make_timed_clip(tmp_path / "b.ts", start=36000.0, frames=20, size=(192, 64), fmt="mpegts", shade=128)
    joined = tmp_path / "joined.ts"
    joined.write_bytes(first.read_bytes() + second.read_bytes())
    src = VideoFileSource(str(joined), realtime=False)
    src.open()
    shapes, times = [], []
    while (frame := src.read()) is not None:
        shapes.append(frame.image.shape)
        times.append(src.last_pts)
    src.close()
    assert len(shapes) == 40 and set(shapes) == {(64, 96, 3)}
    assert times[0] is not None and times[0] < 0.1  # from 0, not 10 h
    assert all(b > a for a, b in zip(times, times[1:]))  # type: ignore[operator]


def test_a_pipe_plays_as_a_camera_file(tmp_path: Path) -> None:
    # `run --camera` reads its file once, so a FIFO (or /dev/stdin) works there.
    import os
    import threading

    clip = make_clip(tmp_path / "c.ts", frames=12, audio=False, stamp=True)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "wb") as writer:
            writer.write(clip.read_bytes())

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    source = open_source(str(fifo), (640, 480), 30, False)
    source.open()
    try:
        images = []
        while (frame := source.read()) is not None:
            images.append(frame.image)  # type: ignore[union-attr]
    finally:
        source.close()
    feeder.join(timeout=10)
    assert [read_clip_index(image) for image in images] == list(range(12))


def test_an_mp4_with_its_index_at_the_end_through_a_pipe_says_so(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    # `cat rec.mp4 | livecam run --camera /dev/stdin`: a pipe cannot seek back from the index (moov,
    # written last by most recorders) to the frames, so every packet read was garbage: a short
    # clip could play "0 frames" with exit 0, a longer one ended "too damaged to read further;
    # re-copy or re-export it"
    import os
    import threading

    import cv2

    noise = tmp_path / "noise.png"  # frames that do not compress: a big file from a short clip
    cv2.imwrite(str(noise), np.random.default_rng(0).integers(0, 256, (480, 640, 3), dtype=np.uint8))
    clip = make_clip(tmp_path / "c.mp4", frames=30, size=(320, 240), audio=False, source_image=noise)
    data = clip.read_bytes()
    # the index last, past what FFmpeg's buffer keeps (about 1 MB; a smaller file plays)
    assert data.find(b"moov") > data.find(b"mdat") and len(data) > 1_200_000
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def feed() -> None:
        try:
            with open(fifo, "wb") as writer:
                writer.write(clip.read_bytes())
        except BrokenPipeError:  # the source gave up before the end
            pass

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    source = open_source(str(fifo), (640, 480), 30, False)
    try:
        with pytest.raises(InputError, match=r"^pipe: no frame could be read: an MP4 or MOV through a pipe needs its "
                                             r"index \(moov\) first.*-movflags \+faststart"):
            source.open()
            while source.read() is not None:
                pass
    finally:
        source.close()
    feeder.join(timeout=10)
    assert "corrupt" not in caplog.text  # (a warning of "damaged data" beside it misled)


def test_a_stream_url_that_goes_quiet_is_a_stall_not_damage(tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    # A live stream whose sender stops (but keeps the connection open) hit PyAV's read timeout,
    # which was counted as 51 corrupt packets: "too damaged ... re-copy or re-export it" (exit 2).
    clip = make_clip(tmp_path / "live.ts", frames=75, size=(96, 64), fps=25, audio=False, stamp=True)
    with stalling_server(clip.read_bytes(), sent=0.2) as url:
        src = VideoFileSource(url, realtime=False, timeout_s=0.5)
        src.open()
        frames = []
        with pytest.raises(DeviceError, match=r"stopped sending data \(nothing for 0.5 s\)"):
            while (frame := src.read()) is not None:
                frames.append(frame.image)
        src.close()
    assert frames and [read_clip_index(f) for f in frames] == list(range(len(frames)))  # what came is kept
    assert src.bad_packets == 0
    assert "corrupt" not in caplog.text


class FakeCapture:
    """Stands in for cv2.VideoCapture: each read does the next step of `plan` ("frame", "none":
    returns False, "raise": raises cv2.error as some backends do), the last step for ever."""

    def __init__(self, plan: list[str]) -> None:
        self.plan = plan
        self.released = False

    def __call__(self, index: int, backend: int) -> FakeCapture:  # cv2.VideoCapture(index, backend)
        return self

    def isOpened(self) -> bool:  # noqa: N802 - OpenCV's name
        return True

    def set(self, prop: int, value: float) -> bool:
        return True

    def get(self, prop: int) -> float:
        return 0.0

    def read(self) -> tuple[bool, np.ndarray | None]:
        import cv2

        step = self.plan.pop(0) if len(self.plan) > 1 else self.plan[0]
        if step == "raise":
            raise cv2.error("OpenCV(4.10.0) /io/opencv/modules/videoio/src/cap_v4l.cpp:1: error: (-2:Unspecified "
                            "error) VIDIOC_DQBUF: No such device in function 'read'\n")
        if step == "none":
            return False, None
        if step == "wide":  # the camera renegotiated its size
            return True, np.full((24, 64, 3), 200, np.uint8)
        if step == "depth":  # a depth camera's 16-bit stream
            return True, np.full((24, 32), 900, np.uint16)
        if step == "yuyv":  # raw YUYV, OpenCV's conversion off
            return True, np.full((24, 32, 2), 90, np.uint8)
        if step == "gray":
            return True, np.full((24, 32, 1), 90, np.uint8)
        return True, np.full((24, 32, 3), 90, np.uint8)

    def release(self) -> None:
        self.released = True


def fake_camera(monkeypatch: pytest.MonkeyPatch, plan: list[str], stall_timeout_s: float = 0.3) -> CameraSource:
    import cv2

    from livecam.media import camera

    monkeypatch.setattr(cv2, "VideoCapture", FakeCapture(plan))
    monkeypatch.setattr(camera, "camera_backends", lambda: [("V4L2", 200)])
    source = CameraSource(0, (640, 480), 30, stall_timeout_s=stall_timeout_s)
    source.open()
    return source


def test_a_camera_read_that_raises_now_and_then_is_retried_and_the_stream_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A read raising cv2.error (rather than returning False) ended the run at once: "internal error".
    source = fake_camera(monkeypatch, ["frame", "raise", "raise", "none", "raise", "frame"], stall_timeout_s=30)
    frames = [source.read() for _ in range(3)]
    assert all(f is not None and f.shape == (24, 32, 3) for f in frames)
    source.close()


def test_a_camera_whose_reads_keep_raising_is_one_clear_line_naming_the_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    source = fake_camera(monkeypatch, ["frame", "raise"])
    assert source.read() is not None
    with pytest.raises(DeviceError) as caught:
        source.read()
    message = caught.value.message
    assert "camera 0 (V4L2) stopped delivering frames (none for 0.3 s" in message
    assert "OpenCV: (-2:Unspecified error) VIDIOC_DQBUF: No such device in function 'read'" in message
    assert "check the cable" in message and "\n" not in message and "cap_v4l.cpp" not in message
    source.close()


def test_a_camera_that_stopped_is_measured_over_its_frames_not_its_silence(monkeypatch: pytest.MonkeyPatch) -> None:
    # "measured 7.1 FPS over 20 frames" for a 30 FPS camera that then went quiet for 2 s.
    from livecam.media import camera

    clock = [100.0]

    class Clock:
        @staticmethod
        def perf_counter() -> float:
            return clock[0]

        monotonic = perf_counter

        @staticmethod
        def sleep(seconds: float) -> None:
            clock[0] += seconds

    source = fake_camera(monkeypatch, ["frame"])
    monkeypatch.setattr(camera, "time", Clock)
    for _ in range(31):
        source.read()
        clock[0] += 1 / 30
    clock[0] += 10.0  # silence before the close
    assert source.measured_fps == pytest.approx(30.0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="V4L2 device paths are Linux's")
def test_a_camera_device_path_or_a_stable_link_to_it_is_that_camera(tmp_path: Path) -> None:
    # `--camera /dev/video0` was read as a video file: "cannot read /dev/video0 as a video ... not a
    # video" with the camera there, "no such camera index, file or URL" without it.
    (tmp_path / "video3").touch()
    by_id = tmp_path / "v4l" / "by-id"
    by_id.mkdir(parents=True)
    (by_id / "usb-Some_Webcam-video-index0").symlink_to("../../video3")
    for spec in (tmp_path / "video3", by_id / "usb-Some_Webcam-video-index0", tmp_path / "video12"):
        source = open_source(str(spec), (640, 480), 30, None, dev=tmp_path)
        assert isinstance(source, CameraSource) and source.index == int(Path(spec).resolve().name[5:])
    not_cameras = [tmp_path / "videos", tmp_path / "video", tmp_path / "v4l" / "video1"]
    for path in not_cameras:
        path.write_bytes(b"x")
        assert not isinstance(open_source(str(path), (640, 480), 30, None, dev=tmp_path), CameraSource)


def test_a_camera_that_changes_its_size_mid_run_keeps_the_first_size(monkeypatch: pytest.MonkeyPatch,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    # Frames of another size went down the pipeline, where faces carried over from the last
    # detection (in the old frame's coordinates) were swapped in the wrong place; a file source
    # already letterboxed them into its first size.
    source = fake_camera(monkeypatch, ["frame", "wide", "wide", "frame"], stall_timeout_s=30)
    with caplog.at_level("WARNING", logger="livecam"):
        images = [source.read() for _ in range(4)]
    assert [i.shape for i in images if i is not None] == [(24, 32, 3)] * 4
    wide = images[1]
    assert wide is not None and wide[:4].max() == 0 and wide[-4:].max() == 0  # black bars above and below
    assert wide[8:16].min() == 200  # the picture, its aspect kept
    assert caplog.text.count("changes its picture size (32x24, then 64x24)") == 1
    source.close()


def test_a_camera_that_opens_but_never_gives_a_frame_is_not_said_to_have_stopped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # "stopped delivering frames ... check the cable" for a camera another application holds
    # (it opens, streaming fails) or a UVC camera's metadata node: it never started, and another
    # --camera fixes it: bad input (exit 2), as a camera that does not open
    source = fake_camera(monkeypatch, ["none"])
    with pytest.raises(InputError) as caught:
        source.read()
    assert caught.value.message == ("camera 0 (V4L2) opened but gave no frame in 0.3 s: check that no other "
                                    "application is using it, or give --camera another index (a camera's second "
                                    "node gives no picture)")
    source.close()


@pytest.mark.parametrize("reported", [float("inf"), float("nan"), 1e9, -1.0, 0.0])
def test_a_camera_rate_no_camera_has_is_not_believed(monkeypatch: pytest.MonkeyPatch, reported: float) -> None:
    # A driver that said inf FPS ended the run in "internal error: OverflowError" (the recorder's
    # rate and the marking backlog are sized from it); 1e9 FPS went into the recording's rate.
    import cv2

    class Reporting(FakeCapture):
        def get(self, prop: int) -> float:
            return reported if prop == cv2.CAP_PROP_FPS else 0.0

    monkeypatch.setattr(cv2, "VideoCapture", Reporting(["frame"]))
    monkeypatch.setattr("livecam.media.camera.camera_backends", lambda: [("V4L2", 200)])
    source = CameraSource(0, (640, 480), 25)
    source.open()
    assert source.fps == 25  # the asked rate
    source.close()


def test_a_camera_stream_that_is_not_8_bit_pictures_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # A depth camera's 16-bit frames ended the run in "internal error: ValueError: FramePacket.image
    # must be HxWx3 uint8 BGR"; a single-channel 3-D gray frame is still a picture.
    source = fake_camera(monkeypatch, ["gray", "depth", "yuyv"], stall_timeout_s=30)
    gray = source.read()
    assert gray is not None and gray.shape == (24, 32, 3)
    for said in ("gives uint16 frames", "gives 2-channel uint8 frames"):
        with pytest.raises(DeviceError, match=f"camera 0 \\(V4L2\\) {said}, not 8-bit pictures .*ordinary camera"):
            source.read()
    source.close()


def _animation(path: Path, durations_ms: list[int]) -> Path:
    from PIL import Image

    frames = [Image.new("RGB", (64, 48), (40 * i, 90, 200 - 40 * i)) for i in range(len(durations_ms))]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=durations_ms, loop=0)
    return path


@pytest.mark.parametrize("name, durations_ms, fps", [
    ("two.png", [100, 100], None),  # no average rate: FFmpeg's guess is the 1/100000 s tick
    ("anim.png", [100] * 4, 10.0), ("anim.gif", [100] * 4, 10.0), ("slides.gif", [2000] * 3, 0.5)])
def test_a_camera_file_rate_is_its_frames_rate_never_its_time_base(tmp_path: Path, name: str,
                                                                    durations_ms: list[int], fps: float | None) -> None:
    # `run --camera two.png` said "at 100000 FPS" and sized its marking queue by that; `video`
    # (the same stream_rate) takes an unknown rate as 30.
    clip = _animation(tmp_path / name, durations_ms)
    source = VideoFileSource(str(clip), realtime=False)
    source.open()
    assert source.fps == fps
    frames = 0
    while source.read() is not None:
        frames += 1
    source.close()
    assert frames == len(durations_ms)
    with VideoReader(clip) as reader:
        assert float(reader.info.rate) == (fps or 30)


def test_a_slow_motion_rate_is_kept_and_a_time_base_is_not_taken_for_one() -> None:
    # phones store slow motion at up to 960 fps: such a clip was once read as "unknown, 30"
    from fractions import Fraction

    from livecam.media.video_reader import plausible_rate

    assert plausible_rate(Fraction(960)) == 960 and plausible_rate(Fraction(240000, 1001)) == Fraction(240000, 1001)
    assert plausible_rate(Fraction(1, 2)) == Fraction(1, 2)
    assert plausible_rate(Fraction(100000)) is None and plausible_rate(Fraction(90000)) is None


def test_a_camera_file_that_ends_before_its_first_frame_is_an_input_error(tmp_path: Path) -> None:
    # a Matroska recording cut after its header opened and played "0 frames", exit 0, nothing
    # recorded; `livecam video` says the file is truncated or corrupt
    whole = make_clip(tmp_path / "whole.mkv", frames=10, size=(320, 240), audio=False)
    cut = tmp_path / "cut.mkv"
    data = whole.read_bytes()
    cut.write_bytes(data[:data.index(b"\x1f\x43\xb6\x75") + 40])  # the header, and the first frame cut short
    source = VideoFileSource(str(cut), realtime=False)
    source.open()
    try:
        with pytest.raises(InputError, match="cut.mkv: no video frame could be decoded; the file is truncated"):
            source.read()
    finally:
        source.close()


def test_an_mp4_with_its_index_at_the_end_from_a_server_that_cannot_seek_says_so(
        tmp_path: Path, faces_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    # `run --camera http://host/rec.mp4` from a server without range requests (python -m
    # http.server): FFmpeg cannot seek back from the index at the end to the frames, as through a
    # pipe, and the run ended "too damaged to read further; re-copy or re-export it" for a file
    # that plays
    import functools
    import http.server
    import threading

    clip = make_clip(tmp_path / "rec.mp4", frames=60, size=(320, 240), audio=False,
                     source_image=faces_dir / "obama.jpg")
    data = clip.read_bytes()
    assert data.find(b"moov") > data.find(b"mdat")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    src = VideoFileSource(f"http://127.0.0.1:{server.server_address[1]}/rec.mp4", realtime=False, timeout_s=5)
    try:
        with pytest.raises(InputError, match=r"^http://127\.0\.0\.1:\d+/rec\.mp4: no frame could be read: an MP4 or "
                                             r"MOV from this server needs its index \(moov\) first.*range requests.*"
                                             r"-movflags \+faststart"):
            src.open()
            while src.read() is not None:
                pass
    finally:
        src.close()
        server.shutdown()
        server.server_close()
    assert "corrupt" not in caplog.text  # (a warning of "damaged data" beside it misled)


def test_a_stream_url_that_connects_but_sends_nothing_says_so_in_bounded_time() -> None:
    # A server that accepts and stays silent (or a udp:// address nothing is sent to) hit PyAV's
    # open timeout, said as FFmpeg's "could not open the stream (Immediate exit requested)"
    import socket
    import time

    with socket.socket() as listener:  # the kernel accepts the connection; nothing is ever sent
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        src = VideoFileSource(f"http://127.0.0.1:{listener.getsockname()[1]}/live.mp4", timeout_s=0.5)
        started = time.monotonic()
        with pytest.raises(InputError, match=r"^--camera http://127\.0\.0\.1:\d+/live\.mp4: the stream sent no video "
                                             r"within 0\.5 s; check the URL and that the stream is live$"):
            src.open()
    assert time.monotonic() - started < 5


def test_a_password_in_a_camera_url_is_never_shown() -> None:
    # rtsp://admin:secret@host/live, how IP cameras are addressed: the password was printed in
    # every line naming the stream, and twice in a failed open (FFmpeg's text repeats the URL)
    import socket

    with socket.socket() as probe:  # a port nothing listens on: the connection is refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    src = VideoFileSource(f"rtsp://admin:s3cret@127.0.0.1:{port}/live", timeout_s=2)
    assert src.name == f"rtsp://admin:***@127.0.0.1:{port}/live"
    with pytest.raises(InputError) as raised:
        src.open()
    assert "s3cret" not in raised.value.message and f"rtsp://admin:***@127.0.0.1:{port}/live" in raised.value.message
    assert "Connection refused" in raised.value.message and "Errno" not in raised.value.message


@pytest.mark.parametrize(("url", "problem"), [
    ("http://[::1/live.mp4", "its host is malformed"),  # was "internal error: ValueError: Invalid IPv6 URL"
    ("rtsp://cam:99999/live", "its port is not a number up to 65535"),  # was FFmpeg's "Invalid argument",
    ("http://127.0.0.1:abc/live.mp4", "its port is not a number up to 65535"),  # once the models had loaded
])
def test_a_camera_url_with_a_malformed_host_or_port_is_refused_before_anything_loads(url: str, problem: str) -> None:
    with pytest.raises(InputError, match=rf"^--camera '{re.escape(url)}': {problem}; give the stream's whole address"):
        open_source(url, (640, 480), 30, None)


@pytest.mark.parametrize("pictures", [1, 3])
def test_a_camera_file_of_jpegs_is_an_mjpeg_stream_unless_it_is_one_picture(tmp_path: Path, faces_dir: Path,
                                                                             pictures: int) -> None:
    # JPEGs one after another (a capture tool's `-f mjpeg -` piped in, a .mjpeg recording) were
    # refused as "a still image"; one JPEG still is, whatever its name
    clip = tmp_path / "camera.mjpeg"
    clip.write_bytes((faces_dir / "obama.jpg").read_bytes() * pictures)
    src = VideoFileSource(str(clip), realtime=False)
    try:
        if pictures == 1:
            with pytest.raises(InputError, match=r"camera\.mjpeg is a still image, not a video; use `livecam image`"):
                src.open()
                src.read()
            return
        src.open()
        frames = 0
        while src.read() is not None:
            frames += 1
        assert frames == pictures
    finally:
        src.close()


@pytest.mark.parametrize("name", ["snapshot.jpg", "snapshot"])
def test_a_camera_url_of_a_still_picture_is_refused_as_a_local_one_is(tmp_path: Path, faces_dir: Path,
                                                                      name: str) -> None:
    # http://cam/snapshot.jpg (a camera's snapshot address) played as a one-frame video, exit 0; and
    # one without .jpg (snapshot.cgi: FFmpeg's jpeg_pipe, as a camera's JPEG stream) did still
    import functools
    import http.server
    import shutil
    import threading

    shutil.copy(faces_dir / "obama.jpg", tmp_path / name)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(tmp_path)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    src = VideoFileSource(f"http://127.0.0.1:{server.server_address[1]}/{name}", timeout_s=5)
    try:
        with pytest.raises(InputError, match=rf"^--camera http://127\.0\.0\.1:\d+/{re.escape(name)} is a still image, "
                                             r"not a video stream \(a camera's snapshot address\?\); give the "
                                             r"camera's stream address"):
            src.open()
            while src.read() is not None:  # (a JPEG stream is known to be one picture only when it ends)
                pass
    finally:
        src.close()
        server.shutdown()
        server.server_close()


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="POSIX FIFOs")
def test_a_camera_pipe_that_sends_nothing_yet_is_said_to_be_waited_for_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    # --camera FIFO whose writer is there but sends nothing (a capture tool still starting) waited
    # silently until Ctrl-C: FFmpeg's probe waits as long as the writer is there
    import logging
    import os
    import threading

    import cv2

    from livecam.media import camera

    monkeypatch.setattr(camera, "FIRST_FRAME_WAIT_S", 0.05)
    jpeg = cv2.imencode(".jpg", np.full((48, 64, 3), 128, np.uint8))[1].tobytes()
    fifo = tmp_path / "camera.fifo"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # (Linux: opens at once) a writer that sends nothing yet
    noted = threading.Event()

    class Note(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "waiting for the first frame" in record.getMessage():
                noted.set()

    def feed() -> None:
        noted.wait(20)
        os.write(writer, jpeg * 3)  # the writer starts sending: an MJPEG stream
        os.close(writer)

    handler = Note()
    logging.getLogger("livecam").addHandler(handler)
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    source = VideoFileSource(str(fifo), realtime=False)
    try:
        with caplog.at_level(logging.INFO, logger="livecam"):
            source.open()
            frames = 0
            while source.read() is not None:
                frames += 1
    finally:
        source.close()
        logging.getLogger("livecam").removeHandler(handler)
    feeder.join(10)
    notes = [r.getMessage() for r in caplog.records if "first frame" in r.getMessage()]
    assert notes == ["note: waiting for the first frame from --camera camera.fifo (nothing has come for 0.05 s: its "
                     "writer has sent nothing yet?); Ctrl-C stops"]
    assert frames == 3


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links need privileges there")
@pytest.mark.parametrize(("link", "said"), [
    ("loop", "is a link in a loop of links (each leads to another); fix or remove the link"),
    ("nothing", "is a link to nothing, which does not exist; fix or remove the link"),
])
def test_a_camera_link_in_a_loop_or_to_nothing_is_named_as_other_inputs_are(tmp_path: Path, link: str,
                                                                             said: str) -> None:
    # both were "no such camera index, file or URL", where `video` and `image` named the link's problem
    (tmp_path / "cam").symlink_to(link if link == "nothing" else tmp_path / "cam")
    with pytest.raises(InputError) as raised:
        open_source(str(tmp_path / "cam"), (640, 480), 30, None)
    assert raised.value.message == f"--camera '{tmp_path / 'cam'}' {said}"
