"""scripts/gpu_bench.py: its preflight fails fast with one line, and the whole run works on the
CPU (--smoke --provider cpu), so the one GPU attempt cannot fail on a typo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_bench.py"
sys.path.insert(0, str(ROOT / "scripts"))

import gpu_bench  # noqa: E402


def one_line_exit_2(capsys: pytest.CaptureFixture[str], provider: str = "cuda") -> str:
    with pytest.raises(SystemExit) as info:
        gpu_bench.preflight(provider)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gpu_bench: ")
    return err


def test_no_cuda_provider_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    # The CPU onnxruntime of this machine: no CUDA provider.
    assert "CUDA provider" in one_line_exit_2(capsys)


def test_no_driver_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import onnxruntime as ort

    from livecam.runtime import providers

    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(providers, "missing_nvidia_driver", lambda: "libcuda.so.1")
    assert "no NVIDIA driver: libcuda.so.1 cannot be loaded" in one_line_exit_2(capsys)


@pytest.mark.filterwarnings("ignore:Specified provider .CUDAExecutionProvider. is not in available:UserWarning")  # the fallback it tests
def test_a_session_that_falls_back_to_the_cpu_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """onnxruntime-gpu lists CUDA whatever the machine has; only the session says where it runs."""
    import onnxruntime as ort

    from livecam.runtime import providers

    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(providers, "missing_nvidia_driver", lambda: None)
    monkeypatch.setattr(providers, "driver_cuda_version", lambda: (13, 0))
    monkeypatch.setattr(gpu_bench, "load_library", lambda names: (object(), names[0]))
    err = one_line_exit_2(capsys)
    assert "fell back from CUDAExecutionProvider to CPUExecutionProvider" in err


@pytest.mark.skipif(not (os.environ.get("LIVECAM_ORTGPU_SITE") and os.environ.get("LIVECAM_ORTGPU_PYTHON")),
                    reason="set LIVECAM_ORTGPU_SITE (onnxruntime-gpu unpacked, docs/GPU.md) and "
                           "LIVECAM_ORTGPU_PYTHON (a Python it fits, with numpy and onnx) to run this")
def test_real_onnxruntime_gpu_without_a_driver_fails_fast() -> None:
    env = {**os.environ, "PYTHONPATH": os.environ["LIVECAM_ORTGPU_SITE"]}
    t0 = time.perf_counter()
    proc = subprocess.run([os.environ["LIVECAM_ORTGPU_PYTHON"], str(SCRIPT), "--out", "/nonexistent"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2 and time.perf_counter() - t0 < 60
    assert proc.stderr.count("\n") == 1 and "NVIDIA driver" in proc.stderr and not proc.stdout


@pytest.mark.skipif(not any(p.is_file() for p in gpu_bench.FACES),
                    reason="needs ../shared/faces/obama.jpg: the stand-in detector finds no face in the script's "
                           "synthetic fallback picture (only the full-size replicas report one anywhere)")
def test_smoke_run_on_the_cpu_writes_every_part(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--provider", "cpu", "--out", str(tmp_path / "out"),
                           "--work", str(tmp_path / "work"), "--repo-json", str(tmp_path / "gpu-h200.json")],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, "LIVECAM_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "gpu.json").read_text())
    assert report["errors"] == {}, report["errors"]
    for part in ("preflight", "replicas", "latency", "pre_post", "video", "reference", "live", "overlap", "fp16"):
        assert report.get(part), part
    swapper = report["latency"]["inswapper_128"]
    # The GPU-only variants run too (the CPU provider ignores their CUDA options): no typo waits there.
    assert {"numpy", "numpy_heuristic", "binding", "binding_graph"} <= set(swapper)
    assert swapper["binding"]["max_abs_diff"] == swapper["binding_graph"]["max_abs_diff"] == 0.0
    assert report["latency"]["det_10g"]["binding_graph_320_then_640"]["max_abs_diff_320"] == 0.0
    assert "binding_nhwc" in report["latency"]["gfpgan_1.4_fp16w"]
    assert "detector_uint8_joined" in report["pre_post"]
    assert report["live"]["lanes"] is True and report["live"]["analysis_lane"] is True
    video = report["video"]
    for kind in ("swap", "enhance"):
        assert [video[kind][v]["frames"] for v in ("shared", "lanes", "lanes_cuda_graphs")] == [8, 8, 8]
        assert video[kind]["lanes_cuda_graphs"]["cuda_graph_sessions"] == []  # the CPU provider captures none
    head = json.loads((tmp_path / "gpu-h200.json").read_text())
    for key in ("video_swap_fps", "video_enhance_fps", "live_p50_ms", "live_p95_ms", "reference_swap_fps",
                "reference_enhance_fps", "provider", "precision", "frames", "measured_at"):
        assert head.get(key) is not None, key
    assert head["provider"] == "CPUExecutionProvider" and head["smoke"] is True
    assert (tmp_path / "out" / "gpu.md").read_text().startswith("# GPU benchmark (SMOKE")
