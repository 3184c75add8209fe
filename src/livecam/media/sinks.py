"""Output sinks for the live pipeline: window, virtual camera, file recorder, none.

Every sink has the same small interface (Sink): `write(image)` for each shown frame, `poll()`
for the keys pressed since the last call (only the window has any), and `close()`, which always
finalises (a recording is complete and playable after Ctrl-C or an error, never half-written).
`make_sink` turns --output into a sink and checks it before any model is loaded.
"""

from __future__ import annotations

import logging
import os
import sys
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

import numpy as np

from livecam.atomic import AtomicOutput, folder_of, trailing_slash_problem
from livecam.errors import InputError
from livecam.media.provenance import CONTAINER_METADATA
from livecam.console import counted
from livecam.paths import why_missing

if TYPE_CHECKING:  # PyAV loads only when a recording starts
    from livecam.media.video_writer import VideoWriter

log = logging.getLogger("livecam")



class Sink(Protocol):
    name: str

    def write(self, image_bgr: np.ndarray) -> None: ...
    def poll(self) -> list[str]: ...
    def close(self) -> None: ...


class NullSink:
    """--output none: frames go nowhere (benchmarks, headless runs)."""

    name = "none"

    def write(self, image_bgr: np.ndarray) -> None:
        pass

    def poll(self) -> list[str]:
        return []

    def close(self) -> None:
        pass


class FileRecorderSink:
    """Records the shown frames to FILE.mp4 with libx264 (VP9 for .webm), marked as synthetic in
    the metadata (the pipeline draws the visible label unless --no-label), through the one
    VideoWriter (live encoder settings) and AtomicOutput.

    Frames are timestamped by when they were shown (a live stream with drops keeps real time), or
    by the source's timestamps through `write_at` (a --no-realtime file keeps its own timing).
    The file is written beside the target under a temporary name and renamed on close, never over
    a file that appeared meanwhile; a size change mid-stream is letterboxed into the first size.
    """

    def __init__(self, path: Path, *, fps: float = 30.0, force: bool = False, codec: str | None = None) -> None:
        from livecam.atomic import check_new_output
        from livecam.media.images import check_output_folder
        from livecam.media.video_writer import check_encoder, container_format, resolve_encoder

        what = "--output "
        check_new_output(path, force=force, what=what)
        if not folder_of(path).exists():
            folder = folder_of(path)
            raise InputError(f"--output {path}: the folder {folder} {why_missing(folder, 'create it first')}")
        try:
            check_output_folder(path)  # writable, checked before any model loads
            # H.264, or VP9 for .webm (which cannot hold H.264); checked now, before any model loads.
            codec = codec or resolve_encoder("auto", path)
            check_encoder(codec, path)
            self.format = container_format(path)
        except InputError as exc:
            raise InputError(f"--output {path}: {exc.message}") from exc
        # Opened (checked again, temporary name reserved) at the first frame, so a run that stops
        # before one (a model that fails to load) leaves nothing behind.
        self._output = AtomicOutput(path, force=force, what=what)
        self.path = path
        self.name = str(path)
        self.fps = fps
        self.codec = codec
        self._writer: VideoWriter | None = None
        self._abandoned = False
        self._t0: float | None = None
        self.written = 0
        # C2PA content credentials over the finished temporary file, into the signed copy's
        # AtomicOutput, before the rename (the command sets it once the models are known; None:
        # --no-c2pa or not MP4/MOV). The copy is made here so that abandon removes it too: a
        # signing stuck on the marking thread kept it (marks.marking_sink).
        self.sign: Callable[[Path, AtomicOutput], None] | None = None
        self._signed: AtomicOutput | None = None

    def _open(self, width: int, height: int) -> VideoWriter:
        from livecam.media.containers import frame_rate
        from livecam.media.video_writer import OutputSpec, VideoWriter, encoder_fits, encoder_sizes, say_trimmed

        # Known only now (the stream's first frame): 1 px became 0 in 4:2:0 ("internal error:
        # IndexError"), past the encoder's side it failed to open ("out of memory").
        if not encoder_fits(self.codec, width, height):
            least, most_w, most_h = encoder_sizes(self.codec)
            raise InputError(f"--output {self.path}: the stream's frames are {width}x{height} pixels, which "
                             f"{self.codec} cannot record (it takes {least}x{least} to {most_w}x{most_h}); give "
                             f"the camera another --resolution, or use --output window or --output none")
        self._output.open()
        say_trimmed(width, height)  # a 321x241 clip was recorded at 320x240 without a word
        spec = OutputSpec(path=self._output.temp, format=self.format, width=width, height=height,
                          rate=frame_rate(self.fps), time_base=Fraction(1, 1000),
                          encoder=self.codec, metadata=dict(CONTAINER_METADATA), target=self.path, live=True)
        try:
            return VideoWriter(spec)
        except BaseException:
            self._output.discard()
            raise

    def write(self, image_bgr: np.ndarray) -> None:
        """Record a frame stamped with the time it is shown (a live source)."""
        import time

        self._encode(image_bgr, time.perf_counter())

    def write_at(self, image_bgr: np.ndarray, pts_s: float, duration_s: float | None = None) -> None:
        """Record a frame stamped with the source's own timestamp (a --no-realtime file, whose
        frames are shown as fast as they are made: shown-time stamps would speed it up), shown
        for the file's `duration_s` (None: one frame at the rate): a variable-rate file's last
        frame may last far longer, and the recording ends where the file does."""
        self._encode(image_bgr, pts_s, duration_s)

    def _encode(self, image_bgr: np.ndarray, t: float, duration_s: float | None = None) -> None:
        if self._abandoned:  # (a write that was stuck returned: nothing more is written)
            return
        if self._writer is None:
            self._writer = self._open(image_bgr.shape[1], image_bgr.shape[0])
        if self._t0 is None:
            self._t0 = t
        writer = self._writer  # (abandon may clear it while this call is stuck)
        try:
            writer.write(image_bgr, t - self._t0, duration_s)
        except BaseException:
            writer.abort()
            self._writer = None
            self._output.discard()
            raise
        if self._abandoned:  # given up while this write was stuck (the disk woke): what it wrote goes
            writer.abort()
            self._output.discard()
            return
        self.written += 1

    def poll(self) -> list[str]:
        return []

    def abandon(self) -> None:
        """Give the recording up while a write or close of it is stuck on another thread (a
        stalled disk): its temporary file goes, the stuck call is left alone."""
        self._abandoned = True
        self._writer = None
        self._output.discard()
        if self._signed is not None:
            self._signed.discard()

    def close(self) -> None:
        """Finalise and put the recording in place (once; later calls do nothing)."""
        writer, self._writer = self._writer, None
        if writer is None:
            if self.written == 0 and not self._output.committed:
                log.warning("no frame was recorded; %s was not written", self.path)
                self._output.discard()
            return
        try:
            writer.close()
            if self.sign is not None:
                self._signed = AtomicOutput(self._output.temp, force=True, shown=self.path)
                self.sign(self._output.temp, self._signed)
        except BaseException:
            self._output.discard()
            raise
        if self._abandoned:  # given up while this close was stuck: the user was told it is gone
            self._output.discard()
            return
        self._output.commit()
        log.info("recorded %s to %s", counted(self.written, "frame"), self.path)


