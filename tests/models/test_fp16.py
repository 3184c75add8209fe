"""fp16 enhancers (livecam.models.fp16): an enhancer's fp32 file converted once, with float32
inputs and outputs kept, checked against fp32 on the CPU, cached beside the models, and refused
with one line when the copy is broken."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from livecam.errors import ModelError
from livecam.models import fp16
from livecam.models.store import ModelStore
from livecam.runtime.providers import import_onnxruntime
from livecam.settings import RuntimeSettings
from tests.standins import save_model
from tests.standins.enhancers import build_enhancer
from tests.standins.gfpgan import build_gfpgan

BUILDERS: dict[str, Callable[[Path, int], Path]] = {
    "gfpgan_1.4": lambda p, seed: build_gfpgan(p, "random", seed=seed),
    "gpen_bfr_256": lambda p, seed: build_enhancer(p, "gpen_bfr_256", seed=seed),
    "gpen_bfr_512": lambda p, seed: build_enhancer(p, "gpen_bfr_512", seed=seed),
    "codeformer": lambda p, seed: build_enhancer(p, "codeformer", seed=seed),
}


@pytest.fixture
def store(tmp_path: Path) -> ModelStore:
    folder = tmp_path / "models"
    folder.mkdir()
    return ModelStore(RuntimeSettings(models_dir=folder, unverified_models=True, quiet=True), progress=False)


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names fp16.convert was called for (the real converter still runs)."""
    calls: list[str] = []
    real = fp16.convert

    def counted(name: str, fp32: Path) -> Any:
        calls.append(name)
        return real(name, fp32)

    monkeypatch.setattr(fp16, "convert", counted)
    return calls


def _standin(store: ModelStore, name: str, seed: int = 0) -> Path:
    return BUILDERS[name](store.root / f"{name}.onnx", seed)


def _cached(store: ModelStore) -> list[str]:
    folder = store.root / fp16.FOLDER
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def _run(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    ort = import_onnxruntime()
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, feeds)[0])


@pytest.mark.parametrize("name", ["gfpgan_1.4", "gpen_bfr_256", "codeformer"])
def test_the_copy_has_float32_io_fp16_weights_and_the_fp32_output(store: ModelStore, name: str) -> None:
    fp32 = _standin(store, name)
    copy = store.precision_path(name, "fp16")
    assert copy.parent == store.root / "fp16" and copy.name.startswith(f"{name}.") and copy.suffix == ".onnx"
    model = onnx.load(str(copy))
    onnx.checker.check_model(model)  # nodes in graph order: the ONNX checker and TensorRT read it
    original = onnx.load(str(fp32))
    assert [(i.name, i.type.tensor_type.elem_type) for i in model.graph.input] == \
        [(i.name, i.type.tensor_type.elem_type) for i in original.graph.input]  # float32 (weight: double)
    assert [o.type.tensor_type.elem_type for o in model.graph.output] == [TensorProto.FLOAT]
    assert model.graph.initializer and {t.data_type for t in model.graph.initializer} == {TensorProto.FLOAT16}
    # On an input the check did not see: the restored crop within the threshold, in grey levels.
    rng = np.random.default_rng(7)
    size = 256 if name == "gpen_bfr_256" else 512
    feeds = {"input": rng.uniform(-1, 1, (1, 3, size, size)).astype(np.float32)}
    if name == "codeformer":
        feeds["weight"] = np.array([0.3])
    want, got = _run(fp32, feeds), _run(copy, feeds)
    assert got.dtype == np.float32 and np.isfinite(got).all()
    levels = np.abs(np.clip(want, -1, 1) - np.clip(got, -1, 1)) * 127.5
    assert 0 < np.percentile(levels, fp16.DRIFT_PERCENTILE) <= fp16.MAX_DRIFT_LEVELS


def test_a_second_run_reuses_the_copy(store: ModelStore, conversions: list[str]) -> None:
    _standin(store, "gpen_bfr_512")
    copy = store.precision_path("gpen_bfr_512", "fp16")
    stamp = copy.stat().st_mtime_ns
    again = ModelStore(store.settings, progress=False).precision_path("gpen_bfr_512", "fp16")  # a new run
    assert again == copy and copy.stat().st_mtime_ns == stamp
    assert conversions == ["gpen_bfr_512"]
    assert fp16.ready(store, "gpen_bfr_512", store.file_path("gpen_bfr_512"))


