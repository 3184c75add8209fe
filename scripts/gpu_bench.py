#!/usr/bin/env python
"""Every GPU figure of issue 17 in one run on the lent GPU machine, failing fast when it cannot.

    python scripts/gpu_bench.py --out $OUT                       # the GPU run (CUDA provider)
    python scripts/gpu_bench.py --smoke --provider cpu --out DIR # here: the same code, tiny, on the CPU
    python scripts/gpu_bench.py --pack .ortgpu/bench             # here, once: wheels the GPU machine lacks

Part 0 (preflight, seconds): onnxruntime imports; with a GPU provider, preload_dlls, the CUDA
provider is listed, the NVIDIA driver loads, cuDNN 9 loads, and a tiny graph actually runs with
`get_providers()[0]` the CUDA provider; TensorRT is noted as present (libnvinfer loads) or
skipped with the reason. Any failure: exit 2 with one line naming the cause, before any model.

Then, in order of value, each part with its own deadline inside --budget seconds, the results
written after every part (OUT/gpu.json, OUT/gpu.md, OUT/gpu-h200.json):

 1. replicas: random-weight copies of the real models (scripts/make_replicas.py, built with
    PyTorch there; --smoke uses the tests' stand-ins, which need no PyTorch), the swap and
    enhancer models listed from the catalog, not named here;
 2. (after 4-6, which answer the goals) per-model batch-1 latency: numpy in/out with cuDNN HEURISTIC and EXHAUSTIVE, IO binding
    (runtime/binding.BoundSession), IO binding + CUDA graph (and, for the detector, a second
    graph at 320 after 640), NHWC for fp16 models; outputs compared with the plain run;
 3. the pre/post graphs (runtime/graphs.py) on the device against numpy + float upload;
 4. `livecam bench --mode video` at 1280x720 with one ~300 px face, swap only and with the
    enhancer, the shared pool against lanes (runtime/lanes.py);
 5. the insightface-style reference loop (scripts/bench_baseline.py), swap only and with GFPGAN;
 6. `--mode live` latency p50/p95, unpaced and paced at 30 FPS;
 7. overlap scaling, 1-6 threads on the swapper: one shared session against one per thread;
 8. host-to-device copies, pageable against pinned (PyTorch); fp16 sanity of GFPGAN;
 9. TensorRT, only when libnvinfer loads, in a subprocess with its own timeout.

../shared/GPU.md and docs/GPU.md say how onnxruntime-gpu gets onto the machine.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import types
from contextlib import redirect_stdout
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _path in (HERE, REPO, REPO / "src"):  # the scripts, tests.standins (smoke), livecam itself
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

PREFLIGHT_EXIT = 2
FACES = (REPO / "shared" / "faces" / "obama.jpg", REPO.parent / "shared" / "faces" / "obama.jpg")
# `livecam video` variants: the shared session pool, K lanes, K lanes with CUDA graphs; and, only
# when asked, the shared pool with libx264 in slice threads (the writer before frame threads)
VIDEO_VARIANTS = ("shared", "lanes", "lanes_cuda_graphs")
GOALS = {"video_swap_fps": (">=", 200.0), "video_enhance_fps": (">=", 100.0), "live_p50_ms": ("<=", 10.0),
         "live_p95_ms": ("<=", 15.0), "video_swap_vs_reference": (">=", 3.0),
         "video_enhance_vs_reference": (">=", 3.0)}
ORT_NAMES = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider", "tensorrt": "TensorrtExecutionProvider"}


def fail(message: str) -> None:
    """The one line a failed preflight prints; exit 2."""
    print(f"gpu_bench: {message}", file=sys.stderr, flush=True)
    raise SystemExit(PREFLIGHT_EXIT)


# ----------------------------------------------------------------------------- part 0: preflight


def tiny_model() -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "tiny",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def load_library(names: tuple[str, ...]) -> tuple[Any, str]:
    """(handle, name) of the first library of `names` that loads, else (None, why)."""
    errors = []
    for name in names:
        try:
            return ctypes.CDLL(name), name
        except OSError as exc:
            errors.append(str(exc).split(":")[-1].strip() or name)
    return None, f"{names[0]} cannot be loaded ({errors[0]})"


def nvidia_smi() -> dict[str, str]:
    fields = "name,driver_version,clocks.sm,clocks.max.sm,memory.total,temperature.gpu,power.draw"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return dict(zip(fields.split(","), (v.strip() for v in out.stdout.strip().splitlines()[0].split(","))))
    except Exception as exc:  # noqa: BLE001 - no driver tools: say so
        return {"error": str(exc)[:120]}


def preflight(provider: str) -> dict[str, Any]:
    """Part 0: exit 2 with one line unless `provider` really runs here."""
    started = time.perf_counter()
    try:
        import onnxruntime as ort
    except Exception as exc:  # noqa: BLE001
        fail(f"onnxruntime cannot be imported ({type(exc).__name__}: {str(exc)[:160]})")
    info: dict[str, Any] = {"onnxruntime": ort.__version__, "python": sys.version.split()[0],
                            "cpu_count": os.cpu_count()}
    missing: list[str] = []
    if provider != "cpu":
        from livecam.runtime.providers import (driver_cuda_version, missing_nvidia_driver, ort_cuda_version,
                                               preload_gpu_libraries)

        missing = preload_gpu_libraries()  # the nvidia-* wheels' CUDA and cuDNN, before any session
        info["available"] = list(ort.get_available_providers())
        if "CUDAExecutionProvider" not in info["available"]:
            fail(f"this onnxruntime ({ort.__version__}) has no CUDA provider (it offers "
                 f"{', '.join(info['available'])}): unpack onnxruntime-gpu first (docs/GPU.md)")
        driver = missing_nvidia_driver()
        if driver is not None:
            fail(f"no NVIDIA driver: {driver} cannot be loaded (onnxruntime-gpu is installed, the GPU is not usable)")
        built, supported = ort_cuda_version(), driver_cuda_version()
        info["cuda_built"], info["cuda_driver"] = built, supported
        if built and supported and built[0] > supported[0]:
            fail(f"the driver supports CUDA {supported[0]}.{supported[1]}, this onnxruntime-gpu needs CUDA {built[0]}")
        cudnn, name = load_library(("libcudnn.so.9", "libcudnn.so"))
        if cudnn is None:
            fail(f"cuDNN: {name}" + (f"; preload_dlls could not load {', '.join(missing[:3])}" if missing else ""))
        try:
            version = int(cudnn.cudnnGetVersion())
            info["cudnn"] = f"{version // 10000}.{version // 100 % 100}.{version % 100}"
        except AttributeError:
            info["cudnn"] = name
        info["gpu"] = nvidia_smi()
    else:
        info["available"] = list(ort.get_available_providers())
    wanted = ORT_NAMES["cuda" if provider == "tensorrt" else provider]
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    with redirect_stdout(io.StringIO()) as said:  # ORT prints its fallback on stdout
        try:
            session = ort.InferenceSession(tiny_model(), opts, providers=list(dict.fromkeys([wanted, "CPUExecutionProvider"])))
        except Exception as exc:  # noqa: BLE001
            fail(f"a one-node session on {wanted} failed: {str(exc).splitlines()[0][:200]}")
    got = session.get_providers()
    if got[0] != wanted:
        text = said.getvalue().strip().splitlines()
        fail(f"onnxruntime fell back from {wanted} to {got[0]}"
             + (f" (missing {', '.join(missing[:3])})" if missing else "")
             + (f": {text[-1][:160]}" if text else ""))
    x = np.arange(4, dtype=np.float32)
    if not np.array_equal(session.run(None, {"x": x})[0], 2 * x):
        fail(f"a one-node graph on {wanted} gave a wrong result")
    info["session_provider"] = got[0]
    if provider != "cpu":
        handle, why = load_library(("libnvinfer.so.10", "libnvinfer.so"))
        info["tensorrt"] = "libnvinfer loads" if handle is not None else f"skipped: {why}"
        if "TensorrtExecutionProvider" not in info["available"]:
            info["tensorrt"] = "skipped: this onnxruntime has no TensorRT provider"
    info["preflight_s"] = round(time.perf_counter() - started, 2)
    return info


# ----------------------------------------------------------------------------- report


class Report:
    """gpu.json, gpu.md and gpu-h200.json under OUT, rewritten after every part."""

    def __init__(self, out: Path, smoke: bool, provider: str) -> None:
        self.out = out
        self.data: dict[str, Any] = {"smoke": smoke, "provider": provider, "errors": {}, "skipped": {},
                                     "measured_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        self.out.mkdir(parents=True, exist_ok=True)

    def __getitem__(self, key: str) -> Any:
        return self.data.get(key)

    def __setitem__(self, key: str, value: Any) -> None:
        self.data[key] = value
        self.write()

    def write(self) -> None:
        (self.out / "gpu.json").write_text(json.dumps(self.data, indent=2, default=str))
        (self.out / "gpu.md").write_text(format_table(self.data))
        (self.out / "gpu-h200.json").write_text(json.dumps(headline(self.data), indent=2, default=str))


def _fps(data: dict[str, Any], part: str, variant: str) -> float | None:
    return (data.get(part) or {}).get(variant, {}).get("fps")


def headline(data: dict[str, Any]) -> dict[str, Any]:
    """The figures that answer the goals (benchmarks/gpu-h200.json)."""
    video = data.get("video") or {}
    default = "lanes" if data.get("provider") in ("cuda", "tensorrt") else "shared"
    live = data.get("live") or {}
    ref = data.get("reference") or {}
    out: dict[str, Any] = {
        "video_swap_fps": _fps(video, "swap", default), "video_enhance_fps": _fps(video, "enhance", default),
        "video_swap_fps_shared_pool": _fps(video, "swap", "shared"),
        "video_enhance_fps_shared_pool": _fps(video, "enhance", "shared"),
        "video_swap_fps_cuda_graphs": _fps(video, "swap", "lanes_cuda_graphs"),
        "video_enhance_fps_cuda_graphs": _fps(video, "enhance", "lanes_cuda_graphs"),
        "video_swap_fps_slice_encoder": _fps(video, "swap", "shared_slices"),
        "video_enhance_fps_slice_encoder": _fps(video, "enhance", "shared_slices"),
        "live_p50_ms": (live.get("paced_30fps") or {}).get("latency_ms_p50"),
        "live_p95_ms": (live.get("paced_30fps") or {}).get("latency_ms_p95"),
        "live_unpaced_p50_ms": (live.get("unpaced") or {}).get("latency_ms_p50"),
        "live_unpaced_p95_ms": (live.get("unpaced") or {}).get("latency_ms_p95"),
        "reference_swap_fps": (ref.get("swap") or {}).get("fps"),
        "reference_enhance_fps": (ref.get("enhance") or {}).get("fps"),
        "provider": (data.get("preflight") or {}).get("session_provider", data.get("provider")),
        "precision": video.get("precision"), "frames": video.get("frames"), "lanes": video.get("lanes"),
        "resolution": video.get("resolution"), "faces_per_frame": video.get("faces_per_frame"),
        "gpu": ((data.get("preflight") or {}).get("gpu") or {}).get("name"),
        "models": ("random-weight replicas" if not any("standin" in (v or {}) for v in (data.get("replicas") or {}).values())
                   else "stand-ins for " + ", ".join(k for k, v in (data.get("replicas") or {}).items() if "standin" in (v or {}))),
        "onnxruntime": (data.get("preflight") or {}).get("onnxruntime"),
        "measured_at": data.get("measured_at"), "smoke": data.get("smoke"),
    }
    for kind in ("swap", "enhance"):
        mine, theirs = out[f"video_{kind}_fps"], out[f"reference_{kind}_fps"]
        out[f"video_{kind}_vs_reference"] = round(mine / theirs, 2) if mine and theirs else None
    return out


def format_table(data: dict[str, Any]) -> str:
    head = headline(data)
    pre = data.get("preflight") or {}
    lines = [f"# GPU benchmark ({'SMOKE, ' if data.get('smoke') else ''}provider {head['provider']}, "
             f"{head.get('gpu') or 'no GPU'}, onnxruntime {pre.get('onnxruntime')}, cuDNN {pre.get('cudnn')})", "",
             f"{head.get('resolution')}, {head.get('faces_per_frame')} face(s) per frame, {head.get('frames')} frames, "
             f"precision: {head.get('precision')}, lanes: {head.get('lanes')}", "",
             "| figure | measured | goal | met |", "|---|---|---|---|"]
    for key, (op, goal) in GOALS.items():
        value = head.get(key)
        met = None if value is None else (value >= goal if op == ">=" else value <= goal)
        lines.append(f"| {key} | {value} | {op} {goal:g} | {'-' if met is None else 'yes' if met else 'no'} |")
    for key in ("video_swap_fps_shared_pool", "video_enhance_fps_shared_pool", "video_swap_fps_cuda_graphs",
                "video_enhance_fps_cuda_graphs", "reference_swap_fps",
                "reference_enhance_fps", "live_unpaced_p50_ms", "live_unpaced_p95_ms"):
        lines.append(f"| {key} | {head.get(key)} | | |")
    lat = data.get("latency") or {}
    if lat:
        lines += ["", "| model | variant | median ms | p95 ms | max abs diff vs numpy | note |", "|---|---|---|---|---|---|"]
        for model, variants in lat.items():
            for variant, v in variants.items():
                if isinstance(v, dict):
                    lines.append(f"| {model} | {variant} | {v.get('median_ms')} | {v.get('p95_ms')} | "
                                 f"{v.get('max_abs_diff')} | {v.get('error') or v.get('providers') or ''} |")
    for key in ("pre_post", "overlap", "copies", "fp16", "tensorrt"):
        if data.get(key):
            lines += ["", f"## {key}", "```", json.dumps(data[key], indent=1, default=str)[:3000], "```"]
    if data.get("skipped"):
        lines += ["", "skipped: " + "; ".join(f"{k}: {v}" for k, v in data["skipped"].items())]
    if data.get("errors"):
        lines += ["", "errors:"] + [f"- {k}: {v}" for k, v in data["errors"].items()]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- helpers


def median_ms(fn: Callable[[], Any], reps: int, deadline: float, warm: int = 3) -> dict[str, Any]:
    for _ in range(warm):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
        if time.perf_counter() > deadline and len(times) >= 5:
            break
    return {"median_ms": round(statistics.median(times), 3), "p95_ms": round(float(np.percentile(times, 95)), 3),
            "reps": len(times)}


def choice_for(provider: str) -> Any:
    from livecam.runtime.providers import resolve_providers

    return resolve_providers([provider])


def ort_session(path: Path, choice: Any, override: dict[str, str] | None = None,
                session_config: dict[str, str] | None = None, without_cpu: bool = False) -> Any:
    """A plain session on `choice` (livecam's provider options), `override` merged into the first
    provider's; `without_cpu` leaves the CPU provider out (ORT refuses disable_cpu_ep_fallback
    beside an explicit CPU provider)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    for key, value in (session_config or {}).items():
        opts.add_session_config_entry(key, value)
    names, options = choice.as_ort_args()
    if override:
        options = [{**options[0], **override}, *options[1:]]
    if without_cpu:
        kept = [i for i, n in enumerate(names) if n != "CPUExecutionProvider"]
        names, options = [names[i] for i in kept], [options[i] for i in kept]
    return ort.InferenceSession(str(path), opts, providers=names, provider_options=options)


