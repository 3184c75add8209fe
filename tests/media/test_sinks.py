"""Output sinks: --output parsing, the file recorder, the virtual camera's missing backend."""

from __future__ import annotations

import ctypes.util
import importlib.util
import logging
import sys
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from livecam.errors import DeviceError, InputError, OutputExistsError
from livecam.media.sinks import FileRecorderSink, NullSink, make_sink
from livecam.pipeline.live import run_live_pipeline
from tests.doubles import SyntheticSource
from tests.pipeline.test_live import FakeEngine, opts


def test_output_none_and_bad_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(make_sink("none"), NullSink)
    with pytest.raises(InputError, match="expected window, virtual-camera, none or a video file"):
        make_sink(str(tmp_path / "out.txt"))
    existing = tmp_path / "rec.mp4"
    existing.write_bytes(b"x")
    with pytest.raises(OutputExistsError, match="--force"):
        make_sink(str(existing))
    assert isinstance(make_sink(str(existing), force=True), FileRecorderSink)


def test_a_recording_name_ending_in_a_slash_is_refused_not_written_without_it(tmp_path: Path) -> None:
    # `--output rec.mp4/` (a folder, by its slash) recorded to the file rec.mp4, as Path drops the slash.
    with pytest.raises(InputError, match=r"ends in a slash, which means a folder; give the file name"):
        make_sink(f"{tmp_path / 'rec.mp4'}/")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["clips", "clips/", "clips.mp4"])
def test_a_recording_named_as_a_folder_that_exists_asks_for_a_file_in_it(tmp_path: Path, name: str) -> None:
    # `--output clips/` was told to "give the file name without the slash (clips)", and `clips`
    # then to give "a video file name ending in .mp4"
    (tmp_path / name).mkdir()
    folder = tmp_path / name.rstrip("/")
    with pytest.raises(InputError, match=f"that is a folder; give a file name such as {folder / 'rec.mp4'}$"):
        make_sink(str(tmp_path / name))


@pytest.mark.parametrize("value", ["", " "])
def test_an_empty_output_is_named_empty(value: str) -> None:
    # `--output "$REC"` with REC unset said "--output : that is a folder" (the current one)
    with pytest.raises(InputError, match=r"^--output is empty; give window, virtual-camera, none or a file name"):
        make_sink(value)


def test_auto_output_without_a_display_asks_for_another_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(InputError, match="no display found.*--output none"):
        make_sink("auto")


@pytest.mark.skipif(importlib.util.find_spec("pyvirtualcam") is not None, reason="pyvirtualcam is installed")
def test_virtual_camera_without_pyvirtualcam_names_what_to_install() -> None:
    with pytest.raises(InputError, match=r"pip install 'livecam\[virtualcam\]'"):
        make_sink("virtual-camera")


class FakeVirtualCam:
    """Stands in for the pyvirtualcam module; `device` None means no backend (no v4l2loopback)."""

    class PixelFormat:
        BGR = "bgr"

    def __init__(self, device: str | None) -> None:
        self.device = device
        self.opened: list[tuple[int, int]] = []
        self.sent: list[tuple[int, ...]] = []
        self.frames: list[np.ndarray] = []
        self.gone = False  # the device went away (v4l2loopback unloaded, OBS closed)
        self.sizes: set[tuple[int, int]] | None = None  # the sizes it takes (None: any)
        module = self

        class Camera:
            def __init__(self, width: int, height: int, fps: float, fmt: str) -> None:
                if module.device is None:
                    raise RuntimeError("'v4l2loopback' backend: No v4l2 loopback device found")
                if module.sizes is not None and (width, height) not in module.sizes:
                    raise RuntimeError(f"virtual camera output could not be started ({width}x{height})")
                module.opened.append((width, height))
                self.device = module.device

            def send(self, frame: np.ndarray) -> None:
                if module.gone:
                    raise RuntimeError("error writing frame: No such device")
                module.sent.append(frame.shape)
                module.frames.append(frame.copy())

            def close(self) -> None:
                if module.gone:
                    raise RuntimeError("error closing device: No such device")

        self.Camera = Camera


