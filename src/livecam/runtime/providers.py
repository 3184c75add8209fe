"""Map livecam's provider names to ONNX Runtime providers and their options."""

from __future__ import annotations

import ctypes
import importlib
import logging
import os
import re
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

from livecam.errors import InputError, ProviderError
from livecam.runtime.capture import captured_output

log = logging.getLogger("livecam")

# livecam name -> ONNX Runtime provider name, in the order `auto` prefers them.
PROVIDER_NAMES: dict[str, str] = {
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "directml": "DmlExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "cpu": "CPUExecutionProvider",
}
CHOICES: tuple[str, ...] = ("auto", *PROVIDER_NAMES)

# `auto` skips TensorRT: its engine build takes minutes on first use, which surprises people.
AUTO_ORDER: tuple[str, ...] = ("cuda", "rocm", "coreml", "directml", "openvino", "cpu")

# Providers whose fp16 kernels are trustworthy (used by --swap-model auto).
FP16_FRIENDLY: frozenset[str] = frozenset({"cuda", "tensorrt", "coreml"})

INSTALL_HINTS: dict[str, str] = {
    "cuda": "pip uninstall -y onnxruntime && pip install 'livecam[cuda]' (CUDA and cuDNN come with it; an NVIDIA driver is needed)",
    "tensorrt": "pip uninstall -y onnxruntime && pip install 'livecam[tensorrt]' (TensorRT 10 for onnxruntime-gpu's CUDA)",
    "rocm": "install onnxruntime-rocm from AMD's ROCm wheel index instead of onnxruntime",
    "coreml": "on macOS, pip install 'livecam[cpu]' (the standard onnxruntime has CoreML)",
    "directml": "pip uninstall -y onnxruntime && pip install 'livecam[directml]' (Windows only)",
    "openvino": "pip uninstall -y onnxruntime && pip install 'livecam[openvino]'",
    "cpu": "pip install 'livecam[cpu]'",
}


# Providers where livecam runs lanes (runtime/lanes.py): K threads, each with its own sessions.
# One session shared by threads does not overlap there (TensorRT serialises runs of a session,
# a CUDA graph belongs to one stream); on the CPU one shared pool is what fills the cores.
LANE_PROVIDERS: frozenset[str] = frozenset({"cuda", "tensorrt"})

# TensorRT optimisation profiles for dynamic dimensions, (min, opt, max): a batch dimension
# (ArcFace takes every face of a frame at once) and an image side (the detector, whose input the
# governor steps from 640 to 320), so that no governor step rebuilds an engine mid-stream.
PROFILE_BATCH: tuple[int, int, int] = (1, 1, 8)
# The most items one call of a dynamic-batch model is given (ArcFace's faces of a frame, an
# enhancer's crops): PROFILE_BATCH's max, since ONNX Runtime's TensorRT provider runs an
# explicitly profiled session only inside the profile (see PROFILE_FRAME_H); more go in slices.
MAX_BATCH = PROFILE_BATCH[2]
PROFILE_SIDE: tuple[int, int, int] = (320, 640, 640)
# A whole frame's height and width, (min, opt, max), for an input that takes the uint8 frame
# [H, W, 3] (the detector with its letterbox joined in front, faces/scrfd.front): optimised for
# 720p, the goal's frame (issue 17); up to 4K UHD landscape, which also holds portrait 1080p
# (1920 x 1080); from 64, below which no face is big enough to swap (processors/base.usable's
# 24 px between the eyes). Larger ranges cost every lane's detector engine memory for the
# frame-sized intermediates (the float copy before the resize) at the max. ONNX Runtime's
# TensorRT provider neither widens an explicit profile nor builds another engine for a shape
# outside it (it widens only the ranges it chose itself), so a frame outside them (portrait
# 4K) takes the detector's numpy path (frame_in_profile).
PROFILE_FRAME_H: tuple[int, int, int] = (64, 720, 2160)
PROFILE_FRAME_W: tuple[int, int, int] = (64, 1280, 3840)


def frame_in_profile(height: int, width: int) -> bool:
    """Whether a frame of this size lies inside PROFILE_FRAME_H x PROFILE_FRAME_W, the only
    frames a session with a frame input may be given (see there)."""
    return (PROFILE_FRAME_H[0] <= height <= PROFILE_FRAME_H[2]) and (PROFILE_FRAME_W[0] <= width <= PROFILE_FRAME_W[2])


