"""The session pool: one shared session per (model, provider set, threads); fallback detection."""

from __future__ import annotations

import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

from livecam.errors import ModelError, ProviderError
from livecam.runtime import sessions as sessions_module
from livecam.runtime.providers import ProviderChoice, resolve_providers
from livecam.runtime.sessions import clear_pool, cpu_threads_per_session, get_session
from tests.models.helpers import tiny_onnx


@pytest.fixture(autouse=True)
def _fresh_pool():
    clear_pool()
    yield
    clear_pool()


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return tiny_onnx(tmp_path / "tiny.onnx", [("x", [1, 4])], [("y", [1, 4])])


def _in_threads(n: int, fn) -> list:
    results: list = [None] * n
    barrier = threading.Barrier(n)

    def work(i: int) -> None:
        barrier.wait()
        results[i] = fn()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def test_two_threads_get_the_same_session_created_once(model, monkeypatch) -> None:
    created = []
    real = sessions_module._create
    monkeypatch.setattr(sessions_module, "_create", lambda *a: created.append(a) or real(*a))
    cpu = resolve_providers(["cpu"])
    a, b = _in_threads(2, lambda: get_session(model, cpu))
    assert a is b
    assert len(created) == 1
    out = a.run(None, {"x": np.ones((1, 4), np.float32)})[0]
    assert out.shape == (1, 4)
    # The same file reached by another spelling of its path is the same session.
    assert get_session(model.parent / ".." / model.parent.name / model.name, cpu) is a


def test_another_provider_set_or_thread_count_gets_another_session(model, monkeypatch) -> None:
    monkeypatch.setattr(sessions_module, "_create", lambda path, providers, threads, front=None: object())
    cpu = resolve_providers(["cpu"])
    gpu = resolve_providers(["cuda"], ort_available=["CUDAExecutionProvider", "CPUExecutionProvider"])
    first = get_session(model, cpu)
    assert get_session(model, gpu) is not first
    assert get_session(model, gpu) is get_session(model, gpu)
    assert get_session(model, cpu, intra_op_threads=1) is not first
    clear_pool()
    assert get_session(model, cpu) is not first


def test_real_sessions_differ_by_thread_count(model) -> None:
    cpu = resolve_providers(["cpu"])
    assert get_session(model, cpu, 1) is not get_session(model, cpu, 2)
    assert get_session(model, cpu, 1) is get_session(model, cpu, 1)


def test_the_pool_lists_what_runs_created(model) -> None:
    """sessions.pooled(): every pooled session with its file's name and joined front's name,
    the lane's BoundSession as such (scripts/gpu_bench.py reports the ones with CUDA graphs)."""
    from livecam.runtime.binding import BoundSession

    assert sessions_module.pooled() == []
    cpu = resolve_providers(["cpu"])
    shared, lane = get_session(model, cpu, 1), get_session(model, cpu.for_lane(0), 1)
    listed = sessions_module.pooled()
    assert sorted((name, front, id(s)) for name, front, s in listed) == sorted(
        [("tiny.onnx", "", id(shared)), ("tiny.onnx", "", id(lane))])
    assert isinstance(lane, BoundSession) and not lane.graphs  # the CPU provider captures none


def test_ort_falling_back_to_cpu_is_detected_and_said_in_one_line(model) -> None:
    """ORT silently runs CUDA-requested sessions on the CPU when CUDA is absent; livecam says so."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("CUDA is really available here; no fallback to provoke")
    asked = ProviderChoice(names=("cuda", "cpu"), ort_providers=(
        ("CUDAExecutionProvider", (("device_id", "0"),)), ("CPUExecutionProvider", ())))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ProviderError) as info:
            get_session(model, asked)
    err = info.value
    assert err.exit_code == 4 and "\n" not in err.message
    assert "fell back from cuda" in err.message and "tiny.onnx" in err.message


@pytest.mark.skipif("OpenVINOExecutionProvider" not in __import__("onnxruntime").get_available_providers(),
                    reason="needs onnxruntime-openvino (pip install 'livecam[openvino]')")
def test_openvino_runs_the_models_on_a_machine_without_a_gpu(model) -> None:
    session = get_session(model, resolve_providers(["openvino"]))
    assert session.get_providers()[0] == "OpenVINOExecutionProvider"
    out = session.run(None, {"x": np.ones((1, 4), np.float32)})[0]
    assert out.shape == (1, 4)


@pytest.mark.skipif("OpenVINOExecutionProvider" not in __import__("onnxruntime").get_available_providers(),
                    reason="needs onnxruntime-openvino (pip install 'livecam[openvino]')")
def test_a_provider_that_fails_to_start_is_one_line_without_ort_console_noise(model, capfd) -> None:
    from livecam.runtime.providers import openvino_devices

    if any(d.startswith("GPU") for d in openvino_devices()):
        pytest.skip("OpenVINO sees a GPU here; no failure to provoke")
    asked = ProviderChoice(names=("openvino", "cpu"), ort_providers=(
        ("OpenVINOExecutionProvider", (("device_type", "GPU"),)), ("CPUExecutionProvider", ())))
    with pytest.raises(ProviderError) as info:
        get_session(model, asked)
    assert "fell back from openvino" in info.value.message and "OpenVINO found no device" in info.value.message
    err = capfd.readouterr().err
    assert "onnxruntime" not in err, err  # ORT's own coloured E/W lines used to come first


def test_the_fallback_message_names_a_cause_for_every_provider() -> None:
    from livecam.runtime.providers import FALLBACK_CAUSES, PROVIDER_NAMES

    assert set(FALLBACK_CAUSES) == set(PROVIDER_NAMES) - {"cpu"}


def test_a_file_that_is_not_a_model_is_a_model_error(tmp_path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00garbage" * 100)
    with pytest.raises(ModelError) as info:
        get_session(bad, resolve_providers(["cpu"]))
    assert info.value.exit_code == 3 and str(bad) in info.value.message


def test_cpu_threads_are_split_between_workers(monkeypatch) -> None:
    monkeypatch.setattr(sessions_module.os, "cpu_count", lambda: 8)
    assert cpu_threads_per_session(1) == 8
    assert cpu_threads_per_session(4) == 2
    assert cpu_threads_per_session(16) == 1


def test_a_slow_session_creation_does_not_hold_up_other_models(tmp_path, monkeypatch) -> None:
    slow, fast = tmp_path / "slow.onnx", tmp_path / "fast.onnx"
    entered, release = threading.Event(), threading.Event()

    def create(path, providers, threads, front=None):
        if path.name == "slow.onnx":
            entered.set()
            release.wait(timeout=30)
        return object()

    monkeypatch.setattr(sessions_module, "_create", create)
    cpu = resolve_providers(["cpu"])
    slow_thread = threading.Thread(target=get_session, args=(slow, cpu))
    slow_thread.start()
    try:
        assert entered.wait(timeout=10)
        done = []
        fast_thread = threading.Thread(target=lambda: done.append(get_session(fast, cpu)))
        fast_thread.start()
        fast_thread.join(timeout=10)
        assert done, "creating one model's session blocked another model"
    finally:
        release.set()
        slow_thread.join(timeout=10)
    assert get_session(slow, cpu) is get_session(slow, cpu)