def random_feeds(session: Any, side: int) -> dict[str, np.ndarray]:
    from livecam.runtime.sessions import input_dtype

    rng = np.random.default_rng(0)
    feeds = {}
    for arg in session.get_inputs():
        shape = [d if isinstance(d, int) else (1 if i == 0 else side) for i, d in enumerate(arg.shape)]
        # the ORT type as numpy's: CodeFormer's fidelity `weight` is a double, a replica's fp16 half
        feeds[arg.name] = rng.standard_normal(shape).astype(input_dtype(arg.type))
    return feeds


def max_diff(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return round(max(float(np.abs(x.astype(np.float64) - y.astype(np.float64)).max()) for x, y in zip(a, b)), 6)


def source_photo(work: Path, given: Path | None, size: tuple[int, int], smoke: bool) -> Path:
    """The face photo for every livecam and reference run: `given` (--photo) or the shared
    obama.jpg. On the GPU the replica detector reports one fixed face (scripts/replica_archs.py)
    whatever the picture shows, and livecam keeps only faces FaceMesh confirms (a source photo's
    too), so the full run places the photo's face where the replica reports it at `size`."""
    import cv2

    photo = given or next((p for p in FACES if p.is_file()), None)
    if photo is None or not photo.is_file():
        raise SystemExit(f"gpu_bench: no face photo ({given or FACES[-1]}); pass --photo FILE with one face")
    if smoke:
        return photo
    import replica_archs

    scale = size[0] / 640.0  # the replica's face is in its 640x640 input, a 16:9 frame letterboxed top-left
    target = np.array(replica_archs.FACE_KPS, np.float32) * np.float32(scale)
    image = cv2.imread(str(photo))
    kps = photo_keypoints(image)
    matrix, _ = cv2.estimateAffinePartial2D(kps, target, method=cv2.LMEDS)
    placed = cv2.warpAffine(image, matrix, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    path = work / "face.png"
    work.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), placed)
    return path