# A TensorRT profile: (input name, (min, opt, max)), the shapes of its dims or, for a shape
# tensor, its values.
Profile = tuple[tuple[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]], ...]


@dataclass(frozen=True)
class SessionTuning:
    """Options one session gets beyond its provider's defaults (ModelStore.open_session makes
    one per model from the catalog's tensor shapes).

    cuda_graph: capture the model once and replay it (CUDA, TensorRT); only for sessions that
    are run through IO binding with buffers that never move (runtime/binding.py, lanes) and whose
    input shapes are fixed. prefer_nhwc: CUDA's NHWC kernels (fp16 convolutions on tensor cores).
    trt_profile: (input name, (min, opt, max) shapes) for every dynamic input."""

    cuda_graph: bool = False
    prefer_nhwc: bool = False
    trt_profile: Profile = ()


@dataclass(frozen=True)
class ProviderChoice:
    """What a session is created with: livecam names and ORT (name, options) pairs.

    `lane`: None for the shared session pool; a number for a lane's own sessions (the pool keys
    on the whole choice, so each lane gets its own session of every model, run through IO
    binding: runtime/lanes.py)."""

    names: tuple[str, ...]
    ort_providers: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]
    lane: int | None = None

    def as_ort_args(self) -> tuple[list[str], list[dict[str, str]]]:
        return [p for p, _ in self.ort_providers], [dict(o) for _, o in self.ort_providers]

    @property
    def primary(self) -> str:
        return self.names[0]

    @property
    def device(self) -> str:
        """Where a lane's tensors live: 'cuda' for the NVIDIA providers, else 'cpu'."""
        return "cuda" if self.primary in LANE_PROVIDERS else "cpu"

    def for_lane(self, lane: int | None) -> ProviderChoice:
        return replace(self, lane=lane)

    def without(self, name: str) -> ProviderChoice:
        """The same choice without the provider `name` (the CPU stays last)."""
        kept = [(n, p) for n, p in zip(self.names, self.ort_providers) if n != name]
        return replace(self, names=tuple(n for n, _ in kept), ort_providers=tuple(p for _, p in kept))

    def tuned(self, tuning: SessionTuning) -> ProviderChoice:
        """The same providers with `tuning`'s options added to those it applies to."""
        return replace(self, ort_providers=tuple(
            (ort_name, tuple(sorted({**dict(opts), **tuning_options(_livecam_name(ort_name), tuning)}.items())))
            for ort_name, opts in self.ort_providers))


NO_ONNXRUNTIME = ("onnxruntime is not installed; install livecam with the one that fits this machine: "
                  "pip install 'livecam[cpu]' (also CoreML on macOS), 'livecam[cuda]', 'livecam[openvino]' "
                  "or 'livecam[directml]'")


# onnxruntime 1.2x+ says this on fd 2 as it is imported when it cannot write its telemetry ID
# under a read-only home (containers): coloured noise before livecam's own lines, nothing to do.
_IMPORT_NOISE = re.compile(rb"[^\n]*Failed to persist telemetry device ID[^\n]*\n?")


def import_onnxruntime() -> ModuleType:
    """onnxruntime (every livecam module imports it through this), or ProviderError when it is
    not installed. An import cut short by Ctrl-C is the interrupt it was: C extensions (numpy's
    import_array, ...) turn it into an ImportError."""
    from livecam.native_stderr import dropping
    from livecam.interrupt import interrupted

    try:
        with dropping(_IMPORT_NOISE, active="onnxruntime" not in sys.modules):
            import onnxruntime as ort
    except ImportError as exc:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, KeyboardInterrupt):
            cause = cause.__cause__ or cause.__context__
        if cause is not None or interrupted():
            raise KeyboardInterrupt from exc
        raise ProviderError(NO_ONNXRUNTIME) from exc
    return ort


def available_ort_providers() -> list[str]:
    return list(import_onnxruntime().get_available_providers())


def available_names(ort_available: list[str] | None = None) -> list[str]:
    ort_available = available_ort_providers() if ort_available is None else ort_available
    return [name for name, ort_name in PROVIDER_NAMES.items() if ort_name in ort_available]


def user_cache_dir() -> Path:
    from platformdirs import user_cache_dir as _ucd

    return Path(os.environ.get("LIVECAM_CACHE_DIR") or _ucd("livecam"))


