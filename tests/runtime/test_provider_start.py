"""Providers that onnxruntime lists but that cannot start (onnxruntime-gpu without CUDA or a
driver): what `auto`, an explicit provider and `doctor` make of them, and how livecam is installed
with exactly one onnxruntime package."""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from livecam.commands import doctor as doctor_module
from livecam.errors import ProviderStartError
from livecam.pipeline.engine import Engine
from livecam.runtime import providers as providers_module
from livecam.runtime import sessions as sessions_module
from livecam.runtime.providers import (NO_ONNXRUNTIME, ProviderChoice, preload_gpu_libraries, resolve_providers,
                                      start_failure)
from livecam.runtime.sessions import usable_choice
from livecam.settings import ProcessingSettings, RuntimeSettings
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
GPU_BOX = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
NO_CUDA = ProviderStartError("x", provider="cuda", cause="missing libcublasLt.so.13",
                             fix="pip install 'onnxruntime-gpu[cuda,cudnn]'")


def test_the_libraries_onnxruntime_could_not_preload_are_kept_not_printed(monkeypatch, capsys) -> None:
    def preload_dlls() -> None:  # what onnxruntime-gpu 1.31 prints without the nvidia wheels
        print("Failed to load /venv/lib/nvidia/cublas/lib/libcublasLt.so.13: cannot open shared object file")
        print("Failed to load libcublasLt.so.13: libcublasLt.so.13: cannot open shared object file")
        print("Failed to load libcurand.so.10: libcurand.so.10: cannot open shared object file")
        print("Please follow https://onnxruntime.ai/docs/install/#cuda-and-cudnn to install CUDA.")

    monkeypatch.setitem(sys.modules, "onnxruntime", types.SimpleNamespace(preload_dlls=preload_dlls))
    assert preload_gpu_libraries() == ["libcublasLt.so.13", "libcurand.so.10"]
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""  # they used to come before livecam's own message


def test_a_start_failure_names_its_cause_and_fix(monkeypatch) -> None:
    cause, fix = start_failure("cuda", ["libcublasLt.so.13", "libcublas.so.13", "libcurand.so.10", "libcudnn.so.9"])
    assert cause == "missing libcublasLt.so.13, libcublas.so.13, libcurand.so.10, ..."
    assert "pip install 'onnxruntime-gpu[cuda,cudnn]'" in fix
    monkeypatch.setattr(providers_module, "missing_nvidia_driver", lambda: "libcuda.so.1")
    cause, fix = start_failure("cuda", [])
    assert cause == "no NVIDIA driver: libcuda.so.1 cannot be loaded" and "nvidia-smi" in fix
    monkeypatch.setattr(providers_module, "missing_nvidia_driver", lambda: None)
    assert "CUDA/cuDNN or driver" in start_failure("cuda", [])[0]
    assert start_failure("openvino", [])[0] == "OpenVINO found no device it can use"


def test_a_driver_older_than_the_cuda_build_is_named(monkeypatch) -> None:
    # The usual reason CUDA does not start after `pip install livecam[cuda]`: a CUDA 13 build on
    # a driver that offers CUDA 12.
    monkeypatch.setattr(providers_module, "missing_nvidia_driver", lambda: None)
    monkeypatch.setattr(providers_module, "ort_cuda_version", lambda: (13, 0))
    monkeypatch.setattr(providers_module, "driver_cuda_version", lambda: (12, 4))
    cause, fix = start_failure("cuda", [])
    assert cause == "the NVIDIA driver supports CUDA up to 12.4, this onnxruntime-gpu needs CUDA 13.0"
    assert fix.startswith("update the NVIDIA driver") and "built for CUDA 12" in fix
    monkeypatch.setattr(providers_module, "driver_cuda_version", lambda: (13, 2))  # minor versions are compatible
    assert "CUDA/cuDNN or driver" in start_failure("cuda", [])[0]
    monkeypatch.setattr(doctor_module, "ort_cuda_version", lambda: (13, 0))
    monkeypatch.setattr(doctor_module, "driver_cuda_version", lambda: (12, 4))
    assert doctor_module.cuda_versions_line() == ("CUDA: this onnxruntime-gpu is built for 13.0; the NVIDIA "
                                                  "driver supports up to 12.4")
    monkeypatch.setattr(doctor_module, "ort_cuda_version", lambda: None)  # not a CUDA build
    assert doctor_module.cuda_versions_line() is None


def test_the_cuda_build_version_is_read_from_onnxruntime(monkeypatch) -> None:
    info = types.SimpleNamespace(cuda_version="13.0")
    monkeypatch.setitem(sys.modules, "onnxruntime.capi.build_and_package_info", info)
    assert providers_module.ort_cuda_version() == (13, 0)
    info.cuda_version = ""  # the CPU build
    assert providers_module.ort_cuda_version() is None


