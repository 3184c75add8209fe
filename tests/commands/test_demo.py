"""`livecam demo`: bundled photos, one command, offline; what it writes and what it refuses."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import av
import cv2
import numpy as np
import pytest
from click.testing import CliRunner

from livecam.media import provenance
from livecam.cli import cli
from livecam.commands import demo
from livecam.media.images import read_image
from livecam.samples import SAMPLES, sample_path
from tests.conftest import run_cli

# The target photo's face box as fractions of its width and height (found with BlazeFace once).
FACE_BOX = {"grace_hopper": (0.31, 0.20, 0.72, 0.55)}


def decode(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="bgr24") for f in c.decode(video=0)]


def face_box_in_frame(index: int, grow: float) -> tuple[int, int, int, int]:
    """The target photo's face box mapped into clip frame `index`, grown by `grow` of its size
    on each side (negative shrinks it)."""
    photo = read_image(sample_path(demo.TARGET))
    ph, pw = photo.shape[:2]
    m = demo.pan_zoom_matrix(index / (demo.CLIP_FRAMES - 1), (pw, ph), demo.CLIP_SIZE, SAMPLES[demo.TARGET].focus)
    fx1, fy1, fx2, fy2 = FACE_BOX[demo.TARGET]
    (x1, y1), (x2, y2) = [m @ np.array([fx * pw, fy * ph, 1.0]) for fx, fy in ((fx1, fy1), (fx2, fy2))]
    dx, dy = (x2 - x1) * grow, (y2 - y1) * grow
    return int(x1 - dx), int(y1 - dy), int(x2 + dx), int(y2 + dy)


def test_demo_offline_in_a_subprocess(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    out = tmp_path / "demo-out"
    result = run_cli(["demo", str(out)], env=isolated_env, timeout=240)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(demo.DEMO_FILES)  # no temporary files left

    # What was done, frames, FPS, where, next commands, in short lines (one ~700-character
    # paragraph was hard to read); it says which models ran.
    text = result.stdout.strip()
    assert f"Files in {out.resolve()}:" in text.splitlines() and "Try next:" in text.splitlines()
    assert max(len(line) for line in text.splitlines() if str(out.resolve()) not in line) <= 100, text
    assert f"{demo.CLIP_FRAMES} frames at " in text and " FPS on this machine" in text
    assert str(out.resolve()) in text
    for hint in ("livecam run", "livecam models download", "--execution-provider"):
        assert hint in text
    assert "embedded mesh swapper" in text and "no download" in text

    # demo.mp4: every frame, an audio stream of the clip's length, tagged as synthetic.
    target, swapped = decode(out / "target.mp4"), decode(out / "demo.mp4")
    assert len(target) == len(swapped) == demo.CLIP_FRAMES
    assert swapped[0].shape == (demo.CLIP_SIZE[1], demo.CLIP_SIZE[0], 3)
    with av.open(str(out / "demo.mp4")) as c:
        assert c.metadata.get("synthetic") == "true"
        assert len(c.streams.audio) == 1
        audio = c.streams.audio[0]
        seconds = sum(float(p.duration * p.time_base) for p in c.demux(audio) if p.duration)
    assert abs(seconds - demo.CLIP_FRAMES / demo.CLIP_FPS) < 0.1

    # Faces changed, everything away from them did not (the label corner aside).
    lx1, ly1, lx2, ly2 = provenance.label_box(swapped[0].shape)
    for i in (0, demo.CLIP_FRAMES // 2, demo.CLIP_FRAMES - 1):
        diff = np.abs(swapped[i].astype(int) - target[i]).max(axis=2)
        x1, y1, x2, y2 = face_box_in_frame(i, -0.25)
        assert diff[y1:y2, x1:x2].mean() > 15, f"frame {i}: the face did not change"
        background = np.ones(diff.shape, bool)
        x1, y1, x2, y2 = face_box_in_frame(i, 0.3)
        background[max(0, y1):y2, max(0, x1):x2] = False
        background[ly1:ly2, lx1:lx2] = False
        assert background.mean() > 0.1  # tens of thousands of pixels of flag, sky and uniform
        assert np.percentile(diff[background], 99) < 12, f"frame {i}: the background changed"

    # before_after.png: caption strip over three panels: source photo, target frame, result frame.
    panels = read_image(out / "before_after.png")
    assert provenance.is_marked_synthetic(out / "before_after.png")
    h, w = demo.CLIP_SIZE[1], demo.CLIP_SIZE[0]
    source = read_image(sample_path(demo.SOURCE))
    widths = demo.panel_widths((source.shape[1], source.shape[0]), h, w)
    assert panels.shape == (demo.CAPTION_H + h, sum(widths) + 2 * demo.PANEL_GAP, 3)
    body = panels[demo.CAPTION_H:].astype(int)
    x = 0
    expected = [cv2.resize(source, (widths[0], h), interpolation=cv2.INTER_AREA),
                target[demo.BEFORE_AFTER_FRAME], swapped[demo.BEFORE_AFTER_FRAME]]
    for k, (width, image) in enumerate(zip(widths, expected)):
        # within the watermark's few levels (a wrong panel is off by tens)
        assert np.abs(body[:, x:x + width] - image).mean() < 3.0, f"panel {k}"
        x += width
        if k < 2:
            assert (body[:, x:x + demo.PANEL_GAP] >= 250).all()  # white, give or take the watermark
            x += demo.PANEL_GAP
    assert np.abs(expected[1].astype(int) - expected[2]).mean() > 2  # before and after differ

    # Both outputs carry the watermark and C2PA content credentials, as `livecam video` writes them.
    checked = run_cli(["verify", "--json", str(out / "demo.mp4"), str(out / "before_after.png")], env=isolated_env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for found in json.loads(checked.stdout):
        assert found["watermark"]["found"] and found["c2pa"]["valid"] and found["c2pa"]["by_livecam"], found


def test_non_empty_folder_is_not_overwritten_without_force(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    out = tmp_path / "busy"
    out.mkdir()
    (out / "demo.mp4").write_bytes(b"mine")
    result = run_cli(["demo", str(out)], env=isolated_env, timeout=60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("livecam: error: ") and "--force" in lines[0]
    assert [p.name for p in out.iterdir()] == ["demo.mp4"]
    assert (out / "demo.mp4").read_bytes() == b"mine"


def test_a_file_as_output_folder_is_a_usage_error(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    result = CliRunner().invoke(cli, ["demo", str(target)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("livecam: error: ") and str(target) in lines[0], result.output
    assert "is a file" in lines[0]
    assert target.read_text() == "x"


@pytest.fixture
def short_demo(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A 12-frame demo, run in-process (the full one runs once, in the subprocess test)."""
    monkeypatch.setattr(demo, "CLIP_FRAMES", 12)
    monkeypatch.setattr(demo, "BEFORE_AFTER_FRAME", 6)
    monkeypatch.setenv("LIVECAM_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LIVECAM_C2PA_DIR", str(tmp_path / "c2pa"))  # the demo signs: never the user's identity
    monkeypatch.delenv("LIVECAM_OFFLINE", raising=False)  # the demo is offline by itself


