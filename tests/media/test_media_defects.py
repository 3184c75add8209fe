"""Odd inputs a user brings, through the one reader and writer (issue 15's media defects).

Each input is generated with PyAV (tests/videos.make_timed_clip), small and fast; each test
failed before the reader and writer were unified."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from livecam.media.video_reader import VideoReader
from livecam.media.video_writer import OutputSpec, VideoWriter, container_format
from tests.conftest import REPO_ROOT
from tests.videos import clip_with_chapters, cover_first, make_clip, make_timed_clip, probe, read_index


def transcode(source: Path, output: Path) -> VideoWriter:
    """What `livecam video` does to the frames, without the engine: read, write, keep audio."""
    with VideoReader(source) as reader:
        info = reader.info
        writer = VideoWriter(OutputSpec(path=output, format=container_format(output), width=info.width,
                                        encoder="libvpx-vp9" if output.suffix == ".webm" else "libx264",
                                        height=info.height, rate=info.rate, time_base=info.time_base,
                                        audio_from=source if info.audio_codec else None, target=output,
                                        sample_aspect=info.sample_aspect, colour=info.colour))
        for frame in reader.frames():
            writer.write(frame.image, frame.time)
        writer.close()
    return writer


def timeline(path: Path) -> dict[str, float]:
    """Where the output's video starts and how long the file says it is (edit lists included)."""
    with av.open(str(path)) as c:
        vs = c.streams.video[0]
        first = next(float(f.pts * f.time_base) for f in c.decode(vs))
        return {"video_start": first, "duration": (c.duration or 0) / av.time_base}


@pytest.mark.parametrize("name, fmt, start", [("tenhours.ts", "mpegts", 36000.0), ("offset.mkv", None, 5.0)])
def test_an_input_whose_timestamps_do_not_start_at_0_gives_a_timeline_from_0(
        tmp_path: Path, name: str, fmt: str | None, start: float) -> None:
    # An MP4 made from a TS starting at 10 h was declared 10 h long (an empty edit-list lead).
    source = make_timed_clip(tmp_path / name, start=start, frames=60, fmt=fmt)
    out = tmp_path / "out.mp4"
    transcode(source, out)
    got = timeline(out)
    assert got["video_start"] < 0.1 and got["duration"] == pytest.approx(2.0, abs=0.15)
    info = probe(out)
    assert info["frames"] == 60 and info["audio_duration"] == pytest.approx(2.0, abs=0.1)
    assert info["audio_start"] < 0.1