def test_a_changed_fp32_file_is_converted_again(store: ModelStore, conversions: list[str]) -> None:
    fp32 = _standin(store, "gfpgan_1.4", seed=0)
    _standin(store, "gpen_bfr_256")
    other = store.precision_path("gpen_bfr_256", "fp16")
    first = store.precision_path("gfpgan_1.4", "fp16")
    feeds = {"input": np.full((1, 3, 512, 512), 0.25, np.float32)}
    old_output = _run(first, feeds)
    _standin(store, "gfpgan_1.4", seed=1)  # same size, other weights
    os.utime(fp32, ns=(fp32.stat().st_atime_ns, fp32.stat().st_mtime_ns + 10**9))  # a coarse clock
    second = store.precision_path("gfpgan_1.4", "fp16")
    assert second != first and conversions == ["gpen_bfr_256", "gfpgan_1.4", "gfpgan_1.4"]
    new_fp32 = _run(fp32, feeds)
    assert np.abs(_run(second, feeds) - new_fp32).max() < 0.01  # the new weights
    assert np.abs(old_output - new_fp32).max() > 0.05
    # The old file's copy is gone (never used again); another model's copy stays.
    assert sorted(_cached(store)) == sorted(p.name for p in (second, second.with_suffix(".json"), other,
                                                              other.with_suffix(".json")))


def _poisoned(how: str) -> Callable[[str, Path], Any]:
    """A converter whose copy is broken: one fp16 weight NaN, or every weight off by half."""
    real = fp16.convert

    def convert(name: str, fp32: Path) -> Any:
        model = real(name, fp32)
        for i, tensor in enumerate(model.graph.initializer):
            values = numpy_helper.to_array(tensor).copy()
            if how == "nan":
                values.flat[0] = np.nan
            else:
                values *= np.float16(1.5)
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(values, tensor.name))
        return model

    return convert


@pytest.mark.parametrize("how, said", [("nan", "NaN/Inf values"), ("drift", "drifts")])
def test_a_broken_copy_is_refused_in_one_line_and_not_kept(store: ModelStore, monkeypatch: pytest.MonkeyPatch,
                                                           how: str, said: str) -> None:
    _standin(store, "gfpgan_1.4")
    calls: list[str] = []
    poisoned = _poisoned(how)
    monkeypatch.setattr(fp16, "convert", lambda name, fp32: calls.append(name) or poisoned(name, fp32))
    with pytest.raises(ModelError) as info:
        store.precision_path("gfpgan_1.4", "fp16")
    message = info.value.message
    assert "\n" not in message and "gfpgan_1.4" in message and said in message
    assert message.endswith("use --enhancer-precision fp32")
    assert not [n for n in _cached(store) if n.endswith(".onnx") or ".part" in n]
    # The refusal is remembered: the next run says it again without converting again.
    with pytest.raises(ModelError, match=said):
        ModelStore(store.settings, progress=False).precision_path("gfpgan_1.4", "fp16")
    assert calls == ["gfpgan_1.4"]
    assert not fp16.ready(store, "gfpgan_1.4", store.file_path("gfpgan_1.4"))