def test_tensorrt_without_its_libraries_says_so(monkeypatch) -> None:
    monkeypatch.setattr(providers_module, "missing_nvidia_driver", lambda: None)
    said = "EP Error ... Please install TensorRT libraries as mentioned in the GPU requirements page"
    cause, fix = start_failure("tensorrt", [], said)
    assert cause == "the TensorRT libraries are missing" and "pip install 'livecam[tensorrt]'" in fix
    assert "--execution-provider cuda" in fix


def test_what_onnxruntime_prints_while_falling_back_stays_off_stdout(tmp_path: Path, monkeypatch, capsys) -> None:
    # onnxruntime-gpu prints an "EP Error" block on stdout before retrying without the provider;
    # on stdout it corrupted `livecam bench --json`, and it came before livecam's one line.
    import onnxruntime as ort

    from tests.models.helpers import tiny_onnx

    model = tiny_onnx(tmp_path / "tiny.onnx", [("x", [1, 4])], [("y", [1, 4])])
    real = ort.InferenceSession

    def noisy_session(path: str, sess_options: object = None, providers: object = None,
                      provider_options: object = None) -> object:
        print("*************** EP Error ***************")
        print("EP Error ... Please install TensorRT libraries as mentioned in the GPU requirements page")
        return real(path, sess_options=sess_options, providers=["CPUExecutionProvider"])

    monkeypatch.setattr(ort, "InferenceSession", noisy_session)
    monkeypatch.setattr(providers_module, "missing_nvidia_driver", lambda: None)
    monkeypatch.setattr(providers_module, "preload_gpu_libraries", lambda: [])
    monkeypatch.setattr(sessions_module, "preload_gpu_libraries", lambda: [])
    asked = ProviderChoice(names=("tensorrt", "cpu"), ort_providers=(
        ("TensorrtExecutionProvider", ()), ("CPUExecutionProvider", ())))
    problem = sessions_module.start_problem(model, asked)
    assert problem is not None and problem.cause == "the TensorRT libraries are missing"
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


def test_auto_runs_on_the_cpu_when_its_accelerator_cannot_start(monkeypatch) -> None:
    monkeypatch.setattr(providers_module, "available_ort_providers", lambda: GPU_BOX)
    probed = []

    def start_problem(model: Path, choice):
        probed.append(choice.primary)
        return NO_CUDA

    monkeypatch.setattr(sessions_module, "start_problem", start_problem)
    choice, problem = usable_choice(("auto",), lambda: Path("probe.onnx"))
    assert choice.names == ("cpu",) and problem is NO_CUDA and probed == ["cuda"]
    # An explicit provider is never swapped behind the user's back (its own error comes later).
    choice, problem = usable_choice(("cuda",), lambda: Path("probe.onnx"))
    assert choice.primary == "cuda" and problem is None and probed == ["cuda"]
    monkeypatch.setattr(sessions_module, "start_problem", lambda model, choice: None)
    choice, problem = usable_choice((), lambda: Path("probe.onnx"))
    assert choice.primary == "cuda" and problem is None


