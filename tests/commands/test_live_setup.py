"""`livecam run`'s command layer (commands/live.py) in-process: what it hands the pipeline, the
checks it makes before any model loads, and SIGTERM while the models load."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from livecam.commands import live as live_command
from livecam.errors import InputError, OutputExistsError
from livecam.settings import LiveJob, ProcessingSettings, RuntimeSettings, SwapSettings
from tests.commands.test_image import only_error_line
from tests.conftest import run_cli
from tests.videos import make_clip


@pytest.fixture
def cache_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path / "cache"))


def job(tmp_path: Path, source: Path, camera: Path, **kw: Any) -> LiveJob:
    runtime = RuntimeSettings(providers=("cpu",), models_dir=tmp_path / "models", offline=True, quiet=True)
    processing = ProcessingSettings(sources=(source,), runtime=runtime, swap=SwapSettings(model="mesh"))
    return LiveJob(processing=processing, camera=str(camera), realtime=False, **kw)


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Stands in for the pipeline: keeps the options and sink run_live built, runs nothing."""
    seen: dict[str, Any] = {}

    def fake_pipeline(engine: Any, source: Any, sink: Any, options: Any, **kw: Any) -> None:
        seen.update(engine=engine, sink=sink, options=options)
        source.close()

    monkeypatch.setattr(live_command, "run_live_pipeline", fake_pipeline)
    return seen


def test_recordings_are_labelled_by_default_and_blazeface_gets_no_det_size_step(
        tmp_path: Path, faces_dir: Path, cache_env: None, captured: dict[str, Any]) -> None:
    clip = make_clip(tmp_path / "c.mp4", frames=2, audio=False)
    source = faces_dir / "obama.jpg"
    live_command.run_live(job(tmp_path, source, clip, output=str(tmp_path / "rec.mp4")))
    options = captured["options"]
    assert options.label is True  # a file output says it is synthetic, visibly, unless --no-label
    # The embedded BlazeFace detector has a fixed input: "detect at 320" would change nothing.
    assert captured["engine"].det_size is None  # the pipeline reads it from the engine
    live_command.run_live(job(tmp_path, source, clip, output=str(tmp_path / "rec2.mp4"), label=False))
    assert captured["options"].label is False  # --no-label
    live_command.run_live(job(tmp_path, source, clip, output="none"))
    assert captured["options"].label is False  # window, virtual camera, none: only with --label
    live_command.run_live(job(tmp_path, source, clip, output="none", label=True))
    assert captured["options"].label is True


def test_existing_stats_json_is_kept_without_force_and_checked_before_models(
        tmp_path: Path, captured: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    clip = make_clip(tmp_path / "c.mp4", frames=2, audio=False)
    stats = tmp_path / "stats.jsonl"
    stats.write_text("yesterday's measurements\n")

    def no_models(*a: Any, **kw: Any) -> None:
        raise AssertionError("models were loaded before the option check")

    monkeypatch.setattr("livecam.pipeline.engine.Engine.create", no_models)
    with pytest.raises(OutputExistsError, match="--stats-json .*--force"):
        live_command.run_live(job(tmp_path, tmp_path / "x.jpg", clip, output="none", stats_json=stats))
    assert stats.read_text() == "yesterday's measurements\n"
    with pytest.raises(InputError, match="folder .* does not exist"):
        live_command.run_live(job(tmp_path, tmp_path / "x.jpg", clip, output="none",
                                  stats_json=tmp_path / "nope" / "s.jsonl"))
    # a link to a file in a missing folder failed only after the models loaded
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "gone" / "s.jsonl")
    with pytest.raises(InputError, match=f"--stats-json {link} is a link into the folder {tmp_path / 'gone'}, which does not exist"):
        live_command.run_live(job(tmp_path, tmp_path / "x.jpg", clip, output="none", stats_json=link))
    with pytest.raises(AssertionError, match="models were loaded"):  # --force: past the check
        live_command.run_live(job(tmp_path, tmp_path / "x.jpg", clip, output="none", stats_json=stats, force=True))
    # Even with --force, the clip being played is never the file written over.
    with pytest.raises(InputError, match="--camera file"):
        live_command.run_live(job(tmp_path, tmp_path / "x.jpg", clip, output=str(clip), force=True))
    with pytest.raises(InputError, match="--camera or --output file"):
        live_command.run_live(job(tmp_path, tmp_path / "x.jpg", clip, output="none", stats_json=clip, force=True))
    assert clip.stat().st_size > 1000


