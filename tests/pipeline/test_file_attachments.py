"""Files attached to a Matroska input (fonts for ASS subtitles, cover art): copied into a
Matroska output; named in the one 'not copied' note, with the fix, where the output cannot hold them."""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from livecam.media.video_reader import VideoReader
from livecam.pipeline.file import process_video
from livecam.pipeline.segments import process_segmented
from tests.pipeline.test_file import InvertEngine, _opts
from tests.videos import cover_first, make_clip, make_timed_clip, probe, read_index

FONT = bytes(range(256)) * 40 + b"a font's bytes, as the file holds them"
COVER = cv2.imencode(".jpg", np.full((32, 32, 3), 90, np.uint8))[1].tobytes()


@pytest.fixture(scope="module")
def attached(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 12-frame Matroska clip with sound, a font and a cover picture attached (built with PyAV,
    the way mkvmerge stores them: FFmpeg reads the picture back as an attached-picture stream)."""
    folder = tmp_path_factory.mktemp("attached")
    plain = make_clip(folder / "plain.mkv", frames=12, size=(64, 48), stamp=True)
    src = folder / "attached.mkv"
    with av.open(str(plain)) as i, av.open(str(src), "w") as o:
        streams = {s.index: o.add_stream_from_template(s) for s in i.streams}
        o.add_attachment("Font.ttf", "font/ttf", FONT)
        o.add_attachment("cover.jpg", "image/jpeg", COVER)
        for packet in i.demux():
            if packet.dts is not None:
                packet.stream = streams[packet.stream.index]
                o.mux(packet)
    return src


def _attached_files(path: Path) -> list[tuple[str, str, bytes]]:
    """(file name, MIME type, bytes) of every file attached to `path`, as FFmpeg reads them."""
    found = []
    with av.open(str(path)) as c:
        for s in c.streams:
            if s.type == "attachment":
                found.append((s.metadata["filename"], s.metadata["mimetype"], s.data))
            elif s.type == "video" and s.disposition & av.stream.Disposition.attached_pic:
                found.append((s.metadata["filename"], s.metadata["mimetype"], bytes(next(iter(c.demux(s))))))
    return found


def _notes(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "not copied" in r.getMessage()]


def test_the_input_reports_its_attached_files_apart_from_dropped_streams(attached: Path) -> None:
    with VideoReader(attached) as reader:
        info = reader.info
    assert info.attachments == ("Font.ttf", "cover.jpg")
    assert info.other_streams == ()  # the cover is not 'one more video stream', the font no 'attachment stream'
    assert _attached_files(attached) == [("Font.ttf", "font/ttf", FONT), ("cover.jpg", "image/jpeg", COVER)]


def test_a_matroska_output_keeps_the_attached_files(tmp_path: Path, attached: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "out.mkv"
    with caplog.at_level(logging.WARNING, logger="livecam"):
        result = process_video(_opts(attached, out), InvertEngine(face=False), quiet=True)
    assert _attached_files(out) == [("Font.ttf", "font/ttf", FONT), ("cover.jpg", "image/jpeg", COVER)]
    assert result.audio == "copy" and probe(out)["frames"] == 12
    with VideoReader(out) as reader:  # the picture is no video to livecam either
        assert reader.info.width == 64 and reader.info.attachments == ("Font.ttf", "cover.jpg")
    assert _notes(caplog) == []


@pytest.mark.parametrize("ext,kind", [(".mp4", "MP4"), (".webm", "WebM")])
def test_an_output_that_cannot_hold_them_says_so_in_one_line_with_the_fix(tmp_path: Path, attached: Path,
                                                                        caplog: pytest.LogCaptureFixture,
                                                                        ext: str, kind: str) -> None:
    out = tmp_path / f"out{ext}"
    with caplog.at_level(logging.WARNING, logger="livecam"):
        process_video(_opts(attached, out, encoder="libvpx-vp9" if ext == ".webm" else "libx264"),
                      InvertEngine(face=False), quiet=True)
    assert _attached_files(out) == [] and probe(out)["streams"] == ["video", "audio"]
    notes = _notes(caplog)
    assert len(notes) == 1 and "\n" not in notes[0]
    assert notes[0].endswith(f"not copied: 2 attached files (Font.ttf, cover.jpg): {kind} outputs leave them "
                             "out; write a .mkv output to keep them"), notes[0]


def test_a_segmented_run_keeps_them_too(tmp_path: Path, attached: Path) -> None:
    out = tmp_path / "joined.mkv"
    process_segmented(_opts(attached, out), InvertEngine(face=False), segment_seconds=0.2, overlap_seconds=0.0)
    assert _attached_files(out) == [("Font.ttf", "font/ttf", FONT), ("cover.jpg", "image/jpeg", COVER)]
    assert probe(out)["frames"] == 12


def test_a_segmented_run_of_an_mp4_with_its_cover_first_reads_the_video_and_keeps_the_cover(tmp_path: Path) -> None:
    # the cover is stream 0; every segment seeks in and decodes the video, the join keeps the cover
    src = cover_first(make_timed_clip(tmp_path / "covered.mp4", frames=30, cover=(256, 256)))
    out = tmp_path / "joined.mkv"
    process_segmented(_opts(src, out), InvertEngine(face=False), segment_seconds=0.3, overlap_seconds=0.0)
    info = probe(out)
    assert info["size"] == (96, 64) and [read_index(image) for image in info["images"]] == list(range(30))
    assert [name for name, _, _ in _attached_files(out)] == ["cover.jpg"]


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg (the command) builds the MP4 with cover art")
def test_an_mp4_s_cover_art_goes_into_an_mkv_output_as_a_cover_file(tmp_path: Path) -> None:
    plain = make_clip(tmp_path / "plain.mp4", frames=6, size=(64, 48))
    (tmp_path / "cover.jpg").write_bytes(COVER)
    src = tmp_path / "covered.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-i", str(plain), "-i", str(tmp_path / "cover.jpg"), "-map", "0",
                    "-map", "1", "-c", "copy", "-disposition:v:1", "attached_pic", str(src)], check=True)
    out = tmp_path / "out.mkv"
    process_video(_opts(src, out), InvertEngine(face=False), quiet=True)
    assert _attached_files(out) == [("cover.jpg", "image/jpeg", COVER)]
