"""HyperSwap 1a/1b/1c 256 through the neural swapper, on a stand-in of the files' exact signature
(tests/standins/hyperswap.py): the catalog facts, what reaches the model (the normed embedding,
no emap; the 256 crop in [-1, 1]), the paste-back, several sources, --map, the masks and pixel
boost, and the CLI end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from livecam.errors import InputError, ModelError
from livecam.faces.align import arcface_template, to_blob
from livecam.faces.source import SourceIdentity
from livecam.frame import FramePacket
from livecam.models.catalog import CATALOG
from livecam.models.store import signature_problem
from livecam.processors.crop_masks import FaceMasker
from livecam.processors.face_swapper import HYPERSWAP, INSWAPPER, NeuralSwapper, swap_kind
from livecam.processors.occluder import Occluder
from livecam.settings import HYPERSWAP_MODELS, SWAP_MODELS, SwapSettings
from tests.processors.test_face_swapper import (BIDEN_KPS, OBAMA_KPS, _CountingSession, _embedding, _face,
                                                _noise_frame, _quad_mask, _rotated, _source)
from tests.standins import cpu_session
from tests.standins.hyperswap import build_hyperswap
from tests.standins.inswapper import build_inswapper
from tests.standins.masks import build_xseg

NO_COLOR = SwapSettings(color_match=False)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("hyperswap")
    return {"hs": build_hyperswap(d / "hyperswap_1a_256.onnx"),
            "identity": build_hyperswap(d / "identity.onnx", identity=True),
            "identity_dyn": build_hyperswap(d / "identity_dyn.onnx", identity=True, batch="N"),
            "inswapper": build_inswapper(d / "inswapper_128.onnx"),
            "xseg": build_xseg(d / "xseg_1.onnx")}


class _Recording(_CountingSession):
    """A session that also keeps every run's feeds and the outputs asked for."""

    def __init__(self, session) -> None:
        super().__init__(session)
        self.feeds: list[dict[str, np.ndarray]] = []
        self.asked: list[object] = []

    def run(self, names, feeds):
        self.feeds.append({k: np.array(v) for k, v in feeds.items()})
        self.asked.append(names)
        return super().run(names, feeds)


def _swapper(path, settings=NO_COLOR, sources=None, **kw) -> NeuralSwapper:
    sw = NeuralSwapper(_Recording(cpu_session(path)), settings, kind=HYPERSWAP, **kw)
    sw.prepare(sources if sources is not None else [_source(1)])
    return sw


def _run(sw: NeuralSwapper, image: np.ndarray, faces) -> np.ndarray:
    packet = FramePacket(index=0, image=image.copy(), faces=faces)
    sw.process(packet)
    return packet.image


# -- catalog ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", HYPERSWAP_MODELS)
def test_catalog_entries_and_the_standin_signature(models, name):
    spec = CATALOG[name]
    assert name in SWAP_MODELS and swap_kind(name) is HYPERSWAP and swap_kind("inswapper_128") is INSWAPPER
    assert spec.urls == (
        f"https://github.com/facefusion/facefusion-assets/releases/download/models-3.3.0/{name}.onnx",
        f"https://huggingface.co/facefusion/models-3.3.0/resolve/main/{name}.onnx")
    assert spec.size == 402_742_682 and spec.sha256 is not None and len(spec.sha256) == 64
    assert spec.needs_acceptance and "ResearchRAIL" in spec.licence
    session = cpu_session(models["hs"])
    assert signature_problem(spec, session.get_inputs(), session.get_outputs()) in ("", None)
    # An inswapper file is not a HyperSwap one.
    other = cpu_session(models["inswapper"])
    assert signature_problem(spec, other.get_inputs(), other.get_outputs())


def test_the_1a_digest_is_the_one_the_issue_states():
    assert CATALOG["hyperswap_1a_256"].sha256 == "c0e98a8a03a238f461ed3d2570e426b49f46745ee400854a60dceeb70c246add"