def photo_keypoints(image: np.ndarray) -> np.ndarray:
    """The five keypoints of the photo's largest face, from livecam's embedded detector (CPU)."""
    from livecam.faces.blazeface import BlazeFaceDetector
    from livecam.faces.selection import largest_face
    from livecam.runtime.providers import resolve_providers
    from livecam.runtime.sessions import get_session

    models = REPO / "src" / "livecam" / "models" / "default"
    detector = BlazeFaceDetector(get_session(models / "blazeface_full_range.onnx", resolve_providers(("cpu",))),
                                 variant="full")
    face = largest_face(detector.detect(image))
    if face is None:
        raise SystemExit("gpu_bench: the embedded detector finds no face in the photo; pass --photo FILE with one face")
    return np.asarray(face.kps, np.float32)


def catalog_models() -> dict[str, list[str]]:
    """The models to time, from the catalog and the processor registry: the analysis models,
    every swap model the swapper's --swap-model offers that has a file, every enhancer model."""
    from livecam.models.catalog import CATALOG
    from livecam.processors import registry

    roles: dict[str, list[str]] = {"analysis": [n for n in ("det_10g", "w600k_r50") if n in CATALOG],
                                   "swapper": [], "enhancer": []}
    for name, spec in CATALOG.items():
        text = f"{name} {spec.description}".lower()
        if spec.bundled or name in roles["analysis"]:
            continue
        if "swap" in text:
            roles["swapper"].append(name)
        elif any(w in text for w in ("enhanc", "restor", "gfpgan", "gpen", "codeformer")):
            roles["enhancer"].append(name)
    roles["processors"] = [f"{s}:{registry.spec(s).role}" for s in registry.names()]
    return roles


# ----------------------------------------------------------------------------- part 1: replicas