def test_a_resolution_change_and_restarting_timestamps_keep_every_frame_and_the_audio(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Two TS segments glued together (an HLS or WebRTC recording): the second is twice as wide
    # and its timestamps start again. Its frames were cropped to the top-left corner and squeezed
    # into 2 ms, and its audio dropped.
    first = make_timed_clip(tmp_path / "a.ts", start=1.4, frames=30, size=(96, 64), fmt="mpegts")
    second = make_timed_clip(tmp_path / "b.ts", start=1.4, frames=30, size=(192, 64), fmt="mpegts", shade=128)
    joined = tmp_path / "joined.ts"
    joined.write_bytes(first.read_bytes() + second.read_bytes())
    out = tmp_path / "out.mp4"
    with caplog.at_level(logging.WARNING, logger="livecam"):
        transcode(joined, out)
    info = probe(out)
    assert info["frames"] == 60 and info["size"] == (96, 64)
    times = info["times"]
    assert all(b > a for a, b in zip(times, times[1:]))
    assert times[-1] - times[0] == pytest.approx(59 / 30, abs=0.1)  # not squeezed into milliseconds
    assert info["audio_duration"] == pytest.approx(2.0, abs=0.15)  # both segments' audio
    later = info["images"][45]
    assert later[:12].max() < 20  # a black bar above the wide frame, scaled to fit (aspect kept)
    assert abs(int(later[32, 60].mean()) - 128) < 20  # its grey picture in the middle, not cropped
    warnings = [r.getMessage() for r in caplog.records if "picture size" in r.getMessage()]
    assert len(warnings) == 1 and "96x64" in warnings[0] and "192x64" in warnings[0]


def test_a_one_frame_still_track_before_the_video_is_not_what_gets_swapped(tmp_path: Path) -> None:
    # The still (a thumbnail track) was taken and a 1-frame output written, blaming damage.
    source = make_timed_clip(tmp_path / "thumb.mp4", frames=30, still_first=(200, 200))
    out = tmp_path / "out.mp4"
    transcode(source, out)
    info = probe(out)
    assert info["frames"] == 30 and info["size"] == (96, 64)
    assert [read_index(img) for img in info["images"]] == list(range(30))


def test_cover_art_is_never_chosen_over_the_video(tmp_path: Path) -> None:
    from livecam.media.video_reader import select_video_stream

    path = make_timed_clip(tmp_path / "cover.mp4", frames=10, cover=(256, 256))  # larger than the video
    with av.open(str(path)) as c:
        assert c.streams.video[1].disposition & av.stream.Disposition.attached_pic  # the fixture holds
        chosen = select_video_stream(c)
        assert chosen is not None and chosen.codec_context.name == "h264"
    assert probe(transcode(path, tmp_path / "out.mp4").spec.path)["frames"] == 10


def test_cover_art_first_in_the_file_is_no_frame_and_the_video_is_read_whole(tmp_path: Path) -> None:
    # an MP4 whose metadata comes before its tracks gives its cover as stream 0, before the video
    path = cover_first(make_timed_clip(tmp_path / "cover.mp4", frames=10, cover=(256, 256)))
    with av.open(str(path)) as c:
        first = c.streams[0]
        assert first.type == "video" and first.disposition & av.stream.Disposition.attached_pic  # the fixture holds
    with VideoReader(path) as reader:
        info = reader.info
        assert (info.codec, info.width, info.height, info.frames) == ("h264", 96, 64, 10)
        assert info.attachments == ("cover.jpg",) and info.other_streams == ()
        images = [f.image for f in reader.frames()]
    assert [read_index(image) for image in images] == list(range(10))  # the 256x256 cover is none of them
    assert probe(transcode(path, tmp_path / "out.mp4").spec.path)["frames"] == 10


@pytest.mark.parametrize("name, codec", [("pcm24.mov", "pcm_s24le"), ("float.mov", "pcm_f32le"),
                                         ("vorbis.mkv", "vorbis")])
def test_audio_mp4_players_do_not_read_is_reencoded_as_aac_and_said_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str, codec: str) -> None:
    # PCM from MOV was copied into MP4 (noise or silence in common players), Vorbis too.
    source = make_timed_clip(tmp_path / name, frames=30, audio_codec=codec)
    out = tmp_path / "out.mp4"
    with caplog.at_level(logging.INFO, logger="livecam"):
        writer = transcode(source, out)
    info = probe(out)
    assert writer.audio_mode == "reencode" and info["audio_codec"] == "aac"
    assert info["audio_duration"] == pytest.approx(1.0, abs=0.1)
    lines = [r for r in caplog.records if "re-encoded" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno >= logging.WARNING  # shown by default, once
    assert codec in lines[0].getMessage() and "AAC" in lines[0].getMessage()


@pytest.mark.parametrize("codec", ["pcm_s16le", "pcm_s24le", "pcm_f32le"])
def test_pcm_from_a_mov_stays_pcm_in_a_mov(tmp_path: Path, caplog: pytest.LogCaptureFixture, codec: str) -> None:
    # MOV's own uncompressed audio (ProRes and camera files) was re-encoded as lossy AAC, with a
    # note saying MOV files are "not commonly played" with it.
    source = make_timed_clip(tmp_path / "in.mov", frames=30, audio_codec=codec)
    out = tmp_path / "out.mov"
    with caplog.at_level(logging.INFO, logger="livecam"):
        assert transcode(source, out).audio_mode == "copy"
    assert not [r for r in caplog.records if "re-encoded" in r.getMessage()]
    assert probe(out)["audio_codec"] == codec
    assert np.array_equal(_samples(out), _samples(source))  # bit for bit


def _samples(path: Path) -> np.ndarray:
    with av.open(str(path)) as c:
        return np.concatenate([frame.to_ndarray().ravel() for frame in c.decode(audio=0)])


def _cut_without_reencoding(source: Path, path: Path, at: float) -> Path:
    """What `ffmpeg -ss AT -i SOURCE -c copy PATH` and editors' quick trims write: every packet
    from the keyframe before `at`, shifted so that `at` is 0; the MP4 muxer hides the frames
    before it with an edit list (make_clip's only keyframe is its first frame)."""
    with av.open(str(source)) as i, av.open(str(path), "w") as o:
        streams = {s.index: o.add_stream_from_template(s) for s in i.streams}
        for packet in i.demux():
            if packet.dts is None or packet.pts is None:
                continue
            shift = int(round(at / packet.time_base))
            packet.pts -= shift
            packet.dts -= shift
            packet.stream = streams[packet.stream.index]
            o.mux(packet)
    return path


def test_a_clip_cut_without_reencoding_is_not_called_truncated(tmp_path: Path) -> None:
    # Its header counts the 90 frames it holds, the edit list shows 43: it was refused as
    # "ended after 43 of the 90 frames its header announces: the file looks truncated".
    source = make_clip(tmp_path / "whole.mp4", frames=90, size=(160, 120), fps=30, stamp=True)
    cut = _cut_without_reencoding(source, tmp_path / "cut.mp4", 1.55)
    with VideoReader(cut) as reader:
        assert reader.info.expected_frames == 44  # 1.45 s at 30 fps
    info = probe(transcode(cut, tmp_path / "out.mp4").spec.path)
    assert info["frames"] == 43
    assert [read_index(image) for image in info["images"][:2]] == [47, 48]  # the frames the cut shows


def _surround_clip(path: Path, layout: str, seconds: float = 1.0) -> Path:
    """10 frames of video and FLAC audio in `layout`, each channel a tone of its own loudness."""
    rate = 48000
    with av.open(str(path), "w") as out:
        vs = out.add_stream("libx264", rate=10)
        vs.width, vs.height, vs.pix_fmt = 64, 48, "yuv420p"
        audio = out.add_stream("flac", rate=rate, layout=layout)
        channels = audio.codec_context.channels
        t = np.arange(int(rate * seconds)) / rate
        tone = np.sin(2 * np.pi * 440 * t).astype(np.float32)
        samples = np.stack([tone * (0.1 + 0.1 * c) for c in range(channels)])
        samples = (samples * 32767).astype(np.int16)
        for i in range(10):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 100, np.uint8), format="bgr24")
            frame.pts = i
            out.mux(vs.encode(frame))
        out.mux(vs.encode(None))
        for start in range(0, samples.shape[1], 4096):
            chunk = np.ascontiguousarray(samples[:, start:start + 4096].T.reshape(1, -1))
            frame = av.AudioFrame.from_ndarray(chunk, format="s16", layout=layout)
            frame.rate, frame.pts = rate, start
            out.mux(audio.encode(frame))
        out.mux(audio.encode(None))
    return path


@pytest.mark.parametrize("layout", ["5.1", "7.1"])
def test_surround_sound_re_encoded_stays_surround(tmp_path: Path, layout: str) -> None:
    # Re-encoded audio was always stereo (or mono): 5.1 lost its channels.
    source = _surround_clip(tmp_path / "in.mkv", layout)
    out = tmp_path / "out.mp4"
    assert transcode(source, out).audio_mode == "reencode"
    with av.open(str(out)) as c:
        assert c.streams.audio[0].codec_context.channels == 6
        sound = np.concatenate([f.to_ndarray() for f in c.decode(audio=0)], axis=1)  # planar float
    loudness = np.sqrt((sound[:, 4800:-4800] ** 2).mean(axis=1))  # RMS of each channel's tone
    own = [0.1 * (c + 1) / np.sqrt(2) for c in range(6)]
    # FL, FR, FC keep their own tone (LFE is low-passed: the tone is above its band)
    assert np.allclose(loudness[:3], own[:3], rtol=0.1)
    if layout == "5.1":  # and the back pair theirs
        assert np.allclose(loudness[4:], own[4:], rtol=0.1)
    else:  # 7.1's back and side pairs, mixed into 5.1's back pair
        assert (loudness[4:] > own[5]).all()


def test_audio_at_a_rate_aac_does_not_take_is_resampled(tmp_path: Path) -> None:
    # 192 kHz PCM (studio recorders) into MP4 failed the whole run: "encoding out.mp4 failed:
    # Invalid argument".
    source = make_timed_clip(tmp_path / "studio.mov", frames=30, audio_codec="pcm_s24le", audio_rate=192000)
    out = tmp_path / "out.mp4"
    assert transcode(source, out).audio_mode == "reencode"
    with av.open(str(out)) as c:
        assert c.streams.audio[0].codec_context.sample_rate == 48000
    assert probe(out)["audio_duration"] == pytest.approx(1.0, abs=0.1)


