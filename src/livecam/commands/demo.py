"""`livecam demo [OUTPUT_DIR]`: a real swap in one command, offline, from the bundled photos.

    sample photo --pan and zoom, 30 fps, quiet tone--> target.mp4
    other sample photo --Engine (mesh swapper, or the neural models when present)--+
    target.mp4 --pipeline.file.process_video (the same path as `livecam video`)--> demo.mp4
    source photo | target frame | result frame --> before_after.png
    short lines on stdout: what was done, frames, FPS, where the files are, what to try next

Nothing touches the network (the demo forces offline mode). An existing non-empty folder is
only written into with --force, and then only the demo's own three files are replaced. On any
failure the files this run created are removed again (and the folder, when it made it).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import click
import cv2
import numpy as np

from livecam.atomic import AtomicOutput, refusal
from livecam.console import counted
from livecam.errors import InputError, OutputError, OutputExistsError
from livecam.paths import why_missing
from livecam.marks.credentials import signing_for
from livecam.marks.watermark import open_watermarker
from livecam.media.images import read_image, write_image_atomic
from livecam.models.catalog import NEURAL_SWAP_MODELS, download_command
from livecam.media.video_writer import AudioSamples, OutputSpec, VideoWriter, container_format, encoder_available
from livecam.samples import SAMPLES, sample_path
from livecam.settings import (AnalysisSettings, C2paSettings, DemoJob, ProcessingSettings, RuntimeSettings,
                              SwapSettings, VideoJob)

if TYPE_CHECKING:
    from livecam.models.store import ModelStore

log = logging.getLogger("livecam")

SOURCE, TARGET = "astronaut", "grace_hopper"  # whose face goes in, and the photo the clip is made of
DEMO_FILES = ("demo.mp4", "target.mp4", "before_after.png")
CLIP_SIZE = (640, 480)
CLIP_FPS = 30
CLIP_FRAMES = 90  # three seconds
ZOOM = 0.25  # the window shrinks by 1 + ZOOM over the clip (a slow push in on the face)
TONE_HZ = 440.0
TONE_LEVEL = 0.05  # peak amplitude, about -26 dBFS: audible but quiet
AUDIO_RATE = 48000
# before_after.png: a caption strip above three panels of the clip's height, with gaps between.
CAPTION_H = 28
PANEL_GAP = 8
BEFORE_AFTER_FRAME = 60  # the frame shown: well into the zoom
CAPTIONS = ("source photo", "target (frame {n})", "result (frame {n})")
ENCODERS = ("libx264", "mpeg4")  # the first that opens here writes both clips


@dataclass(frozen=True)
class DemoResult:
    folder: Path
    frames: int
    fps: float
    seconds: float
    models: str  # Engine.describe()
    neural: bool
    audio: str | None
    workers: int
    models_dir: Path | None = None  # RuntimeSettings.typed_models_dir: the download command names it


# ----------------------------------------------------------------------------- the command


def run_demo(job: DemoJob) -> None:
    started = time.perf_counter()
    folder = job.output_dir
    created_folder = prepare_folder(folder, force=job.force)
    workers = max(1, min(2, os.cpu_count() or 1))
    runtime = replace(job.runtime, offline=True, execution_threads=workers)
    written: list[Path] = []
    try:
        from livecam.pipeline.signals import stop_signals  # SIGTERM handled like Ctrl-C, as in `livecam video`

        with stop_signals():
            result = _make_demo(folder, runtime, workers, written, job.c2pa)
    except BaseException:
        _remove_files(written)
        if created_folder:
            _remove_empty_dirs(created_folder, folder)
        raise
    click.echo(summary(replace(result, seconds=time.perf_counter() - started)))


def _make_demo(folder: Path, runtime: RuntimeSettings, workers: int, written: list[Path],
               c2pa: C2paSettings) -> DemoResult:
    from livecam.models.store import ModelStore
    from livecam.pipeline.engine import Engine
    from livecam.pipeline.file import process_video

    encoder = next((e for e in ENCODERS if encoder_available(e)), None)
    if encoder is None:
        raise OutputError(f"none of the video encoders {', '.join(ENCODERS)} opens in this FFmpeg build "
                          "(PyAV); reinstall the av package")
    source, target = sample_path(SOURCE), sample_path(TARGET)
    target_clip, demo_clip = folder / "target.mp4", folder / "demo.mp4"
    # the signing identity is made (or refused in one line) now: made at the end, a read-only
    # home failed the demo after its whole clip was processed
    signing = signing_for(c2pa, None, (), outputs=(demo_clip,))

    write_target_clip(read_image(target)[..., :3], target_clip, focus=SAMPLES[TARGET].focus, encoder=encoder,
                      size=CLIP_SIZE, fps=CLIP_FPS, frames=CLIP_FRAMES)
    written.append(target_clip)  # only complete files are listed: they are removed if a later step fails

    settings = ProcessingSettings(
        sources=(source,), runtime=runtime,  # the default processors: the swapper
        analysis=AnalysisSettings(),  # smoothing on, as `livecam video` does by default
        # auto only where the neural files are here: elsewhere its fallback warning says what a newcomer reads below
        swap=SwapSettings(model="auto" if neural_models_present(ModelStore(runtime, progress=False)) else "mesh"),
    )
    engine = Engine.create(settings, live=False, progress=False)
    # what auto chose, not what is on disk: on the CPU it takes no fp16 inswapper (the summary
    # said "the neural models" over a mesh swap)
    neural = engine.swap_model not in (None, "mesh")
    log.info("demo: putting the face of %s on a clip of %s (%s)", SAMPLES[SOURCE].who, SAMPLES[TARGET].who,
             engine.describe())
    # The demo's outputs carry every mark, as `livecam video` and `livecam image` write them.
    marker = open_watermarker(runtime, engine.providers, workers)
    models = tuple(engine.model_names.values())
    video_signing = replace(signing, input=target_clip, models=models) if signing else None
    # force: prepare_folder already required --force for a folder with files in it
    video = process_video(VideoJob(input=target_clip, output=demo_clip, processing=settings, force=True,
                                   encoder=encoder, quality=20, label=True), engine, quiet=runtime.quiet,
                          watermark=marker,
                          sign=(lambda temp: video_signing.sign_file(temp, demo_clip)) if video_signing else None)
    written.append(demo_clip)
    if video.stats.with_faces == 0:
        raise OutputError("the demo found no face in its own clip; the installation looks broken "
                          "(run `livecam doctor`)")

    panels = before_after(read_image(source)[..., :3], frame_at(target_clip, BEFORE_AFTER_FRAME),
                          frame_at(demo_clip, BEFORE_AFTER_FRAME), BEFORE_AFTER_FRAME)
    # The result panel already carries the visible label from the video; the file gets the tags.
    panels_path = folder / "before_after.png"
    panels_signing = replace(signing, input=source, models=models) if signing else None
    write_image_atomic(panels_path, panels, force=True, label=False, watermark=marker.embed,
                       sign=(lambda data: panels_signing.sign_bytes(data, panels_path)) if panels_signing else None)
    written.append(folder / "before_after.png")
    return DemoResult(folder=folder, frames=video.stats.frames, fps=video.stats.fps, seconds=0.0,
                      models=engine.describe(), neural=neural, audio=video.audio, workers=workers,
                      models_dir=runtime.typed_models_dir)


def prepare_folder(folder: Path, *, force: bool) -> Path | None:
    """Check (and create) the output folder; returns the topmost folder created, or None."""
    if folder.exists():
        if not folder.is_dir():
            raise InputError(f"{folder} is a file; give a folder for the demo's files (default ./livecam-demo)")
        if any(folder.iterdir()) and not force:
            raise OutputExistsError(f"{folder} exists and is not empty; add --force to overwrite the demo files "
                                    f"in it ({', '.join(DEMO_FILES)}) or give another folder")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise InputError(f"cannot write in {folder} (permission denied); give another folder")
        for name in DEMO_FILES:  # found only once the models had loaded, with a fix naming out.mp4 inside it
            if (folder / name).is_dir():
                raise InputError(f"{folder / name} is a folder where the demo writes its file {name}; "
                                 f"move it away or give another folder")
        return None
    if folder.is_symlink():  # a link to nothing or in a loop: mkdir said "File exists"
        raise InputError(f"{folder} {why_missing(folder)}")
    top = folder
    while not top.parent.exists() and top.parent != top:
        top = top.parent
    try:
        folder.mkdir(parents=True)
    except OSError as exc:
        # a usage error (exit 2), as image's and video's unwritable output folders are; it was exit 1
        raise InputError(f"cannot create the folder {folder} ({refusal(exc)}); give another folder") from exc
    return top


def neural_models_present(store: ModelStore) -> bool:
    """True when the inswapper and the ArcFace model it needs are on disk (never downloads)."""
    return bool(store.is_present("w600k_r50")
                and (store.is_present("inswapper_128") or store.is_present("inswapper_128_fp16")))


# ----------------------------------------------------------------------------- the target clip


def smoothstep(t: float) -> float:
    t = min(1.0, max(0.0, t))
    return t * t * (3.0 - 2.0 * t)


def pan_zoom_matrix(t: float, photo_wh: tuple[int, int], out_wh: tuple[int, int],
                    focus: tuple[float, float]) -> np.ndarray:
    """The 2x3 affine map from the photo to output frame at time t in 0..1: a window of the
    output's aspect that starts wide, a little off the face, and glides in onto `focus`."""
    pw, ph = photo_wh
    w, h = out_wh
    e = smoothstep(t)
    ww = min(pw, ph * w / h) / (1.0 + ZOOM * e)  # the largest window of the right aspect, shrinking
    wh = ww * h / w
    fx, fy = focus[0] * pw, focus[1] * ph
    start = (fx - 0.12 * pw, fy + 0.06 * ph)
    cx = start[0] + (fx - start[0]) * e
    cy = start[1] + (fy - start[1]) * e
    cx = min(max(cx, ww / 2), pw - ww / 2)
    cy = min(max(cy, wh / 2), ph - wh / 2)
    s = w / ww
    return np.array([[s, 0.0, -(cx - ww / 2) * s], [0.0, s, -(cy - wh / 2) * s]], np.float64)


