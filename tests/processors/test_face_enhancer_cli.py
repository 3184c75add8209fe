"""`livecam image` / `video` with the swapper and each new enhancer model, on stand-ins of the
exact signatures: the enhancer changes pixels inside the face and nothing outside it, and
--enhancer-weight reaches CodeFormer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import cv2
import numpy as np
import pytest

from livecam.media.images import read_image
from tests.commands.test_image import small
from tests.conftest import run_cli
from tests.standins.arcface import build_arcface
from tests.standins.enhancers import build_enhancer
from tests.standins.inswapper import build_inswapper
from tests.videos import make_clip, probe

EXACT = ["--no-label", "--no-watermark", "--no-c2pa"]  # nothing but the processors changes pixels


def cli_setup(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str],
              add_enhancers: Callable[[Path], object]) -> dict:
    """A models folder with the ArcFace and inswapper stand-ins and what `add_enhancers` builds
    in it, and a small target and source photo."""
    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir()
    build_arcface(models / "w600k_r50.onnx")
    build_inswapper(models / "inswapper_128.onnx")
    add_enhancers(models)
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    return {"env": isolated_env, "target": target, "source": source, "tmp": tmp_path, "models": models}


@pytest.fixture
def setup(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> dict:
    return cli_setup(tmp_path, faces_dir, isolated_env,
                     lambda models: [build_enhancer(models / f"{name}.onnx", name, kind="random")
                                     for name in ("gpen_bfr_256", "gpen_bfr_512", "codeformer")])


def _image(setup: dict, out_name: str, *extra: str, swap_model: str | None = "inswapper_128") -> np.ndarray:
    """`livecam image` on setup's target and source with `extra`; the output's pixels (exit 0).
    swap_model None: `extra` chooses it."""
    out = setup["tmp"] / out_name
    swap = ["--swap-model", swap_model] if swap_model else []
    result = run_cli(["--unverified-models", "image", str(setup["target"]), str(out), "-s", str(setup["source"]),
                      *swap, *EXACT, *extra], env=setup["env"])
    assert result.returncode == 0, result.stderr
    setup["stderr"] = result.stderr
    return read_image(out).astype(int)


def _regions(image: np.ndarray) -> tuple[tuple[slice, slice], tuple[slice, slice]]:
    h, w = image.shape[:2]
    face = (slice(int(h * 0.15), int(h * 0.35)), slice(int(w * 0.4), int(w * 0.65)))  # eyes to mouth
    far = (slice(None), slice(0, int(w * 0.2)))  # the flag on the left
    return face, far


@pytest.mark.parametrize("model", ["gpen_bfr_256", "gpen_bfr_512", "codeformer"])
def test_image_swap_then_enhance(setup: dict, model: str) -> None:
    swapped = _image(setup, "swapped.png")
    enhanced = _image(setup, f"{model}.png", "--frame-processor", "face_swapper", "face_enhancer",
                      "--enhancer-model", model, "--enhancer-blend", "1", "--enhancer-weight",
                      "0" if model == "codeformer" else "0.5")
    assert f"enhancer {model}" in setup["stderr"]
    assert ("--enhancer-weight" in setup["stderr"]) == (model != "codeformer")  # warned, once
    assert setup["stderr"].count("--enhancer-weight") <= 1
    face, far = _regions(swapped)
    assert (np.abs(enhanced - swapped)[face].max(axis=2) > 4).mean() > 0.3
    assert np.array_equal(enhanced[far], swapped[far])


def test_enhancer_weight_reaches_codeformer(setup: dict) -> None:
    args = ("--frame-processor", "face_swapper", "face_enhancer", "--enhancer-model", "codeformer",
            "--enhancer-blend", "1")
    swapped = _image(setup, "swapped.png")
    keep = _image(setup, "w1.png", *args)  # default w = 1: the stand-in gives the face back
    restore = _image(setup, "w0.png", *args, "--enhancer-weight", "0")
    half = _image(setup, "w05.png", *args, "--enhancer-weight", "0.5")
    face, far = _regions(swapped)
    d_keep, d_restore, d_half = (np.abs(x - swapped)[face].mean() for x in (keep, restore, half))
    assert d_keep < 2.0 and d_restore > 4.0 and d_keep < d_half < d_restore
    assert np.array_equal(restore[far], swapped[far])


def test_video_swap_then_enhance(tmp_path: Path, faces_dir: Path, setup: dict) -> None:
    src = make_clip(tmp_path / "obama.mp4", frames=8, size=(640, 480), fps=30, audio=True,
                    source_image=faces_dir / "obama.jpg", moving_crop=False)
    outs = {}
    for name, extra in (("swapped", ()), ("enhanced", ("--frame-processor", "face_swapper", "face_enhancer",
                                                       "--enhancer-model", "gpen_bfr_256", "--enhancer-blend", "1"))):
        out = tmp_path / f"{name}.mp4"
        result = run_cli(["--unverified-models", "video", str(src), str(out), "-s", str(setup["source"]),
                          "--swap-model", "inswapper_128", "--execution-threads", "1", "--video-quality", "0",
                          *EXACT, *extra], env=setup["env"], timeout=300)
        assert result.returncode == 0, result.stderr
        outs[name] = probe(out)
    assert "enhancer gpen_bfr_256" in result.stderr
    assert outs["enhanced"]["frames"] == outs["swapped"]["frames"] == 8
    assert outs["enhanced"]["audio_duration"] == pytest.approx(outs["swapped"]["audio_duration"], abs=1 / 30)
    for i in (0, 7):
        a, b = outs["swapped"]["images"][i].astype(int), outs["enhanced"]["images"][i].astype(int)
        face = np.abs(a[200:330, 320:460] - b[200:330, 320:460]).mean()
        background = np.abs(a[:, :150] - b[:, :150]).mean()
        assert background < 1.0 and face > 4.0, (i, face, background)


def test_a_source_without_the_swapper_is_said_unused_once(setup: dict) -> None:
    # --source with the enhancer alone was taken without a word (even a photo that does not exist).
    enhanced = _image(setup, "enhanced.png", "--frame-processor", "face_enhancer", "--enhancer-model", "gpen_bfr_256",
                      "-s", str(setup["tmp"] / "missing.jpg"), swap_model=None)
    assert setup["stderr"].count("--source") == 1
    assert ("warning: --source is for the face swapper, which this run does not use (add --frame-processor "
            "face_swapper)") in setup["stderr"]
    face, far = _regions(enhanced)
    target = read_image(setup["target"]).astype(int)
    assert (np.abs(enhanced - target)[face].max(axis=2) > 4).mean() > 0.3 and np.array_equal(enhanced[far], target[far])


def test_a_map_without_the_swapper_chooses_faces_and_says_its_sources_go_unused(setup: dict) -> None:
    # --map's REFERENCE picks the faces to enhance; its SOURCE photos were checked, then unused without a word.
    target = setup["target"]
    result = run_cli(["--unverified-models", "image", str(target), str(setup["tmp"] / "mapped.png"), *EXACT,
                      "--frame-processor", "face_enhancer", "--enhancer-model", "gpen_bfr_256", "--blend", "0.5",
                      "--map", f"{setup['source']}={target}"], env=setup["env"])
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("warning: --map's SOURCE and --blend are for the face swapper, which this run does "
                               "not use (add --frame-processor face_swapper)") == 1, result.stderr
    assert "1 face enhanced" in result.stderr


@pytest.mark.parametrize("source", [True, False])
def test_bench_of_the_enhancer_alone_takes_its_clip_from_the_source_photo(setup: dict, faces_dir: Path,
                                                                         source: bool) -> None:
    # Without a swapper, bench's --source photo makes the clip (no warning that it goes unused);
    # without one, the sample portrait does, and no sample face is put in as a source.
    given = ["-s", str(faces_dir / "obama.jpg")] if source else []
    result = run_cli(["--unverified-models", "bench", "--frames", "10", "--resolution", "480x360", "--json",
                      "--frame-processor", "face_enhancer", "--enhancer-model", "gpen_bfr_256", *given],
                     env=setup["env"], timeout=180)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["faces_changed_per_frame"] == 1.0 and report["processors"] == ["face_enhancer"]
    assert "warning: --source" not in result.stderr and "warning: no face" not in result.stderr
    assert ("grace_hopper" in result.stderr) != source and "astronaut" not in result.stderr


def test_models_list_shows_the_enhancers_with_their_licences(isolated_env: dict[str, str]) -> None:
    result = run_cli(["models", "list"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    for name in ("gfpgan_1.4", "gpen_bfr_256", "gpen_bfr_512", "codeformer"):
        assert name in rows and "missing" in rows[name]
    assert "NTU S-Lab" in rows["codeformer"] and "needs --accept-license" in rows["codeformer"]
    assert "non-commercial" in rows["gpen_bfr_256"] and "needs --accept-license" in rows["gpen_bfr_512"]
    assert "needs --accept-license" not in rows["gfpgan_1.4"]


def test_the_enhancer_after_the_swapper_keeps_the_mouth_mask_mouth(setup: dict) -> None:
    # With --mouth-mask the swapper kept the target's mouth, and the enhancer then re-rendered it.
    target = read_image(setup["target"]).astype(int)
    plain = _image(setup, "plain.png")
    kept = _image(setup, "kept.png", "--mouth-mask")
    enhanced = _image(setup, "enhanced.png", "--mouth-mask", "--frame-processor", "face_swapper", "face_enhancer",
                      "--enhancer-model", "gpen_bfr_256", "--enhancer-blend", "1")
    mouth = ((kept == target).all(axis=2) & (plain != target).any(axis=2)).astype(np.uint8)
    inside = cv2.erode(mouth, np.ones((7, 7), np.uint8)).astype(bool)  # away from the two masks' fades
    assert inside.sum() > 500
    assert np.array_equal(enhanced[inside], target[inside])
    face, _ = _regions(target)
    assert (np.abs(enhanced - kept)[face].max(axis=2) > 4).mean() > 0.3  # the rest of the face is enhanced


def test_the_enhancer_after_the_swapper_keeps_what_its_face_mask_kept(tmp_path: Path, faces_dir: Path,
                                                                      isolated_env: dict[str, str]) -> None:
    """--face-mask occlusion keeps what covers the face (the stand-in occluder: the right half of
    any crop) as the target's through the swapper; the enhancer after it restored it all the
    same. Now it leaves out the same part. The enhancer alone keeps nothing (the options are
    the swapper's, said unused) and pastes as before."""
    from tests.standins.masks import build_xseg

    setup = cli_setup(tmp_path, faces_dir, isolated_env,
                      lambda models: (build_enhancer(models / "gpen_bfr_512.onnx", "gpen_bfr_512", kind="random"),
                                      build_xseg(models / "xseg_1.onnx")))
    target = read_image(setup["target"]).astype(int)
    occlusion = ("--face-mask", "box", "occlusion")
    enhance = ("--frame-processor", "face_swapper", "face_enhancer", "--enhancer-model", "gpen_bfr_512",
               "--enhancer-blend", "1")
    swapped = _image(setup, "swapped.png", *occlusion)
    both = _image(setup, "both.png", *enhance, *occlusion)
    plain = _image(setup, "plain.png", *enhance)
    face, _ = _regions(target)
    kept = np.all(swapped == target, axis=2)[face]  # what the swapper left as it was
    assert 0.2 < kept.mean() < 0.8
    assert (np.abs(plain - target)[face].max(axis=2) > 4)[kept].mean() > 0.3  # an enhancer changes it
    assert (both == target)[face].all(axis=2)[kept].mean() > 0.97  # but not after that swapper
    assert (np.abs(both - swapped)[face].max(axis=2) > 4)[~kept].mean() > 0.3  # the swapped part: enhanced
    alone = ("--frame-processor", "face_enhancer", "--enhancer-model", "gpen_bfr_512", "--enhancer-blend", "1")
    masked_alone = _image(setup, "alone_masked.png", *alone, *occlusion, swap_model=None)
    assert "--source and --face-mask are for the face swapper, which this run does not use" in setup["stderr"]
    assert np.array_equal(masked_alone, _image(setup, "alone.png", *alone, swap_model=None))