def _ts_part(path: Path, rate: int, layout: str, frames: int = 30) -> Path:
    """A TS of H.264 video and one AAC track of a tone at `rate` and `layout`."""
    from tests.videos import _write_tone, synthetic_frame

    with av.open(str(path), "w") as out:
        video = out.add_stream("libx264", rate=30)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        sound = out.add_stream("aac", rate=rate, layout=layout)
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(synthetic_frame(i, (64, 48)), format="bgr24")
            frame.pts, frame.time_base = i, Fraction(1, 30)
            out.mux(video.encode(frame))
        out.mux(video.encode())
        _write_tone(out, sound, frames / 30, rate)
    return path


@pytest.mark.parametrize("ext", [".webm", ".mp4", ".mkv"])
def test_audio_whose_rate_and_layout_change_midway_is_reencoded_whole(tmp_path: Path, ext: str) -> None:
    # Two TS recordings joined (a TV recording's stereo adverts before a 5.1 film): re-encoding the
    # sound for WebM failed at the change with a traceback, "Frame does not match AudioResampler
    # setup"; copied into MP4 or MKV (one track header: the first part's), the second part did not
    # decode ("channel element is not allocated"): silence.
    parts = [_ts_part(tmp_path / f"part{n}.ts", rate, layout).read_bytes()
             for n, (rate, layout) in enumerate([(48000, "mono"), (44100, "stereo")])]
    joined = tmp_path / "joined.ts"
    joined.write_bytes(b"".join(parts))
    out = tmp_path / f"out{ext}"
    assert transcode(joined, out).audio_mode == "reencode"
    assert probe(out)["frames"] == 60
    with av.open(str(out)) as c:
        sound = np.concatenate([f.to_ndarray()[0] for f in c.decode(audio=0)])  # planar: the first channel
    assert len(sound) == pytest.approx(2 * 48000, abs=0.1 * 48000)
    loud = [float(np.sqrt(np.mean(sound[int(a * 48000):int(b * 48000)] ** 2))) for a, b in ((0.2, 0.8), (1.2, 1.8))]
    assert min(loud) > 0.05, loud  # both parts' tone is there


def test_the_ts_audio_check_of_one_track_takes_only_that_tracks_packet_headers(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # The check that a TS's AAC keeps its set-up (it reads the whole file before the run) had the
    # demuxer assemble every video packet, only for PyAV to drop it, and copied each audio packet
    # whole to read its 7-byte header: 206 ms of CPU for a 264 MB one-track TS, 94 ms without.
    from livecam.media import video_writer

    source = _ts_part(tmp_path / "one.ts", 48000, "stereo")
    opened: list[av.container.InputContainer] = []
    seen: list[tuple[int, set[str]]] = []

    real_open, real_setup = video_writer.open_container, video_writer._adts_setup

    def opening(path: str) -> av.container.InputContainer:
        opened.append(real_open(path))
        return opened[-1]

    def setup(header: bytes) -> tuple[int, int] | None:
        seen.append((len(header), {s.discard.name for s in opened[-1].streams.video}))
        return real_setup(header)

    monkeypatch.setattr(video_writer, "open_container", opening)
    monkeypatch.setattr(video_writer, "_adts_setup", setup)
    with av.open(str(source)) as probe_:
        audio = [s.index for s in probe_.streams.audio]
    assert video_writer._MidwayChanges(source, audio)(audio[0]) is False
    assert len(seen) > 30  # every audio packet's header was looked at
    assert {length for length, _ in seen} == {7}, seen[:3]  # the header, not the packet
    assert all(discards == {"all"} for _, discards in seen), seen[:3]  # the video is dropped unread


def test_a_file_name_with_a_colon_is_a_file_not_a_protocol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # "2024-05-01T10:30.mp4" was "Protocol not found" (FFmpeg read "2024-05-01T10" as a URL scheme),
    # reading it and writing it; its audio too.
    monkeypatch.chdir(tmp_path)
    source = make_clip(tmp_path / "2024-05-01T10:30.mp4", frames=6, size=(64, 48))
    out = Path("clip:out.mp4")
    writer = transcode(Path(source.name), out)
    assert writer.audio_mode == "copy"
    assert probe(tmp_path / out)["frames"] == 6


def test_aac_is_still_copied_into_mp4(tmp_path: Path) -> None:
    source = make_clip(tmp_path / "in.mov", frames=15, size=(96, 64))
    assert transcode(source, tmp_path / "out.mp4").audio_mode == "copy"


def test_non_square_pixels_keep_their_aspect_ratio(tmp_path: Path) -> None:
    # 720x480 DV with SAR 8:9 came out with square pixels: stretched by 12.5%.
    source = make_timed_clip(tmp_path / "dv.mkv", frames=10, size=(96, 64), sample_aspect=Fraction(8, 9),
                             audio_codec=None)
    with VideoReader(source) as reader:
        assert reader.info.sample_aspect == Fraction(8, 9)
    for suffix in (".mp4", ".mkv"):
        out = tmp_path / f"out{suffix}"
        transcode(source, out)
        with av.open(str(out)) as c:
            assert c.streams.video[0].sample_aspect_ratio == Fraction(8, 9), suffix


def test_a_heavily_damaged_input_gives_one_warning_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # One line per corrupt packet used to flood the terminal.
    clip = make_clip(tmp_path / "c.mp4", frames=60, size=(96, 64), audio=False, stamp=True)
    data = bytearray(clip.read_bytes())
    for at in np.linspace(0.2, 0.9, 12):
        start = int(len(data) * at)
        data[start:start + 64] = bytes(range(64))
    damaged = tmp_path / "damaged.mp4"
    damaged.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="livecam"), VideoReader(damaged) as reader:
        frames = sum(1 for _ in reader.frames())
        bad = reader.bad_packets
    assert frames > 0 and bad > 1  # the fixture damages several packets
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and f"skipped {bad} corrupt video packets" in lines[0], lines