def display_available() -> bool:
    if sys.platform.startswith("linux") or sys.platform.startswith("freebsd"):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def make_sink(output: str, *, fps: float = 30.0, force: bool = False) -> Sink:
    """The sink for --output (auto, window, virtual-camera, none or FILE.mp4)."""
    spec = output.strip()
    if not spec:  # `--output "$REC"` unset: Path("") is the current folder, "that is a folder"
        raise InputError("--output is empty; give window, virtual-camera, none or a file name such as rec.mp4")
    key = spec.lower()
    if key == "auto":
        if not display_available():
            # A display this machine lacks, as for --output window or a missing camera: bad input
            # (exit 2) that another --output fixes; one lost mid-run is a DeviceError.
            raise InputError("--output auto: no display found (DISPLAY and WAYLAND_DISPLAY are unset); use "
                             "--output none, --output FILE.mp4 or --output virtual-camera")
        key = "window"
    if key == "none":
        return NullSink()
    if key == "window":
        from livecam.media.window import WindowSink

        return WindowSink()
    if key in ("virtual-camera", "virtualcam", "virtual"):
        from livecam.media.virtualcam import VirtualCameraSink

        return VirtualCameraSink(fps=fps)
    from livecam.media.video_writer import CONTAINERS

    path = Path(spec)
    if path.is_dir():  # `--output clips/`: "give the file name without the slash" named the folder again
        raise InputError(f"--output {spec}: that is a folder; give a file name such as {path / 'rec.mp4'}")
    problem = trailing_slash_problem(spec)  # `rec.mp4/` recorded to the file rec.mp4
    if problem:
        raise InputError(f"--output {problem}")
    if path.suffix.lower() not in CONTAINERS:  # the writer's list, so both say the same
        raise InputError(f"--output {output!r}: expected window, virtual-camera, none or a video file name "
                         f"ending in {', '.join(sorted(CONTAINERS))}")
    return FileRecorderSink(path, fps=fps, force=force)