# -- what reaches the model -------------------------------------------------------------------

def test_the_source_input_is_the_normed_embedding_without_an_emap(models):
    e = _embedding(3) * 7.0  # not unit length: the swapper normalises
    src = _source(1)
    sw = _swapper(models["hs"], sources=[SourceIdentity(paths=(), image=src.image, face=src.face, embedding=e)])
    image, face = _noise_frame()
    _run(sw, image, [face])
    fed = sw._session.feeds[0]
    assert fed["source"].shape == (1, 512) and fed["source"].dtype == np.float32
    np.testing.assert_allclose(fed["source"][0], e / np.linalg.norm(e), rtol=1e-6, atol=1e-7)
    # The target: the 256 crop by the ArcFace template scaled to 256, RGB, (x / 255 - 0.5) / 0.5.
    aligned = sw.align(image, face)
    assert aligned.crop.shape == (256, 256, 3)
    np.testing.assert_allclose(arcface_template(256), arcface_template(128) * 2, atol=1e-4)
    expected = aligned.crop[:, :, ::-1].transpose(2, 0, 1).astype(np.float32) / 255.0
    np.testing.assert_allclose(fed["target"][0], (expected - 0.5) / 0.5, atol=1e-5)
    assert fed["target"].min() < -0.25 and fed["target"].max() > 0.25  # signed, not [0, 1]
    assert sw._session.asked[0] == ["output"]  # the mask output is not fetched


def test_several_source_photos_average_into_one_normed_input(models):
    a, b = _embedding(1), _embedding(2)
    src = _source(1)
    mean = (a + b) / 2.0  # what faces/source.py gives for two photos of one person
    sw = _swapper(models["hs"], sources=[SourceIdentity(paths=(), image=src.image, face=src.face, embedding=mean)])
    image, face = _noise_frame()
    _run(sw, image, [face])
    np.testing.assert_allclose(sw._session.feeds[0]["source"][0], mean / np.linalg.norm(mean), atol=1e-6)


def test_each_mapped_face_gets_its_own_source(models):
    image, _ = _noise_frame()
    left = _face(OBAMA_KPS * 0.6 + np.float32([0, 100]), source_key=1)
    right = _face(OBAMA_KPS * 0.6 + np.float32([300, 100]), source_key=0)
    sw = _swapper(models["hs"], sources=[_source(1), _source(2)])
    _run(sw, image, [left, right])
    fed = [f["source"][0] for f in sw._session.feeds]
    np.testing.assert_allclose(fed[0], _embedding(2), atol=1e-6)
    np.testing.assert_allclose(fed[1], _embedding(1), atol=1e-6)


# -- pixels -----------------------------------------------------------------------------------

@pytest.mark.parametrize("degrees", [0.0, 25.0])
def test_pixels_change_inside_the_face_and_not_outside(models, degrees):
    image, face = _noise_frame()
    face = _face(_rotated(face.kps, degrees))
    sw = _swapper(models["hs"])
    out = _run(sw, image, [face])
    matrix = sw.align(image, face).matrix
    changed = np.any(out != image, axis=2)
    assert changed[_quad_mask(matrix, image.shape, size=256)].mean() > 0.3
    assert not changed[~_quad_mask(matrix, image.shape, size=256, grow=2)].any()
    # Another source gives another face.
    other = _run(_swapper(models["hs"], sources=[_source(2)]), image, [face])
    assert np.abs(other.astype(int) - out).max() > 10


def test_the_output_range_is_mapped_back_from_minus_one_one(models):
    image, face = _noise_frame()
    sw = _swapper(models["identity"])
    crop = sw.swap_crop(sw.align(image, face), sw.latent(_embedding(1)))
    aligned = sw.align(image, face)
    # A model that returns its input gives back the crop (to a level: float rounding, then truncation).
    assert np.abs(crop.astype(int) - aligned.crop).max() <= 1