def clip_frame(photo: np.ndarray, index: int, *, focus: tuple[float, float], size: tuple[int, int] = CLIP_SIZE,
               frames: int = CLIP_FRAMES) -> np.ndarray:
    m = pan_zoom_matrix(index / max(1, frames - 1), (photo.shape[1], photo.shape[0]), size, focus)
    return cv2.warpAffine(photo, m, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)


def tone(seconds: float, rate: int = AUDIO_RATE) -> np.ndarray:
    """A quiet sine with 50 ms fades (no clicks), float32 mono."""
    t = np.arange(int(round(seconds * rate)), dtype=np.float64) / rate
    fade = np.minimum(1.0, np.minimum(t, seconds - t) / 0.05).clip(0.0, 1.0)
    return (TONE_LEVEL * fade * np.sin(2 * np.pi * TONE_HZ * t)).astype(np.float32)


def write_target_clip(photo: np.ndarray, path: Path, *, focus: tuple[float, float], encoder: str = "libx264",
                      size: tuple[int, int] = CLIP_SIZE, fps: int = CLIP_FPS, frames: int = CLIP_FRAMES) -> None:
    """The pan-and-zoom clip with its tone, written by the one VideoWriter through AtomicOutput
    (force: the folder was checked to be empty, or --force allows replacing the demo's files)."""
    rate = Fraction(fps)
    with AtomicOutput(path, force=True) as out:
        writer = VideoWriter(OutputSpec(path=out.temp, format=container_format(path), width=size[0], height=size[1],
                                        rate=rate, time_base=1 / rate, encoder=encoder, quality=16,
                                        audio=AudioSamples(tone(frames / fps), AUDIO_RATE), target=path))
        try:
            for i in range(frames):
                writer.write(clip_frame(photo, i, focus=focus, size=size, frames=frames), i / fps)
            writer.close()
        except BaseException:
            writer.abort()
            raise