def provider_options(name: str, device_id: int = 0) -> dict[str, str]:
    """ORT options for one provider; values are strings as ORT accepts them everywhere."""
    if name == "cuda":
        return {
            "device_id": str(device_id),
            # livecam's inputs have few shapes (the detector letterboxed to det_size, fixed
            # crops), so cuDNN's one exhaustive search per shape at warm-up pays back on every
            # frame (scripts/gpu_bench.py measures HEURISTIC against it).
            "cudnn_conv_algo_search": "EXHAUSTIVE",
            "cudnn_conv_use_max_workspace": "1",
            # Each lane holds its own session of every model: the arena grows by what is asked,
            # not by doubling, so K lanes do not reserve K times the headroom.
            "arena_extend_strategy": "kSameAsRequested",
        }
    if name == "rocm":
        return {"device_id": str(device_id)}
    if name == "tensorrt":
        cache = user_cache_dir() / "tensorrt"
        return {
            "device_id": str(device_id),
            "trt_fp16_enable": "True",
            "trt_engine_cache_enable": "True",
            "trt_engine_cache_path": str(cache),
            "trt_timing_cache_enable": "True",
            "trt_timing_cache_path": str(cache),
        }
    if name == "coreml":
        return {"ModelFormat": "MLProgram", "MLComputeUnits": "ALL"}
    if name == "openvino":
        return {"device_type": openvino_device_type(openvino_devices())}
    if name == "directml":
        return {"device_id": str(device_id)}
    return {}


def tuning_options(name: str, tuning: SessionTuning) -> dict[str, str]:
    """The provider options `tuning` adds for provider NAME (none for providers it has no say in)."""
    if name == "cuda":
        return {**({"enable_cuda_graph": "1"} if tuning.cuda_graph else {}),
                **({"prefer_nhwc": "1"} if tuning.prefer_nhwc else {})}
    if name == "tensorrt":
        out = {"trt_cuda_graph_enable": "True"} if tuning.cuda_graph else {}
        if tuning.trt_profile:
            for key, which in (("trt_profile_min_shapes", 0), ("trt_profile_opt_shapes", 1),
                               ("trt_profile_max_shapes", 2)):
                out[key] = ",".join(f"{input_name}:{'x'.join(map(str, shapes[which]))}"
                                    for input_name, shapes in tuning.trt_profile)
        return out
    return {}


def profile_for(inputs: Sequence[tuple[str | None, Sequence[int | None] | None]], frames: Collection[str] = (),
                values: Profile = ()) -> Profile:
    """TensorRT profile shapes for a model's inputs as the catalog gives them ((name, shape),
    None = dynamic): the first dimension ranges over PROFILE_BATCH, later ones over PROFILE_SIDE;
    for an input named in `frames` (a uint8 frame [H, W, 3]) the first two over PROFILE_FRAME_H
    and PROFILE_FRAME_W. Inputs that are fixed need no profile; an unnamed or unknown-rank
    dynamic input makes the whole profile empty (TensorRT then picks shapes as they come).

    `values`: (input, (min, opt, max) values) for the shape tensors among the inputs (a Resize's
    sizes fed as an input: graphs.Front.shape_values), added as given. ONNX Runtime's TensorRT
    provider reads a shape tensor's entry as its values, and with any explicit profile refuses
    to create the session when one of them is missing, fixed shape or not (its check for
    inputs without a profile, onnxruntime PR #15546; values read right since PR #18253, 1.17)."""
    profile: list[tuple[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]] = []
    for input_name, shape in inputs:
        if shape is not None and all(d is not None for d in shape):
            continue
        if input_name is None or shape is None:
            return ()
        spans = (PROFILE_FRAME_H, PROFILE_FRAME_W) if input_name in frames else (PROFILE_BATCH,)
        ranges = [(d, d, d) if d is not None else (spans[i] if i < len(spans) else PROFILE_SIDE)
                  for i, d in enumerate(shape)]
        low, opt, high = (tuple(r[k] for r in ranges) for k in range(3))
        profile.append((input_name, (low, opt, high)))
    return tuple(profile) + tuple(values)


