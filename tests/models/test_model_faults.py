"""Model faults (truncated, random bytes, wrong kind, hash mismatch) are caught before processing."""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import pytest

from livecam.errors import ModelError
from livecam.models.catalog import CATALOG, TensorSpec
from livecam.models.store import ModelStore
from livecam.runtime.providers import resolve_providers
from livecam.runtime.sessions import clear_pool
from livecam.settings import RuntimeSettings
from tests.models.helpers import payload, sha, spec_for, tiny_onnx

SWAPPER_IO = dict(inputs=(TensorSpec("target", (1, 3, 128, 128)), TensorSpec("source", (1, 512))),
                  outputs=(TensorSpec(None, (1, 3, 128, 128)),))


@pytest.fixture(autouse=True)
def _fresh_pool():
    clear_pool()
    yield
    clear_pool()


def store_for(models_dir: Path, *specs, unverified: bool = False) -> ModelStore:
    # the folder as the CLI tests give it (LIVECAM_MODELS_DIR): the repair commands are the plain ones
    settings = RuntimeSettings(models_dir=models_dir, models_dir_from="LIVECAM_MODELS_DIR", offline=True, quiet=True,
                               unverified_models=unverified)
    return ModelStore(settings, progress=False, catalog={s.name: s for s in specs})


def swapper(path: Path) -> Path:
    return tiny_onnx(path, [("target", [1, 3, 128, 128]), ("source", [1, 512])], [("output", [1, 3, 128, 128])])


def detector(path: Path) -> Path:
    return tiny_onnx(path, [("input.1", [1, 3, 640, 640])], [(f"o{i}", [100, 1]) for i in range(9)])