def build_replicas(work: Path, smoke: bool, device: str, wanted: list[str], deadline: float,
                   log: Callable[[str], None], essential: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Replica files under WORK named as livecam's models folder has them (catalog file names),
    in the order given (what livecam runs first); past the deadline only missing essentials."""
    from livecam.models.catalog import CATALOG

    work.mkdir(parents=True, exist_ok=True)
    built: dict[str, Any] = {}
    done_path = work / "built.json"
    done = json.loads(done_path.read_text()) if done_path.is_file() else {}
    try:
        import torch  # noqa: F401

        use_torch = True
    except ImportError:
        use_torch = False
        log("no PyTorch here: the tests' stand-ins stand in for the replicas"
            + ("" if smoke else " (figures are not the real models')"))
    import make_replicas

    for name in wanted:
        file_name = CATALOG[name].file_name if name in CATALOG else f"{name}.onnx"
        dest = work / file_name
        if name in done and dest.is_file():
            built[name] = done[name]
            continue
        if time.perf_counter() > deadline and name not in essential:
            built[name] = {"skipped": "deadline"}
            continue
        t0 = time.perf_counter()
        try:
            if use_torch and name in make_replicas.ALL:
                info = make_replicas.export(name, work, device=device, div=16 if smoke else 1, do_count=False)
                if Path(info["file"]) != dest:
                    os.replace(info["file"], dest)
            elif smoke:
                info = {"standin": standin(name, dest)}
            else:
                built[name] = {"error": "no replica builder for this model (scripts/replica_archs.py)"}
                continue
        except Exception as exc:  # noqa: BLE001 - a stand-in keeps the GPU path measurable
            why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            if name not in essential:
                built[name] = {"error": why}
                continue
            info = {"standin": standin(name, dest), "replica_error": why,
                    "note": "a tiny stand-in, not the real architecture: its figures are not the model's"}
            log(f"{name}: replica failed ({why}); a stand-in instead")
        info.update(file=str(dest), bytes=dest.stat().st_size, build_s=round(time.perf_counter() - t0, 1))
        built[name] = done[name] = info
        done_path.write_text(json.dumps(done))
        log(f"built {name}: {info['bytes'] / 2**20:.1f} MiB in {info['build_s']} s")
    return built


def standin(name: str, dest: Path) -> str:
    """Smoke: the tests' stand-in with the model's signature (tests/standins)."""
    from tests.standins.arcface import build_arcface
    from tests.standins.gfpgan import build_gfpgan
    from tests.standins.inswapper import build_inswapper
    from tests.standins.scrfd import build_scrfd

    builders: dict[str, Callable[[Path], Path]] = {
        "det_10g": build_scrfd, "w600k_r50": build_arcface, "inswapper_128": build_inswapper,
        "inswapper_128_fp16": lambda p: build_inswapper(p, fp16=True), "gfpgan_1.4": lambda p: build_gfpgan(p, "random")}
    if name not in builders:
        raise KeyError(f"no stand-in for {name}")
    builders[name](dest)
    return name


def fp16_copy(work: Path, name: str) -> Path:
    """fp16 weights behind fp32 inputs and outputs (make_replicas' converter), built once."""
    import onnx

    import make_replicas
    from livecam.models.catalog import CATALOG

    dest = work / f"{name}_fp16w.onnx"
    if not dest.is_file():
        proto = make_replicas._to_fp16(onnx.load(str(work / CATALOG[name].file_name)))
        onnx.save(proto, str(dest) + ".part")
        os.replace(str(dest) + ".part", dest)
    return dest


# ----------------------------------------------------------------------------- part 2: latency


def latency_matrix(files: dict[str, Path], provider: str, reps: int, deadline: float,
                   log: Callable[[str], None], gpu_paths: bool = False) -> dict[str, Any]:
    """Per model and variant, median ms; `gpu_paths` runs the GPU-only variants on any provider
    (the CPU smoke run: ORT's CPU provider ignores CUDA options, so the code paths are checked)."""
    from livecam.models.catalog import CATALOG
    from livecam.runtime.binding import BoundSession
    from livecam.runtime.providers import SessionTuning

    choice = choice_for(provider)
    device = "cuda" if provider in ("cuda", "tensorrt") else "cpu"
    gpu = gpu_paths or device == "cuda"
    table: dict[str, Any] = {}
    for name, path in files.items():
        if time.perf_counter() > deadline:
            table[name] = {"skipped": "deadline"}
            continue
        side = 640 if name.startswith("det") else 112
        row: dict[str, Any] = {}
        table[name] = row
        base = CATALOG.get(name.removesuffix("_fp16w"))
        fixed = base is not None and all(s.shape is not None and all(d is not None for d in s.shape) for s in base.inputs)
        if device == "cuda":  # does every node sit on the GPU? (ORT refuses the session otherwise)
            try:
                ort_session(path, choice, session_config={"session.disable_cpu_ep_fallback": "1"}, without_cpu=True)
                row["all_nodes_on_gpu"] = True
            except Exception as exc:  # noqa: BLE001
                row["all_nodes_on_gpu"] = f"no: {str(exc).splitlines()[0][:200]}"
        try:
            plain = ort_session(path, choice)
            feeds = random_feeds(plain, side)
            want = plain.run(None, feeds)
            row["numpy"] = {**median_ms(lambda: plain.run(None, feeds), reps, deadline),
                            "providers": plain.get_providers()[:1]}
            if gpu:
                heur = ort_session(path, choice, {"cudnn_conv_algo_search": "HEURISTIC"})
                row["numpy_heuristic"] = median_ms(lambda: heur.run(None, feeds), reps, deadline)
                del heur
            bound = BoundSession(plain, device)
            row["binding"] = {**median_ms(lambda: bound.run(None, feeds), reps, deadline),
                              "max_abs_diff": max_diff(bound.run(None, feeds), want)}
        except Exception as exc:  # noqa: BLE001
            row["error"] = str(exc).splitlines()[0][:300]
            log(f"latency {name}: {row['error']}")
            continue
        if gpu and (fixed or name.startswith("det")):
            try:
                graph = ort_session(path, choice.tuned(SessionTuning(cuda_graph=True)))
                gbound = BoundSession(graph, device, graphs=True)
                row["binding_graph"] = {**median_ms(lambda: gbound.run(None, feeds), reps, deadline),
                                        "max_abs_diff": max_diff(gbound.run(None, feeds), want)}
                if name.startswith("det"):  # a second graph at 320 after 640 (the governor's step)
                    small = random_feeds(plain, 320)
                    row["binding_graph_320_then_640"] = {
                        "max_abs_diff_320": max_diff(gbound.run(None, small), plain.run(None, small)),
                        "max_abs_diff_640": max_diff(gbound.run(None, feeds), want)}
            except Exception as exc:  # noqa: BLE001 - a capture that fails is a finding
                row["binding_graph"] = {"error": str(exc).splitlines()[0][:300]}
        if gpu and ("fp16" in name):
            try:
                nhwc = ort_session(path, choice.tuned(SessionTuning(prefer_nhwc=True)))
                nbound = BoundSession(nhwc, device)
                row["binding_nhwc"] = {**median_ms(lambda: nbound.run(None, feeds), reps, deadline),
                                       "max_abs_diff": max_diff(nbound.run(None, feeds), want)}
            except Exception as exc:  # noqa: BLE001
                row["binding_nhwc"] = {"error": str(exc).splitlines()[0][:300]}
        log(f"latency {name}: " + ", ".join(f"{k} {v.get('median_ms')}" for k, v in row.items() if isinstance(v, dict)))
    return table


# ----------------------------------------------------------------------------- part 3: pre/post graphs


def pre_post(provider: str, reps: int, deadline: float, det_path: Path | None = None) -> dict[str, Any]:
    """The frame's preprocessing on the device (uint8 up) against numpy + the float blob up."""
    import cv2

    from livecam.faces.align import arcface_template, align_matrix, invert, to_blob, warp_crop
    from livecam.runtime.binding import BoundSession
    from livecam.runtime.graphs import letterbox_graph, output_graph, session_of, warp_crop_graph

    choice = choice_for(provider)
    device = "cuda" if provider in ("cuda", "tensorrt") else "cpu"
    frame = np.random.default_rng(0).integers(0, 255, (720, 1280, 3), dtype=np.uint8)
    kps = np.array([[600, 300], [690, 300], [645, 350], [610, 400], [680, 400]], np.float32)
    matrix = align_matrix(kps, arcface_template(128))
    out: dict[str, Any] = {}
    letterbox = BoundSession(session_of(letterbox_graph(640, 1 / 128.0, -127.5 / 128.0), choice), device)
    sizes = np.array([360, 640], np.int64)
    out["letterbox_graph"] = median_ms(lambda: letterbox.run(None, {"image": frame, "resized": sizes}), reps, deadline)

    def numpy_letterbox() -> np.ndarray:
        canvas = np.zeros((640, 640, 3), np.uint8)
        canvas[:360] = cv2.resize(frame, (640, 360))
        return to_blob([canvas], 1 / 128.0, -127.5 / 128.0)

    out["letterbox_numpy"] = median_ms(numpy_letterbox, reps, deadline)
    crop = BoundSession(session_of(warp_crop_graph(128, 1 / 255.0, 0.0), choice), device)
    inverse = invert(matrix).astype(np.float32)
    out["swap_crop_graph"] = median_ms(lambda: crop.run(None, {"image": frame, "inverse": inverse}), reps, deadline)
    out["swap_crop_numpy"] = median_ms(lambda: to_blob([warp_crop(frame, matrix, 128)], 1 / 255.0), reps, deadline)
    if det_path is not None:  # the detector with its letterbox joined: uint8 up, its heads back
        import onnx

        from livecam.runtime.graphs import with_preprocessing

        model = onnx.load(str(det_path))
        joined = with_preprocessing(letterbox_graph(640, 1 / 128.0, -127.5 / 128.0, opset=model.opset_import[0].version),
                                    model, "input.1")
        det_joined = BoundSession(session_of(joined, choice), device)
        det_plain = BoundSession(ort_session(det_path, choice), device)
        out["detector_uint8_joined"] = median_ms(
            lambda: det_joined.run(None, {"pre_image": frame, "pre_resized": sizes}), reps, deadline)
        out["detector_numpy_letterbox_then_float_blob"] = median_ms(
            lambda: det_plain.run(None, {"input.1": numpy_letterbox()}), reps, deadline)
    post = BoundSession(session_of(output_graph(512, 1 / 127.5, -1.0, rounded=True), choice), device)
    restored = np.random.default_rng(1).uniform(-1, 1, (1, 3, 512, 512)).astype(np.float32)
    out["enhancer_output_graph"] = median_ms(lambda: post.run(None, {"output": restored}), reps, deadline)
    return out


# ----------------------------------------------------------------------------- parts 4-6: livecam, reference


def livecam_settings(models: Path, provider: str, swap_model: str, enhance: bool, source: Path, threads: int,
                     lanes: bool | None, enhancer: str | None, cuda_graphs: bool = False) -> Any:
    import bench_baseline as bb

    settings = bb.livecam_settings(models, provider, swap_model, enhance, source, threads)
    if enhance and enhancer is not None:
        settings = replace(settings, frame_processors=(settings.frame_processors[0], enhancer))
    return replace(settings, runtime=replace(settings.runtime, lanes=lanes, explicit_threads=True,
                                             cuda_graphs=cuda_graphs))


def encoded_clip(work: Path, photo: Path, size: tuple[int, int], frames: int, settings: Any) -> Path:
    """The bench's generated clip (one face moving a little), encoded once for every video run."""
    import cv2

    from livecam.commands.bench import _generated_file
    from livecam.settings import BenchJob

    folder = work / f"clip_{size[0]}x{size[1]}_{frames}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "bench-input.mp4"
    if not path.is_file():
        job = BenchJob(processing=settings, mode="video", frames=frames, resolution=size)
        made = _generated_file(job, folder, cv2.imread(str(photo)))
        if made != path:
            os.replace(made, path)
    return path


def video_runs(models: Path, provider: str, swap_model: str, enhancer: str | None, photo: Path, clip: Path,
               frames: int, size: tuple[int, int], threads: int, lanes_k: int, deadline: float,
               log: Callable[[str], None], variants: Sequence[str] = VIDEO_VARIANTS) -> dict[str, Any]:
    import cv2

    from livecam.commands.bench import GeneratedClip, run_video_bench
    from livecam.commands.live import warm_frames
    from livecam.media import video_writer
    from livecam.pipeline.engine import Engine
    from livecam.runtime import sessions
    from livecam.settings import BenchJob

    frame_threads = video_writer.set_encoder_threads
    ring = GeneratedClip(cv2.imread(str(photo)), size, 4)
    warm = [ring.image(i) for i in range(4)]

    out: dict[str, Any] = {"frames": frames, "resolution": f"{size[0]}x{size[1]}", "lanes": lanes_k,
                           "shared_pool_workers": threads, "swap_model": swap_model, "enhancer": enhancer,
                           "precision": f"{swap_model}; batch 1"}
    for kind, enhance in (("swap", False), ("enhance", True)):
        if enhance and enhancer is None:
            out[kind] = {"skipped": "no enhancer processor in the registry"}
            continue
        out[kind] = {}
        # run_video_bench warms every lane in turn before the run: CUDA graphs are captured there,
        # one lane at a time (a capture while another lane copies fails).
        for variant in variants:
            lanes, graphs = variant.startswith("lanes"), variant == "lanes_cuda_graphs"
            workers = lanes_k if lanes else threads
            if time.perf_counter() > deadline:
                out[kind][variant] = {"skipped": "deadline"}
                continue
            settings = livecam_settings(models, provider, swap_model, enhance, photo, workers, lanes, enhancer, graphs)
            t0 = time.perf_counter()
            before = {id(session) for _, _, session in sessions.pooled()}
            try:
                engine = Engine.create(settings, live=False, progress=False, lanes=True)  # as `livecam video`
                # shared_slices: the shared pool with the writer's former libx264 slice threads (the baseline)
                video_writer.set_encoder_threads = (lambda context, spec: None) if variant == "shared_slices" else frame_threads
                for lane in engine.lanes():  # ORT captures a graph on a session's third run: all here, in turn
                    warm_frames(lane, warm, track=False)
                build_s = time.perf_counter() - t0
                res = run_video_bench(BenchJob(processing=settings, mode="video", input=clip, frames=frames,
                                               resolution=size, json=True), engine)
            except Exception as exc:  # noqa: BLE001 - one variant failing leaves the others
                out[kind][variant] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
                log(f"video {kind} {variant}: {out[kind][variant]['error']}")
                continue
            res["engine_build_s"] = round(build_s, 1)
            res["engine"] = engine.describe()
            # The sessions this variant created that replay CUDA graphs (a model ORT refuses one
            # for runs without: runtime/sessions._fallback), as "file+front".
            res["cuda_graph_sessions"] = sorted(f"{name}+{front}" for name, front, session in sessions.pooled()
                                                if id(session) not in before and getattr(session, "graphs", False))
            if enhance:  # --enhancer-precision auto: fp16 on a GPU unless its copy was refused (models/fp16.py)
                fp16_used = any(name.endswith(" fp16") for name in engine.model_names.values())
                out["precision"] = f"{swap_model}; enhancer {'fp16' if fp16_used else 'fp32'}; batch 1"
            out[kind][variant] = res
            out["faces_per_frame"] = res.get("faces_per_frame")
            log(f"video {kind} {variant}: {res['fps']} FPS ({res['frames']} frames, build {build_s:.1f} s)")
    video_writer.set_encoder_threads = frame_threads
    return out


def reference_runs(models: Path, provider: str, swap_model: str, photo: Path, size: tuple[int, int], frames: int,
                   deadline: float, log: Callable[[str], None]) -> dict[str, Any]:
    import cv2

    import bench_baseline as bb
    from livecam.commands.bench import GeneratedClip

    install_shims()
    image = cv2.imread(str(photo))
    clip = GeneratedClip(image, size, frames)
    out: dict[str, Any] = {"frames": frames, "resolution": f"{size[0]}x{size[1]}", "swap_model": swap_model}
    for kind, enhance in (("swap", False), ("enhance", True)):
        if time.perf_counter() > deadline:
            out[kind] = {"skipped": "deadline"}
            continue
        base = bb.Baseline(models, "cuda" if provider == "tensorrt" else provider, swap_model, enhance, image)
        out[kind] = bb.baseline_live(base, clip, frames)
        out["landmark_2d_106"] = bb.landmark_status(base)
        log(f"reference {kind}: {out[kind]}")
    return out


def live_runs(models: Path, provider: str, swap_model: str, photo: Path, size: tuple[int, int], frames: int,
              deadline: float, log: Callable[[str], None], lanes: bool | None = None) -> dict[str, Any]:
    import cv2

    from livecam.commands.bench import GeneratedClip, TimedSource, run_live_bench
    from livecam.commands.live import warm_frames
    from livecam.media.sinks import NullSink
    from livecam.pipeline.engine import Engine
    from livecam.pipeline.live import LiveRun, run_live_pipeline
    from livecam.settings import BenchJob, LiveJob

    settings = livecam_settings(models, provider, swap_model, False, photo, 1, lanes, None)
    settings = replace(settings, runtime=replace(settings.runtime, explicit_threads=False))  # lanes: the default K
    engine = Engine.create(settings, live=True, progress=False, lanes=True)  # as `livecam run`
    lane_engines = engine.lanes()
    out: dict[str, Any] = {"frames": frames, "resolution": f"{size[0]}x{size[1]}",
                           "process_workers": len(lane_engines) or 1, "lanes": bool(lane_engines),
                           "analysis_lane": engine.analysis_lane is not None}
    res = run_live_bench(BenchJob(processing=settings, mode="live", frames=frames, resolution=size, json=True), engine)
    out["unpaced"] = res
    log(f"live unpaced: p50 {res['latency_ms_p50']} p95 {res['latency_ms_p95']} ms, {res['fps']} FPS")
    if time.perf_counter() > deadline:
        out["paced_30fps"] = {"skipped": "deadline"}
        return out
    clip = GeneratedClip(cv2.imread(str(photo)), size, frames)
    warm_frames(engine, [clip.image(i) for i in range(3)], track=True, lanes=lane_engines)

    def paced(fps: float = 30.0) -> Any:
        t0 = time.perf_counter()
        for i in range(frames):
            delay = t0 + i / fps - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            yield clip.image(i)

    options = LiveRun(LiveJob(processing=settings, max_frames=frames, degrade=False, label=False),
                      handle_signals=False, lanes=lane_engines)
    result = run_live_pipeline(engine, TimedSource(paced(), "paced clip", 30.0, []), NullSink(), options)
    s = result.summary
    out["paced_30fps"] = {k: s.get(k) for k in ("frames", "fps", "dropped", "latency_ms_p50", "latency_ms_p95")}
    log(f"live paced 30 FPS: p50 {s.get('latency_ms_p50')} p95 {s.get('latency_ms_p95')} ms")
    return out


# ----------------------------------------------------------------------------- parts 7-9


def gpu_utilisation() -> Callable[[], dict[str, Any]]:
    """Start sampling NVML utilisation and SM clock every 50 ms; the returned call stops it."""
    samples: list[tuple[int, int]] = []
    stop = threading.Event()
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception as exc:  # noqa: BLE001
        reason = f"no NVML: {str(exc)[:80]}"
        return lambda: {"nvml": reason}

    def sample() -> None:
        while not stop.wait(0.05):
            samples.append((pynvml.nvmlDeviceGetUtilizationRates(handle).gpu,
                            pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()

    def finish() -> dict[str, Any]:
        stop.set()
        thread.join(1)
        if not samples:
            return {"nvml": "no samples"}
        return {"gpu_util_pct_median": statistics.median(s[0] for s in samples),
                "sm_clock_mhz_median": statistics.median(s[1] for s in samples)}

    return finish


def overlap(path: Path, provider: str, runs: int, deadline: float) -> dict[str, Any]:
    """Runs per second of the swapper with 1-6 threads: one shared session, or one per thread."""
    from livecam.runtime.binding import BoundSession

    choice = choice_for(provider)
    device = "cuda" if provider in ("cuda", "tensorrt") else "cpu"
    shared = ort_session(path, choice)
    feeds = random_feeds(shared, 128)
    own = [BoundSession(ort_session(path, choice), device) for _ in range(6)]
    for s in own:
        s.run(None, feeds)
    out: dict[str, Any] = {}
    for threads in range(1, 7):
        for mode in ("shared", "per_thread"):
            if time.perf_counter() > deadline:
                out[f"{threads}_{mode}"] = "deadline"
                continue

            def loop(k: int, mode: str = mode) -> None:
                session = shared if mode == "shared" else own[k]
                for _ in range(runs):
                    session.run(None, feeds)

            finish = gpu_utilisation()
            workers = [threading.Thread(target=loop, args=(k,)) for k in range(threads)]
            t0 = time.perf_counter()
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            wall = time.perf_counter() - t0
            out[f"{threads}_{mode}"] = {"runs_per_s": round(threads * runs / wall, 1), **finish()}
    return out


def copies(reps: int) -> dict[str, Any]:
    """Host-to-device copies of a 720p uint8 frame and the float blob, pageable and pinned."""
    import torch

    out: dict[str, Any] = {}
    for label, shape, dtype in (("frame_uint8_2.7MB", (720, 1280, 3), torch.uint8),
                                ("blob_float_11MB", (1, 3, 720, 1280), torch.float32)):
        for memory in ("pageable", "pinned"):
            host = torch.zeros(shape, dtype=dtype, pin_memory=memory == "pinned")
            dev = torch.empty(shape, dtype=dtype, device="cuda")
            times = []
            for _ in range(reps + 3):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                dev.copy_(host, non_blocking=memory == "pinned")
                torch.cuda.synchronize()
                times.append((time.perf_counter() - t0) * 1000.0)
            out[f"{label}_{memory}_ms"] = round(statistics.median(times[3:]), 3)
    return out


def fp16_sanity(fp32: Path, fp16: Path, provider: str) -> dict[str, Any]:
    choice = choice_for(provider)
    a, b = ort_session(fp32, choice), ort_session(fp16, choice)
    feeds = random_feeds(a, 512)
    want, got = a.run(None, feeds)[0], b.run(None, feeds)[0]
    diff = np.abs(want.astype(np.float64) - got.astype(np.float64))
    return {"nan": int(np.isnan(got).sum()), "inf": int(np.isinf(got).sum()),
            "max_abs_diff": round(float(diff.max()), 5), "mean_abs_diff": round(float(diff.mean()), 5),
            "levels_off_p99": round(float(np.percentile(diff, 99)) * 127.5, 2)}


def tensorrt_latency(files: dict[str, Path], out: Path, timeout: float) -> dict[str, Any]:
    """TensorRT in a subprocess with its own timeout; the provider each session really used."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--trt-child", json.dumps({k: str(v) for k, v in files.items()}),
           "--out", str(out / "trt")]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:g} s (engine builds)"}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except Exception:  # noqa: BLE001
        return {"error": f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-300:]}"}


def trt_child(files: dict[str, str]) -> int:
    import onnxruntime as ort

    from livecam.models.catalog import CATALOG
    from livecam.runtime.providers import model_tuning

    result: dict[str, Any] = {}
    try:
        if hasattr(ort, "preload_dlls"):
            with redirect_stdout(io.StringIO()):
                ort.preload_dlls()
        choice = choice_for("tensorrt")
    except Exception as exc:  # noqa: BLE001 - one JSON line whatever happens
        print(json.dumps({"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}), flush=True)
        return 0
    for name, path in files.items():
        try:
            spec = CATALOG.get(name)
            tuned = choice.tuned(model_tuning([(t.name, t.shape) for t in spec.inputs], choice)) if spec else choice
            for opts in tuned.as_ort_args()[1]:  # ORT creates one folder level only
                for key, value in opts.items():
                    if key.endswith("_cache_path"):
                        Path(value).mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            session = ort_session(Path(path), tuned)
            feeds = random_feeds(session, 640 if name.startswith("det") else 112)
            session.run(None, feeds)
            build = time.perf_counter() - t0
            result[name] = {**median_ms(lambda: session.run(None, feeds), 50, time.perf_counter() + 20),
                            "provider_used": session.get_providers()[0], "build_s": round(build, 1)}
        except Exception as exc:  # noqa: BLE001
            result[name] = {"error": str(exc).splitlines()[0][:300]}
    print(json.dumps(result), flush=True)
    return 0


# ----------------------------------------------------------------------------- environment


def install_shims() -> list[str]:
    """Stand-ins for insightface's imports that the GPU machine lacks; only the parts the
    reference loop uses (its face alignment's similarity estimate)."""
    shimmed = []

    def missing(name: str) -> bool:
        try:
            __import__(name)
            return False
        except ImportError:
            return True

    if missing("skimage.transform"):
        from livecam.faces.align import estimate_similarity

        class SimilarityTransform:
            def __init__(self, matrix: Any = None, scale: float = 1.0, rotation: float = 0.0,
                         translation: tuple[float, float] = (0.0, 0.0)) -> None:
                c, s = np.cos(rotation) * scale, np.sin(rotation) * scale
                self.params = np.array([[c, -s, translation[0]], [s, c, translation[1]], [0, 0, 1.0]])
                if matrix is not None:
                    self.params = np.asarray(matrix, dtype=np.float64)

            def estimate(self, src: np.ndarray, dst: np.ndarray) -> bool:
                self.params = np.vstack([estimate_similarity(src, dst), [0.0, 0.0, 1.0]])
                return True

            def __add__(self, other: "SimilarityTransform") -> "SimilarityTransform":
                return SimilarityTransform(matrix=other.params @ self.params)

        skimage = types.ModuleType("skimage")
        transform = types.ModuleType("skimage.transform")
        transform.SimilarityTransform = SimilarityTransform  # type: ignore[attr-defined]
        skimage.transform = transform  # type: ignore[attr-defined]
        sys.modules["skimage"], sys.modules["skimage.transform"] = skimage, transform
        shimmed.append("skimage.transform")
    if missing("requests"):
        sys.modules["requests"] = types.ModuleType("requests")  # downloads only; never called here
        shimmed.append("requests")
    return shimmed


def pack(folder: Path) -> int:
    """Wheels the GPU machine lacks (CPython 3.12, manylinux x86_64) and the insightface package
    from this venv, for the reference loop."""
    import tarfile

    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
                    "-d", str(folder), "platformdirs", "av", "nvidia-ml-py"], check=True)
    try:
        import insightface
    except ImportError:
        print("insightface is not importable here: the reference loop will be skipped there")
    else:
        src = Path(insightface.__file__).resolve().parent
        with tarfile.open(folder / "insightface.tar.gz", "w:gz") as tar:
            tar.add(src, arcname="insightface", filter=lambda t: None if "__pycache__" in t.name else t)
    size = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
    print(f"{folder}: {size:.1f} MiB ({', '.join(sorted(p.name for p in folder.iterdir()))})")
    return 0


# ----------------------------------------------------------------------------- main


def parse_size(text: str) -> tuple[int, int]:
    w, _, h = text.lower().partition("x")
    return int(w), int(h)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="livecam GPU benchmarks (issue 17), one run")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu_bench_out")))
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "livecam_replicas")
    ap.add_argument("--provider", choices=("cuda", "tensorrt", "cpu"), default="cuda")
    ap.add_argument("--smoke", action="store_true", help="tiny: stand-in models, a few frames (checks the script)")
    ap.add_argument("--budget", type=float, default=390.0, help="seconds for everything after the preflight")
    ap.add_argument("--frames", type=int, default=1000, help="frames per livecam video run")
    ap.add_argument("--live-frames", type=int, default=300)
    ap.add_argument("--reference-frames", type=int, default=150)
    ap.add_argument("--resolution", default="1280x720")
    ap.add_argument("--lanes", type=int, default=3, help="K for the lanes runs")
    ap.add_argument("--threads", type=int, default=4, help="shared-pool workers for the comparison runs")
    ap.add_argument("--reps", type=int, default=50, help="runs per latency cell")
    ap.add_argument("--preflight-only", action="store_true")
    ap.add_argument("--photo", type=Path, help="a photo with one face (default: the shared obama.jpg)")
    ap.add_argument("--variants", nargs="+", default=list(VIDEO_VARIANTS),
                    choices=(*VIDEO_VARIANTS, "shared_slices"), help="the video part's variants, in order")
    ap.add_argument("--only", nargs="+", metavar="PART",
                    help="run these parts alone (e.g. video reference live: a second run after a first one's failure)")
    ap.add_argument("--repo-json", type=Path, help="also write the headline figures here (benchmarks/gpu-h200.json)")
    ap.add_argument("--pack", type=Path, help="download what the GPU machine lacks into this folder and exit")
    ap.add_argument("--trt-child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.pack:
        return pack(args.pack)
    if args.trt_child:
        return trt_child(json.loads(args.trt_child))

    started = time.perf_counter()
    log = lambda s: print(f"[{time.perf_counter() - started:6.1f}s] {s}", flush=True)  # noqa: E731
    info = preflight(args.provider)
    log(f"preflight: {info}")
    if args.preflight_only:
        print(json.dumps(info, default=str))
        return 0
    os.environ.setdefault("LIVECAM_CACHE_DIR", tempfile.mkdtemp(prefix="livecam-cache-"))
    import logging

    logging.getLogger("livecam").setLevel(logging.ERROR)  # the replicas' size warnings, once per model
    smoke = args.smoke
    report = Report(args.out, smoke, args.provider)
    report["preflight"] = info
    report["shims"] = install_shims()  # before anything imports insightface (make_replicas' 2d106det check)
    if smoke:
        args.frames, args.live_frames, args.reference_frames, args.reps = 8, 8, 4, 3
        # The GPU's lane path on the CPU: lanes are forced per run below, the detector's joined
        # letterbox here (a lane's SCRFD then takes the uint8 frame, as on the GPU).
        import livecam.runtime.lanes as lanes_module

        lanes_module.uses_device_fronts = lambda providers: providers.lane is not None
        args.resolution = "640x360"
    size = parse_size(args.resolution)
    budget_end = time.perf_counter() + args.budget
    gpu = args.provider in ("cuda", "tensorrt")

    def part(name: str, share_s: float, fn: Callable[[float], Any]) -> Any:
        """Run one part with deadline now + share_s (within the budget); record and go on."""
        now = time.perf_counter()
        if args.only and name not in {*args.only, "replicas", *(["clip"] if "video" in args.only else [])}:
            report["skipped"] = {**report["skipped"], name: "not asked for (--only)"}
            return None
        if now > budget_end and not smoke:
            report["skipped"] = {**report["skipped"], name: "over the budget"}
            log(f"skip {name}: over the {args.budget:g} s budget")
            return None
        deadline = min(budget_end, now + share_s) if not smoke else now + 3600
        try:
            value = fn(deadline)
        except BaseException as exc:  # noqa: BLE001 - record it and go on with the next part
            if isinstance(exc, KeyboardInterrupt):
                raise
            text = str(exc).splitlines()[0][:300] if str(exc) else ""
            report["errors"] = {**report["errors"], name: f"{type(exc).__name__}: {text}"}
            log(f"{name} failed: {report['errors'][name]}")
            return None
        report[name] = value
        report["elapsed_s"] = round(time.perf_counter() - started, 1)
        log(f"{name} done ({time.perf_counter() - now:.1f} s)")
        return value

    roles = catalog_models()
    report["models"] = roles
    swap_model = "inswapper_128_fp16" if gpu else "inswapper_128"
    from livecam.processors import registry

    enhancers = registry.names_with_role("enhancer")
    enhancer = enhancers[0] if enhancers else None
    import make_replicas

    # What the livecam and reference runs need first, then the rest of the catalog's swap and
    # enhancer models (latency only), then the reference loop's landmark model.
    essential = ["det_10g", "w600k_r50", swap_model, "gfpgan_1.4"]
    wanted = list(dict.fromkeys([*essential, *roles["analysis"], *roles["swapper"], *roles["enhancer"],
                                 *(n for n in make_replicas.BASELINE_ONLY if gpu and not smoke)]))
    if not gpu or smoke:  # the CPU run needs only what livecam runs
        wanted = [n for n in wanted if n in essential]
    elif args.only and "latency" not in args.only:  # the other models are timed only there
        wanted = [n for n in wanted if n in essential or n in make_replicas.BASELINE_ONLY]
    work = args.work / ("smoke" if smoke else "full")
    device = "cuda" if gpu else "cpu"
    built = part("replicas", 200, lambda d: build_replicas(work, smoke, device, wanted, d, log, frozenset(essential))) or {}
    files = {n: Path(i["file"]) for n, i in built.items() if "file" in i}
    needed = {"det_10g", "w600k_r50", swap_model}
    if not needed <= set(files):
        log(f"missing replicas {sorted(needed - set(files))}: the livecam parts cannot run")
    photo = source_photo(work, args.photo, size, smoke)

    clip_settings = livecam_settings(work, args.provider, swap_model, False, photo, 1, None, None)
    clip = part("clip", 60, lambda d: str(encoded_clip(work, photo, size, args.frames + 8, clip_settings)))
    if clip:
        part("video", 140, lambda d: video_runs(work, args.provider, swap_model, enhancer, photo, Path(clip),
                                                args.frames, size, args.threads, args.lanes, d, log,
                                                args.variants))
    part("reference", 60, lambda d: reference_runs(work, args.provider, swap_model, photo, size,
                                                   args.reference_frames, d, log))
    part("live", 40, lambda d: live_runs(work, args.provider, swap_model, photo, size, args.live_frames, d, log,
                                         lanes=True if smoke else None))
    if "gfpgan_1.4" in files and (smoke or time.perf_counter() < budget_end):
        try:  # GFPGAN with fp16 weights (fp32 inputs and outputs): latency and fp16 sanity only
            files["gfpgan_1.4_fp16w"] = fp16_copy(work, "gfpgan_1.4")
        except Exception as exc:  # noqa: BLE001
            report["errors"] = {**report["errors"], "gfpgan_fp16": str(exc)[:200]}
    part("latency", 60, lambda d: latency_matrix(files, args.provider, args.reps, d, log, gpu_paths=smoke))
    part("pre_post", 20, lambda d: pre_post(args.provider, args.reps, d, files.get("det_10g")))
    if swap_model in files:
        part("overlap", 30, lambda d: overlap(files[swap_model], args.provider, 5 if smoke else 50, d))
    if gpu:
        part("copies", 10, lambda d: copies(20))
    else:
        report["skipped"] = {**report["skipped"], "copies": "needs the GPU (PyTorch pinned memory)"}
    if "gfpgan_1.4_fp16w" in files:
        part("fp16", 15, lambda d: fp16_sanity(files["gfpgan_1.4"], files["gfpgan_1.4_fp16w"], args.provider))
    trt = info.get("tensorrt", "skipped: not a GPU run")
    if gpu and trt == "libnvinfer loads":
        part("tensorrt", 150, lambda d: tensorrt_latency(files, args.out, max(30.0, d - time.perf_counter())))
    else:
        report["tensorrt"] = trt
    report["elapsed_s"] = round(time.perf_counter() - started, 1)
    if args.repo_json is not None:
        args.repo_json.parent.mkdir(parents=True, exist_ok=True)
        args.repo_json.write_text(json.dumps(headline(report.data), indent=2, default=str) + "\n")
    print(format_table(report.data), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