def test_missing_virtual_camera_device_is_reported_before_any_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    # It used to surface at the first frame, after the models had loaded.
    monkeypatch.setitem(sys.modules, "pyvirtualcam", FakeVirtualCam(None))
    with pytest.raises(InputError, match="no virtual camera device.*v4l2loopback"):
        make_sink("virtual-camera")
    fake = FakeVirtualCam("/dev/video9")
    monkeypatch.setitem(sys.modules, "pyvirtualcam", fake)
    sink = make_sink("virtual-camera", fps=30)
    sink.write(np.zeros((48, 64, 3), np.uint8))
    sink.write(np.zeros((96, 128, 3), np.uint8))  # the device keeps the first frame's size
    sink.close()
    assert fake.opened[-1] == (64, 48) and fake.sent == [(48, 64, 3), (48, 64, 3)]
    assert sink.name == "virtual camera /dev/video9"


def test_a_virtual_camera_letterboxes_a_frame_of_another_size_instead_of_stretching_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeVirtualCam("/dev/video9")
    monkeypatch.setitem(sys.modules, "pyvirtualcam", fake)
    sink = make_sink("virtual-camera", fps=30)
    sink.write(np.zeros((48, 64, 3), np.uint8))
    sink.write(np.full((64, 48, 3), 255, np.uint8))  # a portrait frame into the landscape device
    sink.close()
    portrait = fake.frames[-1]
    assert portrait.shape == (48, 64, 3)
    assert portrait[:, :13].max() == 0 and portrait[:, -13:].max() == 0  # black bars left and right (14 px)
    assert portrait[:, 15:49].min() == 255  # the picture in the middle, 36 px wide: its aspect kept


def test_a_virtual_camera_opens_at_even_sides(monkeypatch: pytest.MonkeyPatch) -> None:
    # An odd width (853x480) opened the loopback device at it: Chrome (Meet, Teams on the web)
    # refuses its 4:2:0 frames ("Dequeued v4l2 buffer contains invalid length").
    fake = FakeVirtualCam("/dev/video9")
    monkeypatch.setitem(sys.modules, "pyvirtualcam", fake)
    sink = make_sink("virtual-camera", fps=30)
    frame = np.zeros((481, 853, 3), np.uint8)
    frame[:, :852] = 255  # the last column is the one trimmed, not scaled into the rest
    sink.write(frame)
    sink.close()
    assert fake.opened[-1] == (852, 480) and fake.sent == [(480, 852, 3)]
    assert fake.frames[-1].min() == 255