def model_tuning(inputs: Sequence[tuple[str | None, Sequence[int | None] | None]], providers: ProviderChoice,
                 *, cuda_graphs: bool = True, frames: Collection[str] = (), nhwc: bool = False,
                 values: Profile = ()) -> SessionTuning:
    """The tuning for one model's session: TensorRT profiles for its dynamic inputs (`frames`:
    the inputs that take a whole frame, `values` its shape tensors, see profile_for), and a CUDA graph for a lane's session
    whose inputs are all fixed (one shape, one graph; the buffers are bound once by
    runtime/binding.py), and CUDA's NHWC kernels with `nhwc` (an fp16 model, when
    RuntimeSettings.nhwc_fp16 asks for them). A joined model (runtime/graphs.Front) is tuned on its own inputs
    (graphs.joined_inputs): the swapper's and the enhancer's pixel fronts are fixed, so they get
    a graph and no profile.

    A session whose only dynamic dims are the frame's height and width (the detector at one det
    size with its letterbox in front, faces/scrfd.front) gets none, although ONNX Runtime allows
    it (shapes fixed per gpu_graph_id, which BoundSession keeps per set of input shapes; CPU
    shape nodes allowed where no Memcpy is): the frame size is known only once a stream starts,
    after the lane warm-up, so every lane would capture on its first frame at once, which is what
    the warm-up is there to prevent; and its `resized` input, read by CPU shape nodes, would be
    copied back from the device inside the capture (ORT begins it before feeding the inputs)."""
    fixed = all(shape is not None and all(d is not None for d in shape) for _, shape in inputs)
    return SessionTuning(cuda_graph=cuda_graphs and fixed and providers.lane is not None, prefer_nhwc=nhwc,
                         trt_profile=profile_for(inputs, frames, values))


def _livecam_name(ort_name: str) -> str:
    return next((n for n, o in PROVIDER_NAMES.items() if o == ort_name), ort_name)


def openvino_devices() -> list[str]:
    """The devices OpenVINO sees (CPU, GPU, GPU.0, NPU...); empty when it cannot say."""
    try:
        from onnxruntime.capi import _pybind_state

        return [str(d) for d in _pybind_state.get_available_openvino_device_ids()]
    except Exception:  # noqa: BLE001 - not the OpenVINO build of onnxruntime
        return []


def openvino_device_type(devices: list[str]) -> str:
    """A GPU where OpenVINO has one (AUTO starts on the CPU while the GPU compiles), else the CPU:
    naming a GPU that is absent makes ORT drop the OpenVINO provider altogether."""
    return "AUTO:GPU,CPU" if any(d.startswith("GPU") for d in devices) else "CPU"


# Why a provider that ORT offers may still fail to load, for the fallback message.
FALLBACK_CAUSES: dict[str, str] = {
    "cuda": "a CUDA/cuDNN or driver library is probably missing",
    "tensorrt": "a TensorRT, CUDA/cuDNN or driver library is probably missing",
    "rocm": "a ROCm library or driver is probably missing",
    "openvino": "OpenVINO found no device it can use",
    "directml": "no DirectX 12 GPU or driver was found",
    "coreml": "Core ML could not take this model",
}


def resolve_providers(
    requested: Sequence[str], ort_available: list[str] | None = None
) -> ProviderChoice:
    """Turn `--execution-provider` values into a ProviderChoice, CPU appended as last resort.

    A requested provider that ORT does not offer is an error, never a silent CPU fallback.
    """
    ort_available = available_ort_providers() if ort_available is None else ort_available
    have = available_names(ort_available)
    wanted = [r.lower() for r in requested] or ["auto"]
    unknown = [w for w in wanted if w not in CHOICES]
    if unknown:
        raise ProviderError(
            f"unknown execution provider {unknown[0]!r}; choose from {', '.join(CHOICES)}"
        )
    if "auto" in wanted:
        others = [w for w in dict.fromkeys(wanted) if w != "auto"]
        if others:  # they were dropped: `auto cuda` without CUDA ran on the CPU, saying nothing
            raise InputError(f"--execution-provider auto picks one provider itself, so {' '.join(others)} beside it "
                             f"would be ignored; give auto alone, or {' '.join(others)} without auto")
        names = [next(n for n in AUTO_ORDER if n in have)] if have else []
    else:
        missing = [w for w in wanted if w not in have]
        if missing:
            m = missing[0]
            raise ProviderError(
                f"execution provider {m!r} is not available in this onnxruntime "
                f"(available: {', '.join(have) or 'none'}); to get it: {INSTALL_HINTS[m]}"
            )
        names = list(dict.fromkeys(wanted))
    if "tensorrt" in names and "cuda" in have and "cuda" not in names:
        # Nodes TensorRT rejects go to CUDA, not to the CPU (a round trip through host memory).
        names.insert(names.index("tensorrt") + 1, "cuda")
    if "cpu" not in names:
        names.append("cpu")
    return ProviderChoice(
        names=tuple(names),
        ort_providers=tuple(
            (PROVIDER_NAMES[n], tuple(sorted(provider_options(n).items()))) for n in names
        ),
    )