def test_force_replaces_the_demo_files_and_keeps_others(tmp_path: Path, short_demo: None) -> None:
    out = tmp_path / "busy"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    (out / "demo.mp4").write_bytes(b"old")
    result = CliRunner().invoke(cli, ["-q", "demo", str(out), "--force"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == sorted([*demo.DEMO_FILES, "notes.txt"])
    assert (out / "notes.txt").read_text() == "keep me"
    assert len(decode(out / "demo.mp4")) == 12


def test_neural_models_are_used_when_present_and_the_summary_says_so(tmp_path: Path, short_demo: None) -> None:
    pytest.importorskip("livecam.processors.face_swapper")
    from tests.standins.arcface import build_arcface
    from tests.standins.inswapper import build_inswapper

    models = tmp_path / "models"
    models.mkdir()
    build_arcface(models / "w600k_r50.onnx")
    build_inswapper(models / "inswapper_128.onnx")
    out = tmp_path / "n"
    result = CliRunner().invoke(cli, ["-q", "--unverified-models", "demo", str(out)])
    assert result.exit_code == 0, result.output
    assert "neural models" in result.output and "swapper inswapper_128" in result.output
    assert "mesh" not in result.output
    assert len(decode(out / "demo.mp4")) == 12


def test_an_fp16_inswapper_the_cpu_does_not_take_is_no_neural_swap_in_the_summary(tmp_path: Path,
                                                                                  short_demo: None) -> None:
    pytest.importorskip("livecam.processors.face_swapper")
    from tests.standins.arcface import build_arcface
    from tests.standins.inswapper import build_inswapper

    models = tmp_path / "models"
    models.mkdir()
    build_arcface(models / "w600k_r50.onnx")
    build_inswapper(models / "inswapper_128_fp16.onnx")  # auto on the CPU takes the fp32 file only
    result = CliRunner().invoke(cli, ["--unverified-models", "demo", str(tmp_path / "n")])
    assert result.exit_code == 0, result.output
    assert "swapped with: the embedded mesh swapper" in result.output and "swapper mesh" in result.output
    assert "neural models found" not in result.output


def test_a_failure_leaves_no_files_and_no_folder(tmp_path: Path, short_demo: None,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from livecam.errors import OutputError
    from livecam.pipeline import file

    def broken(*args: object, **kwargs: object) -> None:
        raise OutputError("could not write demo.mp4: disk full")

    monkeypatch.setattr(file, "process_video", broken)
    out = tmp_path / "new" / "deeper"
    result = CliRunner().invoke(cli, ["-q", "demo", str(out)])
    assert result.exit_code == 1
    assert "disk full" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "new").exists()  # the folders it made are gone, with target.mp4 in them


def test_an_unwritable_c2pa_folder_stops_the_demo_before_its_clip_and_no_c2pa_runs_it(
        tmp_path: Path, short_demo: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # A read-only home: the identity was made only when demo.mp4 was signed, after every frame,
    # and the fix it named (--no-c2pa) was not an option of demo.
    pytest.importorskip("c2pa")
    from livecam.marks import credentials

    if credentials.available() is False:
        pytest.skip("c2pa-python is not installed")
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("LIVECAM_C2PA_DIR", str(blocker / "c2pa"))
    from livecam.pipeline import file

    def too_late(*args: object, **kwargs: object) -> None:
        raise AssertionError("the clip was processed before the identity was made")

    out = tmp_path / "d"
    with monkeypatch.context() as patch:
        patch.setattr(file, "process_video", too_late)
        result = CliRunner().invoke(cli, ["-q", "demo", str(out)])
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines() == [f"livecam: error: cannot create the C2PA identity in {blocker / 'c2pa'} "
                                                  f"(Not a directory); set LIVECAM_C2PA_DIR to a writable folder or "
                                                  f"pass --no-c2pa"]
    assert not out.exists()
    result = CliRunner().invoke(cli, ["-q", "demo", "--no-c2pa", str(out)])
    assert result.exit_code == 0, result.output
    assert len(decode(out / "demo.mp4")) == 12
    assert credentials.read_credentials(out / "demo.mp4").present is False


def test_the_clip_window_stays_inside_the_photo_and_moves_smoothly() -> None:
    pw, ph = 512, 600
    w, h = demo.CLIP_SIZE
    previous = None
    for i in range(demo.CLIP_FRAMES):
        m = demo.pan_zoom_matrix(i / (demo.CLIP_FRAMES - 1), (pw, ph), (w, h), SAMPLES["grace_hopper"].focus)
        inverse = cv2.invertAffineTransform(m)
        corners = np.array([inverse @ np.array([x, y, 1.0]) for x in (0, w) for y in (0, h)])
        assert corners.min() >= -1e-6 and corners[:, 0].max() <= pw + 1e-6 and corners[:, 1].max() <= ph + 1e-6
        if previous is not None:  # no jumps: corners move by less than 3 px of the photo per frame
            assert np.abs(corners - previous).max() < 3.0
        previous = corners


def test_tone_is_quiet_and_clickless() -> None:
    samples = demo.tone(1.0)
    assert samples.dtype == np.float32 and len(samples) == demo.AUDIO_RATE
    assert 0.03 < np.abs(samples).max() <= demo.TONE_LEVEL + 1e-6
    assert abs(samples[0]) < 1e-3 and abs(samples[-1]) < 1e-3


def test_samples_are_small_and_documented() -> None:
    folder = sample_path("astronaut").parent
    total = sum(p.stat().st_size for p in folder.iterdir() if p.suffix in (".jpg", ".png"))
    assert total < 300_000
    notes = (folder / "SAMPLES.md").read_text()
    for sample in SAMPLES.values():
        assert sample.file in notes
        assert read_image(sample_path(next(k for k, v in SAMPLES.items() if v == sample))).shape[2] == 3
    assert notes.count("public domain") >= 2


def test_a_folder_in_the_place_of_a_demo_file_is_refused_before_any_model_loads(tmp_path: Path) -> None:
    # with --force it was found only after the models loaded, and the line said to give
    # "a file name such as demo.mp4/out.mp4", which the demo cannot take
    from livecam.errors import InputError

    (tmp_path / "demo.mp4").mkdir()
    with pytest.raises(InputError) as info:
        demo.prepare_folder(tmp_path, force=True)
    assert f"{tmp_path / 'demo.mp4'} is a folder where the demo writes its file demo.mp4" in info.value.message
    assert "move it away or give another folder" in info.value.message


def test_a_folder_the_demo_cannot_create_is_a_usage_error(tmp_path: Path) -> None:
    # exit 1 ("other") where image and video give an unwritable output folder exit 2
    from livecam.errors import EXIT_USAGE, InputError
    from tests.conftest import unwritable_folder

    with pytest.raises(InputError) as info:
        demo.prepare_folder(unwritable_folder(tmp_path) / "demo", force=False)
    assert info.value.exit_code == EXIT_USAGE and "cannot create the folder" in info.value.message


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="Linux's /proc")
def test_a_demo_folder_in_proc_names_the_problem_not_a_missing_file() -> None:
    from livecam.errors import InputError

    with pytest.raises(InputError) as info:
        demo.prepare_folder(Path("/proc/livecam-demo"), force=False)
    message = info.value.message
    assert message.startswith("cannot create the folder /proc/livecam-demo (") and "No such file" not in message


def test_a_link_to_nothing_as_the_demo_folder_is_named_not_file_exists(tmp_path: Path) -> None:
    # mkdir on a link to a missing folder, or on a loop of links, said "cannot create the folder X: File exists"
    from livecam.errors import InputError

    (tmp_path / "out").symlink_to(tmp_path / "gone")
    with pytest.raises(InputError) as info:
        demo.prepare_folder(tmp_path / "out", force=False)
    assert info.value.message == (f"{tmp_path / 'out'} is a link to {tmp_path / 'gone'}, which does not exist; "
                                  f"fix or remove the link")


def test_try_next_names_the_neural_models_command_not_buffalo_l(tmp_path: Path) -> None:
    # "livecam models download --accept-license (inswapper, buffalo_l, GFPGAN)": buffalo_l meant
    # nothing to a newcomer; the line gives the command that fetches the neural swap's models
    result = demo.DemoResult(folder=tmp_path, frames=12, fps=3.0, seconds=4.0, models="swapper mesh", neural=False,
                             audio=None, workers=1)
    text = demo.summary(result)
    (line,) = [ln for ln in text.splitlines() if "lifelike" in ln]
    assert line == "  a more lifelike swap:    livecam models download inswapper_128 w600k_r50 det_10g --accept-license"
    # `livecam --models-dir DIR demo`: the download goes where the next run looks
    (line,) = [ln for ln in demo.summary(replace(result, models_dir=Path("/x y"))).splitlines() if "lifelike" in ln]
    assert line.endswith("  livecam --models-dir '/x y' models download inswapper_128 w600k_r50 det_10g --accept-license")
    assert "buffalo_l" not in text and max(len(ln) for ln in text.splitlines() if str(tmp_path) not in ln) <= 100
    (line,) = [ln for ln in demo.summary(replace(result, neural=True)).splitlines() if "lifelike" in ln]
    assert line == "  a more lifelike swap:    the neural models, installed already"
