"""Which frames `livecam verify` reads for a video's watermark (counted, not timed): each is one
RivaGAN decoder run, about 0.4 s on a loaded 2-core machine, so their number is verify's cost."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from livecam.marks import evidence
from livecam.marks import watermark as wm
from livecam.media import provenance
from tests.videos import make_clip, read_index


class CountingMarker:
    """Stands in for the Watermarker: notes the (stamped) index of each frame read; the frames in
    `marked` read as marked, the others as an unmarked frame does (16 bits off)."""

    def __init__(self, marked: frozenset[int] = frozenset()) -> None:
        self.marked = marked
        self.indices: list[int] = []

    def read(self, image: np.ndarray) -> wm.Reading:
        index = read_index(image)
        self.indices.append(index)
        errors = 0 if index in self.marked else 16
        return wm.Reading(bits=wm.PAYLOAD_BITS, errors=errors, version=wm.PAYLOAD_VERSION, confidence=1.0)


def tagged_copy(clip: Path, out: Path) -> Path:
    """`clip` remuxed with the container tags livecam writes (what --no-watermark --no-c2pa leaves)."""
    with av.open(str(clip)) as c, av.open(str(out), "w", options={"movflags": "+use_metadata_tags"}) as o:
        o.metadata.update({"synthetic": "true", "comment": provenance.DESCRIPTION})
        streams = {s.index: o.add_stream_from_template(s) for s in c.streams}
        for packet in c.demux():
            if packet.dts is not None:
                packet.stream = streams[packet.stream.index]
                o.mux(packet)
    return out


@pytest.fixture(scope="module")
def long_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 20 s at 30 fps; the frame index stamped in the pixels says which frames were read
    return make_clip(tmp_path_factory.mktemp("clips") / "long.mp4", frames=600, size=(128, 96), fps=30,
                     audio=False, stamp=True)


def test_tags_settle_a_long_clip_after_its_first_runs(long_clip: Path, tmp_path: Path) -> None:
    # A 600-frame clip whose tags say livecam but whose watermark does not read had 90 frames
    # read (40 s) for a verdict its tags had already given.
    tagged = tagged_copy(long_clip, tmp_path / "tagged.mp4")
    marker = CountingMarker()
    found = evidence.examine(tagged, marker)  # type: ignore[arg-type]
    assert found.marked and found.metadata
    assert marker.indices == [0, 1, 2, 3, 15, 16, 17, 18]  # livecam video's first two runs at 30 fps
    assert marker.indices == [i for i in range(600) if wm.mark_frame(i, 30.0)][:evidence.SETTLED_FRAMES]
    assert found.watermark.frames_read == evidence.SETTLED_FRAMES and found.watermark.settled
    assert not found.watermark.cut_short  # the rest was decoded to its end
    assert "already mark it" in found.watermark.describe()


def test_a_clip_without_tags_is_still_read_over_its_whole_sample(long_clip: Path) -> None:
    # The watermark alone decides here (a re-encode drops tags and credentials): every frame of
    # the first 2 s, then frames spread to the end, 90 in all.
    marker = CountingMarker()
    found = evidence.examine(long_clip, marker)  # type: ignore[arg-type]
    assert not found.marked
    assert len(marker.indices) == found.watermark.frames_read == evidence.MAX_VIDEO_FRAMES
    assert marker.indices[:60] == list(range(60)) and marker.indices[-1] > 550
    assert not found.watermark.settled


def test_reading_stops_at_the_second_marked_frame(long_clip: Path, tmp_path: Path) -> None:
    for path in (long_clip, tagged_copy(long_clip, tmp_path / "tagged.mp4")):
        marker = CountingMarker(marked=frozenset({2, 16}))
        found = evidence.examine(path, marker)  # type: ignore[arg-type]
        assert found.marked and found.watermark.found and found.watermark.frames_marked == wm.VIDEO_MIN_FRAMES
        assert marker.indices[-1] == 16


def test_only_the_frames_read_are_converted_to_bgr(long_clip: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # Every frame was converted to BGR (about 5 ms at 1080p) though at most 90 are read; now the
    # others are decoded only (the end still reached, so a cut-short file is still known).
    from livecam.media.video_reader import VideoDecoder

    converted: list[int] = []
    to_bgr = VideoDecoder._to_bgr
    monkeypatch.setattr(VideoDecoder, "_to_bgr", lambda self, frame: converted.append(1) or to_bgr(self, frame))
    for path, read in ((long_clip, evidence.MAX_VIDEO_FRAMES),
                       (tagged_copy(long_clip, tmp_path / "tagged.mp4"), evidence.SETTLED_FRAMES)):
        converted.clear()
        found = evidence.examine(path, CountingMarker())  # type: ignore[arg-type]
        assert found.watermark.frames_read == read and not found.watermark.cut_short
        assert len(converted) == read


def test_an_image_too_large_to_read_is_refused_before_it_is_read(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # `livecam verify` read a 3 GB .jpg whole (4 GB of memory, 30 s) for its tags, then refused it
    from livecam.errors import InputError
    from livecam.media.images import MAX_FILE_BYTES

    big = tmp_path / "big.jpg"
    with big.open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk used
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail(f"{self} was read whole"))
    with pytest.raises(InputError, match="big.jpg is 1.0 GB, too large for an image"):
        evidence.examine(big, marker=None)  # type: ignore[arg-type]