def preload_gpu_libraries() -> list[str]:
    """Let onnxruntime-gpu find CUDA/cuDNN from the nvidia-* wheels (no-op elsewhere); returns
    the libraries it could not load. ORT prints those on stdout; they are kept for our message."""
    ort = import_onnxruntime()

    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return []
    with captured_output() as said:
        try:
            preload()
        except Exception as exc:  # noqa: BLE001 - a failed preload shows up as a fallback later
            said.write(f"{exc}\n")
    text = said.getvalue()
    if text.strip():
        log.debug("onnxruntime.preload_dlls: %s", text.strip())
    return list(dict.fromkeys(re.findall(r"Failed to load (?:\S*/)?([^\s/:]+):", text)))


def start_failure(name: str, missing_libraries: list[str], ort_said: str = "") -> tuple[str, str]:
    """(cause, fix) for provider NAME, which ORT offers but could not start; ORT_SAID is what
    ORT printed while trying."""
    if name in ("cuda", "tensorrt"):
        if missing_libraries:
            shown = ", ".join(missing_libraries[:3]) + (", ..." if len(missing_libraries) > 3 else "")
            return (f"missing {shown}",
                    "pip install 'onnxruntime-gpu[cuda,cudnn]' puts CUDA and cuDNN beside onnxruntime "
                    "(an NVIDIA driver is still needed)")
        driver = missing_nvidia_driver()
        if driver is not None:
            return (f"no NVIDIA driver: {driver} cannot be loaded",
                    "install the NVIDIA driver (`nvidia-smi` then lists the GPU)")
        built, supported = ort_cuda_version(), driver_cuda_version()
        if built and supported and built[0] > supported[0]:
            return (f"the NVIDIA driver supports CUDA up to {supported[0]}.{supported[1]}, this onnxruntime-gpu "
                    f"needs CUDA {built[0]}.{built[1]}",
                    f"update the NVIDIA driver, or install an onnxruntime-gpu release built for CUDA "
                    f"{supported[0]} (onnxruntime.ai lists them)")
        if name == "tensorrt" and "TensorRT libraries" in ort_said:
            return ("the TensorRT libraries are missing",
                    "pip install 'livecam[tensorrt]' (or put TensorRT 10's libraries on LD_LIBRARY_PATH, PATH on Windows), "
                    "or use --execution-provider cuda")
    return FALLBACK_CAUSES.get(name, "it could not start"), "run `livecam doctor` to see what is missing"


def _nvidia_driver_library() -> str:
    return "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


def driver_cuda_version() -> tuple[int, int] | None:
    """The newest CUDA (major, minor) the installed NVIDIA driver supports; None without one."""
    if sys.platform == "darwin":
        return None
    try:
        version = ctypes.c_int(0)
        if ctypes.CDLL(_nvidia_driver_library()).cuDriverGetVersion(ctypes.byref(version)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return version.value // 1000, version.value % 1000 // 10


def ort_cuda_version() -> tuple[int, int] | None:
    """The CUDA (major, minor) this onnxruntime-gpu was built with; None for other builds."""
    try:
        info = importlib.import_module("onnxruntime.capi.build_and_package_info")
    except ImportError:
        return None
    match = re.match(r"(\d+)\.(\d+)", str(getattr(info, "cuda_version", "") or ""))
    return (int(match.group(1)), int(match.group(2))) if match else None


def missing_nvidia_driver() -> str | None:
    """The NVIDIA driver's library when it cannot be loaded (no driver installed), else None."""
    if sys.platform == "darwin":
        return None
    library = _nvidia_driver_library()
    try:
        ctypes.CDLL(library)
    except OSError:
        return library
    return None