def test_the_engine_says_once_why_auto_runs_on_the_cpu(tmp_path: Path, faces_dir: Path, monkeypatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(providers_module, "available_ort_providers", lambda: GPU_BOX)
    monkeypatch.setattr(sessions_module, "start_problem", lambda model, choice: NO_CUDA)
    runtime = RuntimeSettings(providers=("auto",), models_dir=tmp_path / "models", offline=True, quiet=True)
    settings = ProcessingSettings(sources=(faces_dir / "biden.jpg",), frame_processors=("face_swapper",),
                                  runtime=runtime)
    with caplog.at_level(logging.WARNING, logger="livecam"):
        engine = Engine.create(settings, live=False, progress=False)
    assert engine.providers.primary == "cpu" and "provider cpu" in engine.describe()
    warnings = [r.getMessage() for r in caplog.records if "cannot start" in r.getMessage()]
    assert warnings == ["warning: cuda cannot start here (missing libcublasLt.so.13), so livecam runs on the "
                        "CPU; pip install 'onnxruntime-gpu[cuda,cudnn]'"]


def test_doctor_names_the_providers_as_execution_provider_takes_them(isolated_env: dict[str, str]) -> None:
    # "Execution providers: AzureExecutionProvider, CPUExecutionProvider": ORT's names, one livecam cannot use
    line = doctor_module.providers_line(["AzureExecutionProvider", "CPUExecutionProvider", *GPU_BOX[:2]])
    assert line == "Execution providers (--execution-provider): tensorrt, cuda, cpu"
    said = run_cli(["doctor"], env=isolated_env).stdout.splitlines()
    shown = [row for row in said if row.startswith("Execution providers")]
    assert len(shown) == 1 and "ExecutionProvider" not in shown[0] and shown[0].endswith("cpu"), said


def test_doctor_starts_each_accelerator_and_says_which_cannot(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(providers_module, "available_ort_providers",
                        lambda: [*GPU_BOX[:2], "OpenVINOExecutionProvider", "CPUExecutionProvider"])
    monkeypatch.setattr(doctor_module, "available_names", lambda: ["tensorrt", "cuda", "openvino", "cpu"])
    monkeypatch.setattr(doctor_module, "start_problem",
                        lambda model, choice: NO_CUDA if choice.primary == "cuda" else None)
    store = doctor_module.ModelStore(RuntimeSettings(models_dir=tmp_path / "m", offline=True), progress=False)
    lines = doctor_module.provider_start_lines(store)
    assert lines[0] == "Providers started on a small model:"
    assert lines[1].startswith("  tensorrt  not started here")
    assert lines[2] == ("  cuda  cannot start (missing libcublasLt.so.13); fix: "
                        "pip install 'onnxruntime-gpu[cuda,cudnn]'")
    assert lines[3] == "  openvino  starts"
    monkeypatch.setattr(doctor_module, "available_names", lambda: ["cpu"])
    assert doctor_module.provider_start_lines(store) == []


def test_without_onnxruntime_every_command_says_how_to_install_it(tmp_path: Path, faces_dir: Path,
                                                                   isolated_env: dict[str, str]) -> None:
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['onnxruntime'] = None\n")
    env = {**isolated_env, "PYTHONPATH": f"{blocker}:{isolated_env.get('PYTHONPATH', '')}"}
    proc = run_cli(["image", str(faces_dir / "obama.jpg"), str(tmp_path / "out.png"),
                    "-s", str(faces_dir / "biden.jpg")], env=env)
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.strip() == f"livecam: error: {NO_ONNXRUNTIME}"
    assert not (tmp_path / "out.png").exists()


def test_livecam_depends_on_exactly_one_onnxruntime_per_extra() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

    def ort_packages(requirements: list[str]) -> list[str]:
        return [r for r in requirements if r.split("[")[0].split(">")[0].split("=")[0].startswith("onnxruntime")]

    # A base dependency on onnxruntime would be reinstalled beside onnxruntime-gpu by every
    # `pip install livecam[cuda]`, and the two break each other.
    assert ort_packages(project["dependencies"]) == []
    extras = project["optional-dependencies"]
    for extra in ("cpu", "cuda", "openvino", "directml", "dev"):
        assert len(ort_packages(extras[extra])) == 1, extra
    assert ort_packages(extras["cuda"])[0].startswith("onnxruntime-gpu[cuda,cudnn]")


def test_accelerator_sessions_created_at_once_leave_stdout_as_it_was(tmp_path: Path, monkeypatch) -> None:
    # The capture swaps sys.stdout process-wide; two overlapping captures would restore each
    # other's buffer and leave every later print (bench --json) going nowhere.
    import threading
    import time

    import onnxruntime as ort

    from tests.models.helpers import tiny_onnx

    model = tiny_onnx(tmp_path / "tiny.onnx", [("x", [1, 4])], [("y", [1, 4])])
    real = ort.InferenceSession

    def slow_noisy_session(path: str, sess_options: object = None, providers: object = None,
                           provider_options: object = None) -> object:
        print("EP Error: something")
        time.sleep(0.3)
        return real(path, sess_options=sess_options, providers=["CPUExecutionProvider"])

    monkeypatch.setattr(ort, "InferenceSession", slow_noisy_session)
    monkeypatch.setattr(sessions_module, "preload_gpu_libraries", lambda: [])
    asked = ProviderChoice(names=("openvino", "cpu"), ort_providers=(
        ("OpenVINOExecutionProvider", ()), ("CPUExecutionProvider", ())))
    stdout_before = sys.stdout
    threads = [threading.Thread(target=sessions_module.start_problem, args=(model, asked)) for _ in range(2)]
    threads[0].start()
    time.sleep(0.1)  # the second starts while the first is inside its capture
    threads[1].start()
    for t in threads:
        t.join(timeout=30)
    assert sys.stdout is stdout_before


COREML = ProviderChoice(names=("coreml", "cpu"), ort_providers=(
    ("CoreMLExecutionProvider", ()), ("CPUExecutionProvider", ())))


@pytest.fixture
def refused_model(tmp_path: Path, monkeypatch) -> Iterator[Path]:
    """A model whose session the accelerator refuses with an exception of its own (not ORT's
    quiet fallback to the CPU)."""
    import onnxruntime as ort

    from tests.models.helpers import tiny_onnx

    def refusing_session(*args: object, **kwargs: object) -> object:
        raise RuntimeError("CoreML: unsupported operator Foo")

    monkeypatch.setattr(ort, "InferenceSession", refusing_session)
    monkeypatch.setattr(sessions_module, "preload_gpu_libraries", lambda: [])
    yield tiny_onnx(tmp_path / "tiny.onnx", [("x", [1, 4])], [("y", [1, 4])])
    sessions_module.clear_pool()


def test_an_accelerator_that_refuses_the_probe_model_counts_as_not_starting(refused_model: Path) -> None:
    # It used to surface as "cannot load model ...: delete it and download it again", about a
    # verified embedded model.
    problem = sessions_module.start_problem(refused_model, COREML)
    assert problem is not None and problem.provider == "coreml"
    assert problem.cause == "it failed on tiny.onnx: CoreML: unsupported operator Foo"


def test_a_model_an_accelerator_refuses_is_not_called_damaged(refused_model: Path) -> None:
    from livecam.errors import ModelError

    with pytest.raises(ModelError) as info:
        sessions_module.get_session(refused_model, COREML)
    assert f"cannot load model {refused_model} on coreml: CoreML: unsupported operator Foo" in info.value.message
    assert "if it loads with --execution-provider cpu, coreml cannot run this model" in info.value.message


def test_accelerator_sessions_of_two_models_are_created_at_the_same_time(tmp_path: Path, monkeypatch) -> None:
    # Each capture is per thread, so a slow accelerator session (a TensorRT engine build, one per
    # GPU lane) does not hold up another's creation, and each keeps what ORT printed for it.
    import threading

    import onnxruntime as ort

    from tests.models.helpers import tiny_onnx

    model = tiny_onnx(tmp_path / "tiny.onnx", [("x", [1, 4])], [("y", [1, 4])])
    real = ort.InferenceSession
    inside = threading.Barrier(2, timeout=10)  # both creations must be inside at once to pass it
    said: dict[str, str] = {}

    def noisy_session(path: str, sess_options: object = None, providers: object = None,
                      provider_options: object = None) -> object:
        name = threading.current_thread().name
        print(f"EP Error: {name}")
        inside.wait()
        return real(path, sess_options=sess_options, providers=["CPUExecutionProvider"])

    monkeypatch.setattr(ort, "InferenceSession", noisy_session)
    monkeypatch.setattr(sessions_module, "preload_gpu_libraries", lambda: [])
    asked = ProviderChoice(names=("openvino", "cpu"), ort_providers=(
        ("OpenVINOExecutionProvider", ()), ("CPUExecutionProvider", ())))

    def create() -> None:
        problem = sessions_module.start_problem(model, asked)
        said[threading.current_thread().name] = problem.cause if problem else ""

    stdout_before = sys.stdout
    threads = [threading.Thread(target=create, name=f"lane-{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(said) == ["lane-0", "lane-1"], "a creation waited for the other (serialised)"
    assert sys.stdout is stdout_before


def test_tensorrt_falls_back_to_cuda_before_the_cpu() -> None:
    choice = resolve_providers(["tensorrt"], ort_available=[
        "TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"])
    assert choice.names == ("tensorrt", "cuda", "cpu")


def test_the_tensorrt_cache_folder_is_created_before_the_first_session(tmp_path: Path, monkeypatch) -> None:
    # ORT creates one folder level only: on a fresh account the first TensorRT session failed.
    import onnxruntime as ort

    from tests.models.helpers import tiny_onnx

    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path / "fresh" / "cache"))
    model = tiny_onnx(tmp_path / "tiny.onnx", [("x", [1, 4])], [("y", [1, 4])])
    real = ort.InferenceSession
    seen: list[bool] = []

    def session(path: str, sess_options: object = None, providers: object = None,
                provider_options: object = None) -> object:
        seen.append(Path(dict(provider_options[0])["trt_engine_cache_path"]).is_dir())  # type: ignore[index]
        return real(path, sess_options=sess_options, providers=["CPUExecutionProvider"])

    monkeypatch.setattr(ort, "InferenceSession", session)
    monkeypatch.setattr(sessions_module, "preload_gpu_libraries", lambda: [])
    choice = resolve_providers(["tensorrt"], ort_available=["TensorrtExecutionProvider", "CPUExecutionProvider"])
    sessions_module.start_problem(model, choice)
    assert seen == [True]