def test_occlusion_keeps_the_covered_half_exactly(models):
    image, face = _noise_frame()
    settings = SwapSettings(face_mask=("box", "occlusion"), color_match=False)
    out = _swapper(models["hs"], settings, masker=FaceMasker(settings, occluder=Occluder(cpu_session(models["xseg"]))))
    plain = _swapper(models["hs"])
    masked, swapped = _run(out, image, [face]), _run(plain, image, [face])
    m = plain.align(image, face).matrix
    ys, xs = np.mgrid[0:image.shape[0], 0:image.shape[1]].astype(np.float64)
    u = m[0, 0] * xs + m[0, 1] * ys + m[0, 2]
    v = m[1, 0] * xs + m[1, 1] * ys + m[1, 2]
    # The stand-in occluder covers the right half of whatever crop it judges (here 256 px).
    covered = (u > 128 + 4) & (u < 200) & (v > 80) & (v < 200)
    assert not np.array_equal(swapped[covered], image[covered])
    assert np.array_equal(masked[covered], image[covered])
    seen = (u < 128 - 24) & (u > 80) & (v > 100) & (v < 180)
    assert not np.array_equal(masked[seen], image[seen])


def test_padding_shrinks_the_pasted_box(models):
    image, face = _noise_frame()
    plain = np.any(_run(_swapper(models["hs"]), image, [face]) != image, axis=2).sum()
    padded = SwapSettings(color_match=False, face_mask_padding=(30.0, 0.0, 0.0, 0.0))
    fewer = np.any(_run(_swapper(models["hs"], padded), image, [face]) != image, axis=2).sum()
    assert 0 < fewer < 0.9 * plain


# -- pixel boost --------------------------------------------------------------------------------

@pytest.mark.parametrize("model,batched", [("identity", False), ("identity_dyn", True)])
@pytest.mark.parametrize("boost", [None, 256, 512])
def test_pixel_boost_tiles_reassemble_the_crop_exactly(models, model, batched, boost):
    image, face = _noise_frame()
    sw = _swapper(models[model], SwapSettings(color_match=False, pixel_boost=boost))
    size = boost or 256
    k = size // 256
    aligned = sw.align(image, face)
    assert aligned.crop.shape == (size, size, 3) and aligned.blob.shape == (k * k, 3, 256, 256)
    out = sw.predict(aligned, sw.latent(_embedding(1)))
    # A model that returns its input: the interleaved tiles are the whole N x N crop, bit for bit.
    assert np.array_equal(out, to_blob([aligned.crop], 2.0 / 255.0, -1.0))
    session = sw._session
    session.batches.clear()
    _run(sw, image, [face])
    assert session.batches == ([k * k] if batched else [1] * (k * k))


@pytest.mark.parametrize("bad", [128, 384])
def test_pixel_boost_below_or_between_multiples_of_256_is_refused(models, bad):
    with pytest.raises(InputError, match=f"--pixel-boost {bad} does not fit the 256 px HyperSwap.*256 or 512"):
        NeuralSwapper(cpu_session(models["hs"]), SwapSettings(pixel_boost=bad), kind=HYPERSWAP)


def test_pixel_boost_512_pastes_the_same_region(models):
    image, face = _noise_frame()
    base = np.any(_run(_swapper(models["hs"]), image, [face]) != image, axis=2)
    sw = _swapper(models["hs"], SwapSettings(color_match=False, pixel_boost=512))
    boosted = np.any(_run(sw, image, [face]) != image, axis=2)
    quad = _quad_mask(sw.align(image, face).matrix, image.shape, size=512, grow=2)
    # The 512 crop covers the 256 crop's part of the frame: nothing beyond it changes, most within it does.
    assert not boosted[~quad].any() and not base[~quad].any()
    assert boosted.sum() > 0.85 * base.sum()


# -- wrong files --------------------------------------------------------------------------------

