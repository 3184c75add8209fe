"""A segment's packets stream-copied for a worker without the input (media.chunks): decoded,
they give the frames a reader of the input gives, at the exact same times (the chunk's
container rounds its own timestamps to milliseconds; the ones cut beside it are put back)."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import av
import numpy as np
import pytest

from livecam.errors import InputError
from livecam.media.chunks import ChunkReader, cut_chunk
from livecam.media.segments import index_packets, plan_segments
from livecam.media.video_reader import VideoReader
from tests.pipeline.test_segments import CASES, make_coded_clip


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    codec, options, _, suffix, _ = CASES["h264-bframes-long-gop"]
    return make_coded_clip(tmp_path_factory.mktemp("chunks") / f"in{suffix}", codec=codec, options=options,
                           audio_codec=None)


def _frames(reader: VideoReader | ChunkReader, seek: int | None) -> list[tuple[float, np.ndarray]]:
    return [(f.time, f.image) for f in reader.frames_from(seek)]


def test_a_chunk_decodes_to_the_inputs_frames_at_the_exact_times(clip: Path) -> None:
    index = index_packets(clip)
    segments = plan_segments(index, segment_seconds=1.0, overlap_seconds=0.5)
    assert len(segments) == 3
    with VideoReader(clip) as reader:
        info = reader.info
    for segment in segments:
        chunk = cut_chunk(clip, segment, info, name=f"segment {segment.number}")
        with VideoReader(clip) as reader:
            wanted = [(t, im) for t, im in _frames(reader, segment.seek_pts)
                      if segment.role(t) in ("warm", "write")]
        with ChunkReader(chunk) as reader:
            got = [(t, im) for t, im in _frames(reader, segment.seek_pts) if segment.role(t) in ("warm", "write")]
        assert len(got) == len(wanted) == segment.end - segment.warm
        assert [t for t, _ in got] == [t for t, _ in wanted]  # exactly, not approximately
        for (_, a), (_, b) in zip(wanted, got):
            assert np.array_equal(a, b)  # the same packets, the same decoder
        # the packets from the warm-up's keyframe on, in decode order, as the index has them
        start = index.pts.index(segment.seek_pts) if segment.seek_pts is not None else 0
        assert [p for p, _ in chunk.packets.times] == list(index.pts[start:start + len(chunk.packets.times)])


def test_the_chunk_container_rounds_what_the_restore_puts_back(clip: Path) -> None:
    """Without the timestamps beside it the chunk's frames would be off (so the test above can fail)."""
    segment = plan_segments(index_packets(clip), segment_seconds=1.0, overlap_seconds=0.5)[1]
    with VideoReader(clip) as reader:
        chunk = cut_chunk(clip, segment, reader.info, name="s")
    with av.open(io.BytesIO(chunk.packets.data), format=chunk.packets.format) as container:
        stream = container.streams.video[0]
        stored = [float(p.pts * stream.time_base) for p in container.demux(stream) if p.size]
    exact = [float(p * chunk.packets.time_base) for p, _ in chunk.packets.times]
    assert len(stored) == len(exact)
    assert stored != exact


def test_a_chunk_missing_packet_times_is_refused(clip: Path) -> None:
    segment = plan_segments(index_packets(clip), segment_seconds=1.0, overlap_seconds=0.5)[1]
    with VideoReader(clip) as reader:
        chunk = cut_chunk(clip, segment, reader.info, name="in.mp4 segment 2")
    damaged = replace(chunk, packets=replace(chunk.packets, times=chunk.packets.times[:-3]))
    with ChunkReader(damaged) as reader, pytest.raises(InputError, match="in.mp4 segment 2.*more packets"):
        _frames(reader, segment.seek_pts)


def test_a_rotated_inputs_chunk_decodes_upright(tmp_path: Path) -> None:
    """The display rotation (a phone's) travels in the chunk's stream parameters."""
    from tests.videos import make_clip

    clip = make_clip(tmp_path / "phone.mp4", frames=60, size=(160, 96), fps=30, audio=False, rotation=90)
    segment = plan_segments(index_packets(clip), segment_seconds=1.0, overlap_seconds=0.3)[1]
    with VideoReader(clip) as reader:
        info = reader.info
        wanted = _frames(reader, segment.seek_pts)
    assert info.rotation == 90
    with ChunkReader(cut_chunk(clip, segment, info, name="s")) as reader:
        got = _frames(reader, segment.seek_pts)
    assert len(got) == len(wanted) and got[0][1].shape == (160, 96, 3)
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(wanted, got))


@pytest.mark.parametrize("matrix", [(-1, 0, 0, 1), (1, 0, 0, -1)], ids=["mirror", "upside-down mirror"])
def test_a_mirrored_selfie_clips_chunk_decodes_as_players_show_it(tmp_path: Path, matrix: tuple[int, ...]) -> None:
    """A selfie app's mirroring display matrix lives in the MP4's track header, which the
    chunk's Matroska does not carry: a worker given chunks wrote the clip unmirrored and upside
    down while one reading the path (and `video` without --cluster) showed it as players do."""
    from tests.videos import as_displayed, make_clip, set_display_matrix

    plain = make_clip(tmp_path / "plain.mp4", frames=60, size=(160, 96), fps=30, audio=False, stamp=True)
    selfie = tmp_path / "selfie.mp4"  # the same encoded pictures, only the matrix differs
    selfie.write_bytes(plain.read_bytes())
    set_display_matrix(selfie, *matrix)
    segment = plan_segments(index_packets(selfie), segment_seconds=1.0, overlap_seconds=0.3)[1]
    with VideoReader(plain) as reader:
        stored = _frames(reader, segment.seek_pts)
    with VideoReader(selfie) as reader:
        info = reader.info
    with ChunkReader(cut_chunk(selfie, segment, info, name="s")) as reader:
        got = _frames(reader, segment.seek_pts)
    assert len(got) == len(stored) > 0
    assert all(np.array_equal(image, as_displayed(wanted, *matrix)) for (_, image), (_, wanted) in zip(got, stored))