# ----------------------------------------------------------------------------- before / after


def frame_at(path: Path, index: int) -> np.ndarray:
    """Decoded frame `index` of a clip (or its last frame when it is shorter)."""
    from livecam.media.video_reader import VideoReader

    last = None
    with VideoReader(path) as reader:
        for i, frame in enumerate(reader.frames()):
            last = frame.image
            if i == index:
                break
    if last is None:  # VideoReader raises first; kept for the type checker
        raise OutputError(f"{path} holds no frame")
    return last


def panel_widths(source_wh: tuple[int, int], height: int, frame_width: int) -> tuple[int, int, int]:
    sw, sh = source_wh
    return max(1, round(sw * height / sh)), frame_width, frame_width


def before_after(source: np.ndarray, target: np.ndarray, result: np.ndarray, frame_index: int) -> np.ndarray:
    """Three panels side by side (source photo scaled to the frames' height, target frame, result
    frame) under a caption strip; white gaps of PANEL_GAP px between them."""
    h, w = target.shape[:2]
    widths = panel_widths((source.shape[1], source.shape[0]), h, w)
    src = cv2.resize(source, (widths[0], h), interpolation=cv2.INTER_AREA)
    total = sum(widths) + 2 * PANEL_GAP
    canvas = np.full((CAPTION_H + h, total, 3), 255, np.uint8)
    canvas[:CAPTION_H] = 32
    x = 0
    for panel, width, caption in zip((src, target, result), widths, CAPTIONS):
        canvas[CAPTION_H:, x:x + width] = panel
        cv2.putText(canvas, caption.format(n=frame_index), (x + 8, CAPTION_H - 9), cv2.FONT_HERSHEY_SIMPLEX,
                    0.55, (255, 255, 255), 1, cv2.LINE_AA)
        x += width + PANEL_GAP
    return canvas