def test_an_inswapper_file_is_not_a_hyperswap_model_and_back(models):
    with pytest.raises(ModelError, match="not a HyperSwap model"):
        NeuralSwapper(cpu_session(models["inswapper"]), NO_COLOR, kind=HYPERSWAP)
    with pytest.raises(ModelError, match="not an inswapper model"):
        NeuralSwapper(cpu_session(models["hs"]), NO_COLOR, kind=INSWAPPER, emap=np.eye(512, dtype=np.float32))


def test_a_source_without_embedding_names_the_photo_and_the_embedder(models):
    src = _source(1)
    sw = NeuralSwapper(cpu_session(models["hs"]), NO_COLOR, kind=HYPERSWAP)
    with pytest.raises(ModelError, match="HyperSwap swapper needs.*a.jpg.*w600k_r50"):
        sw.prepare([SourceIdentity(paths=(Path("a.jpg"),), image=src.image, face=src.face, embedding=None)])


# -- the CLI ------------------------------------------------------------------------------------

def _cli_models(isolated_env) -> Path:
    from tests.standins.arcface import build_arcface

    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir()
    build_arcface(models / "w600k_r50.onnx")
    build_hyperswap(models / "hyperswap_1b_256.onnx")
    return models


def test_end_to_end_through_the_cli(tmp_path, faces_dir, isolated_env):
    from livecam.media.images import read_image
    from tests.commands.test_image import small
    from tests.conftest import run_cli

    _cli_models(isolated_env)
    target = small(faces_dir, "obama.jpg", tmp_path)
    sources = [small(faces_dir, "biden.jpg", tmp_path)]
    base = ["--unverified-models", "image", str(target), "--no-watermark", "--no-c2pa", "--no-label",
            "--swap-model", "hyperswap_1b_256"]
    before = read_image(target)
    h, w = before.shape[:2]
    outs = {}
    for name, extra in (("plain", []), ("boost", ["--pixel-boost", "512"])):
        out = tmp_path / f"{name}.png"
        result = run_cli([*base[:3], str(out), *base[3:], "-s", str(sources[0]), *extra], env=isolated_env)
        assert result.returncode == 0, result.stderr
        assert "hyperswap_1b_256" in result.stderr
        outs[name] = read_image(out).astype(int)
        diff = np.abs(outs[name] - before).max(axis=2)
        assert diff[int(h * 0.15):int(h * 0.35), int(w * 0.4):int(w * 0.65)].mean() > 3  # the face changed
        assert diff[:, : int(w * 0.2)].max() == 0  # the flag on the left, far from the face, did not
    refused = run_cli([*base[:3], str(tmp_path / "bad.png"), *base[3:], "-s", str(sources[0]),
                       "--pixel-boost", "384"], env=isolated_env)
    errors = [line for line in refused.stderr.splitlines() if line.startswith("livecam: error:")]
    assert refused.returncode == 2 and len(errors) == 1 and "256 or 512" in errors[0]
    assert not (tmp_path / "bad.png").exists()


def test_models_list_and_the_licence_question(isolated_env):
    from tests.conftest import run_cli

    result = run_cli(["models", "list"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines()[1:] if line.strip()}
    for name in HYPERSWAP_MODELS:
        assert "missing" in lines[name] and "ResearchRAIL" in lines[name] and "--accept-license" in lines[name]
    from tests.models.helpers import env_without_offline

    env = env_without_offline(isolated_env)
    refused = run_cli(["models", "download", "hyperswap_1c_256"], env=env)  # no TTY, no flag: never accepted
    assert refused.returncode == 3 and "Traceback" not in refused.stderr
    assert "hyperswap_1c_256 needs its licence accepted" in refused.stderr and "--accept-license" in refused.stderr
    assert "ResearchRAIL" in refused.stderr
    assert not list(Path(env["LIVECAM_MODELS_DIR"]).glob("hyperswap_1c_256*"))
