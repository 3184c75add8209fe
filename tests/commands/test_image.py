"""`livecam image` end to end in a subprocess: real photos, RGBA, errors, no partial outputs."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.media import provenance
from livecam.media.images import read_image
from tests.conftest import run_cli, unwritable_folder
from tests.videos import make_clip


def small(faces_dir: Path, name: str, folder: Path, *, alpha: bool = False) -> Path:
    img = cv2.imread(str(faces_dir / name))
    img = cv2.resize(img, (img.shape[1] // 2, img.shape[0] // 2), interpolation=cv2.INTER_AREA)
    out = folder / f"{Path(name).stem}{'_rgba' if alpha else ''}.png"
    if alpha:
        a = np.full(img.shape[:2], 255, np.uint8)
        a[:, : img.shape[1] // 6] = 0  # a transparent band on the left
        a[:, img.shape[1] // 6: img.shape[1] // 3] = 128
        img = np.dstack([img, a])
    cv2.imwrite(str(out), img)
    return out


def only_error_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("livecam: error: ")
    assert "Traceback" not in stderr
    return lines[0]


def no_leftovers(folder: Path, *allowed: Path) -> None:
    """Only the expected files: no output, no temporary file (isolated_env's folders aside)."""
    assert sorted(p for p in folder.iterdir() if p.name not in ("cache", "models")) == sorted(allowed)


def test_mesh_swap_on_real_photos(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    out = tmp_path / "out" / "swapped.jpg"
    out.parent.mkdir()
    result = run_cli(["image", str(faces_dir / "obama.jpg"), str(out), "--source", str(faces_dir / "biden.jpg"),
                      "--swap-model", "mesh"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stderr and "1 face swapped" in result.stderr
    assert "mesh swapper" not in result.stderr  # the option the fallback warning names silences it
    no_leftovers(out.parent, out)
    before, after = read_image(faces_dir / "obama.jpg"), read_image(out)
    assert after.shape == before.shape
    diff = np.abs(after.astype(int) - before).max(axis=2)
    # The face (around the middle of the upper half here) changed; the top band did not (JPEG noise only).
    h, w = before.shape[:2]
    assert (diff[int(h * 0.15):int(h * 0.35), int(w * 0.4):int(w * 0.65)] > 25).mean() > 0.2
    assert np.percentile(diff[: int(h * 0.08)], 99) < 12
    assert provenance.is_marked_synthetic(out)
    assert provenance.read_jpeg_description(out) == provenance.DESCRIPTION
    x1, y1, x2, y2 = provenance.label_box(after.shape)
    assert diff[y1:y2, x1:x2].max() > 60  # the visible label
    assert cv2.imread(str(out), cv2.IMREAD_UNCHANGED).shape[2] == 3  # a colour photo stays colour


@pytest.mark.parametrize("given, written, alpha", [("png", "png", False), ("jpg", "jpg", False),
                                                   ("png", "png", True), ("png", "tif", False)])
def test_a_grey_picture_comes_back_grey(given: str, written: str, alpha: bool, tmp_path: Path, faces_dir: Path,
                                        isolated_env: dict[str, str]) -> None:
    # A grey photo (with its alpha or not) was written back as RGB (or RGBA): three times the
    # samples, and a picture no longer grey to the tools that read it.
    colour = cv2.imread(str(small(faces_dir, "obama.jpg", tmp_path)))
    grey = cv2.cvtColor(colour, cv2.COLOR_BGR2GRAY)
    target, out = tmp_path / f"grey.{given}", tmp_path / f"out.{written}"
    h, w = grey.shape
    opacity = np.full_like(grey, 255)
    opacity[:, : w // 6] = 0  # a transparent band on the left
    cv2.imwrite(str(target), np.dstack([grey, grey, grey, opacity]) if alpha else grey)
    if alpha:  # OpenCV writes no grey with alpha: made one by hand (Pillow, as a user's editor would)
        from PIL import Image

        Image.fromarray(np.dstack([grey, opacity]), "LA").save(target)
    result = run_cli(["image", str(target), str(out), "-s", str(faces_dir / "biden.jpg"), "--swap-model", "mesh",
                      "--no-watermark"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    written_pixels = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    if alpha:  # OpenCV reads a grey-and-alpha PNG as BGRA: its header says what the file holds
        assert out.read_bytes()[25] == 4  # colour type 4: grey with alpha
        after = written_pixels[..., 0]
        x1, y1, x2, y2 = provenance.label_box(written_pixels.shape)
        alpha_after = written_pixels[..., 3].copy()
        alpha_after[y1:y2, x1:x2] = opacity[y1:y2, x1:x2]
        assert np.array_equal(alpha_after, opacity)  # the alpha kept (but the label's opaque box)
    else:
        assert written_pixels.shape == grey.shape  # one channel
        after = written_pixels
    diff = np.abs(after.astype(int) - grey)  # one channel: smaller than a colour photo's largest of three
    assert (diff[int(h * 0.15):int(h * 0.35), int(w * 0.4):int(w * 0.65)] > 15).mean() > 0.2  # the face
    assert np.percentile(diff[: int(h * 0.08)], 99) < 12  # the top band: as it was (JPEG noise only)
    assert provenance.is_marked_synthetic(out)
    x1, y1, x2, y2 = provenance.label_box(written_pixels.shape)
    assert diff[y1:y2, x1:x2].max() > 60  # the visible label


def test_a_grey_picture_with_the_watermark_comes_back_in_colour_and_says_why(tmp_path: Path, faces_dir: Path,
                                                                            isolated_env: dict[str, str]) -> None:
    # The invisible watermark lives in the colours: a grey output read as unmarked (13 of 32 bits off)
    target, out = tmp_path / "grey.png", tmp_path / "out.png"
    cv2.imwrite(str(target), cv2.cvtColor(cv2.imread(str(small(faces_dir, "obama.jpg", tmp_path))),
                                          cv2.COLOR_BGR2GRAY))
    result = run_cli(["image", str(target), str(out), "-s", str(faces_dir / "biden.jpg"), "--swap-model", "mesh"],
                     env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert "note: grey.png is grey, but its output is written in colour" in result.stderr
    assert "--no-watermark writes it grey" in result.stderr
    assert cv2.imread(str(out), cv2.IMREAD_UNCHANGED).shape[2] == 3
    found = run_cli(["verify", "--json", str(out)], env=isolated_env)
    assert json.loads(found.stdout)[0]["watermark"]["found"], found.stdout


def test_auto_without_inswapper_falls_back_to_mesh_with_one_warning(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    out = tmp_path / "o.png"
    result = run_cli(["image", str(target), str(out), "-s", str(source), "--no-label", "--no-watermark"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "mesh swapper" in line]
    assert len(warnings) == 1 and "livecam models download inswapper_128" in warnings[0]
    # it named the inswapper and ArcFace only: fetching those two gave a neural swap on BlazeFace,
    # without the SCRFD detector (det_10g) the neural path runs
    assert "using the embedded mesh swapper: inswapper_128.onnx, w600k_r50.onnx and det_10g.onnx are not in " \
           in warnings[0], warnings
    assert "`livecam models download inswapper_128 w600k_r50 det_10g --accept-license`" in warnings[0], warnings
    assert warnings[0].endswith("; --swap-model mesh silences this"), warnings
    assert provenance.read_png_text(out)["Comment"] == provenance.DESCRIPTION
    assert "1 face swapped" in result.stderr
    before, after = read_image(target), read_image(out)
    # The fallback really swapped: the face changed, the top band did not (a lossless PNG).
    changed = np.abs(after.astype(int) - before).max(axis=2) > 25
    h, w = before.shape[:2]
    assert changed[int(h * 0.15):int(h * 0.35), int(w * 0.4):int(w * 0.65)].mean() > 0.2
    assert np.array_equal(after[: int(h * 0.08)], before[: int(h * 0.08)])
    x1, y1, x2, y2 = provenance.label_box(after.shape)
    assert np.array_equal(after[y1:y2, x1:x2], before[y1:y2, x1:x2])  # --no-label


def test_a_corrupt_inswapper_is_called_corrupt_when_auto_falls_back(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # A damaged inswapper_128.onnx in the models folder was "not available here".
    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir()
    (models / "inswapper_128.onnx").write_bytes(b"<html>502 Bad Gateway</html>")
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    result = run_cli(["image", str(target), str(tmp_path / "o.png"), "-s", str(source)], env=isolated_env)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "mesh swapper" in line]
    corrupt = [line for line in lines if "inswapper_128.onnx is corrupt" in line]
    assert len(corrupt) == 1, lines
    assert "run `livecam models download inswapper_128 --accept-license`, which replaces it" in corrupt[0]
    assert "livecam models verify" in corrupt[0]
    assert not any("inswapper_128 and" in line or "inswapper_128 not available" in line for line in lines), lines


def test_damaged_neural_models_online_fall_back_to_mesh_as_offline(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # Online (and licences accepted) a broken model file counted as "can be had" (it is
    # downloadable), but a file that is there is never downloaded again: auto chose the neural path
    # and the run failed with the repair line. Nothing is fetched here: the files are all present.
    env = {k: v for k, v in isolated_env.items() if k != "LIVECAM_OFFLINE"}
    models = Path(env["LIVECAM_MODELS_DIR"])
    models.mkdir()
    for name in ("inswapper_128", "w600k_r50"):
        (models / f"{name}.onnx").write_bytes(b"<html>502 Bad Gateway</html>")
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    out = tmp_path / "o.png"
    result = run_cli(["--accept-license", "image", str(target), str(out), "-s", str(source), "--no-watermark",
                      "--no-c2pa"], env=env)
    assert result.returncode == 0, result.stderr
    assert "swapper mesh" in result.stderr and "1 face swapped" in result.stderr
    lines = [line for line in result.stderr.splitlines() if "mesh swapper" in line]
    assert any("inswapper_128.onnx is corrupt" in line and "run `livecam models download "
               "inswapper_128 --accept-license`, which replaces it" in line for line in lines), lines
    assert (models / "inswapper_128.onnx").read_bytes() == b"<html>502 Bad Gateway</html>"  # left as it was


def test_rgba_target_and_source(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    target = small(faces_dir, "obama.jpg", tmp_path, alpha=True)
    source = small(faces_dir, "biden.jpg", tmp_path, alpha=True)
    out = tmp_path / "o.png"
    result = run_cli(["image", str(target), str(out), "-s", str(source), "--swap-model", "mesh",
                      "--no-watermark"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    before, after = read_image(target), read_image(out)
    assert after.shape == before.shape and after.shape[2] == 4
    x1, y1, x2, y2 = provenance.label_box(after.shape)
    alpha_before, alpha_after = before[..., 3].copy(), after[..., 3].copy()
    alpha_before[y1:y2, x1:x2] = alpha_after[y1:y2, x1:x2] = 0
    assert np.array_equal(alpha_after, alpha_before)  # alpha kept (except the opaque label box)
    # The face was swapped (the label alone would also make the colours differ), nothing far from it moved.
    h, w = before.shape[:2]
    changed = np.abs(after[..., :3].astype(int) - before[..., :3]).max(axis=2) > 25
    assert changed[int(h * 0.15):int(h * 0.35), int(w * 0.4):int(w * 0.65)].mean() > 0.2
    assert np.array_equal(after[: int(h * 0.08)], before[: int(h * 0.08)])


def test_no_face_in_source(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    blank = tmp_path / "blank.png"
    cv2.imwrite(str(blank), np.full((200, 200, 3), 120, np.uint8))
    target = small(faces_dir, "obama.jpg", tmp_path)
    out = tmp_path / "o.jpg"
    result = run_cli(["image", str(target), str(out), "-s", str(blank), "--swap-model", "mesh"], env=isolated_env)
    assert result.returncode == 2
    line = only_error_line(result.stderr)
    assert "no face found in source photo" in line and "blank.png" in line
    no_leftovers(tmp_path, blank, target)


def test_no_face_in_target_writes_it_unchanged(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    blank = tmp_path / "blank.png"
    cv2.imwrite(str(blank), np.full((200, 300, 3), 120, np.uint8))
    source = small(faces_dir, "biden.jpg", tmp_path)
    out = tmp_path / "o.png"
    result = run_cli(["image", str(blank), str(out), "-s", str(source), "--swap-model", "mesh", "--no-label", "--no-watermark"],
                     env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert "no face found in" in result.stderr and "blank.png" in result.stderr
    assert np.array_equal(read_image(out), read_image(blank))
    assert provenance.is_marked_synthetic(out)


@pytest.mark.parametrize("content", [b"this is not a picture\n", b""])
def test_unreadable_input(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], content: bytes) -> None:
    bad = tmp_path / "photo.jpg"
    bad.write_bytes(content)
    out = tmp_path / "o.jpg"
    result = run_cli(["image", str(bad), str(out), "-s", str(faces_dir / "biden.jpg")], env=isolated_env)
    assert result.returncode == 2
    assert "photo.jpg" in only_error_line(result.stderr)
    no_leftovers(tmp_path, bad)


def test_unreadable_source_and_missing_input(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    bad = tmp_path / "face.png"
    bad.write_text("text")
    out = tmp_path / "o.jpg"
    result = run_cli(["image", str(faces_dir / "obama.jpg"), str(out), "-s", str(bad), "--swap-model", "mesh"],
                     env=isolated_env)
    assert result.returncode == 2 and "face.png" in only_error_line(result.stderr)
    result = run_cli(["image", str(tmp_path / "missing.jpg"), str(out), "-s", str(bad)], env=isolated_env)
    assert result.returncode == 2 and "missing.jpg" in only_error_line(result.stderr)
    result = run_cli(["image", str(faces_dir / "obama.jpg"), str(tmp_path / "o.xyz"), "-s", str(bad)],
                     env=isolated_env)
    assert result.returncode == 2 and ".png" in only_error_line(result.stderr)
    no_leftovers(tmp_path, bad)


def test_one_line_for_a_bad_source_or_a_missing_arcface_with_auto_models(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    """No neural model here, so `--swap-model auto` would fall back to the mesh swapper with a
    warning; a bad --source, or --reference/--map without ArcFace, is the one problem to say."""
    target, photo = str(faces_dir / "obama.jpg"), str(faces_dir / "biden.jpg")
    out = tmp_path / "o.png"
    result = run_cli(["image", target, str(out), "-s", str(tmp_path / "nobody.jpg")], env=isolated_env)
    assert result.returncode == 2 and "nobody.jpg does not exist" in only_error_line(result.stderr)
    for extra in (["-s", photo, "--reference", photo], ["--map", f"{photo}={photo}"]):
        result = run_cli(["image", target, str(out), *extra], env=isolated_env)
        assert result.returncode == 3
        line = only_error_line(result.stderr)
        assert "w600k_r50 is missing" in line and "mesh" not in line
        # the option that needs it is named (the line named only the model)
        assert line.startswith(f"livecam: error: {extra[-2]} needs the ArcFace model w600k_r50"), line
    # a mistyped --reference or --map photo is the error, not the model it would need
    for extra in (["-s", photo, "--reference", str(tmp_path / "who.jpg")], ["--map", f"{photo}={tmp_path / 'who.jpg'}"],
                  ["--map", f"{tmp_path / 'who.jpg'}={photo}"]):
        result = run_cli(["image", target, str(out), *extra], env=isolated_env)
        assert result.returncode == 2, result.stderr
        assert "photo " + str(tmp_path / "who.jpg") + " does not exist" in only_error_line(result.stderr)
    no_leftovers(tmp_path)


def test_a_map_photo_whose_name_holds_an_equals_sign_is_found(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # --map split at the first '=': 'take=2.jpg=target.jpg' said "photo take does not exist"
    target, photo = faces_dir / "obama.jpg", faces_dir / "biden.jpg"
    for source, reference in ((tmp_path / "take=2.jpg", target), (photo, tmp_path / "who=me.jpg")):
        for named in (source, reference):
            if not named.exists():
                shutil.copyfile(photo, named)
        result = run_cli(["image", str(target), str(tmp_path / "o.png"), "--map", f"{source}={reference}"],
                         env=isolated_env)
        # past the photos to the model --map needs (none here): both were found
        assert result.returncode == 3, result.stderr
        assert "--map needs the ArcFace model w600k_r50" in only_error_line(result.stderr)


def test_an_unreadable_source_photo_is_the_one_line_even_with_the_mesh_fallback(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # `--swap-model auto` falls back to the mesh swapper here; its warning waits until the
    # engine is built, so the source's problem is all the user reads.
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"not a photo")
    out = tmp_path / "o.png"
    result = run_cli(["image", str(faces_dir / "obama.jpg"), str(out), "-s", str(broken)], env=isolated_env)
    assert result.returncode == 2
    assert "broken.jpg is not an image" in only_error_line(result.stderr)
    assert not out.exists()


def test_existing_output_needs_force(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    out = tmp_path / "o.jpg"
    out.write_bytes(b"precious")
    result = run_cli(["image", str(target), str(out), "-s", str(source), "--swap-model", "mesh"], env=isolated_env)
    assert result.returncode == 2
    line = only_error_line(result.stderr)
    assert "o.jpg exists" in line and "--force" in line
    assert out.read_bytes() == b"precious"
    result = run_cli(["image", str(target), str(out), "-s", str(source), "--swap-model", "mesh", "--force"],
                     env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert read_image(out).shape == read_image(target).shape
    no_leftovers(tmp_path, target, source, out)


def test_missing_model_offline_exits_3_without_output(tmp_path: Path, faces_dir: Path,
                                                     isolated_env: dict[str, str]) -> None:
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    out = tmp_path / "o.jpg"
    result = run_cli(["image", str(target), str(out), "-s", str(source), "--swap-model", "inswapper_128"],
                     env=isolated_env)
    assert result.returncode == 3
    line = only_error_line(result.stderr)
    assert "inswapper_128" in line and "livecam models download" in line
    no_leftovers(tmp_path, target, source)


def test_inswapper_with_standin_models(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    pytest.importorskip("livecam.processors.face_swapper")
    from tests.standins.arcface import build_arcface
    from tests.standins.inswapper import build_inswapper

    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir()
    build_arcface(models / "w600k_r50.onnx")
    build_inswapper(models / "inswapper_128.onnx")
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    out = tmp_path / "o.png"
    result = run_cli(["--unverified-models", "image", str(target), str(out), "-s", str(source),
                      "--no-watermark"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert "swapper inswapper_128" in result.stderr and "mesh swapper" not in result.stderr
    before, after = read_image(target), read_image(out)
    diff = np.abs(after.astype(int) - before).max(axis=2)
    h, w = before.shape[:2]
    face = diff[int(h * 0.15):int(h * 0.35), int(w * 0.4):int(w * 0.65)].mean()
    side = diff[:, : int(w * 0.2)].max()  # the flag on the left, far from the face
    assert face > 3 and side == 0  # the stand-in changes the face a little, and nothing far from it
    assert provenance.is_marked_synthetic(out)


def test_pixel_boost_reaches_the_inswapper(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    pytest.importorskip("livecam.processors.face_swapper")
    from tests.standins.arcface import build_arcface
    from tests.standins.inswapper import build_inswapper

    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir()
    build_arcface(models / "w600k_r50.onnx")
    build_inswapper(models / "inswapper_128.onnx")
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    before = read_image(target)
    h, w = before.shape[:2]
    outs = {}
    for boost in ("128", "256"):
        out = tmp_path / f"o{boost}.png"
        result = run_cli(["--unverified-models", "image", str(target), str(out), "-s", str(source),
                          "--swap-model", "inswapper_128", "--pixel-boost", boost, "--no-watermark", "--no-c2pa"],
                         env=isolated_env)
        assert result.returncode == 0, result.stderr
        outs[boost] = read_image(out).astype(int)
        assert np.abs(outs[boost] - before)[:, : int(w * 0.2)].max() == 0  # nothing far from the face
    face = (slice(int(h * 0.15), int(h * 0.35)), slice(int(w * 0.4), int(w * 0.65)))
    # The stand-in's 3x3 convolution sees the 256 crop's sub-pixel tiles, not the 128 crop: the
    # swap differs inside the face, so the option got to the swapper.
    assert np.abs(outs["256"] - outs["128"])[face].max(axis=2).mean() > 0.5
    assert np.abs(outs["256"] - before)[face].max(axis=2).mean() > 3


def test_options_the_run_does_not_use_are_each_warned_once(tmp_path: Path, faces_dir: Path,
                                                            isolated_env: dict[str, str]) -> None:
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    out = tmp_path / "o.png"
    result = run_cli(["image", str(target), str(out), "-s", str(source), "--swap-model", "mesh",
                      "--pixel-boost", "512", "--face-mask-blur", "0.9", "--enhancer-model", "codeformer",
                      "--no-watermark", "--no-c2pa"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("--pixel-boost and --face-mask-blur are for the neural swapper; the mesh swapper") == 1
    assert result.stderr.count("--enhancer-model is for the face enhancer, which this run does not use") == 1


@pytest.mark.parametrize("command", ["image", "run"])
def test_det_size_with_blazeface_is_warned_once(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str],
                                                command: str) -> None:
    # --det-size only sizes SCRFD; with the embedded BlazeFace (no det_10g) it was ignored without a word.
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    io = ([str(target), str(tmp_path / "o.png")] if command == "image"
          else ["--camera", str(make_clip(tmp_path / "c.mp4", frames=3, audio=False, source_image=target)),
                "--output", "none"])
    for det_size, warned in (("320", 1), (None, 0)):
        result = run_cli([command, *io, "-s", str(source), "--force", *(["--det-size", det_size] if det_size else [])],
                         env=isolated_env)
        assert result.returncode == 0, result.stderr
        assert result.stderr.count("warning: --det-size sizes the SCRFD detector (det_10g); this run's embedded "
                                   "BlazeFace has a fixed input size, so it is ignored") == warned, result.stderr


def test_the_input_photo_is_never_the_output_even_with_force(tmp_path: Path, faces_dir: Path,
                                                             isolated_env: dict[str, str]) -> None:
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    original = target.read_bytes()
    link = tmp_path / "link.png"
    link.symlink_to(target)
    for out in (target, link):  # the same path, and another name for the same file
        result = run_cli(["image", str(target), str(out), "-s", str(source), "--swap-model", "mesh", "--force"],
                         env=isolated_env)
        assert result.returncode == 2, result.stderr
        assert "is the input; write to another file" in only_error_line(result.stderr)
    assert target.read_bytes() == original
    no_leftovers(tmp_path, target, source, link)


def test_force_onto_a_link_writes_the_linked_file_and_keeps_the_link(tmp_path: Path, faces_dir: Path,
                                                                      isolated_env: dict[str, str]) -> None:
    # `livecam image t.png latest.png --force`, latest.png a link into a gallery folder: the link
    # became a plain file and the gallery kept the old picture (cp and ffmpeg -y write through it)
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    gallery = tmp_path / "gallery"
    gallery.mkdir()
    linked = gallery / "today.png"
    linked.write_bytes(b"yesterday's picture")
    link = tmp_path / "latest.png"
    link.symlink_to(linked)
    result = run_cli(["image", str(target), str(link), "-s", str(source), "--swap-model", "mesh", "--force",
                      "--no-watermark"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and os.readlink(link) == str(linked)
    assert read_image(linked).shape == read_image(target).shape
    no_leftovers(tmp_path, target, source, link, gallery)
    no_leftovers(gallery, linked)


def test_force_never_replaces_a_source_reference_or_map_photo(tmp_path: Path, faces_dir: Path,
                                                               isolated_env: dict[str, str]) -> None:
    # `livecam image t.jpg me.jpg -s me.jpg --force` replaced the portrait.
    target, me = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    original = me.read_bytes()
    for option in (["-s", str(me)], ["-s", str(target), "--reference", str(me)], ["--map", f"{target}={me}"],
                   ["--map", f"{me}={target}"], ["-s", str(tmp_path)]):
        result = run_cli(["image", str(target), str(me), *option, "--swap-model", "mesh", "--force"],
                         env=isolated_env)
        assert result.returncode == 2, (option, result.stderr)
        line = only_error_line(result.stderr)
        assert str(me) in line and "--force never replaces an input" in line, line
    assert me.read_bytes() == original
    no_leftovers(tmp_path, target, me)


def test_unwritable_output_folder_is_refused_before_any_model_loads(tmp_path: Path, faces_dir: Path,
                                                                   isolated_env: dict[str, str]) -> None:
    folder = unwritable_folder(tmp_path)
    target = small(faces_dir, "obama.jpg", tmp_path)
    # The default swap model: the mesh fallback's warning would show that models were loaded.
    result = run_cli(["image", str(target), str(folder / "o.png"), "-s", str(target)], env=isolated_env)
    assert result.returncode == 2, result.stderr
    assert f"the output folder {folder} is not writable" in only_error_line(result.stderr)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="Linux's /proc")
@pytest.mark.parametrize("command", ["image", "video"])
def test_an_output_in_proc_is_one_line_naming_the_problem_and_the_fix(command: str, tmp_path: Path, faces_dir: Path,
                                                                      isolated_env: dict[str, str]) -> None:
    # as root it was "the output folder /proc is not writable (No such file or directory)"
    target = small(faces_dir, "obama.jpg", tmp_path)
    given = target if command == "image" else make_clip(tmp_path / "in.mp4", frames=2, audio=False)
    out = "/proc/o.jpg" if command == "image" else "/proc/o.mp4"
    result = run_cli([command, str(given), out, "-s", str(target)], env=isolated_env)
    assert result.returncode == 2, result.stderr
    line = only_error_line(result.stderr)
    assert line.startswith("livecam: error: the output folder /proc is not writable (") and "No such file" not in line
    assert line.endswith("); choose another output path"), line


def test_no_face_of_the_reference_person_says_so(tmp_path: Path, faces_dir: Path,
                                                isolated_env: dict[str, str]) -> None:
    from tests.standins.arcface import build_arcface

    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir()
    build_arcface(models / "w600k_r50.onnx")
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    out = tmp_path / "o.png"
    result = run_cli(["--unverified-models", "image", str(target), str(out), "-s", str(source), "--swap-model",
                      "mesh", "--reference", str(source), "--reference-distance", "0", "--no-label", "--no-watermark"],
                     env=isolated_env)
    assert result.returncode == 0, result.stderr
    # The photo has a face, just not the reference person's: say which kind of face was missing.
    assert "no face of the --reference person (within --reference-distance 0) found in" in result.stderr
    assert np.array_equal(read_image(out), read_image(target))


def test_the_enhancer_alone_needs_no_source(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    from tests.standins.gfpgan import build_gfpgan

    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir()
    build_gfpgan(models / "gfpgan_1.4.onnx", kind="random")
    target = small(faces_dir, "obama.jpg", tmp_path)
    out = tmp_path / "o.png"
    result = run_cli(["--unverified-models", "image", str(target), str(out), "--frame-processor", "face_enhancer",
                      "--no-label", "--no-watermark"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert "1 face enhanced" in result.stderr and "enhancer gfpgan_1.4" in result.stderr
    # The face was enhanced (with --no-label nothing else could change it); the bottom of the photo,
    # far from the face, was not.
    before, after = read_image(target), read_image(out)
    diff = np.abs(after.astype(int) - before).max(axis=2)
    h, w = before.shape[:2]
    assert (diff[int(h * 0.15):int(h * 0.35), int(w * 0.4):int(w * 0.65)] > 10).mean() > 0.2
    assert not diff[int(h * 0.7):].any()


@pytest.mark.parametrize("ext", [".jpg", ".png", ".tif"])
def test_the_output_keeps_the_photos_print_density(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str],
                                                   ext: str) -> None:
    # A 300 dpi photo came out with no density (viewers and printers take 72 dpi: a print four
    # times as large). This one is stored sideways (EXIF orientation 6) at 300 x 150 dpi: upright,
    # its axes swap.
    pil = pytest.importorskip("PIL.Image")
    photo = pil.open(small(faces_dir, "obama.jpg", tmp_path)).transpose(pil.Transpose.ROTATE_90)
    exif = pil.Exif()
    exif[0x0112] = 6
    target = tmp_path / "sideways.jpg"
    photo.save(target, exif=exif.tobytes(), dpi=(300, 150))
    out = tmp_path / f"o{ext}"
    result = run_cli(["image", str(target), str(out), "-s", str(faces_dir / "biden.jpg"), "--swap-model", "mesh",
                      "--no-watermark"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    written = pil.open(out)
    assert written.size == (photo.height, photo.width)  # upright
    assert np.allclose(written.info.get("dpi", (0, 0)), (150, 300), atol=0.05), written.info  # PNG: per metre


def test_a_webp_output_keeps_the_photos_print_density_and_the_provenance_mark(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # A .webp output lost the density: the provenance tags replaced the EXIF block that held it.
    pil = pytest.importorskip("PIL.Image")
    target = tmp_path / "photo.jpg"
    pil.open(small(faces_dir, "obama.jpg", tmp_path)).save(target, dpi=(300, 150))
    out = tmp_path / "o.webp"
    result = run_cli(["image", str(target), str(out), "-s", str(faces_dir / "biden.jpg"), "--swap-model", "mesh",
                      "--no-watermark"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    exif = pil.open(out).getexif()  # Pillow's own EXIF reader, not livecam's
    assert (float(exif[0x011A]), float(exif[0x011B]), exif[0x0128]) == (300.0, 150.0, 2), dict(exif)
    assert exif[0x010E] == provenance.DESCRIPTION
    verified = run_cli(["verify", str(out)], env=isolated_env)
    assert verified.returncode == 0 and "MARKED" in verified.stdout, verified.stdout + verified.stderr


def test_a_missing_enhancer_says_its_checkpoint_can_be_converted(tmp_path: Path, faces_dir: Path,
                                                                isolated_env: dict[str, str]) -> None:
    # GFPGAN cannot be fetched (offline here): the fix said only "copy gfpgan_1.4.onnx into ...", a
    # file the user may not have, while the GFPGANv1.4.pth many hold converts with `models convert`.
    target = small(faces_dir, "obama.jpg", tmp_path)
    out = tmp_path / "o.png"
    result = run_cli(["--offline", "image", str(target), str(out), "--frame-processor", "face_enhancer"],
                     env=isolated_env)
    assert result.returncode == 3, result.stderr
    assert "model gfpgan_1.4 is missing" in result.stderr
    assert "or make it from GFPGANv1.4.pth with `livecam models convert GFPGANv1.4.pth`" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and not out.exists()


def test_faces_too_small_to_swap_are_reported_not_counted(tmp_path: Path, faces_dir: Path,
                                                          isolated_env: dict[str, str]) -> None:
    # Biden at 1/6 size: a face is found, but under 24 px between the eyes the swapper leaves it.
    img = cv2.imread(str(faces_dir / "biden.jpg"))
    target = tmp_path / "far.png"
    cv2.imwrite(str(target), cv2.resize(img, (img.shape[1] // 6, img.shape[0] // 6), interpolation=cv2.INTER_AREA))
    source = small(faces_dir, "obama.jpg", tmp_path)
    out = tmp_path / "o.png"
    result = run_cli(["image", str(target), str(out), "-s", str(source), "--swap-model", "mesh", "--no-label", "--no-watermark"],
                     env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert "too small to change (under 24 px between the eyes)" in result.stderr and "far.png" in result.stderr
    assert "0 faces swapped" in result.stderr and "1 face swapped" not in result.stderr
    assert np.array_equal(read_image(out), read_image(target))


def test_a_tiny_source_face_is_warned_about(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    img = cv2.imread(str(faces_dir / "obama.jpg"))
    tiny = tmp_path / "tiny.png"
    cv2.imwrite(str(tiny), cv2.resize(img, (img.shape[1] // 8, img.shape[0] // 8), interpolation=cv2.INTER_AREA))
    target = small(faces_dir, "biden.jpg", tmp_path)
    for run in range(2):  # the second run reads the cached analysis and still warns
        out = tmp_path / f"o{run}.png"
        result = run_cli(["image", str(target), str(out), "-s", str(tiny), "--swap-model", "mesh", "--no-label", "--no-watermark"],
                         env=isolated_env)
        assert result.returncode == 0, result.stderr
        assert "the face in source photo" in result.stderr and "tiny.png is small (" in result.stderr, result.stderr
        assert "1 face swapped" in result.stderr


def test_a_reference_photo_without_a_face_is_called_a_reference_photo(tmp_path: Path, faces_dir: Path,
                                                                      isolated_env: dict[str, str]) -> None:
    from tests.standins.arcface import build_arcface

    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir()
    build_arcface(models / "w600k_r50.onnx")
    blank = tmp_path / "blank.png"
    cv2.imwrite(str(blank), np.full((200, 300, 3), 120, np.uint8))
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    out = tmp_path / "o.png"
    result = run_cli(["--unverified-models", "image", str(target), str(out), "-s", str(source), "--swap-model",
                      "mesh", "--reference", str(blank)], env=isolated_env)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "no face found in reference photo" in errors[0] and "blank.png" in errors[0]
    assert not out.exists()


def test_the_output_keeps_the_input_photos_colour_profile(tmp_path: Path, faces_dir: Path,
                                                          isolated_env: dict[str, str]) -> None:
    # Without it, a Display P3 or Adobe RGB photo (phones, cameras) came out looking duller.
    Image = pytest.importorskip("PIL.Image")
    profile = b"\x00\x00\x02\x00lcms\x04\x30\x00\x00mntrRGB XYZ " + bytes(12) + b"acsp" + bytes(472)
    target = tmp_path / "p3.jpg"
    with Image.open(small(faces_dir, "obama.jpg", tmp_path)) as photo:
        photo.convert("RGB").save(target, icc_profile=profile)
    out = tmp_path / "out.webp"
    result = run_cli(["image", str(target), str(out), "-s", str(faces_dir / "biden.jpg"), "--swap-model", "mesh",
                      "--no-watermark"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    with Image.open(out) as written:
        assert written.info.get("icc_profile") == profile


@pytest.mark.parametrize("suffix, size", [(".webp", (20000, 60)), (".jpg", (66000, 2))])
def test_an_image_too_large_for_the_output_format_is_refused_before_any_model_loads(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], suffix: str, size: tuple[int, int]) -> None:
    # It ran every model, then failed with "OpenCV could not encode a 20000x60 image as webp", exit 1.
    wide = tmp_path / "panorama.png"
    cv2.imwrite(str(wide), np.full((size[1], size[0], 3), 128, np.uint8))
    out = tmp_path / f"o{suffix}"
    result = run_cli(["image", str(wide), str(out), "-s", str(faces_dir / "biden.jpg")], env=isolated_env)
    assert result.returncode == 2, result.stderr
    line = only_error_line(result.stderr)  # the mesh fallback's warning would show that models were loaded
    assert f"cannot hold a {size[0]}x{size[1]} image" in line and ".png" in line
    no_leftovers(tmp_path, wide)


def test_an_upside_down_photo_is_swapped(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    """`livecam image` looks for faces at every roll (a photo taken upside down said "no face found")."""
    target = tmp_path / "upside_down.png"
    cv2.imwrite(str(target), cv2.rotate(cv2.imread(str(small(faces_dir, "biden.jpg", tmp_path))), cv2.ROTATE_180))
    out = tmp_path / "o.png"
    result = run_cli(["image", str(target), str(out), "-s", str(faces_dir / "obama.jpg"), "--swap-model", "mesh",
                      "--no-label", "--no-watermark"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert "1 face swapped" in result.stderr, result.stderr
    before, after = read_image(target), read_image(out)
    # (12: the colour matched by lightness changes less by much; upright, the same share changes)
    changed = np.abs(after.astype(int) - before).max(axis=2) > 12
    h = before.shape[0]
    assert changed[h // 2:].mean() > 0.01 and changed[: h // 4].mean() < 0.001  # biden's face is in the lower half now


@pytest.mark.parametrize("command", ["image", "video"])
def test_an_output_with_a_trailing_slash_is_refused(command: str, tmp_path: Path, faces_dir: Path,
                                                    isolated_env: dict[str, str]) -> None:
    """`out.jpg/` means a folder: the file out.jpg was written instead (Path drops the slash)."""
    name = "out.jpg/" if command == "image" else "out.mp4/"
    result = run_cli([command, str(faces_dir / "obama.jpg"), str(tmp_path) + "/" + name,
                      "--source", str(faces_dir / "biden.jpg")], env=isolated_env)
    assert result.returncode == 2
    line = only_error_line(result.stderr)
    assert f"{name}' ends in a slash, which means a folder; give the file name without it" in line, line
    no_leftovers(tmp_path)


def test_help_names_the_formats_read_and_written() -> None:
    result = run_cli(["image", "--help"])
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "reads JPEG, PNG, WebP, TIFF, BMP, GIF; writes JPEG, PNG, WebP, TIFF" in text, text


def test_a_video_given_as_the_source_face_is_told_how_to_take_a_frame_of_it(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # `--source clip.mp4` was told "(`livecam video` swaps the faces in videos)": the hint for a
    # video given to `livecam image` as its input, useless for the face to put in.
    from livecam.settings import IMAGE_READ_FORMATS
    from tests.videos import make_animation, make_clip

    formats = ", ".join(IMAGE_READ_FORMATS)
    clip = make_clip(tmp_path / "my clip.mp4", frames=2, audio=False)
    gif = make_animation(tmp_path / "face.gif", frames=2)
    out = tmp_path / "o.jpg"

    def error_line(target: Path, source: Path) -> str:
        result = run_cli(["image", str(target), str(out), "-s", str(source), "--swap-model", "mesh"], env=isolated_env)
        assert result.returncode == 2, result.stderr
        return only_error_line(result.stderr)

    line = error_line(faces_dir / "obama.jpg", clip)
    assert line == (f"livecam: error: {clip} is a video, not a photo; a source photo must be a still image of "
                    f"the face ({formats}): save one frame of the video as a photo first, e.g. "
                    f"`ffmpeg -ss 5 -i '{clip}' -frames:v 1 face.jpg` (the frame 5 seconds in), and give face.jpg"), line
    # the same video as the input to swap faces in keeps its own hint
    line = error_line(clip, faces_dir / "biden.jpg")
    assert line.endswith(f"is a video, not a photo; give a {formats} image (`livecam video` swaps "
                         f"the faces in videos)"), line
    # an animated GIF as the source face: not "use `livecam video`" either
    line = error_line(faces_dir / "obama.jpg", gif)
    assert line == (f"livecam: error: {gif} is an animated GIF, not one picture; a source photo must be one still "
                    f"image of the face: save the frame you want as its own image (e.g. `ffmpeg -i {gif} -frames:v 1 "
                    f"face.png` takes the first) and give that"), line
    no_leftovers(tmp_path, clip, gif)


@pytest.mark.parametrize("fmt, codec, name", [
    ("mpegts", "libx264", "rec.ts"), ("vob", "mpeg2video", "clip.mpg"), ("flv", "flv", "clip.flv"),
    ("asf", "wmv2", "clip.wmv"), ("h264", "libx264", "cam.h264"), ("yuv4mpegpipe", "rawvideo", "clip.y4m"),
])
def test_a_video_livecam_video_reads_is_called_a_video_in_any_container(
        tmp_path: Path, isolated_env: dict[str, str], fmt: str, codec: str, name: str) -> None:
    # only MP4/MOV, Matroska and AVI were: a .ts, .mpg, .flv, .wmv, .y4m or a dashcam's .h264
    # given to `livecam image` was "not an image livecam can read; check the file"
    import av

    clip = tmp_path / name
    with av.open(str(clip), "w", format=fmt) as out:
        vs = out.add_stream(codec, rate=25)
        vs.width, vs.height, vs.pix_fmt = 64, 48, "yuv420p"
        for i in range(3):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 60 * i, np.uint8), format="bgr24")
            frame.pts = i
            out.mux(vs.encode(frame))
        out.mux(vs.encode())
    result = run_cli(["image", str(clip), str(tmp_path / "o.jpg"), "-s", "face.jpg"], env=isolated_env)
    assert result.returncode == 2
    line = only_error_line(result.stderr)
    assert line.startswith(f"livecam: error: {clip} is a video, not a photo; ") and "`livecam video`" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_options_an_image_has_no_use_for_are_said(tmp_path: Path, faces_dir: Path,
                                                  isolated_env: dict[str, str]) -> None:
    # --smoothing, --execution-threads (one frame), --reference-distance without --reference or
    # --map, and --many-faces with --map were dropped without a word.
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    base = ["image", str(target), str(tmp_path / "o.png"), "-s", str(source), "--swap-model", "mesh", "--force",
            "--no-watermark", "--no-c2pa"]
    result = run_cli([*base, "--smoothing", "0.2", "--execution-threads", "2", "--reference-distance", "0.4"],
                     env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("warning: --smoothing and --execution-threads are for videos and live runs; an image "
                               "is one frame (nothing to smooth across and its models get every core), so they are "
                               "ignored") == 1, result.stderr
    # each with its own reason: --smoothing alone was told "whose models get every core"
    alone = run_cli([*base, "--smoothing", "0.2"], env=isolated_env)
    assert alone.returncode == 0 and "warning: --smoothing is for videos and live runs; an image is one frame " \
                                     "(nothing to smooth across), so it is ignored" in alone.stderr, alone.stderr
    assert result.stderr.count("warning: --reference-distance is how close a face must be to the --reference or "
                               "--map person; this run gives neither, so it is ignored") == 1, result.stderr
    from tests.standins.arcface import build_arcface  # --reference recognises people with ArcFace

    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir(exist_ok=True)
    build_arcface(models / "w600k_r50.onnx")
    base.remove("-s")
    base.remove(str(source))
    mapped = run_cli(["--unverified-models", *base, "--map", f"{source}={target}", "--reference-distance", "2",
                      "--many-faces"], env=isolated_env)
    assert mapped.returncode == 0, mapped.stderr
    assert mapped.stderr.count("warning: --many-faces is ignored with --map, which swaps every face of its "
                               "REFERENCE people") == 1, mapped.stderr
    assert "--reference-distance" not in mapped.stderr  # --map uses it
