"""--output virtual-camera: pyvirtualcam (v4l2loopback on Linux, OBS Virtual Camera elsewhere)."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from livecam.errors import DeviceError, InputError

if TYPE_CHECKING:  # (PyAV loads with it: only once a frame of another size comes)
    from livecam.media.video_reader import Fitter

log = logging.getLogger("livecam")

INSTALL_HINT = "pip install 'livecam[virtualcam]'"
# v4l2loopback before 0.13 (Debian 12, Ubuntu 22.04) refuses frames under 48x32.
MIN_WIDTH, MIN_HEIGHT = 48, 32


def backend_hint() -> str:
    if sys.platform.startswith("linux"):
        return "the v4l2loopback kernel module (sudo modprobe v4l2loopback exclusive_caps=1)"
    return "OBS Studio (its Virtual Camera)"


class VirtualCameraSink:
    """Sends the frames to a virtual camera that Zoom, Meet, Teams and OBS can pick."""

    name = "virtual camera"

    def __init__(self, fps: float = 30.0) -> None:
        try:
            import pyvirtualcam
        except ImportError as exc:
            # at start, fixed by the user: bad input (exit 2), as --cluster ray without Ray
            raise InputError(f"--output virtual-camera needs pyvirtualcam: run {INSTALL_HINT} and install "
                             f"{backend_hint()}") from exc
        self._pvc: Any = pyvirtualcam
        self.fps = fps
        self._cam: Any = None
        self._size: tuple[int, int] | None = None
        self._stream_size: tuple[int, int] | None = None  # the first frame's, when under the minimum
        self._fitter: Fitter | None = None
        # The device's size is known only at the first frame; open it once now, so a missing
        # backend is reported before any model loads rather than after.
        self._connect(640, 480).close()

    def _connect(self, width: int, height: int) -> Any:
        try:
            return self._pvc.Camera(width=width, height=height, fps=self.fps, fmt=self._pvc.PixelFormat.BGR)
        except Exception as exc:  # noqa: BLE001 - pyvirtualcam raises RuntimeError for missing backends
            # before any model loads: a device to install, as a missing display (exit 2); one lost mid-run is a DeviceError
            raise InputError(f"no virtual camera device is available ({exc}); install {backend_hint()}") from exc

    def _open(self, width: int, height: int) -> None:
        # even sides: v4l2loopback's 4:2:0 frame of an odd width is a buffer length Chrome
        # (Meet, Teams on the web) refuses ("Dequeued v4l2 buffer contains invalid length")
        stream = (width, height)
        width, height = max(MIN_WIDTH, width & ~1), max(MIN_HEIGHT, height & ~1)
        if stream[0] < MIN_WIDTH or stream[1] < MIN_HEIGHT:
            self._stream_size = stream  # every frame is letterboxed up to the device, unannounced
            log.info("the stream's %dx%d is under the virtual camera's %dx%d minimum: sent scaled up, with "
                     "black bars", *stream, width, height)
        try:
            self._cam = self._pvc.Camera(width=width, height=height, fps=self.fps, fmt=self._pvc.PixelFormat.BGR)
        except Exception as exc:  # noqa: BLE001 - as in _connect
            # the device opened before the models loaded: "no device is available" was wrong here
            raise DeviceError(f"the virtual camera did not open at the stream's {width}x{height} ({exc}): another "
                              f"program may be feeding it at another size, or the device does not take that "
                              f"size; close that program, or give the camera another --resolution such as "
                              f"1280x720") from exc
        self._size = (width, height)
        self.name = f"virtual camera {self._cam.device}"
        log.info("sending %dx%d at %g FPS to %s", width, height, self.fps, self._cam.device)

    def write(self, image_bgr: np.ndarray) -> None:
        if self._cam is None:
            self._open(image_bgr.shape[1], image_bgr.shape[0])
        assert self._cam is not None and self._size is not None  # _open sets both or raises
        width, height = self._size
        if (image_bgr.shape[1], image_bgr.shape[0]) == self._stream_size:
            from livecam.media.video_reader import letterbox

            image_bgr = letterbox(image_bgr, width, height)
        elif image_bgr.shape[1] - width in (0, 1) and image_bgr.shape[0] - height in (0, 1):
            image_bgr = image_bgr[:height, :width]  # the odd row or column
        else:
            # the device's size is fixed: a frame of another size is letterboxed (it was stretched)
            if self._fitter is None:
                from livecam.media.video_reader import Fitter

                self._fitter = Fitter(self._size, self.name)
            image_bgr = self._fitter.fit(image_bgr)
        try:
            self._cam.send(np.ascontiguousarray(image_bgr))
        except Exception as exc:  # noqa: BLE001 - pyvirtualcam's backends raise RuntimeError (or OSError)
            # the device went away (v4l2loopback unloaded, OBS closed): one line, not "internal error"
            raise DeviceError(f"{self.name} stopped taking frames ({exc}); check {backend_hint()} and run "
                              f"again, or use --output FILE.mp4 or --output window") from exc

    def poll(self) -> list[str]:
        return []

    def close(self) -> None:
        cam, self._cam = self._cam, None
        if cam is not None:
            try:
                cam.close()
            except Exception as exc:  # noqa: BLE001 - as send: the device may be gone
                log.warning("%s did not close cleanly (%s)", self.name, exc)