def test_auto_runs_fp32_with_a_warning_where_the_copy_is_refused(store: ModelStore, monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    _standin(store, "gpen_bfr_256")
    monkeypatch.setattr(fp16, "convert", _poisoned("nan"))
    with caplog.at_level(logging.WARNING, logger="livecam"):
        assert fp16.choose(store, "gpen_bfr_256", "auto", "cuda") == "fp32"
    assert "NaN/Inf" in caplog.text and "auto runs it in fp32" in caplog.text
    assert fp16.label(store, "gpen_bfr_256", "auto", "cuda") == "gpen_bfr_256"
    assert fp16.choose(store, "gpen_bfr_256", "fp16", "cpu") == "fp16"  # explicit: open_session raises
    with pytest.raises(ModelError, match="NaN/Inf"):
        store.precision_path("gpen_bfr_256", "fp16")


def test_auto_is_fp16_on_fp16_friendly_providers_only() -> None:
    assert [fp16.wanted("auto", p) for p in ("cuda", "tensorrt", "coreml")] == ["fp16"] * 3
    assert [fp16.wanted("auto", p) for p in ("cpu", "openvino", "directml", "rocm")] == ["fp32"] * 4
    assert fp16.wanted("fp16", "cpu") == "fp16" and fp16.wanted("fp32", "cuda") == "fp32"


def test_label_names_fp16_only_when_the_checked_copy_runs(store: ModelStore) -> None:
    _standin(store, "codeformer")
    assert fp16.label(store, "codeformer", "fp16", "cpu") == "codeformer"  # not converted yet
    assert fp16.choose(store, "codeformer", "auto", "cuda") == "fp16"  # converts and checks
    assert fp16.label(store, "codeformer", "auto", "cuda") == "codeformer fp16"
    assert fp16.label(store, "codeformer", "auto", "cpu") == "codeformer"


def test_without_onnx_the_error_says_what_to_install(store: ModelStore, monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    _standin(store, "gfpgan_1.4")
    monkeypatch.setitem(sys.modules, "onnxruntime.transformers.float16", None)  # import fails
    with pytest.raises(ModelError) as info:
        store.precision_path("gfpgan_1.4", "fp16")
    assert "livecam[fp16]" in info.value.message and info.value.message.endswith("; use --enhancer-precision fp32")
    with caplog.at_level(logging.WARNING, logger="livecam"):
        assert fp16.choose(store, "gfpgan_1.4", "auto", "tensorrt") == "fp32"
    assert "livecam[fp16]" in caplog.text and caplog.text.count("--enhancer-precision") == 1  # auto's, not the fix
    assert _cached(store) == []


def test_an_interrupted_conversion_leaves_nothing_that_counts(store: ModelStore, monkeypatch: pytest.MonkeyPatch,
                                                              conversions: list[str]) -> None:
    """Stopped after the copy but before its record: the next run converts again."""
    _standin(store, "gpen_bfr_256")
    from livecam.atomic import AtomicOutput

    real_write = AtomicOutput.write_bytes

    def stop_at_the_record(self: AtomicOutput, data: bytes) -> None:
        if self.path.suffix == ".json" and self.path.parent.name == fp16.FOLDER:
            raise KeyboardInterrupt
        real_write(self, data)

    monkeypatch.setattr(AtomicOutput, "write_bytes", stop_at_the_record)
    with pytest.raises(KeyboardInterrupt):
        store.precision_path("gpen_bfr_256", "fp16")
    assert not [n for n in _cached(store) if n.endswith(".json") or ".part" in n]
    assert not fp16.ready(store, "gpen_bfr_256", store.file_path("gpen_bfr_256"))
    monkeypatch.setattr(AtomicOutput, "write_bytes", real_write)
    copy = store.precision_path("gpen_bfr_256", "fp16")
    assert copy.is_file() and conversions == ["gpen_bfr_256", "gpen_bfr_256"]


def _deep_restorer(path: Path, layers: int, size: int = 128, seed: int = 0) -> Path:
    """A random-weight stack of 3x3 convolutions with instance norm and leaky ReLU, ending in
    tanh: deeper than the stand-ins, and far more sensitive to rounding than a trained restorer."""
    rng = np.random.default_rng(seed)
    nodes, inits, x, cin = [], [], "input", 3
    for i in range(layers):
        cout = 3 if i == layers - 1 else 32
        w = rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2.0 / (cin * 9))
        inits += [numpy_helper.from_array(w.astype(np.float32), f"w{i}"),
                  numpy_helper.from_array((rng.standard_normal(cout) * 0.05).astype(np.float32), f"b{i}")]
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        if i == layers - 1:
            nodes.append(helper.make_node("Tanh", [f"c{i}"], ["output"]))
            break
        inits += [numpy_helper.from_array(np.ones(cout, np.float32), f"s{i}"),
                  numpy_helper.from_array(np.zeros(cout, np.float32), f"o{i}")]
        nodes += [helper.make_node("InstanceNormalization", [f"c{i}", f"s{i}", f"o{i}"], [f"n{i}"]),
                  helper.make_node("LeakyRelu", [f"n{i}"], [f"r{i}"], alpha=0.2)]
        x, cin = f"r{i}", cout
    shape = [1, 3, size, size]
    graph = helper.make_graph(nodes, "deep_restorer", [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)], inits)
    return save_model(graph, path)