def test_a_stream_under_48x32_is_sent_scaled_up_to_the_virtual_cameras_minimum(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    # v4l2loopback before 0.13 refuses frames under 48x32: a 40x20 stream failed to open.
    fake = FakeVirtualCam("/dev/video9")
    fake.sizes = {(640, 480), (48, 32)}  # what an old v4l2loopback takes of these
    monkeypatch.setitem(sys.modules, "pyvirtualcam", fake)
    sink = make_sink("virtual-camera", fps=30)
    with caplog.at_level(logging.WARNING, logger="livecam"):
        for _ in range(2):
            sink.write(np.full((20, 40, 3), 255, np.uint8))
    sink.close()
    assert fake.opened[-1] == (48, 32) and fake.sent == [(32, 48, 3), (32, 48, 3)]
    frame = fake.frames[-1]
    assert frame[4:28, :].min() == 255  # the picture fills the width, its aspect kept (48x24)
    assert frame[:3].max() == 0 and frame[-3:].max() == 0  # black bars above and below
    assert not caplog.records  # not the "changes its picture size" warning: the stream never changed


def test_a_virtual_camera_that_refuses_the_stream_size_is_not_called_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    # It opened at 640x480 before the models loaded, then refused the stream's size at the first
    # frame (another program feeds it, or a fixed-size device), and the line said "no virtual
    # camera device is available ... install the v4l2loopback kernel module".
    fake = FakeVirtualCam("/dev/video9")
    fake.sizes = {(640, 480)}
    monkeypatch.setitem(sys.modules, "pyvirtualcam", fake)
    sink = make_sink("virtual-camera", fps=30)
    with pytest.raises(DeviceError) as caught:
        sink.write(np.zeros((720, 1280, 3), np.uint8))
    message = caught.value.message
    assert message.startswith("the virtual camera did not open at the stream's 1280x720 (")
    assert "another program may be feeding it at another size" in message and "no virtual camera" not in message
    sink.close()


def test_a_virtual_camera_that_goes_away_mid_run_is_one_clear_line(monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    # pyvirtualcam's RuntimeError from send() ended the run as "internal error: RuntimeError: ...".
    fake = FakeVirtualCam("/dev/video9")
    monkeypatch.setitem(sys.modules, "pyvirtualcam", fake)
    sink = make_sink("virtual-camera", fps=30)
    sink.write(np.zeros((48, 64, 3), np.uint8))
    fake.gone = True
    with pytest.raises(DeviceError) as caught:
        sink.write(np.zeros((48, 64, 3), np.uint8))
    message = caught.value.message
    assert message.startswith("virtual camera /dev/video9 stopped taking frames (error writing frame: No such")
    assert "v4l2loopback" in message and "--output FILE.mp4" in message and "\n" not in message
    sink.close()  # the pipeline's shutdown: a warning, not a second error
    assert "did not close cleanly" in caplog.text


@pytest.mark.parametrize("size", [(1, 720), (720, 1), (17000, 64)])
def test_frames_a_recording_cannot_hold_are_one_clear_line_and_leave_nothing(
        tmp_path: Path, size: tuple[int, int]) -> None:
    # A 1-pixel-wide stream ended in "internal error: IndexError" (4:2:0 made it 0 wide); one wider
    # than libx264's 16384 in "writing rec.mp4 failed: out of memory".
    out = tmp_path / "rec.mp4"
    sink = make_sink(str(out), fps=30)
    with pytest.raises(InputError) as caught:
        sink.write(np.zeros((size[1], size[0], 3), np.uint8))
    message = caught.value.message
    assert f"the stream's frames are {size[0]}x{size[1]} pixels, which libx264 cannot record" in message
    assert "(it takes 2x2 to 16384x16384)" in message
    assert "--resolution" in message and "--output none" in message
    sink.close()
    assert list(tmp_path.iterdir()) == []


def test_recording_is_a_complete_synthetic_tagged_video(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "rec.mp4"
    sink = make_sink(str(out), fps=30)
    with caplog.at_level(logging.WARNING, logger="livecam"):
        result = run_live_pipeline(FakeEngine(), SyntheticSource(frames=20, fps=100, width=65, height=49), sink,
                                   opts())
    # said once, as `livecam video` says it (a 65x49 clip was recorded at 64x48 without a word)
    assert caplog.text.count("note: the output is 64x48, the input 65x49: video is encoded with even sides") == 1
    assert out.is_file() and not list(tmp_path.glob(".rec*"))  # no temporary file left
    with av.open(str(out)) as container:
        tags = {k.lower(): v for k, v in container.metadata.items()}
        frames = [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]
    assert len(frames) == result.summary["frames"]
    assert frames[0].shape == (48, 64, 3)  # odd sizes trimmed to even for yuv420p
    assert tags.get("synthetic") == "true" and "AI-generated" in tags.get("comment", "")


@pytest.mark.parametrize("suffix, codec", [(".webm", "vp9"), (".mkv", "h264")])
def test_every_offered_container_records(tmp_path: Path, suffix: str, codec: str) -> None:
    # .webm is offered by --output but cannot hold H.264: it failed at the first frame.
    out = tmp_path / f"rec{suffix}"
    sink = make_sink(str(out), fps=30)
    for i in range(5):
        sink.write(np.full((48, 64, 3), 40 * i, np.uint8))
    sink.close()
    with av.open(str(out)) as container:
        assert container.streams.video[0].codec_context.name == codec
        assert sum(1 for _ in container.decode(video=0)) == 5
        assert {k.lower(): v for k, v in container.metadata.items()}.get("synthetic") == "true"


def test_a_no_realtime_file_is_recorded_with_its_own_timing(tmp_path: Path) -> None:
    # Frames of a --no-realtime file are shown as fast as they are made; stamped by shown time,
    # two seconds of video became a recording a fraction as long.
    from livecam.media.camera import VideoFileSource
    from tests.videos import make_clip

    clip = make_clip(tmp_path / "clip.mp4", frames=60, size=(96, 64), fps=30, audio=False)
    source = VideoFileSource(str(clip), realtime=False)
    source.open()
    out = tmp_path / "rec.mp4"
    run_live_pipeline(FakeEngine(), source, make_sink(str(out)), opts())
    with av.open(str(out)) as container:
        times = [float(f.pts * f.time_base) for f in container.decode(video=0)]
    assert len(times) == 60
    assert times[-1] - times[0] == pytest.approx(59 / 30, abs=0.01)


@pytest.mark.parametrize("name, marked", [("screen.mkv", False), ("screen.mkv", True), ("phone.mp4", False)])
def test_a_no_realtime_variable_rate_file_is_recorded_to_its_end(tmp_path: Path, name: str, marked: bool) -> None:
    # Its last frame lasts 0.3 s: recorded as one frame at the rate, the recording ended at
    # 0.63 s of the file's 0.9 s (a watermark's marking sink passes the durations on too). A
    # phone's MP4 with B-frames gives its packets' durations in decode order: other frames'.
    from livecam.marks.marking_sink import MarkingSink
    from livecam.media.camera import VideoFileSource
    from tests.videos import make_vfr_clip, video_end

    times = [0.0, 0.033, 0.066, 0.133, 0.166, 0.233, 0.6]
    clip = make_vfr_clip(tmp_path / name, times, 0.3, audio=False, bframes=name.endswith(".mp4"))
    source = VideoFileSource(str(clip), realtime=False)
    source.open()
    out = tmp_path / "rec.mp4"
    sink = make_sink(str(out))
    run_live_pipeline(FakeEngine(), source, MarkingSink(sink, lambda i, image: image, backlog=4, lossless=True)
                      if marked else sink, opts())
    with av.open(str(out)) as container:
        recorded = [float(f.pts * f.time_base) for f in container.decode(video=0)]
    assert recorded == pytest.approx(times, abs=0.002)
    assert video_end(out) == pytest.approx(0.9, abs=0.002)


def test_a_no_realtime_file_cut_short_is_recorded_to_its_last_frame_read(tmp_path: Path) -> None:
    # Its index (first) says 2 s of video, the bytes hold less: the last frame read lasts one
    # frame, not to where the index says the video ends (a frozen picture for what was lost).
    from livecam.media.camera import VideoFileSource
    from tests.pipeline.test_file import _truncated_faststart
    from tests.videos import video_end

    source = VideoFileSource(str(_truncated_faststart(tmp_path)), realtime=False)
    source.open()
    out = tmp_path / "rec.mp4"
    run_live_pipeline(FakeEngine(), source, make_sink(str(out)), opts())
    with av.open(str(out)) as container:
        last = max(float(f.pts * f.time_base) for f in container.decode(video=0))
    assert last < 1.9 and video_end(out) == pytest.approx(last + 1 / 30, abs=0.002)


@pytest.mark.parametrize("damage", ["cut", "lost sync"])
def test_a_no_realtime_matroska_ending_early_is_recorded_to_its_last_frame_read_and_said(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str) -> None:
    # A Matroska has no index to show a cut: one cut in half, or whose demuxer lost sync in
    # zeroed block data and just ended, had its last frame read held to the stored end (0.875 s,
    # 1.792 s: a frozen picture for what was lost) and said nothing, where `livecam video` gives
    # it one frame at the rate and says, once, that the file ended early.
    from livecam.media.camera import VideoFileSource
    from tests.videos import make_clip, video_end

    whole = make_clip(tmp_path / "whole.mkv", frames=60, size=(96, 64), fps=24, audio=False)
    data = bytearray(whole.read_bytes())
    if damage == "cut":
        data = data[:len(data) // 2]
    else:
        start = int(len(data) * 0.4)
        data[start:start + 48] = bytes(48)
    clip = tmp_path / "damaged.mkv"
    clip.write_bytes(bytes(data))
    source = VideoFileSource(str(clip), realtime=False)
    source.open()
    out = tmp_path / "rec.mp4"
    with caplog.at_level(logging.WARNING):
        run_live_pipeline(FakeEngine(), source, make_sink(str(out)), opts())
    source.close()
    with av.open(str(out)) as container:
        last = max(float(f.pts * f.time_base) for f in container.decode(video=0))
    assert last < 2.0 and video_end(out) == pytest.approx(last + 1 / 24, abs=0.002)
    said = [r.getMessage() for r in caplog.records if "damaged.mkv ended at" in r.getMessage()]
    assert len(said) == 1 and "damaged or cut short" in said[0], said


def test_a_no_realtime_file_whose_read_fails_gives_every_frame_read_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The frame held for its duration is still handed on before the error (too damaged to read on).
    from livecam.media import video_reader
    from livecam.media.camera import VideoFileSource
    from tests.videos import make_clip

    real = video_reader.VideoDecoder.__iter__

    def failing(self: video_reader.VideoDecoder) -> Any:
        for n, frame in enumerate(real(self)):
            if n == 3:
                raise InputError("too damaged")
            yield frame

    monkeypatch.setattr(video_reader.VideoDecoder, "__iter__", failing)
    source = VideoFileSource(str(make_clip(tmp_path / "clip.mkv", frames=10, size=(96, 64), audio=False)),
                             realtime=False)
    source.open()
    assert [source.read() is not None for _ in range(3)] == [True] * 3
    with pytest.raises(InputError, match="too damaged"):
        source.read()


def test_size_change_mid_stream_is_scaled_to_the_first_size(tmp_path: Path) -> None:
    out = tmp_path / "rec.mp4"
    sink = FileRecorderSink(out, fps=30)
    sink.write(np.zeros((48, 64, 3), np.uint8))
    sink.write(np.full((96, 128, 3), 255, np.uint8))
    sink.close()
    with av.open(str(out)) as container:
        shapes = [f.to_ndarray(format="bgr24").shape for f in container.decode(video=0)]
    assert shapes == [(48, 64, 3), (48, 64, 3)]


def test_no_frame_recorded_leaves_no_file(tmp_path: Path) -> None:
    out = tmp_path / "rec.mp4"
    sink = FileRecorderSink(out)
    sink.close()
    assert not out.exists() and list(tmp_path.iterdir()) == []


class FakeGui:
    """Stands in for cv2's highgui (no display here): records calls, replays key codes."""

    WINDOW_NORMAL, WINDOW_FULLSCREEN, WND_PROP_FULLSCREEN, WND_PROP_VISIBLE = 0, 1, 0, 4
    error = RuntimeError

    def __init__(self, keys: list[int]) -> None:
        self.keys = keys
        self.shown = 0
        self.fullscreen: list[int] = []
        self.visible = 1.0
        self.destroyed = False
        self.sizes: list[tuple[int, int]] = []

    def namedWindow(self, title: str, flags: int) -> None: ...  # noqa: N802

    def resizeWindow(self, title: str, width: int, height: int) -> None:  # noqa: N802
        self.sizes.append((width, height))

    def imshow(self, title: str, image: np.ndarray) -> None:
        self.shown += 1

    def waitKey(self, ms: int) -> int:  # noqa: N802
        return self.keys.pop(0) if self.keys else -1

    def getWindowProperty(self, title: str, prop: int) -> float:  # noqa: N802
        return self.visible

    def setWindowProperty(self, title: str, prop: int, value: int) -> None:  # noqa: N802
        self.fullscreen.append(value)

    def destroyWindow(self, title: str) -> None:  # noqa: N802
        self.destroyed = True


def test_window_opens_at_the_stream_size_fitted_to_the_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    # Qt opened every window at 400x300, whatever the stream.
    import sys

    from livecam.media import window

    gui = FakeGui([])
    monkeypatch.setitem(sys.modules, "cv2", gui)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.setattr(window, "bundled_qt_platforms", lambda: None)
    for screen, frame, expected in [((1920, 1080), (720, 1280), (1280, 720)),  # fits: its own size
                                    ((1366, 768), (1080, 1920), (1229, 691)),  # 90% of the screen
                                    ((1920, 1080), (1080, 1440), (1296, 972)),  # height bound
                                    (None, (480, 640), (640, 480))]:  # screen unknown
        monkeypatch.setattr(window, "screen_size", lambda screen=screen: screen)
        sink = window.WindowSink()
        sink.write(np.zeros((*frame, 3), np.uint8))
        sink.write(np.zeros((*frame, 3), np.uint8))
        sink.close()
        assert gui.sizes[-1] == expected
    assert len(gui.sizes) == 4  # once per window, not per frame


def test_window_maps_keys_toggles_fullscreen_and_notices_a_closed_window(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from livecam.media.window import WindowSink

    gui = FakeGui([ord("m"), ord("f"), 32, ord("f"), 27])
    monkeypatch.setitem(sys.modules, "cv2", gui)
    monkeypatch.delenv("DISPLAY", raising=False)  # no real display is checked for the fake GUI
    monkeypatch.setattr("livecam.media.window.bundled_qt_platforms", lambda: None)
    sink = WindowSink()
    frame = np.zeros((8, 8, 3), np.uint8)
    keys = []
    for _ in range(5):
        sink.write(frame)
        keys += sink.poll()
    assert keys == ["m", "space", "esc"]  # f is handled by the window itself
    assert gui.fullscreen == [gui.WINDOW_FULLSCREEN, gui.WINDOW_NORMAL]
    gui.visible = 0.0
    assert sink.poll() == ["closed"]
    sink.close()
    assert gui.destroyed and gui.shown == 5


@pytest.mark.skipif(not sys.platform.startswith("linux") or ctypes.util.find_library("xcb") is None,
                    reason="the X display check needs Linux and libxcb")
def test_an_unreachable_x_display_is_a_clear_error_not_an_abort(monkeypatch: pytest.MonkeyPatch) -> None:
    # OpenCV's Qt used to abort the process (SIGABRT, exit 134) at the first frame, after the
    # models had loaded, when DISPLAY named no reachable server.
    monkeypatch.setattr("livecam.media.window.opencv_gui", lambda: "QT5")  # whichever cv2 is installed
    monkeypatch.setenv("DISPLAY", ":987")
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(InputError, match="cannot connect to the X display ':987'.*--output none"):
        make_sink("window")
    with pytest.raises(InputError, match="cannot connect to the X display"):
        make_sink("auto")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the display check is for Linux")
def test_a_wayland_session_without_xwayland_is_a_clear_error_not_an_abort(monkeypatch: pytest.MonkeyPatch) -> None:
    # opencv-python's Qt ships only the xcb plugin: with WAYLAND_DISPLAY alone, Qt aborted the
    # process (exit 134) at the first frame.
    from livecam.media import window

    monkeypatch.setattr(window, "bundled_qt_platforms", lambda: frozenset({"xcb"}))
    monkeypatch.setattr(window, "opencv_gui", lambda: "QT5")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    for output in ("window", "auto"):
        with pytest.raises(InputError, match="X11 only, and DISPLAY is unset .*XWayland.*--output none"):
            make_sink(output)
    # Asking Qt for a platform this build lacks would abort the same way.
    monkeypatch.setenv("QT_QPA_PLATFORM", "wayland")
    with pytest.raises(InputError, match="no Qt platform plugin for QT_QPA_PLATFORM=wayland .*has xcb"):
        make_sink("window")
    # A GTK (or other non-Qt) build speaks Wayland itself: nothing to refuse.
    monkeypatch.setattr(window, "bundled_qt_platforms", lambda: None)
    assert window.display_problem() is None


@pytest.mark.skipif(not sys.platform.startswith("linux") or ctypes.util.find_library("xcb") is None,
                    reason="the X display check needs Linux and libxcb")
def test_an_unreachable_x_display_in_a_wayland_session_is_a_clear_error_not_an_abort(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # With WAYLAND_DISPLAY also set the X display went unchecked, but opencv-python's Qt draws
    # through xcb only: Qt printed its own lines and aborted the process (exit 134).
    from livecam.media import window

    monkeypatch.setattr(window, "bundled_qt_platforms", lambda: frozenset({"xcb"}))
    monkeypatch.setattr(window, "opencv_gui", lambda: "QT5")
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.setenv("DISPLAY", ":987")
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    for output in ("window", "auto"):
        with pytest.raises(InputError, match="cannot connect to the X display ':987'.*--output none"):
            make_sink(output)


def test_qt_is_told_to_keep_its_warnings_to_itself_unless_verbose(monkeypatch: pytest.MonkeyPatch) -> None:
    # On a lost display Qt printed "The X11 connection broke (error 1). Did the X11 server die?"
    # before livecam's own line. Its warnings are off when the window starts Qt (which reads
    # QT_LOGGING_RULES then), kept with -v, and a user's own rules still come last (they win).
    import logging

    from livecam.media import window

    seen: list[str | None] = []

    class Gui(FakeGui):
        def namedWindow(self, title: str, flags: int) -> None:  # noqa: N802
            import os

            seen.append(os.environ.get("QT_LOGGING_RULES"))

    monkeypatch.setitem(sys.modules, "cv2", Gui([]))
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.setattr(window, "bundled_qt_platforms", lambda: None)
    frame = np.zeros((8, 8, 3), np.uint8)
    for level, rules in [(logging.INFO, None), (logging.INFO, "qt.qpa.xcb.warning=true"), (logging.DEBUG, None)]:
        if rules is None:
            monkeypatch.delenv("QT_LOGGING_RULES", raising=False)
        else:
            monkeypatch.setenv("QT_LOGGING_RULES", rules)
        logger = logging.getLogger("livecam")
        before = logger.level
        logger.setLevel(level)  # -v (setLevel: isEnabledFor's cache is cleared)
        try:
            sink = window.WindowSink()
            sink.write(frame)
            sink.close()
        finally:
            logger.setLevel(before)
    assert seen == ["*.warning=false", "*.warning=false;qt.qpa.xcb.warning=true", None]


def test_a_headless_opencv_is_reported_before_the_models_load(monkeypatch: pytest.MonkeyPatch) -> None:
    # opencv-python-headless (pulled in by insightface and others) replaces opencv-python's cv2;
    # its namedWindow failed only at the first frame, saying "rebuild the library with GTK+".
    from livecam.media import window

    monkeypatch.setattr(window, "opencv_gui", lambda: "NONE")
    monkeypatch.setenv("DISPLAY", ":0")
    with pytest.raises(InputError, match="this OpenCV has no GUI .*pip uninstall -y opencv-python-headless"):
        make_sink("window")


def test_the_opencv_gui_is_read_from_its_build_information() -> None:
    from livecam.media.window import bundled_qt_platforms, opencv_gui

    gui = opencv_gui()
    assert gui not in ("", "UNKNOWN")
    if bundled_qt_platforms() is not None:  # opencv-python's own wheel
        assert gui.startswith("QT")


def test_the_bundled_qt_platforms_are_read_from_the_installed_opencv() -> None:
    from livecam.media.window import bundled_qt_platforms

    spec = importlib.util.find_spec("cv2")
    assert spec is not None and spec.submodule_search_locations
    qt = Path(next(iter(spec.submodule_search_locations))) / "qt" / "plugins" / "platforms"
    if not qt.is_dir():
        pytest.skip("this OpenCV build bundles no Qt (opencv-python's Qt build does)")
    assert "xcb" in (bundled_qt_platforms() or ())


def test_a_file_that_appears_during_a_recording_is_kept_and_the_result_set_aside(tmp_path: Path) -> None:
    # The final rename used to replace whatever was at the name (a second run's result, a file
    # someone put there) and exit 0; now that file stays, and the recording is kept beside it.
    from livecam.atomic import OutputConflictError

    out = tmp_path / "rec.mp4"
    sink = make_sink(str(out), fps=30)
    for _ in range(3):
        sink.write(np.zeros((48, 64, 3), np.uint8))
    out.write_bytes(b"someone else's file")
    with pytest.raises(OutputConflictError, match=r"rec\.mp4 appeared while livecam was writing it") as caught:
        sink.close()
    assert out.read_bytes() == b"someone else's file" and caught.value.exit_code == 1
    assert caught.value.kept is not None and caught.value.kept.name == "rec.livecam-1.mp4"
    with av.open(str(caught.value.kept)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.livecam-1.mp4", "rec.mp4"]  # no temporary file


def test_the_output_folder_removed_during_a_recording_is_one_clear_line(tmp_path: Path) -> None:
    # It was "internal error" (or a message naming the hidden temporary file).
    folder = tmp_path / "recordings"
    folder.mkdir()
    out = folder / "rec.mp4"
    sink = make_sink(str(out), fps=30)
    sink.write(np.zeros((48, 64, 3), np.uint8))
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()
    with pytest.raises(InputError) as caught:
        sink.close()
    message = caught.value.message
    assert str(out) in message and "no longer exists" in message and ".part" not in message
    assert "\n" not in message
