"""`livecam bench` on the embedded mesh path (no downloadable model needed): a tiny generated
clip and a tiny real file through the live and the file pipelines; the report's shape and
figures; errors before any model loads. No timed assertions (speed is measured, not tested)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from livecam.commands.bench import GeneratedClip, format_table, stage_table
from tests.conftest import run_cli
from tests.videos import make_clip


def _bench(args: list[str], env: dict[str, str]) -> dict:
    result = run_cli(["bench", "--frames", "10", "--json", *args], env=env, timeout=180)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_live_mode_on_a_generated_clip(faces_dir: Path, isolated_env: dict[str, str]) -> None:
    report = _bench(["--source", str(faces_dir / "obama.jpg"), "--resolution", "480x360"], isolated_env)
    assert report["mode"] == "live" and report["input"] == "generated" and report["resolution"] == "480x360"
    assert report["frames"] == 10 and report["dropped"] == 0  # --no-realtime semantics: nothing dropped
    assert report["processors"] == ["face_swapper"] and "mesh" in report["engine"]
    assert report["faces_per_frame"] == 1.0  # the generated clip shows the photo's face in every frame
    stages = report["stages"]
    assert list(stages)[0] == "capture" and list(stages)[-2:] == ["process", "output"]
    for name in ("capture", "detect", "landmarks", "face_swapper", "process", "output"):
        assert stages[name]["count"] == 10, name
        assert 0 <= stages[name]["median_ms"] <= stages[name]["p95_ms"], name
    assert report["fps"] > 0
    assert 0 < report["latency_ms_p50"] <= report["latency_ms_p95"]
    # Latency is capture to output: at least the time spent in analysis and processing.
    assert report["latency_ms_p50"] >= stages["detect"]["median_ms"]
    assert report["peak_rss_mb"] > 50 and report["cpu_ms_per_frame"] > 0


def test_video_mode_on_an_input_file_and_the_table(faces_dir: Path, isolated_env: dict[str, str],
                                                    tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "in.mp4", frames=20, size=(320, 240), audio=False,
                     source_image=faces_dir / "obama.jpg")
    report = _bench(["--mode", "video", "--input", str(clip), "--source", str(faces_dir / "biden.jpg")],
                    isolated_env)
    assert report["mode"] == "video" and report["input"] == str(clip)
    assert report["resolution"] == "320x240"  # the input's real size
    assert report["frames"] == 10  # --frames caps the file (3 more were used to warm up)
    assert list(report["stages"])[0] == "decode" and list(report["stages"])[-1] == "encode"
    assert report["stages"]["decode"]["count"] == 10 and report["stages"]["encode"]["count"] == 10
    assert report["latency_ms_p50"] is None  # throughput mode: no live latency
    assert not list(tmp_path.glob("bench-*"))  # temporary files stay in their own folder
    table = run_cli(["bench", "--frames", "10", "--mode", "video", "--input", str(clip),
                     "--source", str(faces_dir / "biden.jpg")], env=isolated_env, timeout=180)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith("livecam bench: video mode")
    assert any(line.startswith("decode") for line in lines) and "FPS" in table.stdout
    # --resolution with --input was silently ignored
    sized = run_cli(["bench", "--frames", "10", "--mode", "video", "--input", str(clip), "--resolution", "640x480",
                     "--source", str(faces_dir / "biden.jpg")], env=isolated_env, timeout=180)
    assert sized.returncode == 0 and "--input in.mp4 is measured at its own 320x240" in sized.stderr, sized.stderr


def test_without_source_the_bundled_sample_photo_is_used(isolated_env: dict[str, str]) -> None:
    # As the README shows it: `livecam bench --mode video ...` with no --source used to exit 2.
    # The clip is made of the demo's portrait, whose face the detector finds
    # at the default 1280x720 (the other sample, letterboxed there, showed no face at all).
    report = _bench([], isolated_env)
    assert report["frames"] == 10 and report["resolution"] == "1280x720"
    assert report["faces_per_frame"] == 1.0
    assert "mesh" in report["engine"]


def test_faces_too_small_to_change_are_said_so(faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # biden.jpg letterboxed into 320x240: a face is found in every frame, but under 24 px between
    # the eyes, so no processor changes it; the table showed the swapper's 0.03 ms and
    # "faces per frame 1.0" without a word.
    result = run_cli(["bench", "--frames", "10", "--json", "--resolution", "320x240", "--source",
                      str(faces_dir / "biden.jpg")], env=isolated_env, timeout=180)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["faces_per_frame"] == 1.0 and report["faces_changed_per_frame"] == 0.0
    assert "the faces in the clip's frames are all too small to change (under 24 px" in result.stderr
    assert "so these figures leave out what the processors do to a face" in result.stderr
    assert _bench(["--source", str(faces_dir / "obama.jpg"), "--resolution", "480x360"],
                  isolated_env)["faces_changed_per_frame"] == 1.0


def test_a_clip_without_any_face_is_said_so(tmp_path: Path, faces_dir: Path,
                                            isolated_env: dict[str, str]) -> None:
    # A clip with no face: the figures leave the swap out; the table showed them without a word.
    clip = make_clip(tmp_path / "noface.mp4", frames=14, size=(320, 240), audio=False)
    result = run_cli(["bench", "--frames", "10", "--input", str(clip), "--source", str(faces_dir / "obama.jpg")],
                     env=isolated_env, timeout=180)
    assert result.returncode == 0, result.stderr
    assert "faces per frame 0.0" in result.stdout
    assert "no face was found in the clip" in result.stderr


def test_a_clip_that_leaves_one_frame_to_measure_has_no_rate(tmp_path: Path, faces_dir: Path,
                                                               isolated_env: dict[str, str]) -> None:
    # one measured frame has no rate: the table printed "0.0 FPS", then (the rate null) an internal error
    clip = make_clip(tmp_path / "four.mp4", frames=4, size=(320, 240), audio=False,
                     source_image=faces_dir / "biden.jpg")
    result = run_cli(["bench", "--frames", "10", "--input", str(clip), "--source", str(faces_dir / "obama.jpg")],
                     env=isolated_env, timeout=180)
    assert result.returncode == 0, result.stderr
    assert "end-to-end: FPS n/a" in result.stdout
    assert "has 4 frames, so 1 is measured after the 3 warm-up frames" in result.stderr


def test_errors_come_before_any_model_loads(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    result = run_cli(["bench", "--frames", "10", "--source", str(tmp_path / "x.jpg")], env=isolated_env)
    assert result.returncode == 2 and "x.jpg" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # --execution-provider beside --compare-providers was silently dropped (the runs use the listed ones)
    result = run_cli(["bench", "--frames", "10", "--execution-provider", "cpu", "--compare-providers", "cpu,auto"],
                     env=isolated_env)
    assert result.returncode == 2 and "exclude each other" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    result = run_cli(["bench", "--frames", "10", "--input", str(tmp_path / "missing.mp4"),
                      "--source", str(tmp_path / "x.jpg")], env=isolated_env)
    assert result.returncode == 2 and "missing.mp4" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # a folder was said not to exist
    result = run_cli(["bench", "--frames", "10", "--input", str(tmp_path)], env=isolated_env)
    assert result.returncode == 2 and f"--input {tmp_path} is a folder; give a video file" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # --compare-providers "," ran a plain bench, as if nothing had been asked
    result = run_cli(["bench", "--frames", "10", "--compare-providers", ","], env=isolated_env)
    assert result.returncode == 2 and "--compare-providers" in result.stderr and "names no provider" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # cpu,cpu ran a plain bench, the comparison asked for silently dropped
    result = run_cli(["bench", "--frames", "10", "--compare-providers", "cpu,auto,CPU"], env=isolated_env)
    assert result.returncode == 2 and result.stderr.startswith(
        "livecam: error: Invalid value for --compare-providers: 'cpu,auto,CPU' names cpu twice; list each provider "
        "once (--rounds repeats the runs)"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # a mistyped provider was found after the clip was made, as a provider problem (exit 4), not a usage error
    result = run_cli(["bench", "--frames", "10", "--compare-providers", "cpu,cdua"], env=isolated_env)
    assert result.returncode == 2 and "unknown execution provider 'cdua'" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_photo_as_input_is_told_to_be_the_source(faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # `bench --input photo.jpg` was told "use `livecam image` for images"; bench makes its clip from a --source photo
    photo = faces_dir / "biden.jpg"
    result = run_cli(["bench", "--frames", "10", "--input", str(photo)], env=isolated_env)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr  # no note on the sample face first
    assert result.stderr.splitlines()[-1] == (f"livecam: error: --input {photo} is a still image, not a video; to "
                                              f"measure on a clip made from it, leave --input out and give it as "
                                              f"--source {photo}")


def test_generated_clip_moves_and_is_copied() -> None:
    photo = np.random.default_rng(0).integers(0, 255, (200, 150, 3), dtype=np.uint8)
    clip = GeneratedClip(photo, (320, 240), frames=30)
    a, b = clip.image(0), clip.image(6)
    assert a.shape == (240, 320, 3) and a.dtype == np.uint8
    assert not np.array_equal(a, b)  # the face drifts, so detection/tracking do real work
    a[:] = 0  # processors write into frames: the clip must hand out copies
    assert clip.image(0).any()


def test_stage_table_order_and_statistics() -> None:
    records = [{"detect": float(i), "face_swapper": 2.0, "process": 3.0, "output": 0.5} for i in range(1, 11)]
    table = stage_table(records, ("capture", [1.0] * 10))
    assert list(table) == ["capture", "detect", "face_swapper", "process", "output"]
    assert table["detect"]["median_ms"] == 5.5 and table["detect"]["count"] == 10
    assert 9.0 < table["detect"]["p95_ms"] <= 10.0


def test_video_bench_closes_its_writer_when_processing_fails(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from livecam.commands.bench import run_video_bench
    from livecam.media.video_writer import VideoWriter
    from livecam.settings import BenchJob, ProcessingSettings
    from tests.pipeline.test_file import InvertEngine

    ended: list[str] = []
    real_abort, real_close = VideoWriter.abort, VideoWriter.close

    def abort(self: VideoWriter) -> None:
        ended.append("abort")
        real_abort(self)

    def close(self: VideoWriter, **kw: bool) -> None:
        ended.append("close")
        real_close(self, **kw)

    monkeypatch.setattr(VideoWriter, "abort", abort)
    monkeypatch.setattr(VideoWriter, "close", close)
    clip = make_clip(tmp_path / "in.mp4", frames=12, size=(128, 96), fps=30)
    job = BenchJob(processing=ProcessingSettings(sources=()), mode="video", input=clip, frames=8)
    with pytest.raises(RuntimeError, match="exploded"):
        run_video_bench(job, InvertEngine(fail_at=4))
    assert ended == ["abort"]


def test_live_mode_finds_the_small_faces_video_mode_finds(tmp_path: Path, faces_dir: Path,
                                                          isolated_env: dict[str, str]) -> None:
    # A still clip of the group photo at 1280x720 (faces 95-135 px wide): live mode's short-range
    # detector found none of them (0.0 faces per frame), video mode all six.
    from fractions import Fraction

    from livecam.media.images import read_image
    from livecam.media.video_writer import OutputSpec, VideoWriter

    group = read_image(faces_dir / "group6.jpg")
    top = (group.shape[0] - 720) // 2
    frame = np.ascontiguousarray(group[top:top + 720, :1280])
    clip = tmp_path / "group.mp4"
    writer = VideoWriter(OutputSpec(path=clip, format="mp4", width=1280, height=720, rate=Fraction(30),
                                    time_base=Fraction(1, 30), quality=18))
    for i in range(14):
        writer.write(frame.copy(), i / 30)
    writer.close()
    args = ["--input", str(clip), "--many-faces", "--source", str(faces_dir / "obama.jpg")]
    assert _bench(["--mode", "live", *args], isolated_env)["faces_per_frame"] == 6.0
    assert _bench(["--mode", "video", *args], isolated_env)["faces_per_frame"] == 6.0


def test_providers_side_by_side_over_alternating_rounds(faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # `auto` resolves to the CPU here: two columns of the same work, each with its ratio to the first.
    side = _bench(["--source", str(faces_dir / "obama.jpg"), "--resolution", "320x240",
                   "--compare-providers", "cpu,auto", "--rounds", "2"], isolated_env)
    assert list(side["providers"]) == ["cpu", "auto"] and side["rounds"] == 2
    for name, report in side["providers"].items():
        assert report["frames"] == 10 and len(report["fps_rounds"]) == 2, name
        assert "provider cpu" in report["engine"] and report["faces_per_frame"] == 1.0, name
        assert min(report["fps_rounds"]) <= report["fps"] <= max(report["fps_rounds"]), name
    assert side["ratios_to_first"]["cpu"]["fps"] == 1.0
    auto = side["ratios_to_first"]["auto"]
    assert auto["fps"] == round(side["providers"]["auto"]["fps"] / side["providers"]["cpu"]["fps"], 3)
    assert set(auto["stages"]) >= {"detect", "face_swapper"}
    table = run_cli(["bench", "--frames", "10", "--resolution", "320x240", "--source", str(faces_dir / "obama.jpg"),
                     "--compare-providers", "cpu,auto"], env=isolated_env, timeout=180)
    assert table.returncode == 0, table.stderr
    header = table.stdout.splitlines()[1].split()
    assert header[-2:] == ["cpu", "auto"] and "(x1.00)" in table.stdout
    assert table.stdout.splitlines()[0].endswith(", median of 1 alternating round")  # was "1 alternating round(s)"


def test_ratios_against_a_saved_baseline(faces_dir: Path, isolated_env: dict[str, str], tmp_path: Path) -> None:
    args = ["--source", str(faces_dir / "obama.jpg"), "--resolution", "320x240"]
    baseline = _bench(args, isolated_env)
    saved = tmp_path / "before.json"
    saved.write_text(json.dumps(baseline))
    report = _bench([*args, "--baseline", str(saved)], isolated_env)
    against = report["against_baseline"]
    # one of another mode or size: the ratios were given without a word
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**baseline, "mode": "video", "resolution": "1280x720"}))
    result = run_cli(["bench", "--frames", "10", "--json", *args, "--baseline", str(other)], env=isolated_env,
                     timeout=180)
    assert result.returncode == 0, result.stderr
    assert (f"warning: --baseline {other} was measured in video mode at 1280x720, this run is live mode at "
            f"320x240: its ratios compare different work") in result.stderr
    assert against["fps"] == round(report["fps"] / baseline["fps"], 3)
    assert against["stages"]["detect"] == round(report["stages"]["detect"]["median_ms"]
                                                / baseline["stages"]["detect"]["median_ms"], 3)
    # side by side, every provider gets its ratios (the baseline was once silently ignored there)
    side = _bench([*args, "--compare-providers", "cpu,auto", "--baseline", str(saved)], isolated_env)
    for name, column in side["providers"].items():
        assert column["against_baseline"]["fps"] == round(column["fps"] / baseline["fps"], 3), name
    table = run_cli(["bench", "--frames", "10", *args, "--compare-providers", "cpu,auto", "--baseline", str(saved)],
                    env=isolated_env, timeout=180)
    assert table.returncode == 0, table.stderr
    assert "against the baseline" in table.stdout and "auto: fps x" in table.stdout


@pytest.mark.parametrize("content", [None, "not json", '{"providers": {}}',
                                     '{"fps": 10, "stages": {"detect": 3}}'])  # (an internal error after the run)
def test_a_missing_or_wrong_baseline_is_one_line_before_any_model_loads(
        isolated_env: dict[str, str], tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "before.json"
    if content is not None:
        path.write_text(content)
    result = run_cli(["bench", "--frames", "10", "--baseline", str(path)], env=isolated_env, timeout=60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--baseline" in lines[0] and "livecam bench --json" in lines[0]


def test_watermark_shows_as_a_stage_in_both_modes(faces_dir: Path, isolated_env: dict[str, str]) -> None:
    photo = ["--source", str(faces_dir / "obama.jpg"), "--resolution", "320x240"]
    live = _bench([*photo, "--watermark"], isolated_env)["variants"]  # with and without, alternating
    assert list(live) == ["unmarked", "watermarked"] and "watermark" not in live["unmarked"]["stages"]
    marked = live["watermarked"]
    assert marked["stages"]["watermark"]["count"] == marked["marked_frames"] >= 1  # every frame shown
    assert marked["stages"]["watermark encoder"]["count"] >= 1  # the change, computed beside the stream
    assert 0 < marked["marked_read_back"] <= 1  # frame 1 at least: the change from a warm-up frame reads
    video = _bench([*photo, "--watermark", "--mode", "video"], isolated_env)["variants"]
    assert video["watermarked"]["stages"]["watermark"]["count"] == 4  # one run of 4 frames in the first 10 at 30 FPS
    assert "watermark" not in video["unmarked"]["stages"]
    assert "watermark" not in _bench(photo, isolated_env)["stages"]  # off by default


def test_compare_providers_with_one_provider_is_the_plain_report(faces_dir: Path,
                                                                 isolated_env: dict[str, str]) -> None:
    # `--compare-providers cpu` once ended in "internal error: KeyError" (`cpu,cpu` is a usage error now)
    report = _bench(["--source", str(faces_dir / "obama.jpg"), "--resolution", "320x240",
                     "--compare-providers", "CPU"], isolated_env)
    assert "provider cpu" in report["engine"] and report["frames"] == 10 and report["fps"] > 0


def test_without_source_an_input_clip_is_named_not_the_sample_clip(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    # `bench --input mine.mp4` without --source once said "... on a clip of grace_hopper.jpg"
    from livecam.commands.bench import with_default_source
    from livecam.settings import BenchJob, ProcessingSettings

    job = BenchJob(processing=ProcessingSettings(sources=()), input=tmp_path / "mine.mp4")
    with caplog.at_level("INFO", logger="livecam"):
        job, clip_photo = with_default_source(job)
    assert clip_photo is None and job.processing.sources[0].name == "astronaut.jpg"
    assert "on the faces of mine.mp4" in caplog.text and "grace_hopper" not in caplog.text


def test_a_generated_clip_too_large_for_the_memory_is_refused_before_any_model_loads(
        faces_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # --resolution 20000x20000 once loaded the models, then died in OpenCV's "insufficient memory"
    from livecam.commands import bench as bench_module
    from livecam.errors import InputError
    from livecam.settings import BenchJob, ProcessingSettings

    def no_models(*a: object, **kw: object) -> None:
        raise AssertionError("models were loaded before the clip size was checked")

    monkeypatch.setattr("livecam.machine.available_bytes", lambda: 100_000_000)  # 100 MB free
    monkeypatch.setattr("livecam.pipeline.engine.Engine.create", no_models)
    job = BenchJob(processing=ProcessingSettings(sources=(faces_dir / "obama.jpg",)), resolution=(1280, 720))
    with pytest.raises(InputError, match=r"--resolution 1280x720: the generated clip .* smaller --resolution"):
        bench_module.run_bench(job)


@pytest.mark.parametrize("mode", ["live", "video"])
def test_a_clip_the_warm_up_uses_up_is_an_input_error(tmp_path: Path, faces_dir: Path,
                                                      isolated_env: dict[str, str], mode: str) -> None:
    # 2 frames (the warm-up takes 3) once gave "0 frames, 0.0 FPS", "no face was found" and exit 0
    clip = make_clip(tmp_path / "two.mp4", frames=2, size=(160, 120), audio=False,
                     source_image=faces_dir / "obama.jpg")
    result = run_cli(["bench", "--frames", "10", "--mode", mode, "--input", str(clip), "--source",
                      str(faces_dir / "biden.jpg")], env=isolated_env, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "no frame is left to measure after the 3 warm-up frames" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_a_compared_provider_that_is_missing_is_said_before_any_model_loads(
        faces_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `--compare-providers cpu,directml` built the cpu engine (all its models) before saying directml is missing
    from livecam.commands import bench as bench_module
    from livecam.errors import ProviderError
    from livecam.settings import BenchJob, ProcessingSettings

    from livecam.runtime.providers import available_names

    if "directml" in available_names():
        pytest.skip("DirectML is installed here")

    def no_models(*a: object, **kw: object) -> None:
        raise AssertionError("models were loaded before every compared provider was checked")

    monkeypatch.setattr("livecam.pipeline.engine.Engine.create", no_models)
    job = BenchJob(processing=ProcessingSettings(sources=(faces_dir / "obama.jpg",)), resolution=(320, 240),
                   compare_providers=("cpu", "directml"))
    with pytest.raises(ProviderError, match="'directml' is not available"):
        bench_module.run_bench(job)


def test_a_baseline_that_is_no_report_is_not_named_as_the_file_to_overwrite(tmp_path: Path) -> None:
    # `--baseline clip.mp4` said "save one with `livecam bench --json > clip.mp4`", which would
    # overwrite the user's clip with JSON; a broken .json report may be written over
    from livecam.commands.bench import read_baseline
    from livecam.errors import InputError

    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"\x00\x00\x00\x20ftypisom\xdb\xff" * 8)
    with pytest.raises(InputError) as info:
        read_baseline(clip)
    assert "(not text)" in info.value.message and "> baseline.json`" in info.value.message, info.value.message
    assert "> clip.mp4" not in info.value.message
    broken = tmp_path / "before.json"
    broken.write_text("{")
    with pytest.raises(InputError, match=r"> before\.json`"):
        read_baseline(broken)


def test_a_baseline_that_is_a_loop_of_links_is_named_as_such(tmp_path: Path) -> None:
    # "cannot be read (Too many levels of symbolic links); save a report with ..." said no fix that works
    from livecam.commands.bench import read_baseline
    from livecam.errors import InputError

    (tmp_path / "a.json").symlink_to("b.json")
    (tmp_path / "b.json").symlink_to("a.json")
    with pytest.raises(InputError, match=r"a\.json is a link in a loop of links .*; fix or remove the link$"):
        read_baseline(tmp_path / "a.json")


def test_a_baseline_larger_than_any_report_is_refused_without_reading_it_all(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `--baseline /dev/zero` read until memory ran out (an internal MemoryError after a minute)
    from livecam.commands import bench
    from livecam.errors import InputError

    monkeypatch.setattr(bench, "MAX_BASELINE_BYTES", 1024)
    big = tmp_path / "big.json"
    big.write_text(" " * 4096)
    with pytest.raises(InputError, match=r"big\.json is over \d+ MB, not a livecam bench JSON report"):
        bench.read_baseline(big)


def test_frames_beyond_the_input_clip_are_said(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # `--frames 40` on a 15-frame clip measured 12 frames without a word (the JSON's "frames" alone said so)
    clip = make_clip(tmp_path / "c.mp4", frames=15, size=(160, 120), audio=False, source_image=faces_dir / "obama.jpg")
    base = ["bench", "--json", "--source", str(faces_dir / "biden.jpg"), "--input", str(clip)]
    short = run_cli([*base, "--frames", "40"], env=isolated_env)
    assert short.returncode == 0 and json.loads(short.stdout)["frames"] == 12, short.stderr
    assert short.stderr.count("warning: --input c.mp4 has 15 frames, so 12 are measured after the 3 warm-up frames, "
                              "not the 40 of --frames") == 1, short.stderr
    enough = run_cli([*base, "--frames", "10"], env=isolated_env)
    assert enough.returncode == 0 and "--frames" not in enough.stderr, enough.stderr


def test_faces_the_face_mask_left_as_they_were_are_not_counted_as_changed(faces_dir: Path,
                                                                         isolated_env: dict[str, str]) -> None:
    # --face-mask-regions glasses on a face without glasses (the stand-in parser: hair above, skin
    # below): the swapper left every face as it was, while faces_changed_per_frame counted faces
    # by size only (1.0) and nothing was said.
    from tests.standins import build_swap_models

    build_swap_models(Path(isolated_env["LIVECAM_MODELS_DIR"]), face_parser=True)
    args = ["--unverified-models", "bench", "--frames", "10", "--json", "--source", str(faces_dir / "obama.jpg"),
            "--resolution", "480x360", "--swap-model", "inswapper_128", "--face-mask", "box", "region"]
    result = run_cli([*args, "--face-mask-regions", "glasses"], env=isolated_env, timeout=180)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["faces_per_frame"] == 1.0 and report["faces_changed_per_frame"] == 0.0
    assert report["faces_usable_per_frame"] == 1.0  # big enough: the masks left them, not their size
    assert result.stderr.count("warning: --face-mask left nothing to swap of the faces in the clip's frames") == 1
    skin = run_cli([*args, "--face-mask-regions", "skin"], env=isolated_env, timeout=180)
    assert skin.returncode == 0, skin.stderr
    assert json.loads(skin.stdout)["faces_changed_per_frame"] == 1.0 and "left nothing" not in skin.stderr


def test_faces_swapped_too_faintly_to_show_are_reported_apart_from_the_changed(faces_dir: Path,
                                                                              isolated_env: dict[str, str]) -> None:
    # --blend 0.01 on faces just over the size limit: every paste changed no pixel. The report had
    # no word of it (FramePacket.faint was not counted), the table gave only "faces per frame 1.0",
    # and the warning blamed FaceMesh ("could not fit its landmarks").
    result = run_cli(["bench", "--frames", "10", "--json", "--resolution", "400x300", "--blend", "0.01",
                      "--source", str(faces_dir / "obama.jpg")], env=isolated_env, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["faces_usable_per_frame"] == 1.0
    assert report["faces_changed_per_frame"] == 0.0 and report["faces_faint_per_frame"] == 1.0
    assert "--blend 0.01 is too faint to change a pixel of the faces in the clip's frames" in result.stderr
    assert "could not fit" not in result.stderr
    assert format_table(report).splitlines()[-1].endswith(
        "faces per frame 1.0 (changed 0.0, too faint to show 1.0)")