DISK_LIMIT = textwrap.dedent("""
    import resource, signal, sys
    import numpy as np
    from pathlib import Path
    from livecam.errors import LivecamError
    from livecam.media.sinks import FileRecorderSink
    import livecam.atomic, livecam.media.images, livecam.media.video_writer  # imported before the limit

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
    sink = FileRecorderSink(Path(sys.argv[1]), fps=30)
    rng = np.random.default_rng(0)
    try:
        for _ in range(200):
            sink.write(rng.integers(0, 255, (240, 320, 3), dtype=np.uint8))  # noise: large frames
        sink.close()
    except LivecamError as exc:
        print(exc.message)
        sys.exit(exc.exit_code)
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE and SIGXFSZ as on Linux")
def test_a_file_size_limit_is_one_line_naming_the_output(tmp_path: Path) -> None:
    # It named the hidden temporary file (".rec.livecam-1234.part.mp4") or said "internal error".
    script = tmp_path / "limit.py"
    script.write_text(DISK_LIMIT)
    out = tmp_path / "rec.mp4"
    # No bytecode written: the size limit would leave truncated .pyc files behind.
    env = {"PYTHONPATH": str(REPO_ROOT / "src"), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=120,
                            env=env)
    message = result.stdout.strip()
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert message.count("\n") == 0 and str(out) in message and "file size limit" in message
    assert "--video-quality" not in message  # `run` has no such option (it was the fix named)
    assert ".part" not in message and not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["limit.py"]  # no temporary file left


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (every write fails with ENOSPC)")
def test_a_full_disk_is_one_line_naming_the_output_not_the_temporary_file(tmp_path: Path) -> None:
    from livecam.errors import OutputError

    out = tmp_path / "out.mkv"
    writer = VideoWriter(OutputSpec(path=Path("/dev/full"), format="matroska", width=160, height=120,
                                    rate=Fraction(30), time_base=Fraction(1, 30), target=out, live=True))
    rng = np.random.default_rng(0)
    with pytest.raises(OutputError) as caught:
        for i in range(100):
            writer.write(rng.integers(0, 255, (120, 160, 3), dtype=np.uint8), i / 30)
        writer.close()
    writer.abort()
    message = caught.value.message
    assert message.startswith(f"writing {out} failed: the disk is full") and "/dev/full" not in message


FULL_709 = (2, 1, 1, 1)  # full range, BT.709 primaries, transfer and matrix
LIMITED_601 = (1, 6, 6, 6)


@pytest.mark.parametrize("name, pix_fmt, codec, colour", [
    ("mjpeg.avi", "yuvj420p", "mjpeg", None),  # a webcam's MJPEG: full range by its pixel format
    ("full.mp4", "yuv420p", "libx264", FULL_709),  # flagged full range (H.264 decodes it as yuvj420p)
    ("full.webm", "yuv420p", "libvpx-vp9", FULL_709),  # flagged full range, decoded as yuv420p
    ("limited.mkv", "yuv420p", "libx264", LIMITED_601),
])
def test_a_flat_grey_keeps_its_level_and_the_output_keeps_the_colour_tags(
        tmp_path: Path, name: str, pix_fmt: str, codec: str, colour: tuple[int, int, int, int] | None) -> None:
    # Full-range inputs came out 3-4 levels darker (and tinted) in flat areas, and outputs had no
    # colour range, primaries, transfer or matrix.
    from tests.videos import colour_tags, make_flat_clip

    luma = 100 if colour != LIMITED_601 else 102  # grey 100 either way
    source = make_flat_clip(tmp_path / name, luma=luma, pix_fmt=pix_fmt, codec=codec, colour=colour)
    with VideoReader(source) as reader:
        first = next(iter(reader.frames())).image
    assert np.abs(first.astype(int) - 100).max() <= 1  # decoded by the input's range
    out = tmp_path / "out.mp4"
    transcode(source, out)
    for image in probe(out)["images"]:  # by the output's tags
        assert np.abs(image.astype(int) - 100).max() <= 1
    tags = colour_tags(out)
    if colour is not None:
        assert tags == colour
    else:
        assert tags[0] == 2  # full range, as the input was; the rest what players assume for SD
        assert tags[1:] == (6, 6, 5)  # MJPEG's decoder says BT.470BG for its matrix


def test_an_untagged_input_gives_an_output_tagged_as_players_read_it(tmp_path: Path) -> None:
    from tests.videos import colour_tags, make_flat_clip

    sd = make_flat_clip(tmp_path / "sd.mp4", luma=102)
    hd = make_flat_clip(tmp_path / "hd.mp4", luma=102, size=(1280, 720), frames=2)
    for source, expected in ((sd, LIMITED_601), (hd, (1, 1, 1, 1))):
        out = tmp_path / f"out-{source.name}"
        transcode(source, out)
        assert colour_tags(out) == expected
        assert np.abs(probe(out)["images"][0].astype(int) - 100).max() <= 1


def test_an_animated_png_is_a_clip(tmp_path: Path) -> None:
    # `livecam video anim.png` said "is a still image, not a video; use `livecam image`", which
    # took its first frame only.
    pil = pytest.importorskip("PIL.Image")
    frames = [pil.fromarray(np.full((32, 48, 3), v, np.uint8)) for v in (0, 120, 240)]
    path = tmp_path / "anim.png"
    # An ICC profile before acTL, as a photo's has: FFmpeg's probe then takes the file for a still
    # (a small APNG it recognises). 64 KB that do not compress: acTL starts past the first 4 KB.
    profile = np.random.default_rng(0).integers(0, 256, 65536, dtype=np.uint8).tobytes()
    frames[0].save(path, "PNG", save_all=True, append_images=frames[1:], duration=100, icc_profile=profile)
    info = probe(transcode(path, tmp_path / "out.mp4").spec.path)
    assert [int(round(image.mean())) for image in info["images"]] == pytest.approx([0, 120, 240], abs=4)


def test_an_animated_gif_is_a_clip_and_an_animated_webp_says_what_to_do(tmp_path: Path) -> None:
    # `livecam video anim.webp` (3 frames) said "is a still image". Where FFmpeg cannot decode
    # animated WebP, the message says so and how to convert it; where it can, it is a clip, as a
    # GIF is.
    from livecam.errors import InputError
    from tests.videos import make_animation

    gif = make_animation(tmp_path / "anim.gif")
    out = tmp_path / "gif.mp4"
    transcode(gif, out)
    assert [read_index(image) for image in probe(out)["images"]] == [0, 1, 2]
    webp = make_animation(tmp_path / "anim.webp")
    try:
        with VideoReader(webp) as reader:
            images = [frame.image for frame in reader.frames()]
    except InputError as refused:  # an FFmpeg without the animated WebP decoder (PyAV 18 and older)
        assert "animated WebP" in refused.message and "anim.gif" in refused.message
        assert "still image" not in refused.message
    else:  # PyAV 19's FFmpeg decodes it: a clip like the GIF
        assert [read_index(image) for image in images] == [0, 1, 2]


def test_an_interlaced_input_is_deinterlaced_once_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Interlaced input was encoded as woven fields (combing on every moving edge) and flagged
    # progressive. It is deinterlaced (bwdif, one frame per frame), said in one line.
    from tests.videos import combing, make_interlaced_clip

    source = make_interlaced_clip(tmp_path / "tv.mkv", frames=8)
    woven = probe(source)["images"]
    out = tmp_path / "out.mp4"
    with caplog.at_level(logging.WARNING, logger="livecam"):
        transcode(source, out)
    said = [r.getMessage() for r in caplog.records if "interlaced" in r.getMessage()]
    assert len(said) == 1 and "deinterlaced" in said[0]
    info = probe(out)
    assert info["frames"] == 8 and info["times"] == pytest.approx([i / 25 for i in range(8)], abs=0.002)
    assert all(combing(image) < combing(before) / 3 for image, before in zip(info["images"], woven))
    with av.open(str(out)) as c:  # progressive now, and flagged so
        assert not next(c.decode(video=0)).interlaced_frame


def test_a_progressive_input_is_left_as_it_is(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = make_timed_clip(tmp_path / "p.mp4", frames=10, audio_codec=None)
    with caplog.at_level(logging.WARNING, logger="livecam"), VideoReader(source) as reader:
        assert [read_index(f.image) for f in reader.frames()] == list(range(10))
    assert not [r for r in caplog.records if "interlaced" in r.getMessage()]


@pytest.mark.parametrize("encoder, name", [("libx264", "a.mp4"), ("mpeg4", "a.mp4"), ("libvpx-vp9", "a.webm"),
                                           ("libvpx", "a.webm"), ("libx265", "a.mkv")])
def test_every_encoder_keeps_a_full_range_grey(tmp_path: Path, encoder: str, name: str) -> None:
    # VP8 cannot say "full range" in its bitstream: it is encoded limited (and tagged so).
    from livecam.media.colour import Colour
    from livecam.media.video_writer import encoder_available

    if not encoder_available(encoder):
        pytest.skip(f"{encoder} is not in this FFmpeg build")
    out = tmp_path / name
    writer = VideoWriter(OutputSpec(path=out, format=container_format(out), width=64, height=48, rate=Fraction(25),
                                    time_base=Fraction(1, 25), encoder=encoder, colour=Colour(2, 1, 1, 1)))
    for i in range(3):
        writer.write(np.full((48, 64, 3), 100, np.uint8), i / 25)
    writer.close()
    assert all(np.abs(image.astype(int) - 100).max() <= 1 for image in probe(out)["images"])


def _vp8(path: Path, image: np.ndarray, quality: int = 18, colour: tuple[int, int, int, int] | None = None) -> Path:
    """Three frames of `image` written by VideoWriter with VP8 (libvpx) at `quality`."""
    from livecam.media.colour import Colour
    from livecam.media.video_writer import encoder_available

    if not encoder_available("libvpx"):
        pytest.skip("libvpx is not in this FFmpeg build")
    h, w = image.shape[:2]
    writer = VideoWriter(OutputSpec(path=path, format="webm", width=w, height=h, rate=Fraction(25), time_base=Fraction(1, 25),
                                    encoder="libvpx", quality=quality, colour=Colour(*colour) if colour else None))
    for i in range(3):
        writer.write(image, i / 25)
    writer.close()
    return path


def test_a_vp8_output_of_an_hd_input_keeps_its_colours(tmp_path: Path) -> None:
    # VP8's bitstream says BT.601, and decoders go by it: a BT.709 (HD) input was encoded with
    # BT.709's matrix and came back 10-20 levels off in saturated colours (a grey was right).
    colours = [(40, 60, 200), (200, 80, 40), (60, 190, 70), (150, 150, 150)]  # BGR: red, blue, green, grey
    image = np.repeat(np.array(colours, np.uint8)[None], 32, axis=0).repeat(32, axis=1)  # 32x128, 4 patches
    out = _vp8(tmp_path / "hd.webm", image, quality=0, colour=(1, 1, 1, 1))  # the matrix, not the codec
    with VideoReader(out) as reader:
        frames = [frame.image for frame in reader.frames()]
    assert len(frames) == 3
    for got in frames:
        for k, bgr in enumerate(colours):
            patch = got[8:24, 32 * k + 8:32 * k + 24].reshape(-1, 3).astype(float).mean(axis=0)
            assert np.abs(patch - bgr).max() <= 2, (bgr, patch)


def test_vp8_takes_the_video_quality(tmp_path: Path) -> None:
    # VP8 has no constant-quality mode: given no bitrate, libvpx held it to 256 kb/s whatever
    # --video-quality said (a 720p flat grey came back 1-4 levels off, a moving pattern 7.7 at any
    # quality), and --video-quality 0 failed with "Invalid argument". A better quality now gives a
    # larger, truer file.
    rng = np.random.default_rng(0)
    image = np.repeat(np.repeat(rng.integers(40, 216, (24, 40, 3), dtype=np.uint8), 4, axis=0), 4, axis=1)
    sizes, errors = [], []
    for quality in (0, 18, 40):
        out = _vp8(tmp_path / f"q{quality}.webm", image, quality=quality)
        sizes.append(out.stat().st_size)
        with VideoReader(out) as reader:
            errors.append(np.mean([np.abs(frame.image.astype(int) - image).mean() for frame in reader.frames()]))
    assert sizes[0] > sizes[1] > sizes[2], sizes
    assert errors[0] < errors[1] < errors[2], errors


def test_the_own_420_conversion_round_trips_within_the_chroma_rounding() -> None:
    # The encode path for a PyAV without ACCURATE_RND (Python 3.10 gets PyAV 17): an image of
    # 2x2 blocks comes back through swscale's decoder within a few levels, for each range and matrix.
    import av

    from livecam.media.colour import FULL, LIMITED, Colour, ColourConverter, bgr_to_yuv420p

    rng = np.random.default_rng(0)
    blocks = rng.integers(40, 216, (32, 48, 3), dtype=np.uint8)  # inside every range's gamut
    image = np.repeat(np.repeat(blocks, 2, axis=0), 2, axis=1)
    for colour in (Colour(FULL, 1, 1, 1), Colour(LIMITED, 1, 1, 1), Colour(LIMITED, 6, 6, 6)):
        frame = av.VideoFrame.from_ndarray(bgr_to_yuv420p(image, colour), format="yuv420p")
        back = ColourConverter().to_bgr(frame, colour).astype(int)
        assert np.abs(back - image.astype(int)).max() <= 3, colour


def test_an_mp4s_chapter_track_is_not_called_a_data_stream_left_out(tmp_path: Path) -> None:
    # MP4/MOV keep chapters in a track of their own, which FFmpeg reads into chapters() (copied
    # to the output) and shows as a data stream: the 'not copied' note said '1 data stream'.
    path = clip_with_chapters(tmp_path / "chapters.mp4")
    with av.open(str(path)) as c:
        assert [s.type for s in c.streams] == ["video", "data"]  # what FFmpeg shows of the chapters
    with VideoReader(path) as reader:
        assert reader.info.other_streams == ()
        assert [dict(ch.metadata)["title"] for ch in reader.info.chapters] == ["Intro", "Main"]


@pytest.mark.parametrize("suffix", [".mp4", ".webm"])
def test_an_audio_stream_without_sound_gives_no_audio_and_says_so(
        tmp_path: Path, suffix: str, caplog: pytest.LogCaptureFixture) -> None:
    # A recorder stopped at once: its audio track holds no packet. The summary said 'audio
    # re-encoded' over an MP4 without audio, and a WebM got a track of encoder padding.
    source = tmp_path / "silent.mkv"
    with av.open(str(source), "w") as out:
        video = out.add_stream("libx264", rate=30)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        out.add_stream("pcm_s16le", rate=48000)
        for i in range(15):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 8 * i, np.uint8), format="bgr24")
            frame.pts = i
            out.mux(video.encode(frame))
        out.mux(video.encode())
    with av.open(str(source)) as c:
        assert len(c.streams.audio) == 1
    output = tmp_path / f"out{suffix}"
    with caplog.at_level(logging.WARNING, logger="livecam"):
        writer = transcode(source, output)
    assert writer.audio_mode is None
    with av.open(str(output)) as c:
        assert not c.streams.audio and c.streams.video[0].frames in (0, 15)
    assert "audio stream holds no sound" in caplog.text and "re-encoded" not in caplog.text


def test_a_video_with_transparency_says_the_output_is_opaque_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # A PNG-in-MOV or ProRes 4444 cut-out lost its transparency silently (the encoders hold none).
    source = tmp_path / "cutout.mov"
    with av.open(str(source), "w") as out:
        stream = out.add_stream("png", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "rgba"
        for i in range(6):
            rgba = np.zeros((48, 64, 4), np.uint8)
            rgba[..., 1], rgba[:, :32, 3] = 40 * i, 255
            frame = av.VideoFrame.from_ndarray(rgba, format="rgba")
            frame.pts = i
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    with caplog.at_level(logging.WARNING, logger="livecam"), VideoReader(source) as reader:
        frames = list(reader.frames())
    assert len(frames) == 6 and frames[0].image.shape == (48, 64, 3)
    notes = [r.getMessage() for r in caplog.records if "transparency" in r.getMessage()]
    assert notes == ["note: cutout.mov has transparency (rgba), which the output cannot hold; its frames are "
                     "written opaque, showing the colours under the transparent parts"]


def test_a_webm_with_vp9_alpha_says_the_output_is_opaque(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # WebM keeps VP9's alpha beside the picture, which FFmpeg's own decoder does not read: the
    # frames came out opaque yuv420p and the cut-out lost its transparency unsaid
    from tests.videos import make_vp9_alpha

    source = make_vp9_alpha(tmp_path / "cutout.webm")
    with caplog.at_level(logging.WARNING, logger="livecam"), VideoReader(source) as reader:
        assert len(list(reader.frames())) == 3
    notes = [r.getMessage() for r in caplog.records if "transparency" in r.getMessage()]
    assert notes == ["note: cutout.webm has transparency (VP9 alpha), which the output cannot hold; its frames are "
                     "written opaque, showing the colours under the transparent parts"], notes


def _song_with_cover(path: Path) -> Path:
    """A music file: AAC with an attached picture (cover art) and no video."""
    with av.open(str(path), "w", format="mp4") as out:
        sound = out.add_stream("aac", rate=44100, layout="mono")
        cover = out.add_stream("mjpeg", rate=1)
        cover.width, cover.height, cover.pix_fmt = 64, 64, "yuvj420p"
        cover.disposition = av.stream.Disposition.attached_pic
        picture = av.VideoFrame.from_ndarray(np.full((64, 64, 3), 200, np.uint8), format="bgr24")
        picture.pts, picture.time_base = 0, Fraction(1, 1)
        for packet in [*cover.encode(picture), *cover.encode(None)]:
            out.mux(packet)
        for i in range(40):
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
            frame.sample_rate, frame.pts = 44100, i * 1024
            for packet in sound.encode(frame):
                out.mux(packet)
        for packet in sound.encode(None):
            out.mux(packet)
    return path


def test_a_song_with_cover_art_is_no_video(tmp_path: Path) -> None:
    # its cover art was read as a one-frame video: the output was the picture alone, with a
    # "cut short" warning, the sound cut to one frame
    from livecam.errors import InputError

    song = _song_with_cover(tmp_path / "song.m4a")
    with pytest.raises(InputError) as info:
        VideoReader(song)
    assert "song.m4a has no video stream, only a still picture attached to it (cover art)" in info.value.message


def test_a_video_cut_in_half_is_named_once_with_ffmpegs_reason(tmp_path: Path) -> None:
    # the line read "cannot read cut.mp4 as a video ([Errno 1094995529] Invalid data found when
    # processing input: 'cut.mp4'): ...", the errno and the name a second time inside it
    from livecam.errors import InputError

    whole = make_clip(tmp_path / "whole.mp4", frames=10, audio=False).read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(whole[:len(whole) // 2])  # the index (moov) is written last: gone
    with pytest.raises(InputError) as info:
        VideoReader(cut)
    message = info.value.message
    assert "Errno" not in message and message.count("cut.mp4") == 1, message
    assert "its index (the moov box a recorder writes last) is missing" in message
    noise = tmp_path / "noise.mp4"  # no MP4 at all: FFmpeg's reason, once
    noise.write_bytes(np.random.default_rng(1).integers(0, 256, 4096, np.uint8).tobytes())
    with pytest.raises(InputError) as info:
        VideoReader(noise)
    message = info.value.message
    assert "Errno" not in message and message.count("noise.mp4") == 1, message
    assert "Invalid data found when processing input" in message and "truncated or corrupt" in message


def test_a_10_bit_video_says_once_that_the_output_has_8_bits(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # a phone's 10-bit HDR clip (BT.2020, PQ here) came out 8-bit without a word
    source = tmp_path / "hdr.mkv"
    with av.open(str(source), "w") as out:
        stream = out.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p10le"
        for i in range(4):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 30 * i, np.uint8), format="bgr24")
            frame = frame.reformat(format="yuv420p10le")
            frame.pts, frame.time_base = i, Fraction(1, 25)
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    eight = make_timed_clip(tmp_path / "sdr.mp4", frames=4, audio_codec=None)
    with caplog.at_level(logging.WARNING, logger="livecam"):
        for path in (source, eight):
            with VideoReader(path) as reader:
                assert len(list(reader.frames())) == 4
    notes = [r.getMessage() for r in caplog.records if "bits a sample" in r.getMessage()]
    assert notes == ["note: hdr.mkv has 10 bits a sample; livecam works in 8, so the output has 8 bits (smooth "
                     "gradients may band) and keeps the input's colour tags"]


def test_a_4_4_4_video_says_once_that_the_output_halves_its_colour(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    # a 4:4:4 screen recording came out 4:2:0 without a word, where transparency and 10 bits are said
    sources = []
    for pix_fmt in ("yuv444p", "yuv420p"):
        sources.append(tmp_path / f"{pix_fmt}.mkv")
        with av.open(str(sources[-1]), "w") as out:
            stream = out.add_stream("ffv1", rate=25)
            stream.width, stream.height, stream.pix_fmt = 64, 48, pix_fmt
            for i in range(3):
                frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 30 * i, np.uint8), format="bgr24")
                frame = frame.reformat(format=pix_fmt)
                frame.pts, frame.time_base = i, Fraction(1, 25)
                out.mux(stream.encode(frame))
            out.mux(stream.encode())
    with caplog.at_level(logging.WARNING, logger="livecam"):
        for path in sources:
            with VideoReader(path) as reader:
                assert len(list(reader.frames())) == 3
    notes = [r.getMessage() for r in caplog.records if "colour" in r.getMessage()]
    assert notes == ["note: yuv444p.mkv has full-resolution colour (yuv444p); the output stores colour at half "
                     "resolution (4:2:0, what players expect), so thin coloured edges may soften"]


def _opens(encoder: str, width: int, height: int) -> bool:
    """Whether `encoder` encodes one frame of width x height (into memory)."""
    import io

    try:
        with av.open(io.BytesIO(), "w", format="matroska") as out:
            stream = out.add_stream(encoder, rate=25)
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            stream.codec_context.options = {"x265-params": "log-level=none"} if encoder == "libx265" else {}
            frame = av.VideoFrame.from_ndarray(np.full((height, width, 3), 90, np.uint8), format="bgr24")
            frame.pts, frame.time_base = 0, Fraction(1, 25)
            for packet in [*stream.encode(frame), *stream.encode(None)]:
                out.mux(packet)
        return True
    except (av.error.FFmpegError, ValueError):
        return False


@pytest.mark.parametrize("encoder, fits, too_small", [("libx265", (16, 16), (14, 16)), ("libsvtav1", (26, 64), (24, 64))])
def test_an_encoder_too_large_or_small_for_the_frames_is_refused_before_any_model_loads(
        tmp_path: Path, encoder: str, fits: tuple[int, int], too_small: tuple[int, int]) -> None:
    # libx265 under 16 px and SVT-AV1 under 26 px (PyAV 15/16: SIGFPE; 17 on: 4) or over 16384x8704 failed after the models loaded
    # with "encoding out.mp4 failed: Invalid argument" (SVT-AV1 adding lines of its own)
    from livecam.errors import InputError
    from livecam.media.video_writer import check_encoder, encoder_available, encoder_fits

    if not encoder_available(encoder):
        pytest.skip(f"{encoder} is not in this FFmpeg build")
    assert encoder_fits(encoder, *fits) and _opens(encoder, *fits)  # the table matches the encoder
    assert not encoder_fits(encoder, *too_small)
    if encoder == "libx265":  # SVT-AV1 in PyAV 19's FFmpeg opens 2 px wide (18's refused it): the table keeps the stricter limit
        assert not _opens(encoder, *too_small)
    with pytest.raises(InputError) as info:
        check_encoder(encoder, tmp_path / "out.mkv", too_small)
    assert f"{encoder} encodes frames of at least" in info.value.message and "use --video-encoder libx264" in info.value.message
    if encoder == "libsvtav1":
        with pytest.raises(InputError, match=r"at most 16384x8704 pixels, and this video is 64x9000; use --video-encoder libx264"):
            check_encoder(encoder, tmp_path / "out.mkv", (64, 9000))


def test_an_opaque_gif_is_not_called_transparent(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # FFmpeg's GIF decoder gives bgra for every GIF, so each one got "has transparency (bgra),
    # which the output cannot hold"; the pixels decide now
    from tests.videos import make_animation

    Image = pytest.importorskip("PIL.Image", reason="Pillow writes the GIF with a transparent colour")
    opaque = make_animation(tmp_path / "opaque.gif", frames=3)
    frames = []
    for i in range(3):
        rgba = np.zeros((48, 96, 4), np.uint8)
        rgba[..., :3], rgba[..., 3], rgba[:10, :10, 3] = 40 * i + 20, 255, 0  # a clear corner
        frames.append(Image.fromarray(rgba, "RGBA"))
    clear = tmp_path / "clear.gif"
    frames[0].save(clear, save_all=True, append_images=frames[1:], duration=100, loop=0, disposal=2)
    with caplog.at_level(logging.WARNING, logger="livecam"):
        for path in (opaque, clear):
            with VideoReader(path) as reader:
                assert len(list(reader.frames())) == 3
    notes = [r.getMessage() for r in caplog.records if "transparency" in r.getMessage()]
    assert notes == ["note: clear.gif has transparency (bgra), which the output cannot hold; its frames are "
                     "written opaque, showing the colours under the transparent parts"], notes


def test_an_mkv_whose_sound_runs_on_past_its_video_is_not_called_cut_short(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # The video's length was the container's, which spans the sound too: 1 s of video with sound
    # from 0.5 s to 1.5 s warned "ended at 1.00 s of the 1.52 s its header announces (damaged or
    # cut short): 30 frames could be read; the output stops there".
    from tests.videos import make_offset_mkv

    clip = make_offset_mkv(tmp_path / "late_sound.mkv", frames=30, size=(64, 48), video_start=0.0, tone_start=0.5,
                           tone_seconds=1.0, sample_rate=44100)
    with caplog.at_level(logging.WARNING, logger="livecam"), VideoReader(clip) as reader:
        assert reader.info.duration == pytest.approx(1.0, abs=0.05)
        assert sum(1 for _ in reader.frames()) == 30 and not reader.ended_early
    assert not [r.getMessage() for r in caplog.records if "cut short" in r.getMessage()]


def test_an_mkv_starting_late_is_not_called_cut_short(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Matroska's duration counts from timestamp 0: one starting at 10 s said 11 s for its 1 s, and
    # reading it warned 'ended at 1.00 s of the 11.01 s its header announces (damaged or cut short)'.
    from tests.videos import make_timed_clip

    clip = make_timed_clip(tmp_path / "late.mkv", start=10.0, frames=30, size=(64, 48))
    with caplog.at_level(logging.WARNING, logger="livecam"), VideoReader(clip) as reader:
        assert reader.info.duration == pytest.approx(1.0, abs=0.05)
        assert sum(1 for _ in reader.frames()) == 30
    assert not [r.getMessage() for r in caplog.records if "cut short" in r.getMessage()]


def _avi_with_b_frames(path: Path, frames: int = 10) -> Path:
    """A 25 fps H.264 AVI with two B-frames between references, frame i a grey of level 20 i, and
    0.4 s of PCM audio from 0."""
    with av.open(str(path), "w") as out:
        vs = out.add_stream("libx264", rate=25)
        vs.width, vs.height, vs.pix_fmt = 64, 48, "yuv420p"
        vs.codec_context.options = {"preset": "ultrafast", "x264-params": "bframes=2:b-adapt=0"}
        audio = out.add_stream("pcm_s16le", rate=8000)
        audio.layout = "mono"
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 20 * i, np.uint8), format="bgr24")
            frame.pts, frame.time_base = i, Fraction(1, 25)
            for packet in vs.encode(frame):
                out.mux(packet)
        for packet in vs.encode():
            out.mux(packet)
        sound = av.AudioFrame.from_ndarray(np.zeros((1, 3200), np.int16), format="s16", layout="mono")
        sound.sample_rate, sound.pts = 8000, 0
        for packet in [*audio.encode(sound), *audio.encode()]:
            out.mux(packet)
    return path


def test_an_avi_with_b_frames_keeps_its_frame_times_and_audio_sync(tmp_path: Path,
                                                                   isolated_env: dict[str, str]) -> None:
    # AVI's times are decode times, handed out of order with reordered frames: the output began
    # at 0.04 s with 0.08 s missing, the video a frame late against the audio.
    from livecam.samples import sample_path
    from tests.conftest import run_cli

    source = _avi_with_b_frames(tmp_path / "in.avi")
    with av.open(str(source)) as c:
        assert c.streams.video[0].codec_context.has_b_frames
    out = tmp_path / "out.mkv"  # the PCM copied: the audio keeps its exact start
    made = run_cli(["video", str(source), str(out), "--source", str(sample_path("astronaut")), "--swap-model", "mesh",
                    "--no-label", "--no-watermark", "--no-c2pa"], env=isolated_env)
    assert made.returncode == 0, made.stderr
    info = probe(out)
    assert info["times"] == pytest.approx([i / 25 for i in range(10)], abs=1e-3)
    assert [round(float(image.mean()) / 20) for image in info["images"]] == list(range(10))  # in order
    assert info["audio_start"] == pytest.approx(0.0, abs=1e-3)
    assert info["audio_duration"] == pytest.approx(0.4, abs=0.03)


def test_the_frames_an_avi_with_b_frames_holds_back_are_in_its_info(tmp_path: Path) -> None:
    # the 8 frames DecodeTimes holds to time them count in --max-memory's plan (VideoInfo.held_back)
    from livecam.media.video_reader import DecodeTimes
    from tests.videos import make_timed_clip

    with VideoReader(_avi_with_b_frames(tmp_path / "in.avi")) as reader:
        assert reader.info.held_back == DecodeTimes.LOOKAHEAD
    with VideoReader(make_timed_clip(tmp_path / "plain.mkv", start=0.0, frames=5, size=(64, 48))) as reader:
        assert reader.info.held_back == 0


def _mjpeg_with_gaps(path: Path, shown: list[int | None], fmt: str) -> Path:
    """An MJPEG clip at 10 fps of a grey level per frame (frame i: 20 * i); None in `shown` muxes
    an empty packet at that frame's time (a dropped frame as Theora writes it), and a missing
    number is a gap (the AVI muxer fills it with an empty chunk, as capture software does)."""
    with av.open(str(path), "w", format=fmt) as out:
        stream = out.add_stream("mjpeg", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuvj420p"
        for i, level in enumerate(shown):
            if level is None:
                empty = av.Packet(b"")
                empty.pts = empty.dts = i
                empty.time_base, empty.stream = stream.codec_context.time_base, stream
                out.mux(empty)
                continue
            image = np.full((48, 64, 3), 20 * level, np.uint8)
            frame = av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format="yuvj420p")
            frame.pts = level
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    return path


def test_an_empty_packet_is_a_dropped_frame_not_damage(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Theora (an .ogv) stores a dropped frame as an empty packet: FFmpeg refuses it, and a fresh
    # file was said to hold "1 corrupt video packet (damaged data)".
    source = _mjpeg_with_gaps(tmp_path / "dropped.nut", [0, 1, 2, None, 4, 5], "nut")
    with av.open(str(source)) as c:
        assert [p.size for p in c.demux(video=0)].count(0) == 2  # the empty one and the flush packet
    with caplog.at_level(logging.WARNING, logger="livecam"), VideoReader(source) as reader:
        frames = list(reader.frames())
    assert [round(float(f.image.mean()) / 20) for f in frames] == [0, 1, 2, 4, 5]
    assert [f.time for f in frames] == pytest.approx([0, 0.1, 0.2, 0.4, 0.5])
    assert reader.bad_packets == 0
    assert [r.getMessage() for r in caplog.records] == []


def test_an_avi_of_a_variable_rate_source_is_not_called_cut_short(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    # AVI is constant-rate: the muxer fills a VFR source's gaps with empty chunks, which its
    # header counts; a whole file was said to have "ended at 1.00 s of the 1.00 s its header
    # announces (damaged or cut short): 7 of the 10 frames could be read".
    source = _mjpeg_with_gaps(tmp_path / "screen.avi", [0, 1, 2, 6, 7, 8, 9], "avi")
    with av.open(str(source)) as c:
        assert c.streams.video[0].frames == 10
    with caplog.at_level(logging.WARNING, logger="livecam"), VideoReader(source) as reader:
        frames = list(reader.frames())
    assert [r.getMessage() for r in caplog.records] == []
    assert not reader.ended_early
    assert [round(float(f.image.mean()) / 20) for f in frames] == [0, 1, 2, 6, 7, 8, 9]
    assert [f.time for f in frames] == pytest.approx([0, 0.1, 0.2, 0.6, 0.7, 0.8, 0.9])
    assert reader.info.frames == 7  # the progress bar's total
