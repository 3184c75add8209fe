"""What `livecam verify` reads from one file: metadata tags, C2PA credentials, the watermark.

A file counts as marked when any of the three says "made by livecam": the provenance tags
(provenance.py), a C2PA manifest by livecam that c2pa validates, or the watermark in an image
or in at least watermark.VIDEO_MIN_FRAMES frames of a video. Each is reported on its own, since
each survives different things (tags and credentials: copies; the watermark: re-encodes,
resizes, screenshots).

Video frames: every frame of the first DENSE_SECONDS is read (the watermark is on runs of
frames twice a second, and a re-encode may move them), then frames spread over the rest, MAX_VIDEO_FRAMES in
all; reading stops as soon as enough marked frames are found. When the tags or the credentials
already say "made by livecam" the verdict is settled before any frame is read, and the watermark
is only reported: then only the frames livecam video marks in its first runs are read,
SETTLED_FRAMES at most (frames 0 to 3 and the next run; a live recording marks every frame, its
first exactly), which says whether the pixels carry the mark as written; the other frames are
still decoded (not read for the mark), so a file cut short says so. Each frame read is one
RivaGAN decoder run (about 0.25 s on a loaded 2-core machine; 0.4 s before the decoder ran
2-D convolutions): a 600-frame clip without a readable watermark read 90 of them, 40 s, though
its tags had settled the verdict.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from livecam.media import provenance
from livecam.media.metadata import sniff_format
from livecam.errors import InputError
from livecam.marks import credentials as cr
from livecam.marks import watermark as wm
from livecam.paths import why_missing

DENSE_SECONDS = 2.0
MAX_VIDEO_FRAMES = 90
SETTLED_FRAMES = 2 * wm.RUN_FRAMES  # frames read when tags or credentials settle the verdict
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".tif", ".tiff", ".bmp"})


@dataclass(frozen=True)
class WatermarkFinding:
    frames_read: int = 0
    frames_marked: int = 0
    best_errors: int = 32  # fewest bit errors in a frame read
    version: int = 0
    cut_short: bool = False  # a video ended before its header said (the frames read count), an image did not decode
    settled: bool = False  # a video's tags or credentials settled the verdict: only its first runs were read

    @property
    def needed(self) -> int:
        """Frames that must carry the mark for it to count as found."""
        return 1 if self.frames_read <= 1 else min(wm.VIDEO_MIN_FRAMES, self.frames_read)

    @property
    def found(self) -> bool:
        return self.frames_marked >= self.needed

    def describe(self) -> str:
        if not self.frames_read:
            return "not read (the image cannot be decoded: damaged or cut short)" if self.cut_short else "not read"
        what = "the image" if self.frames_read == 1 else f"{self.frames_marked} of {self.frames_read} frames read"
        if self.cut_short:
            what += ", the file ends early"
        if self.settled and not self.found:
            what += ", livecam video's first two runs only: its tags or credentials already mark it"
        if self.found:
            return (f"found in {what} (livecam payload v{self.version}, {self.best_errors} of 32 bits off; "
                    f"at most {wm.MAX_BIT_ERRORS} allowed)")
        if self.frames_read == 1:  # an image has no other frame to be closer
            return f"not found ({what}; {self.best_errors} of 32 bits off)"
        # "0 of 90 frames read" read as no frame read at all: the count is of the frames marked
        needed = f", {self.needed} needed" if self.frames_marked else ""
        return f"not found (marked in {what}{needed}; closest frame {self.best_errors} of 32 bits off)"


@dataclass(frozen=True)
class Evidence:
    path: Path
    kind: str  # image or video
    metadata: tuple[str, ...] = ()  # the livecam tags found
    credentials: cr.Credentials = field(default_factory=lambda: cr.Credentials(False))
    watermark: WatermarkFinding = field(default_factory=WatermarkFinding)

    @property
    def marked(self) -> bool:
        return bool(self.metadata) or self.credentials.by_livecam or self.watermark.found

    def as_dict(self) -> dict[str, Any]:
        """The findings, for `verify --json` (which names the file: commands/verify.py)."""
        return {"kind": self.kind, "marked": self.marked,
                "metadata": list(self.metadata),
                "c2pa": {**asdict(self.credentials), "valid": self.credentials.valid,
                         "by_livecam": self.credentials.by_livecam},
                "watermark": {**asdict(self.watermark), "found": self.watermark.found}}


def examine(path: Path, marker: wm.Watermarker) -> Evidence:
    """All the evidence in one file; InputError when it cannot be read as an image or a video."""
    if path.is_dir():
        raise InputError(f"{path} is a folder; give the files in it, such as {path / '*'}")
    if not path.exists():
        if str(path) == "-":  # the usual spelling of standard input, which was "-: no such file"
            raise InputError("'-' (standard input) is not a file; verify reads files: save what you "
                             "would pipe in to a file first and give that file")
        raise InputError(f"{path} {why_missing(path, 'give an image or a video file')}")
    if not path.is_file():
        raise InputError(f"{path} is not a regular file; give an image or a video file")
    if is_still_image(path):
        from livecam.media.images import read_image

        tags, credentials = _image_tags(path), cr.read_credentials(path)
        try:
            image = read_image(path)
        except InputError:
            if not tags and not credentials.present:
                raise
            # Cut short (a partial download) or damaged: its tags, at the start, are evidence still.
            return Evidence(path, "image", tags, credentials, WatermarkFinding(cut_short=True))
        reading = marker.read(image[:, :, :3] if image.ndim == 3 else image)
        finding = WatermarkFinding(1, int(reading.marked), reading.errors, reading.version)
        return Evidence(path, "image", tags, credentials, finding)
    (tags, picture), credentials = _video_tags(path), cr.read_credentials(path)
    settled = bool(tags) or credentials.by_livecam
    return Evidence(path, "image" if picture else "video", tags, credentials, _video_watermark(path, marker, settled))


def is_still_image(path: Path) -> bool:
    """By its extension, or by its first bytes when the extension says nothing or lies (a marked
    photo renamed without one was read as a video and called "not a video"). GIF is a clip."""
    if path.suffix.lower() in IMAGE_SUFFIXES:
        return True
    try:
        with path.open("rb") as f:
            head = f.read(16)
    except OSError:
        return False  # the video reader names the problem
    return sniff_format(head) not in (None, "gif")


def _image_tags(path: Path) -> tuple[str, ...]:
    from livecam.media.images import read_image_bytes

    data = read_image_bytes(path)  # a 3 GB .jpg was read whole (4 GB of memory) before being refused
    found = []
    if provenance.DIGITAL_SOURCE_TYPE in (provenance.read_xmp(data) or ""):
        found.append("XMP DigitalSourceType compositeWithTrainedAlgorithmicMedia")
    if provenance.read_jpeg_description(data) == provenance.DESCRIPTION:
        # a TIFF's own IFD0 tag, which holds no EXIF block ("EXIF" sent a reader looking for one)
        found.append(f"{'TIFF' if sniff_format(data) == 'tiff' else 'EXIF'} ImageDescription")
    if data.startswith(b"\x89PNG") and provenance.read_png_text(data).get("AI-Generated") == "true":
        found.append("PNG text AI-Generated")
    return tuple(found)


def _video_tags(path: Path) -> tuple[tuple[str, ...], bool]:
    """The livecam tags in a file read as a video, and whether it is one picture (an icon, a GIF
    of one frame: an image, read the video's way)."""
    from livecam.media.images import heif_kind, is_video, unreadable_message
    from livecam.media.video_reader import container_tags

    try:
        tags, picture = container_tags(path)
    except InputError:
        with path.open("rb") as f:
            head = f.read(512)
        # neither kind, or a phone's HEIC: "cannot read it as a video ... expected a video file"
        if head and (heif_kind(head) is not None or not is_video(head)):
            raise InputError(unreadable_message(path, head, videos_too=True)) from None
        raise
    return tuple(f"container {key}={tags[key]!r}" for key in ("synthetic", "ai_generated", "comment")
                 if key in tags and (tags[key] == "true" or tags[key] == provenance.DESCRIPTION)), picture


def _video_watermark(path: Path, marker: wm.Watermarker, settled: bool = False) -> WatermarkFinding:
    """The watermark in a video's sampled frames (_sampled), or with `settled` (its tags or
    credentials already mark it) in the frames of its first runs only (_first_runs)."""
    from livecam.media.video_reader import VideoReader

    read = marked = 0
    best, version = 32, 0
    cut_short = False
    # no output: nothing said of what one would lose; an early end is said in the verdict (cut_short)
    with VideoReader(path, writes=False, says_end=False) as reader:
        info = reader.info
        try:
            fps = float(info.rate or 30)
            # only the frames read for the mark are converted to BGR (a frame's image is made when
            # asked for); the rest are decoded all the same, so a file that ends early is still known
            decoded = reader.frames()
            frames = _first_runs(decoded, fps) if settled else _sampled(decoded, fps, info.expected_frames)
            for image in frames:
                reading = marker.read(image)
                read += 1
                best = min(best, reading.errors)
                if reading.marked:
                    marked += 1
                    version = reading.version
                    if marked >= wm.VIDEO_MIN_FRAMES:
                        break
            cut_short = reader.ended_early  # read to its end: the frames read are all it holds
        except InputError:
            # Cut short (a partial download) or damaged at the end: the frames read are evidence
            # still, as are its tags; it was "UNREADABLE", exit 2, tags and all.
            if not read:
                raise
            cut_short = True
    return WatermarkFinding(read, marked, best, version, cut_short, settled)


def _sampled(frames: Iterator[Any], fps: float, total: int | None) -> Iterator[np.ndarray]:
    dense = max(1, int(round(DENSE_SECONDS * fps)))
    rest = max(1, (total or dense * 10) - dense)
    stride = max(1, -(-rest // max(1, MAX_VIDEO_FRAMES - dense)))
    taken = 0
    for index, frame in enumerate(frames):
        if index < dense or (index - dense) % stride == 0:
            yield frame.image
            taken += 1
            if taken >= MAX_VIDEO_FRAMES:
                return


def _first_runs(frames: Iterator[Any], fps: float) -> Iterator[np.ndarray]:
    """The frames livecam video marks (watermark.mark_frame), SETTLED_FRAMES at most: its first
    runs. The rest is still decoded (not converted to BGR: DecodedFrame), not read for the
    mark, so a file that ends early says so as when every sample is read."""
    taken = 0
    for index, frame in enumerate(frames):
        if taken < SETTLED_FRAMES and wm.mark_frame(index, fps):
            yield frame.image
            taken += 1
