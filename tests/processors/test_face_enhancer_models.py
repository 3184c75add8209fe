"""The enhancer models beside GFPGAN (GPEN-BFR 256/512, CodeFormer): their catalog signatures on
stand-ins, their crops and pre/post-processing, CodeFormer's weight, the governor's fast model,
and downloads through the model store from a server on 127.0.0.1."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.errors import LicenseNotAcceptedError, ModelError
from livecam.faces.align import FFHQ_512, align_matrix, arcface_template, invert, warp_crop
from livecam.models.catalog import CATALOG
from livecam.models.store import ModelStore, signature_problem
from livecam.processors.face_enhancer import ENHANCERS, FASTEST, PROCESSOR, FaceEnhancer, _build
from livecam.processors.registry import BuildContext
from livecam.runtime.providers import resolve_providers
from livecam.settings import ENHANCER_MODELS, EnhanceSettings, ProcessingSettings, RuntimeSettings
from tests.models.conftest import FAST, server  # noqa: F401 - the loopback server fixture
from tests.models.helpers import sha
from tests.processors.test_face_enhancer import CountingSession, _run, two_faces  # noqa: F401 - fixture
from tests.standins import cpu_session
from tests.standins.enhancers import SIZES, build_enhancer
from tests.standins.gfpgan import build_gfpgan

NEW = ("gpen_bfr_256", "gpen_bfr_512", "codeformer")


@pytest.fixture(scope="module")
def standins(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("enhancers")
    out = {f"{n}:{k}": build_enhancer(d / f"{n}_{k}.onnx", n, kind=k) for n in NEW for k in ("identity", "random")}
    out["gfpgan_1.4:random"] = build_gfpgan(d / "gfpgan.onnx", kind="random")
    return out


def test_every_choice_has_a_spec_and_a_catalog_entry() -> None:
    assert tuple(ENHANCERS) == ENHANCER_MODELS
    for name in ENHANCER_MODELS:
        spec = CATALOG[name]
        assert spec.inputs[0].shape == (1, 3, ENHANCERS[name].size, ENHANCERS[name].size)
    for name in NEW:
        spec = CATALOG[name]
        assert spec.sha256 and spec.size and spec.needs_acceptance and "non-commercial" in spec.licence
        assert spec.urls[0].startswith("https://github.com/facefusion/facefusion-assets/releases/download/models-3.0.0/")
        assert spec.urls[1] == f"https://huggingface.co/facefusion/models-3.0.0/resolve/main/{name}.onnx"
    assert "NTU S-Lab" in CATALOG["codeformer"].licence


@pytest.mark.parametrize("name", NEW)
def test_standins_have_the_catalog_signature_and_others_do_not(standins, name) -> None:
    session = cpu_session(standins[f"{name}:random"])
    assert signature_problem(CATALOG[name], session.get_inputs(), session.get_outputs()) == ""
    for other in NEW:
        if SIZES[other] != SIZES[name] or ("codeformer" in (name, other) and other != name):
            assert signature_problem(CATALOG[other], session.get_inputs(), session.get_outputs()) != ""


def test_a_model_of_the_wrong_size_is_refused_by_name(standins) -> None:
    with pytest.raises(ModelError, match="not a gpen_bfr_256 model.*livecam models download gpen_bfr_256"):
        FaceEnhancer(cpu_session(standins["gpen_bfr_512:random"]), EnhanceSettings(model="gpen_bfr_256"))


@pytest.mark.parametrize("name", ENHANCER_MODELS)
def test_a_file_the_enhancer_refuses_is_one_the_catalog_check_calls_corrupt(tmp_path, name) -> None:
    # the enhancer's refusal says `models download` replaces the file; it does only for a file that
    # `models verify` calls corrupt: gfpgan_1.4's catalog input had no name, so a file whose input is
    # not `input` was "already present" to the download and refused by every run
    from tests.models.helpers import tiny_onnx

    size = ENHANCERS[name].size
    wrong = cpu_session(tiny_onnx(tmp_path / f"{name}.onnx", [("x", [1, 3, size, size])], [("y", [1, 3, size, size])]))
    with pytest.raises(ModelError, match=f"livecam models download {name}.*, which replaces it"):
        FaceEnhancer(wrong, EnhanceSettings(model=name))
    assert signature_problem(CATALOG[name], wrong.get_inputs(), wrong.get_outputs()) != ""


def _region(kps: np.ndarray, template: np.ndarray, size: int, shape) -> np.ndarray:
    """Frame pixels covered by a face's crop, grown by 2 px (the bilinear paste)."""
    m = align_matrix(kps, template)
    quad = cv2.transform(np.array([[[0, 0], [size, 0], [size, size], [0, size]]], np.float64), invert(m))[0]
    mask = np.zeros(shape[:2], np.uint8)
    cv2.fillConvexPoly(mask, np.round(quad).astype(np.int32), 1)
    return cv2.dilate(mask, np.ones((5, 5), np.uint8)).astype(bool)


