"""Output sinks: --output parsing, the file recorder, the virtual camera's missing backend."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import av
import numpy as np
import pytest

from livecam.errors import DeviceError, InputError, OutputExistsError
from livecam.media.camera import SyntheticSource
from livecam.media.sinks import FileRecorderSink, NullSink, make_sink
from livecam.pipeline.live import LiveOptions, run_live_pipeline
from tests.pipeline.test_live import FakeEngine


def test_output_none_and_bad_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(make_sink("none"), NullSink)
    with pytest.raises(InputError, match="expected window, virtual-camera, none or a video file"):
        make_sink(str(tmp_path / "out.txt"))
    existing = tmp_path / "rec.mp4"
    existing.write_bytes(b"x")
    with pytest.raises(OutputExistsError, match="--force"):
        make_sink(str(existing))
    assert isinstance(make_sink(str(existing), force=True), FileRecorderSink)


def test_auto_output_without_a_display_asks_for_another_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(InputError, match="no display found.*--output none"):
        make_sink("auto")


@pytest.mark.skipif(importlib.util.find_spec("pyvirtualcam") is not None, reason="pyvirtualcam is installed")
def test_virtual_camera_without_pyvirtualcam_names_what_to_install() -> None:
    with pytest.raises(DeviceError, match=r"pip install 'livecam\[virtualcam\]'"):
        make_sink("virtual-camera")


def test_recording_is_a_complete_synthetic_tagged_video(tmp_path: Path) -> None:
    out = tmp_path / "rec.mp4"
    sink = make_sink(str(out), fps=30)
    result = run_live_pipeline(FakeEngine(), SyntheticSource(frames=20, fps=100, width=65, height=49), sink,
                               LiveOptions(handle_signals=False))
    assert out.is_file() and not list(tmp_path.glob(".*partial*"))
    with av.open(str(out)) as container:
        tags = {k.lower(): v for k, v in container.metadata.items()}
        frames = [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]
    assert len(frames) == result.summary["frames"]
    assert frames[0].shape == (48, 64, 3)  # odd sizes trimmed to even for yuv420p
    assert "synthetic" in " ".join(tags.values()).lower() or tags.get("synthetic") == "true"


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

    def namedWindow(self, title: str, flags: int) -> None: ...  # noqa: N802

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


def test_window_maps_keys_toggles_fullscreen_and_notices_a_closed_window(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from livecam.media.window import WindowSink

    gui = FakeGui([ord("m"), ord("f"), 32, ord("f"), 27])
    monkeypatch.setitem(sys.modules, "cv2", gui)
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