# ----------------------------------------------------------------------------- reporting and cleanup


def summary(r: DemoResult) -> str:
    """What the demo did, where its files are and what to try next, in short lines (one
    700-character paragraph was more than a newcomer reads)."""
    how = ("the neural models found in the models folder" if r.neural else
           "the embedded mesh swapper, shipped inside livecam (no download needed)")
    lines = [
        f"Demo done in {r.seconds:.0f} s.",
        f"  face of:      {SAMPLES[SOURCE].who}, a bundled photo",
        f"  put on:       a clip of {SAMPLES[TARGET].who}, made from another",
        f"  swapped with: {how}",
        f"  models:       {r.models}",
        f"  speed:        {counted(r.frames, 'frame')} at {r.fps:.1f} FPS on this machine "
        f"({counted(r.workers, 'worker')}), as `livecam video` runs",
        "",
        f"Files in {r.folder.resolve()}:",
        f"  demo.mp4          the result{' (its tone copied)' if r.audio else ', without audio'}, "
        "labelled and tagged as AI-generated",
        f"  target.mp4        the clip before the swap ({CLIP_FRAMES / CLIP_FPS:.0f} s, {CLIP_SIZE[0]}x{CLIP_SIZE[1]}, "
        f"{CLIP_FPS} fps, a quiet {TONE_HZ:.0f} Hz tone)",
        "  before_after.png  source photo, target frame and result frame side by side",
        "",
        "Try next:",
        "  swap a face in a photo:  livecam image PHOTO.jpg OUT.jpg --source FACE.jpg",
        "  swap live from a camera: livecam run --source FACE.jpg (with that person's consent)",
        # the neural swap's models by name, as the mesh-fallback warning and doctor give them
        # ("inswapper, buffalo_l, GFPGAN" meant nothing to a newcomer)
        "  a more lifelike swap:    "
        + ("the neural models, installed already" if r.neural
           else download_command(*NEURAL_SWAP_MODELS, models_dir=r.models_dir)),
        "  use a GPU:               --execution-provider cuda (or tensorrt, coreml, directml, openvino, rocm)",
        "  check this machine:      livecam doctor",
    ]
    return "\n".join(lines)


def _remove_files(paths: list[Path]) -> None:
    for path in paths:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:  # the original error matters more; say what is left behind
            log.warning("could not remove %s: %s", path, exc.strerror or exc)


def _remove_empty_dirs(top: Path, folder: Path) -> None:
    """Remove `folder` and its parents up to `top` (the folders this run created) when empty."""
    current = folder
    while True:
        try:
            current.rmdir()
        except OSError:
            return
        if current == top or current.parent == current:
            return
        current = current.parent