@pytest.mark.parametrize("layers", [16, 32])
def test_a_deep_sound_conversion_passes_the_check(tmp_path: Path, layers: int) -> None:
    """The threshold is not so tight that a sound conversion of a deep network is refused
    (measured: about 0.9 grey levels at p99 with 16 layers, 4.7 with 32)."""
    fp32 = _deep_restorer(tmp_path / "deep.onnx", layers)
    drift = fp16.measure(fp32, fp16.convert("deep", fp32).SerializeToString())
    assert drift.problem() == "" and drift.nonfinite == 0
    assert 0.1 < drift.p99_levels <= fp16.MAX_DRIFT_LEVELS


def test_the_governors_fast_model_runs_at_the_same_precision(store: ModelStore) -> None:
    from livecam.processors.face_enhancer import FASTEST, _build
    from livecam.processors.registry import BuildContext
    from livecam.runtime.providers import resolve_providers
    from livecam.settings import EnhanceSettings, ProcessingSettings

    _standin(store, "gfpgan_1.4")
    _standin(store, FASTEST)
    for precision, copies in (("fp32", []), ("fp16", ["gfpgan_1.4", FASTEST])):
        settings = ProcessingSettings(sources=(), frame_processors=("face_enhancer",), runtime=store.settings,
                                      enhance=EnhanceSettings(precision=precision))
        enhancer = _build(BuildContext(settings, store, resolve_providers(["cpu"]), 1, None, live=True))
        assert enhancer.fast_model == FASTEST
        assert sorted(n.rsplit(".", 2)[0] for n in _cached(store) if n.endswith(".onnx")) == sorted(copies)


def test_a_copy_the_cpu_cannot_run_is_refused_in_one_line(store: ModelStore, monkeypatch: pytest.MonkeyPatch) -> None:
    _standin(store, "gpen_bfr_256")
    real = fp16.convert

    def unrunnable(name: str, fp32: Path) -> Any:
        model = real(name, fp32)
        model.graph.node[0].op_type = "NoSuchOp"  # as a kernel ONNX Runtime lacks for fp16 on the CPU
        return model

    monkeypatch.setattr(fp16, "convert", unrunnable)
    with pytest.raises(ModelError) as info:
        store.precision_path("gpen_bfr_256", "fp16")
    message = info.value.message
    assert "\n" not in message and "gpen_bfr_256" in message and "cannot be checked on the CPU" in message
    assert message.endswith("; use --enhancer-precision fp32") and _cached(store) == []


@pytest.mark.parametrize("choice", ["fp16", "auto"])
def test_a_file_of_another_model_is_its_own_error_before_any_conversion(
        store: ModelStore, conversions: list[str], caplog: pytest.LogCaptureFixture, choice: str) -> None:
    # gpen_bfr_256's file under gpen_bfr_512's name: it was converted and its fp16 copy kept before
    # the signature check refused it (and auto warned of an fp16 problem, then failed in fp32).
    BUILDERS["gpen_bfr_256"](store.root / "gpen_bfr_512.onnx", 0)
    with caplog.at_level(logging.WARNING, logger="livecam"), \
            pytest.raises(ModelError, match=r"does not look like model gpen_bfr_512 .*\[1,3,256,256\]"):
        if choice == "auto":
            fp16.choose(store, "gpen_bfr_512", "auto", "cuda")
        else:
            store.precision_path("gpen_bfr_512", "fp16")
    assert conversions == [] and _cached(store) == [] and "fp32" not in caplog.text  # no "auto runs it in fp32"


@pytest.mark.parametrize("source, other", [("--models-dir", "give --models-dir another folder"),
                                           ("LIVECAM_MODELS_DIR", "set LIVECAM_MODELS_DIR to another folder")])
def test_a_copy_that_cannot_be_kept_names_where_the_models_folder_came_from(tmp_path: Path, source: str,
                                                                            other: str) -> None:
    # it said "--models-dir picks another folder" to a user who had set LIVECAM_MODELS_DIR
    folder = tmp_path / "models"
    folder.mkdir()
    store = ModelStore(RuntimeSettings(models_dir=folder, models_dir_from=source, unverified_models=True, quiet=True),
                       progress=False)
    _standin(store, "gpen_bfr_256")
    (folder / fp16.FOLDER).write_text("")  # a file where the copies' folder goes
    with pytest.raises(ModelError) as info:
        store.precision_path("gpen_bfr_256", "fp16")
    message = info.value.message
    assert message.startswith(f"cannot keep the fp16 copy of gpen_bfr_256 in the models folder {folder} ({source}): ")
    assert message.endswith(f"; {other}; use --enhancer-precision fp32")
    assert ("--models-dir" in message) == (source == "--models-dir")