@pytest.mark.parametrize("name", NEW)
def test_each_model_runs_on_its_own_crop_with_the_shared_pre_and_post_processing(standins, two_faces, name) -> None:
    frame, faces = two_faces
    model = ENHANCERS[name]
    session = cpu_session(standins[f"{name}:random"])
    enhancer = FaceEnhancer(session, EnhanceSettings(model=name, blend=1.0, weight=0.0))
    crop = warp_crop(frame, align_matrix(faces[0].kps, model.template), model.size,
                     interpolation=cv2.INTER_LINEAR, border=cv2.BORDER_REPLICATE)
    feeds = {"input": ((crop[:, :, ::-1].astype(np.float32) / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None].copy()}
    if model.fidelity:
        feeds["weight"] = np.zeros(1, np.float64)
    y = session.run(None, feeds)[0][0]
    assert y.max() > 1.0 or y.min() < -1.0  # the clamp matters
    expected = np.rint((np.clip(y, -1, 1) + 1.0) / 2.0 * 255.0).astype(np.uint8).transpose(1, 2, 0)[:, :, ::-1]
    got = enhancer.restore([crop])[0]
    assert got.shape == (model.size, model.size, 3)
    assert np.abs(got.astype(np.int16) - expected).max() <= 1
    # In the frame: the faces change, nothing outside their crops does.
    out = _run(enhancer, frame, faces)
    touched = np.zeros(frame.shape[:2], bool)
    for face in faces:
        touched |= _region(face.kps, model.template, model.size, frame.shape)
        x1, y1, x2, y2 = face.bbox.astype(int)
        assert (np.abs(out[y1:y2, x1:x2].astype(np.int16) - frame[y1:y2, x1:x2]).max(axis=2) > 4).mean() > 0.2
    assert np.array_equal(out[~touched], frame[~touched])


def test_gpen_256_uses_the_arcface_template_scaled_to_256(standins, two_faces) -> None:
    """The identity stand-in gives the frame back through the 256 ArcFace crop: a crop by the
    FFHQ template instead would be pasted somewhere else and smear the face."""
    assert np.allclose(ENHANCERS["gpen_bfr_256"].template, arcface_template(256))
    assert np.allclose(arcface_template(256)[0], [(38.2946 + 8) * 2, 51.6963 * 2], atol=1e-3)
    assert ENHANCERS["gpen_bfr_512"].template is FFHQ_512 and ENHANCERS["codeformer"].template is FFHQ_512
    frame, faces = two_faces
    out = _run(FaceEnhancer(cpu_session(standins["gpen_bfr_256:identity"]),
                            EnhanceSettings(model="gpen_bfr_256", blend=1.0)), frame, faces)
    for face in faces:
        x1, y1, x2, y2 = face.bbox.astype(int)
        assert np.abs(out[y1:y2, x1:x2].astype(np.int16) - frame[y1:y2, x1:x2]).mean() < 2.0


def test_codeformer_weight_reaches_the_model(standins, two_faces) -> None:
    frame, faces = two_faces
    path = standins["codeformer:random"]

    class Recording(CountingSession):
        weights: list[np.ndarray] = []

        def run(self, names, feeds):
            self.weights.append(feeds["weight"])
            return super().run(names, feeds)

    outs = {}
    for w in (None, 0.0, 0.5):
        session = Recording(cpu_session(path))
        session.weights = []
        outs[w] = _run(FaceEnhancer(session, EnhanceSettings(model="codeformer", blend=1.0, weight=w)), frame, faces)
        fed = session.weights[0]
        assert fed.dtype == np.float64 and fed.shape == (1,) and fed[0] == (1.0 if w is None else w)
    # w = 1 (the default) keeps the input face: the stand-in gives the crop back.
    x1, y1, x2, y2 = faces[0].bbox.astype(int)
    assert np.abs(outs[None][y1:y2, x1:x2].astype(np.int16) - frame[y1:y2, x1:x2]).mean() < 2.0
    assert np.abs(outs[0.0][y1:y2, x1:x2].astype(np.int16) - frame[y1:y2, x1:x2]).mean() > 4.0
    half = np.abs(outs[0.5][y1:y2, x1:x2].astype(np.int16) - frame[y1:y2, x1:x2]).mean()
    assert 1.0 < half < np.abs(outs[0.0][y1:y2, x1:x2].astype(np.int16) - frame[y1:y2, x1:x2]).mean()


def test_a_weight_declared_as_1x1_is_fed_so(tmp_path, two_faces) -> None:
    frame, faces = two_faces
    session = cpu_session(build_enhancer(tmp_path / "cf.onnx", "codeformer", weight_shape=(1, 1)))
    assert signature_problem(CATALOG["codeformer"], session.get_inputs(), session.get_outputs()) == ""
    out = _run(FaceEnhancer(session, EnhanceSettings(model="codeformer", blend=1.0, weight=0.0)), frame, faces)
    x1, y1, x2, y2 = faces[0].bbox.astype(int)
    assert np.abs(out[y1:y2, x1:x2].astype(np.int16) - frame[y1:y2, x1:x2]).mean() > 4.0


def test_the_fast_model_is_switched_to_and_back(standins, two_faces) -> None:
    frame, faces = two_faces
    slow = CountingSession(cpu_session(standins["gfpgan_1.4:random"]))
    fast = CountingSession(cpu_session(standins["gpen_bfr_256:random"]))
    enhancer = FaceEnhancer(slow, EnhanceSettings(blend=1.0), fast_session=fast)
    assert enhancer.fast_model == FASTEST and enhancer.model_name == "gfpgan_1.4"
    chosen = _run(enhancer, frame, faces)
    enhancer.set_fast_model(True)
    assert enhancer.model_name == FASTEST
    switched = _run(enhancer, frame, faces)
    assert slow.batches == [1, 1] and fast.batches == [1, 1]
    direct = _run(FaceEnhancer(cpu_session(standins["gpen_bfr_256:random"]),
                               EnhanceSettings(model=FASTEST, blend=1.0)), frame, faces)
    assert np.array_equal(switched, direct) and not np.array_equal(switched, chosen)
    enhancer.set_fast_model(False)
    assert np.array_equal(_run(enhancer, frame, faces), chosen)
    assert FaceEnhancer(slow, EnhanceSettings()).fast_model is None


def _context(models: Path, enhance: EnhanceSettings, live: bool) -> BuildContext:
    runtime = RuntimeSettings(models_dir=models, offline=True, unverified_models=True, quiet=True)
    settings = ProcessingSettings(sources=(), frame_processors=("face_enhancer",), runtime=runtime, enhance=enhance)
    return BuildContext(settings, ModelStore(runtime, progress=False), resolve_providers(["cpu"]), 1, None, live=live)


def test_build_holds_the_fast_model_only_live_and_only_when_present(tmp_path, standins, caplog) -> None:
    models = tmp_path / "models"
    models.mkdir()
    (models / "gfpgan_1.4.onnx").write_bytes(standins["gfpgan_1.4:random"].read_bytes())
    settings = EnhanceSettings()
    assert _build(_context(models, settings, live=True)).fast_model is None  # not in the folder: never fetched
    (models / "gpen_bfr_256.onnx").write_bytes(standins["gpen_bfr_256:random"].read_bytes())
    assert _build(_context(models, settings, live=True)).fast_model == FASTEST
    assert _build(_context(models, settings, live=False)).fast_model is None  # files: no governor
    assert _build(_context(models, replace(settings, model=FASTEST), live=True)).fast_model is None
    other = tmp_path / "other"  # a new folder: sessions are shared by path
    other.mkdir()
    (other / "gfpgan_1.4.onnx").write_bytes(standins["gfpgan_1.4:random"].read_bytes())
    (other / "gpen_bfr_256.onnx").write_bytes(standins["gpen_bfr_512:random"].read_bytes())  # wrong kind
    with caplog.at_level(logging.WARNING, logger="livecam"):
        assert _build(_context(other, settings, live=True)).fast_model is None
    assert "switch the enhancer straight off" in caplog.text and "gpen_bfr_256" in caplog.text


def test_a_weight_without_codeformer_is_warned_about_once(tmp_path, standins, caplog) -> None:
    """The run says it once (Engine.create, from PROCESSOR.unused_options); building the enhancer,
    which every lane does again, says nothing."""
    models = tmp_path / "models"
    models.mkdir()
    (models / "gpen_bfr_512.onnx").write_bytes(standins["gpen_bfr_512:random"].read_bytes())
    weighted = EnhanceSettings(model="gpen_bfr_512", weight=0.3)
    with caplog.at_level(logging.WARNING, logger="livecam"):
        _build(_context(models, weighted, live=False))
        _build(_context(models, weighted, live=False))
    assert "--enhancer-weight" not in caplog.text

    def said(enhance: EnhanceSettings) -> tuple[str, ...]:
        settings = ProcessingSettings(sources=(), frame_processors=("face_swapper", "face_enhancer"), enhance=enhance)
        return PROCESSOR.unused_options(settings, "inswapper_128", True)

    [line] = said(weighted)
    assert "--enhancer-weight is CodeFormer's fidelity; gpen_bfr_512 has no such input" in line
    assert said(EnhanceSettings(model="codeformer", weight=0.3)) == () == said(EnhanceSettings(model="gpen_bfr_512"))


@pytest.mark.parametrize("name", NEW)
def test_download_asks_for_the_licence_verifies_and_opens(tmp_path, server, standins, name) -> None:
    """The catalog entry as it is (licence, mirror after the primary, signature), with the
    stand-in's bytes, size and digest: served from 127.0.0.1, the primary URL answering 404."""
    data = standins[f"{name}:random"].read_bytes()
    real = CATALOG[name]
    spec = replace(real, urls=(server.url(f"/missing/{real.file_name}"), server.serve(f"/{real.file_name}", data)),
                   size=len(data), sha256=sha(data))
    models = tmp_path / "models"

    def store(accept: bool) -> ModelStore:
        runtime = RuntimeSettings(models_dir=models, accept_license=accept, quiet=True)
        return ModelStore(runtime, progress=False, catalog={name: spec}, policy=FAST)

    with pytest.raises(LicenseNotAcceptedError) as info:
        store(False).path(name)
    assert real.licence in info.value.message and server.state.log == []
    session = store(True).open_session(name, resolve_providers(["cpu"]))
    assert (models / real.file_name).read_bytes() == data
    assert [code for _, _, code in server.state.requests(f"/missing/{real.file_name}")] == [404]  # then the mirror
    assert store(True).verify(name).state == "verified"
    enhancer = FaceEnhancer(session, EnhanceSettings(model=name))
    crop = np.full((SIZES[name], SIZES[name], 3), 128, np.uint8)
    assert enhancer.restore([crop])[0].shape == crop.shape
    # a file whose bytes differ from the digest is refused
    (models / real.file_name).write_bytes(standins[f"{name}:identity"].read_bytes()[:len(data)].ljust(len(data), b"\0"))
    with pytest.raises(ModelError):
        store(True).open_session(name, resolve_providers(["cpu"]))