def test_a_damaged_camera_file_is_reported_before_any_model_loads(tmp_path: Path, captured: dict[str, Any],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    clip = make_clip(tmp_path / "c.mp4", frames=2, audio=False)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(clip.read_bytes()[: clip.stat().st_size // 3])  # the index (moov) is lost

    def no_models(*a: Any, **kw: Any) -> None:
        raise AssertionError("models were loaded before the camera file was checked")

    monkeypatch.setattr("livecam.pipeline.engine.Engine.create", no_models)
    with pytest.raises(InputError, match="cannot read .*cut.mp4: its index .* is missing"):
        live_command.run_live(job(tmp_path, tmp_path / "x.jpg", cut, output="none"))


@pytest.mark.parametrize("url", ["http://", "HTTP://", "rtsp:///live"])
def test_a_camera_url_without_a_host_is_refused_before_any_model_loads(tmp_path: Path, url: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`--camera http://` loaded every model and only then failed in FFmpeg."""
    def no_models(*a: Any, **kw: Any) -> None:
        raise AssertionError("models were loaded before the camera URL was checked")

    monkeypatch.setattr("livecam.pipeline.engine.Engine.create", no_models)
    with pytest.raises(InputError) as refused:
        live_command.run_live(job(tmp_path, tmp_path / "x.jpg", url, output="none"))  # type: ignore[arg-type]
    scheme = url.split(":")[0].lower()
    assert refused.value.message == (f"--camera {url!r} names no host; give the stream's whole address, such as "
                                     f"{scheme}://192.168.1.20:8554/live")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_while_the_models_load_stops_like_ctrl_c(tmp_path: Path, captured: dict[str, Any],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Before the pipeline installs its handlers, SIGTERM used to kill the process (exit 143).
    clip = make_clip(tmp_path / "c.mp4", frames=2, audio=False)

    def slow_models(*a: Any, **kw: Any) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not interrupt the model loading")

    def not_handled(signum: int, frame: Any) -> None:  # stands in for the default (kill the process)
        raise RuntimeError("SIGTERM reached the default handler")

    monkeypatch.setattr("livecam.pipeline.engine.Engine.create", slow_models)
    before = signal.signal(signal.SIGTERM, not_handled)
    try:
        with pytest.raises(KeyboardInterrupt):  # cli.py: "livecam: interrupted", exit 130
            live_command.run_live(job(tmp_path, tmp_path / "x.jpg", clip, output="none"))
        assert signal.getsignal(signal.SIGTERM) is not_handled  # restored afterwards
    finally:
        signal.signal(signal.SIGTERM, before)


def test_camera_options_a_file_has_no_use_for_are_named_not_silently_ignored(
        tmp_path: Path, captured: dict[str, Any], caplog: pytest.LogCaptureFixture, cache_env: None,
        faces_dir: Path) -> None:
    # --resolution 320x240 --fps 5 with --camera clip.mp4 once recorded 640x480 at 30 FPS without a word
    clip = make_clip(tmp_path / "c.mp4", frames=2, audio=False)
    source = faces_dir / "obama.jpg"
    with caplog.at_level("WARNING", logger="livecam"):
        live_command.run_live(job(tmp_path, source, clip, output="none", resolution=(320, 240), fps=5.0))
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("--resolution and --fps are for a camera's capture; c.mp4 plays at its own size" in w for w in warnings)
    caplog.clear()
    with caplog.at_level("WARNING", logger="livecam"):
        live_command.run_live(job(tmp_path, source, clip, output="none"))
    assert not any("camera's capture" in r.getMessage() for r in caplog.records)
    from livecam.media.camera import CameraSource, VideoFileSource
    from livecam.media.sinks import NullSink, make_sink

    camera = CameraSource(0)
    none = NullSink()
    assert live_command.ignored_options(job(tmp_path, source, clip), camera, none) == [  # realtime=False given
        "--realtime/--no-realtime is for a video file or URL; a camera always runs in real time"]
    one = live_command.ignored_options(job(tmp_path, source, clip, fps=5.0), VideoFileSource(str(clip)), none)
    assert one == ["--fps is for a camera's capture; c.mp4 plays at its own size and frame rate"]
    assert live_command.ignored_options(LiveJob(processing=ProcessingSettings(sources=())), camera, none) == []
    # --output none --watermark ran the watermark encoder for frames nobody sees, without a word
    marks = live_command.ignored_options(job(tmp_path, source, clip, output="none", label=True, watermark=True),
                                         VideoFileSource(str(clip)), none)
    assert marks == ["--label/--no-label and --watermark/--no-watermark are for frames shown or recorded; "
                     "--output none shows and records none"]
    assert live_command.ignored_options(job(tmp_path, source, clip, output="rec.mp4", label=True, watermark=True),
                                        VideoFileSource(str(clip)), make_sink(str(tmp_path / "rec.mp4"))) == []
    # --output none --stats drew the overlay on frames nobody sees, without a word
    stats = live_command.ignored_options(job(tmp_path, source, clip, output="none", stats=True),
                                         VideoFileSource(str(clip)), none)
    assert stats == ["--stats is for frames shown or recorded; --output none shows and records none "
                     "(--stats-json - prints the metrics)"]
    assert live_command.ignored_options(job(tmp_path, source, clip, output="rec.mp4", stats=True),
                                        VideoFileSource(str(clip)), make_sink(str(tmp_path / "rec.mp4"))) == []
    # --no-degrade --max-latency-ms 5 ran without the budget, without a word
    budget = live_command.ignored_options(job(tmp_path, source, clip, degrade=False, max_latency_ms=5.0),
                                          VideoFileSource(str(clip)), none)
    assert budget == ["--max-latency-ms is the budget the governor defends; --no-degrade turns the governor off"]
    assert live_command.ignored_options(job(tmp_path, source, clip, max_latency_ms=5.0),
                                        VideoFileSource(str(clip)), none) == []


def test_signing_and_force_without_a_recorded_file_are_named_not_silently_ignored(tmp_path: Path) -> None:
    # `run -o none --c2pa-cert c.pem --force` signed nothing and overwrote nothing, without a word
    from livecam.media.camera import VideoFileSource
    from livecam.media.sinks import NullSink, make_sink
    from livecam.settings import C2paSettings

    clip, none = VideoFileSource(str(tmp_path / "c.mp4")), NullSink()
    cert = C2paSettings(cert=tmp_path / "c.pem", key=tmp_path / "k.pem")
    said = live_command.ignored_options(job(tmp_path, tmp_path / "s.jpg", tmp_path / "c.mp4", output="none",
                                            c2pa=cert, force=True), clip, none)
    assert said == ["--c2pa-cert and --c2pa-key are for a recording's content credentials; --output none records "
                    "no file",
                    "--force overwrites a recording or --stats-json file; --output none records no file and there "
                    "is no --stats-json"]
    off = live_command.ignored_options(job(tmp_path, tmp_path / "s.jpg", tmp_path / "c.mp4", output="none",
                                           c2pa=C2paSettings(enabled=False)), clip, none)
    assert off == ["--c2pa/--no-c2pa is for a recording's content credentials; --output none records no file"]
    # where they do something: a recording, or --force beside --stats-json
    recording = make_sink(str(tmp_path / "rec.mp4"))
    assert live_command.ignored_options(job(tmp_path, tmp_path / "s.jpg", tmp_path / "c.mp4", output="rec.mp4",
                                            c2pa=cert, force=True), clip, recording) == []
    assert live_command.ignored_options(job(tmp_path, tmp_path / "s.jpg", tmp_path / "c.mp4", output="none",
                                            force=True, stats_json=tmp_path / "s.jsonl"), clip, none) == []


def test_recording_a_clip_with_sound_says_the_sound_is_not_recorded(
        tmp_path: Path, captured: dict[str, Any], caplog: pytest.LogCaptureFixture, cache_env: None,
        faces_dir: Path) -> None:
    # `run --camera talk.mp4 --output rec.mp4` recorded the pictures only, without a word (`livecam
    # video` keeps every audio track)
    source = faces_dir / "obama.jpg"
    sound = make_clip(tmp_path / "sound.mp4", frames=2, audio=True)
    silent = make_clip(tmp_path / "silent.mp4", frames=2, audio=False)
    said = "sound.mp4's sound is not recorded (`livecam run` records the pictures); `livecam video` keeps it"
    for camera, output, warned in ((sound, str(tmp_path / "a.mp4"), True), (silent, str(tmp_path / "b.mp4"), False),
                                   (sound, "none", False)):
        caplog.clear()
        with caplog.at_level("WARNING", logger="livecam"):
            live_command.run_live(job(tmp_path, source, camera, output=output))
        assert any(said in r.getMessage() for r in caplog.records) is warned, (camera, output, caplog.text)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_stats_json_to_a_fifo_or_dev_stdout_needs_no_force(tmp_path: Path, faces_dir: Path) -> None:
    # `--stats-json /dev/stdout | jq` or a FIFO once failed "the file exists; add --force" (and, for
    # users who cannot create files in /dev, failed even with --force)
    from livecam.media.sinks import make_sink

    fifo = tmp_path / "stats.fifo"
    os.mkfifo(fifo)
    clip = make_clip(tmp_path / "c.mp4", frames=2, audio=False)
    live_command.check_files(job(tmp_path, faces_dir / "obama.jpg", clip, stats_json=fifo), make_sink("none"))
    existing = tmp_path / "s.jsonl"
    existing.write_text("keep")
    with pytest.raises(OutputExistsError):  # a regular file is still kept without --force
        live_command.check_files(job(tmp_path, faces_dir / "obama.jpg", clip, stats_json=existing), make_sink("none"))


def test_stats_json_spelled_differently_from_the_recording_is_still_the_recording(tmp_path: Path,
                                                                                 faces_dir: Path) -> None:
    # `--output r.mp4 --stats-json sub/../r.mp4` once wrote the stats into r.mp4 and lost the recording
    from livecam.media.sinks import make_sink

    (tmp_path / "sub").mkdir()
    clip = make_clip(tmp_path / "c.mp4", frames=2, audio=False)
    recording = tmp_path / "r.mp4"
    for stats in (tmp_path / "sub" / ".." / "r.mp4", tmp_path / "." / "r.mp4"):
        with pytest.raises(InputError, match="--camera or --output file"):
            live_command.check_files(job(tmp_path, faces_dir / "obama.jpg", clip, stats_json=stats,
                                         output=str(recording)), make_sink(str(recording)))
    photo = tmp_path / "me.jpg"
    photo.write_bytes((faces_dir / "obama.jpg").read_bytes())
    with pytest.raises(InputError, match="is a --source photo"):  # --force once overwrote it
        live_command.check_files(job(tmp_path, photo, clip, stats_json=photo, force=True, output="none"),
                                 make_sink("none"))
    assert photo.read_bytes() == (faces_dir / "obama.jpg").read_bytes()


def test_stats_json_never_replaces_a_photo_of_a_source_folder(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # `--source faces/ --stats-json faces/me.jpg --force` wrote the stats over the photo: only a
    # --source file was compared, not the photos of a --source folder
    folder = tmp_path / "faces"
    folder.mkdir()
    photo = folder / "me.jpg"
    shutil.copy(faces_dir / "obama.jpg", photo)
    clip = make_clip(tmp_path / "c.mp4", frames=2, audio=False)
    result = run_cli(["run", "--source", str(folder), "--camera", str(clip), "--output", "none",
                      "--stats-json", str(photo), "--force"], env=isolated_env)
    line = only_error_line(result.stderr)
    assert result.returncode == 2 and f"--stats-json: the output {photo} is a --source photo" in line, line
    assert photo.read_bytes() == (faces_dir / "obama.jpg").read_bytes()


def test_a_c2pa_identity_that_cannot_be_made_is_said_before_the_recording_starts(
        tmp_path: Path, faces_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # an unwritable identity folder once failed at the end of the run and lost the whole recording
    from livecam.errors import OutputError
    from livecam.marks.credentials import available

    if not available():
        pytest.skip("c2pa-python is not installed")
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("LIVECAM_C2PA_DIR", str(blocker / "c2pa"))  # cannot be created: a file is in the way

    def no_models(*a: Any, **kw: Any) -> None:
        raise AssertionError("models were loaded before the C2PA identity was made")

    monkeypatch.setattr("livecam.pipeline.engine.Engine.create", no_models)
    clip = make_clip(tmp_path / "c.mp4", frames=2, audio=False)
    with pytest.raises(OutputError, match="cannot create the C2PA identity"):
        live_command.run_live(job(tmp_path, faces_dir / "obama.jpg", clip, output=str(tmp_path / "rec.mp4")))