def test_truncated_model_is_refused_with_file_and_fix(tmp_path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    full = swapper(tmp_path / "full.onnx").read_bytes()
    (models / "sw.onnx").write_bytes(full[: len(full) // 2])
    store = store_for(models, spec_for("sw", (), full, **SWAPPER_IO))
    with pytest.raises(ModelError) as info:
        store.path("sw")
    msg = info.value.message
    assert info.value.exit_code == 3
    assert str(models / "sw.onnx") in msg and "truncated" in msg and "livecam models download sw" in msg
    assert store.verify("sw").state == "corrupt"


def test_hash_mismatch_is_refused_unless_unverified_models(tmp_path, caplog) -> None:
    models = tmp_path / "models"
    models.mkdir()
    good = payload(4096, 1)
    (models / "sw.onnx").write_bytes(payload(4096, 2))  # same size, other bytes
    spec = spec_for("sw", (), good)
    with pytest.raises(ModelError) as info:
        store_for(models, spec).path("sw")
    assert "SHA-256" in info.value.message and str(models / "sw.onnx") in info.value.message
    with caplog.at_level("WARNING", logger="livecam"):
        assert store_for(models, spec, unverified=True).path("sw") == models / "sw.onnx"
    assert "--unverified-models" in caplog.text


def test_an_unverified_file_is_warned_about_once_a_run(tmp_path, caplog) -> None:
    # an fp16 enhancer's run looks its fp32 file up twice, and said "used anyway because of
    # --unverified-models" twice for it
    models = tmp_path / "models"
    models.mkdir()
    (models / "sw.onnx").write_bytes(payload(4096, 2))
    store = store_for(models, spec_for("sw", (), payload(4096, 1)), unverified=True)
    with caplog.at_level("WARNING", logger="livecam"):
        store.path("sw")
        store.path("sw")
    assert caplog.text.count("used anyway because of --unverified-models") == 1, caplog.text


def test_random_bytes_named_as_an_unpinned_model_fail_before_processing(tmp_path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    (models / "sw.onnx").write_bytes(payload(5000, 3))
    spec = replace(spec_for("sw", (), None, **SWAPPER_IO), size=None)
    store = store_for(models, spec)
    with pytest.raises(ModelError) as info:
        store.open_session("sw", resolve_providers(["cpu"]))
    assert info.value.exit_code == 3
    assert str(models / "sw.onnx") in info.value.message and "livecam models download sw" in info.value.message
    state = store.verify("sw")
    assert state.state == "corrupt" and "not a whole ONNX model" in state.detail, state.detail


def test_wrong_kind_of_model_in_a_slot_is_named(tmp_path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    detector(models / "sw.onnx")  # a detector where the swapper belongs
    spec = replace(spec_for("sw", (), None, **SWAPPER_IO), size=None)
    store = store_for(models, spec)
    with pytest.raises(ModelError) as info:
        store.open_session("sw", resolve_providers(["cpu"]))
    msg = info.value.message
    assert "does not look like model sw" in msg and "target" in msg and "input.1" in msg
    assert store.verify("sw").state == "corrupt"


def test_right_kind_of_unpinned_model_opens_and_verifies_as_unpinned(tmp_path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    data = swapper(models / "sw.onnx").read_bytes()
    spec = spec_for("sw", (), data, pinned=False, **SWAPPER_IO)
    store = store_for(models, spec)
    session = store.open_session("sw", resolve_providers(["cpu"]))
    assert [i.name for i in session.get_inputs()] == ["target", "source"]
    assert store.verify("sw").state == "unpinned"


@pytest.mark.parametrize("damage", ["empty", "cut short", "end never written", "zeros", "another file"])
def test_a_broken_unpinned_model_is_listed_as_corrupt_as_verify_says(tmp_path, damage: str) -> None:
    # `models list` and `doctor` (state()) said "unpinned" for any file of a model with no
    # SHA-256 whose size was right or not catalogued, as if it were fine; only verify loaded it
    models = tmp_path / "models"
    models.mkdir()
    good = swapper(tmp_path / "good.onnx").read_bytes()
    half = len(good) // 2
    (models / "sw.onnx").write_bytes({"empty": b"", "cut short": good[:-100],
                                      "end never written": good[:half] + bytes(len(good) - half),
                                      "zeros": bytes(len(good)), "another file": b"%PDF-1.7\n" + payload(5000)}[damage])
    store = store_for(models, replace(spec_for("sw", (), None, **SWAPPER_IO), size=None))
    listed, verified = store.state("sw"), store.verify("sw")
    assert listed.state == verified.state == "corrupt", (listed, verified)
    assert listed.detail and verified.detail.startswith(listed.detail), (listed, verified)
    assert "run `livecam models download sw`, which replaces it" in verified.detail


def test_whole_onnx_files_pass_the_framing_check(tmp_path) -> None:
    from livecam.models.catalog import DEFAULT_DIR
    from livecam.models.onnx_wire import framing_problem

    whole = [swapper(tmp_path / "sw.onnx"), detector(tmp_path / "det.onnx"), *sorted(DEFAULT_DIR.glob("*.onnx"))]
    assert len(whole) > 4 and [(p.name, framing_problem(p)) for p in whole] == [(p.name, "") for p in whole]
    models = tmp_path / "models"
    models.mkdir()
    (models / "sw.onnx").write_bytes(whole[0].read_bytes())
    assert store_for(models, replace(spec_for("sw", (), None, **SWAPPER_IO), size=None)).state("sw").state == "unpinned"


def test_real_catalog_signatures_reject_each_other() -> None:
    """Each real slot's tensor spec refuses a model made for another slot."""
    from livecam.models.store import signature_problem

    class Arg:
        def __init__(self, name, shape, type_="tensor(float)"):
            self.name, self.shape, self.type = name, shape, type_

    swapper_io = ([Arg("target", [1, 3, 128, 128]), Arg("source", [1, 512])], [Arg("output", [1, 3, 128, 128])])
    arcface_io = ([Arg("input.1", ["None", 3, 112, 112])], [Arg("683", ["None", 512])])
    assert signature_problem(CATALOG["inswapper_128"], *swapper_io) == ""
    assert signature_problem(CATALOG["w600k_r50"], *arcface_io) == ""
    assert signature_problem(CATALOG["inswapper_128"], *arcface_io) != ""
    assert signature_problem(CATALOG["w600k_r50"], *swapper_io) != ""
    assert signature_problem(CATALOG["gfpgan_1.4"], *swapper_io) != ""
    assert signature_problem(CATALOG["det_10g"], *arcface_io) != ""


def test_embedded_defaults_are_verified_from_the_package() -> None:
    store = ModelStore(RuntimeSettings(offline=True), progress=False)
    for name in ("blazeface_short_range", "blazeface_full_range", "face_landmark"):
        spec = store.spec(name)
        assert spec.bundled and spec.sha256, f"{name}: SHA256SUMS entry missing"
        path = store.path(name)
        assert sha(path.read_bytes()) == spec.sha256
        store.check_signature(name, __import__("onnxruntime").InferenceSession(
            str(path), providers=["CPUExecutionProvider"]))


def test_real_catalog_facts() -> None:
    assert CATALOG["inswapper_128"].size == 554_253_681
    assert CATALOG["det_10g"].archive is not None and CATALOG["det_10g"].archive.members == (
        "det_10g.onnx", "w600k_r50.onnx")
    assert CATALOG["gfpgan_1.4"].sha256 is None and "CRC32" in CATALOG["gfpgan_1.4"].pin_note
    assert all(CATALOG[n].needs_acceptance for n in ("det_10g", "w600k_r50", "inswapper_128", "inswapper_128_fp16"))
    assert all(len(s.urls) >= 2 for s in CATALOG.values() if s.downloadable and s.archive is None)


def test_a_broken_unpinned_model_of_the_right_size_is_not_present_and_its_damage_names_the_repair(tmp_path) -> None:
    # is_present() counted a zeroed unpinned file of the right size as present while doctor and
    # `models list` called it corrupt: auto chose it, and the run failed instead of the mesh fallback
    models = tmp_path / "models"
    models.mkdir()
    good = swapper(tmp_path / "good.onnx").read_bytes()
    spec = replace(spec_for("sw", (), None, **SWAPPER_IO), size=len(good))
    (models / "sw.onnx").write_bytes(good)
    assert store_for(models, spec).is_present("sw") and store_for(models, spec).damage("sw") == ""
    (models / "sw.onnx").write_bytes(bytes(len(good)))
    store = store_for(models, spec)
    assert not store.is_present("sw")
    assert store.damage("sw").startswith(f"{models / 'sw.onnx'} is corrupt (not a whole ONNX model")
    assert "run `livecam models download sw`, which replaces it" in store.damage("sw")


@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "unpinned"])
def test_a_damaged_file_is_not_provided_online_and_stays_as_it_is(tmp_path, pinned: bool) -> None:
    # Online, can_provide() said yes to a broken file (the model is downloadable) while path() does
    # not replace a file that is there: auto chose the neural path and the run failed with the
    # repair line instead of falling back to the mesh swapper as it does offline.
    models = tmp_path / "models"
    models.mkdir()
    good = swapper(tmp_path / "good.onnx").read_bytes()
    spec = spec_for("sw", ("https://example.invalid/sw.onnx",), good, pinned=pinned, **SWAPPER_IO)
    broken = bytes(len(good)) if not pinned else good[: len(good) // 2]
    (models / "sw.onnx").write_bytes(broken)
    online = ModelStore(RuntimeSettings(models_dir=models, offline=False, accept_license=True, quiet=True),
                        progress=False, catalog={"sw": spec})
    assert online.damage("sw") and not online.can_provide("sw")
    assert (models / "sw.onnx").read_bytes() == broken  # the user's file is left alone
    (models / "sw.onnx").unlink()
    assert online.can_provide("sw")  # absent: downloadable, as before


def test_a_model_that_fails_to_load_off_the_cpu_names_the_provider_and_the_repair(tmp_path) -> None:
    # open_session said only the download's repair and dropped the sessions module's hint that
    # the provider (not the file) may be what cannot load it
    from tests.standins.gfpgan import build_gfpgan

    models = tmp_path / "models"
    models.mkdir()
    good = build_gfpgan(tmp_path / "good.onnx").read_bytes()
    half = len(good) // 2
    (models / "enh.onnx").write_bytes(good[:half] + bytes(len(good) - half))  # the right size, end never written
    spec = replace(spec_for("enh", (), good, pinned=False), inputs=(TensorSpec("input", (1, 3, 512, 512)),),
                   outputs=(TensorSpec(None, (1, 3, 512, 512)),))
    store = store_for(models, spec)
    cuda = resolve_providers(["cuda"], ort_available=["CUDAExecutionProvider", "CPUExecutionProvider"])
    with pytest.raises(ModelError) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # onnxruntime's own: CUDA is not installed here
        store.open_session("enh", cuda)
    msg = info.value.message
    assert "\n" not in msg and msg.startswith(f"model file {models / 'enh.onnx'} cannot be loaded as enh on cuda ("), msg
    assert msg.endswith("; if it loads with --execution-provider cpu, cuda cannot run this model; "
                        "otherwise run `livecam models download enh`, which replaces it"), msg
    with pytest.raises(ModelError) as info:  # on the CPU the file is all there is to blame
        store.open_session("enh", resolve_providers(["cpu"]))
    assert info.value.message.endswith("; run `livecam models download enh`, which replaces it"), info.value.message
    assert "execution-provider" not in info.value.message
