"""The session pool: one ONNX Runtime session per (model file, providers, threads).

Sessions are created lazily, once, under a lock, and shared by all threads (ORT's run() is
thread-safe). This pool (sessions, their per-key creation locks, and the count of per-thread
captures of what ORT prints while an accelerator session is created, runtime/capture.py) is the
only module-level mutable state in livecam.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import threading
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from livecam.errors import ModelError, ProviderError, ProviderStartError
from livecam.runtime.binding import ORT_TYPES, BoundSession
from livecam.runtime.capture import captured_output
from livecam.runtime.graphs import Front, joined_model
from livecam.runtime.providers import (PROVIDER_NAMES, ProviderChoice, import_onnxruntime, preload_gpu_libraries, resolve_providers,
                                      start_failure)

log = logging.getLogger("livecam")

_POOL: dict[tuple[str, ProviderChoice, int, str], Any] = {}
_KEY_LOCKS: dict[tuple[str, ProviderChoice, int, str], threading.Lock] = {}
_POOL_LOCK = threading.Lock()


def input_dtype(ort_type: str) -> type[np.floating[Any]]:
    """The numpy dtype to feed an input that ONNX Runtime reports as `ort_type` (float32 when it
    is not a float type we know)."""
    dtype = ORT_TYPES.get(ort_type)
    return dtype if dtype is not None and issubclass(dtype, np.floating) else np.float32


def cpu_threads_per_session(workers: int) -> int:
    """Intra-op threads so that workers x threads does not exceed the cores."""
    cores = os.cpu_count() or 1
    return max(1, cores // max(1, workers))


def get_session(model_path: Path | str, providers: ProviderChoice, intra_op_threads: int = 0,
                front: Front | None = None) -> Any:
    """Return the session for this model and provider set, creating it on first use: shared by
    every thread, or with `providers.lane` set, that lane's own BoundSession. `front`: the model
    with those graphs joined around it (runtime/graphs.Front), a session of its own."""
    key = (str(Path(model_path).resolve()), providers, intra_op_threads, front.name if front else "")
    with _POOL_LOCK:
        session = _POOL.get(key)
        if session is not None:
            return session
        key_lock = _KEY_LOCKS.setdefault(key, threading.Lock())
    # One lock per key: a slow creation (a TensorRT engine build) does not hold up other models.
    with key_lock:
        with _POOL_LOCK:
            session = _POOL.get(key)
        if session is None:
            session = _create(Path(model_path), providers, intra_op_threads, front)
            if providers.lane is not None:  # a lane's own session: buffers bound once (runtime/binding.py)
                session = BoundSession(session, providers.device, _device_id(providers), graphs=_captures_graphs(session))
            with _POOL_LOCK:
                _POOL[key] = session
        return session


def _captures_graphs(session: Any) -> bool:
    """Whether the session was created with CUDA graphs (the options as ORT applied them: a
    model that could not have one was created without, see _create)."""
    applied = session.get_provider_options()
    return (applied.get("CUDAExecutionProvider", {}).get("enable_cuda_graph") == "1"
            or applied.get("TensorrtExecutionProvider", {}).get("trt_cuda_graph_enable") in ("1", "True"))


def _device_id(providers: ProviderChoice) -> int:
    return int(dict(providers.ort_providers[0][1]).get("device_id", "0"))


def pooled() -> list[tuple[str, str, Any]]:
    """(model file name, joined front's name or "", session) for every session in the pool now:
    what runs have created (scripts/gpu_bench.py reports which of them replay CUDA graphs)."""
    with _POOL_LOCK:
        return [(Path(key[0]).name, key[3], session) for key, session in _POOL.items()]


def clear_pool() -> None:
    """Drop every session (tests, and switching models at run time)."""
    with _POOL_LOCK:
        _POOL.clear()
        _KEY_LOCKS.clear()


def _create(model_path: Path, providers: ProviderChoice, intra_op_threads: int, front: Front | None = None) -> Any:
    ort = import_onnxruntime()

    # A provider that fails to start makes ORT print several coloured lines of its own; livecam
    # reports it in one line below, so ORT's console says only fatal things (unless -v).
    ort.set_default_logger_severity(2 if logging.getLogger("livecam").isEnabledFor(logging.DEBUG) else 4)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if intra_op_threads > 0:
        options.intra_op_num_threads = intra_op_threads
        # Pipeline stages share the cores: spinning pool threads would burn the time another
        # stage needs (measured: 1-worker video 26.6 -> 37.2 FPS at 720p without spinning).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    names, provider_opts = providers.as_ort_args()
    source: str | bytes = str(model_path) if front is None else joined_model(str(model_path), front)
    wanted = PROVIDER_NAMES[providers.primary]
    accelerated = providers.primary != "cpu"
    missing: list[str] = []
    if accelerated:
        _make_cache_folders(provider_opts)
        missing = preload_gpu_libraries()
    opts = provider_opts
    while True:
        session, error, said = _attempt(ort, source, options, names, opts, model_path, capture=accelerated)
        # ORT's Python layer retries a session its provider refuses on the next ones, without
        # their options, and says why on stdout (an "EP Error" block): livecam retries first.
        refusal = str(error) if error is not None else (said if wanted not in session.get_providers() else None)
        lighter = None if refusal is None else _fallback(opts, refusal)
        if lighter is None:
            break
        log.debug("%s: %s; created again with less tuning", model_path.name,
                  refusal.strip().splitlines()[-1][:200] if refusal and refusal.strip() else refusal)
        opts = lighter
    if error is not None:  # ORT raises its own exception types for bad files
        # No repair command here: a path does not say which catalog model it is (an fp16 copy's
        # name has a digest); ModelStore.open_session, the caller, names the model and its repair.
        first = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
        if not accelerated:
            raise ModelError(f"cannot load model {model_path}: {first}; the file is damaged or not an "
                             f"ONNX model") from error
        raise ModelError(f"cannot load model {model_path} on {providers.primary}: {first}; "
                         f"{provider_hint(providers.primary)}; otherwise the file is damaged") from error
    got = session.get_providers()
    if wanted not in got:
        cause, fix = start_failure(providers.primary, missing, said)
        raise ProviderStartError(
            f"onnxruntime fell back from {providers.primary} to {', '.join(got)} while loading "
            f"{model_path.name} ({cause}); {fix}, or pass --execution-provider cpu",
            provider=providers.primary, cause=cause, fix=fix)
    return session


def provider_hint(provider: str) -> str:
    """What a file that `provider` (not the CPU) failed to load may mean besides damage: said
    here and by ModelStore.open_session beside its repair."""
    return f"if it loads with --execution-provider cpu, {provider} cannot run this model"


def _attempt(ort: Any, source: str | bytes, options: Any, names: list[str], provider_opts: list[dict[str, str]],
             model_path: Path, capture: bool) -> tuple[Any, Exception | None, str]:
    """(session or None, ORT's exception or None, what ORT printed) for one creation. With an
    accelerator (`capture`), ORT's Python layer prints on stdout: the libraries preload_dlls
    could not load, and an "EP Error" block when a provider fails and it retries without it.
    Both are kept for the cause (stdout may be `bench --json`'s output), per thread
    (runtime/capture.py): sessions of other models or lanes are created at the same time."""
    session: Any = None
    error: Exception | None = None
    buffer = io.StringIO()
    with captured_output() if capture else contextlib.nullcontext(buffer) as out:
        try:
            session = ort.InferenceSession(source, sess_options=options, providers=names,
                                           provider_options=provider_opts)
        except Exception as exc:  # noqa: BLE001 - the caller says what it means
            error = exc
    said = out.getvalue()
    if said.strip():
        log.debug("onnxruntime while loading %s: %s", model_path.name, said.strip())
    return session, error, said


_GRAPH_KEYS = ("enable_cuda_graph", "trt_cuda_graph_enable")
_PROFILE_KEYS = ("trt_profile_min_shapes", "trt_profile_opt_shapes", "trt_profile_max_shapes")
# How ORT's TensorRT provider refuses explicit profiles that leave a dynamic input out.
PROFILE_REFUSED = "provide all the dynamic shape inputs with associated profiles"


def _fallback(provider_opts: list[dict[str, str]], error: str) -> list[dict[str, str]] | None:
    """The provider options to try next after ORT refused these with `error`, or None. Where ORT
    asks for more TensorRT profiles, without them (its TensorRT provider wants one for every
    dynamic input of every TensorRT subgraph, whose names depend on the nodes TensorRT takes:
    without profiles it sizes engines to the shapes as they come, building another for a shape
    outside them); else without CUDA graphs (a graph needs every node on the GPU: a model with a
    CPU node runs without one rather than being refused). Nothing else is retried: a TensorRT
    engine build may take minutes."""
    def without(keys: Sequence[str]) -> list[dict[str, str]]:
        return [{k: v for k, v in o.items() if k not in keys} for o in provider_opts]

    if PROFILE_REFUSED in error and without(_PROFILE_KEYS) != provider_opts:
        return without(_PROFILE_KEYS)
    if without(_GRAPH_KEYS) != provider_opts:
        return without(_GRAPH_KEYS)
    return None


def _make_cache_folders(provider_opts: Sequence[Mapping[str, str]]) -> None:
    """Create the cache folders a provider writes to (TensorRT's engine and timing caches): ORT
    creates one level only, so on a fresh account the first session failed and blamed missing
    libraries."""
    for opts in provider_opts:
        for key, value in opts.items():
            if key.endswith("_cache_path") and value:
                try:
                    Path(value).mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise ProviderError(f"cannot create the cache folder {value} for {key.split('_')[0]} "
                                        f"({exc.strerror or exc}); set LIVECAM_CACHE_DIR to a writable folder") from exc


def start_problem(model_path: Path, providers: ProviderChoice) -> ProviderStartError | None:
    """Why a session of this small model does not start on providers.primary, or None when it
    does (not pooled: a probe for `auto` and `doctor`)."""
    if providers.primary == "cpu":
        return None
    try:
        _create(model_path, providers, 1)
    except ProviderStartError as exc:
        return exc
    except ModelError as exc:  # the accelerator itself refused a verified model that the CPU loads
        text = str(exc.__cause__ or exc).strip()
        reason = text.splitlines()[0][:160] if text else type(exc.__cause__ or exc).__name__
        return ProviderStartError(exc.message, provider=providers.primary,
                                  cause=f"it failed on {model_path.name}: {reason}",
                                  fix="`livecam -v` shows onnxruntime's own messages")
    return None


def usable_choice(requested: Sequence[str], probe_model: Callable[[], Path]
                  ) -> tuple[ProviderChoice, ProviderStartError | None]:
    """resolve_providers(requested), except that `auto` whose accelerator cannot start here
    (onnxruntime-gpu without CUDA, say) runs on the CPU; the second value says why. An explicit
    provider is left to fail loudly when its first session is created."""
    choice = resolve_providers(requested)
    if choice.primary == "cpu" or (requested and "auto" not in [r.lower() for r in requested]):
        return choice, None
    problem = start_problem(probe_model(), choice)
    if problem is None:
        return choice, None
    return resolve_providers(["cpu"]), problem
