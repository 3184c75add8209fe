"""Provider names -> ONNX Runtime providers and options; unavailable providers are errors."""

from __future__ import annotations

import click
import pytest

from livecam.cli import LivecamGroup
from livecam.errors import InputError, ProviderError
from livecam.runtime import providers as providers_module
from livecam.runtime.providers import CHOICES, PROVIDER_NAMES, provider_options, resolve_providers

CPU_ONLY = ["CPUExecutionProvider"]
GPU_BOX = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]


def test_every_choice_maps_to_an_ort_provider() -> None:
    assert set(CHOICES) == {"auto", "cuda", "tensorrt", "coreml", "directml", "openvino", "rocm", "cpu"}
    assert PROVIDER_NAMES["cuda"] == "CUDAExecutionProvider"
    assert PROVIDER_NAMES["directml"] == "DmlExecutionProvider"
    assert PROVIDER_NAMES["coreml"] == "CoreMLExecutionProvider"


def test_auto_picks_the_best_available_and_keeps_cpu_last() -> None:
    choice = resolve_providers(["auto"], ort_available=GPU_BOX)
    assert choice.names == ("cuda", "cpu")  # not TensorRT: its first engine build takes minutes
    names, options = choice.as_ort_args()
    assert names == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert options[0] == {"device_id": "0", "cudnn_conv_algo_search": "EXHAUSTIVE",
                          "cudnn_conv_use_max_workspace": "1", "arena_extend_strategy": "kSameAsRequested"}
    assert resolve_providers([], ort_available=CPU_ONLY).names == ("cpu",)


def test_auto_beside_named_providers_is_refused() -> None:
    # `--execution-provider auto cuda` without CUDA ran on the CPU and said nothing: auto dropped cuda
    with pytest.raises(InputError) as refused:
        resolve_providers(["auto", "cuda"], ort_available=CPU_ONLY)
    assert refused.value.exit_code == 2
    assert refused.value.message == ("--execution-provider auto picks one provider itself, so cuda beside it would "
                                     "be ignored; give auto alone, or cuda without auto")


def test_explicit_order_is_kept() -> None:
    choice = resolve_providers(["tensorrt", "cuda"], ort_available=GPU_BOX)
    assert choice.names == ("tensorrt", "cuda", "cpu") and choice.primary == "tensorrt"


def test_provider_options(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path))
    trt = provider_options("tensorrt")
    assert trt["trt_fp16_enable"] == "True" and trt["trt_engine_cache_path"].startswith(str(tmp_path))
    assert trt["trt_timing_cache_enable"] == "True"
    assert provider_options("coreml") == {"ModelFormat": "MLProgram", "MLComputeUnits": "ALL"}
    monkeypatch.setattr(providers_module, "openvino_devices", lambda: ["CPU", "GPU.0", "NPU"])
    assert provider_options("openvino") == {"device_type": "AUTO:GPU,CPU"}
    assert provider_options("directml", device_id=1) == {"device_id": "1"}
    assert provider_options("cpu") == {}


def test_openvino_asks_for_a_gpu_only_where_openvino_sees_one(monkeypatch) -> None:
    # "AUTO:GPU,CPU" on a machine without an Intel GPU made ORT drop OpenVINO altogether, so
    # --execution-provider openvino failed on every CPU-only machine.
    monkeypatch.setattr(providers_module, "openvino_devices", lambda: ["CPU"])
    assert provider_options("openvino") == {"device_type": "CPU"}
    monkeypatch.setattr(providers_module, "openvino_devices", lambda: [])  # cannot tell: safe choice
    assert provider_options("openvino") == {"device_type": "CPU"}
    assert providers_module.openvino_device_type(["CPU", "GPU"]) == "AUTO:GPU,CPU"


def test_openvino_devices_are_read_from_the_openvino_build_only() -> None:
    import onnxruntime as ort

    devices = providers_module.openvino_devices()
    if "OpenVINOExecutionProvider" in ort.get_available_providers():
        assert "CPU" in devices
    else:
        assert devices == []


def test_unavailable_provider_is_an_error_listing_what_is_available() -> None:
    with pytest.raises(ProviderError) as info:
        resolve_providers(["cuda"], ort_available=CPU_ONLY)
    err = info.value
    assert err.exit_code == 4
    assert "'cuda' is not available" in err.message and "available: cpu" in err.message
    assert "pip install 'livecam[cuda]'" in err.message
    assert "\n" not in err.message


def test_unavailable_provider_through_the_cli_is_one_line_and_exit_4(monkeypatch, capsys) -> None:
    """The CLI's error handling turns the ProviderError into one stderr line and exit code 4."""
    monkeypatch.setattr(providers_module, "available_ort_providers", lambda: list(CPU_ONLY))

    @click.group(cls=LivecamGroup)
    def app() -> None:
        pass

    @app.command()
    def go() -> None:
        resolve_providers(["directml"])

    with pytest.raises(SystemExit) as exit_info:
        app.main(args=["go"], prog_name="livecam")
    assert exit_info.value.code == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("livecam: error: ")
    assert "available: cpu" in err and "Traceback" not in err


def test_unknown_provider_name_is_refused() -> None:
    with pytest.raises(ProviderError) as info:
        resolve_providers(["vulkan"], ort_available=CPU_ONLY)
    assert "cuda" in info.value.message


def test_real_onnxruntime_offers_cpu() -> None:
    assert "cpu" in providers_module.available_names()


def test_importing_onnxruntime_under_a_read_only_home_says_nothing(tmp_path) -> None:
    """onnxruntime 1.32 writes a coloured 'Failed to persist telemetry device ID' line on fd 2 as
    it is imported where it cannot write under the home folder (a container's read-only root)."""
    import os
    import subprocess
    import sys

    blocker = tmp_path / "file"
    blocker.write_text("")
    env = {**os.environ, "HOME": str(blocker / "home"), "XDG_CACHE_HOME": str(blocker / "cache")}

    def stderr_of(code: str) -> str:
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              timeout=120).stderr

    if "telemetry" not in stderr_of("import onnxruntime"):
        pytest.skip("this onnxruntime says nothing on import under a read-only home")
    said = stderr_of("import sys; from livecam.runtime.providers import import_onnxruntime; "
                     "import_onnxruntime(); print('livecam goes on', file=sys.stderr)")
    assert said == "livecam goes on\n"
