#!/usr/bin/env python
"""Every GPU measurement of the benchmarks issue, in one run on the lent GPU machine.

    python scripts/gpu_bench.py [--out $OUT] [--budget 420] [--smoke]
    python scripts/gpu_bench.py --pack .ortgpu/bench.d     # on the development machine, once

What it does, in order of priority (results are written to OUT/gpu_bench.json and
OUT/gpu_bench.md after every part, so a run cut short still leaves what it measured; a part is
skipped once --budget seconds have passed):

 1. the GPU's measured rate (torch matmul, fp32 and fp16), for the "physical floor" of each figure;
 2. full-size random-weight replicas built there with PyTorch on the GPU (scripts/make_replicas.py;
    the files are too large to carry), plus fp16-weight copies of the inswapper and GFPGAN;
 3. per-model latency: batch 1, numpy in and out, median of 100, CUDA provider;
 4. livecam at 1280x720 with one face, swap only (inswapper fp16, the GPU default): video-mode FPS
    (file pipeline: decode, workers, encode) and live latency p50/p95 (live pipeline, --no-realtime);
 5. the Deep-Live-Cam-style baseline (scripts/bench_baseline.py) alternating with livecam in the
    same process, same clip, models and provider: FPS and latency ratios;
 6. the same with GFPGAN after the swap;
 7. the TensorRT provider with FP16, where its libraries load: per-model latency, or the error;
 8. the CPU work outside inference at 1080p with trivial models (CPU provider), both programs.

--smoke runs the same code on the CPU with narrow replicas (widths / 16), short clips and few
repetitions, to check the script before spending GPU time. --pack prepares what the GPU machine
lacks (see BENCHMARKS.md): wheels of click, platformdirs, tqdm, filelock, packaging, nvidia-ml-py and PyAV for CPython 3.12, and the
insightface package from this venv; missing small dependencies of insightface (scikit-image's
SimilarityTransform, requests, tqdm) are replaced by shims here when they cannot be imported.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

MODELS = ("det_10g", "w600k_r50", "inswapper_128", "inswapper_128_fp16", "gfpgan_1.4", "2d106det", "gpen_bfr_256", "gpen_bfr_512", "codeformer")
FACES = REPO.parent / "shared" / "faces" / "obama.jpg"


# ----------------------------------------------------------------------------- environment


def install_shims() -> list[str]:
    """Stand-ins for insightface's imports that the GPU machine lacks; only the parts our path
    uses (its face alignment's similarity estimate). Returns the names shimmed."""
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
    if missing("tqdm"):
        tqdm = types.ModuleType("tqdm")
        tqdm.tqdm = lambda it=None, *a, **k: it  # type: ignore[attr-defined]
        sys.modules["tqdm"] = tqdm
        shimmed.append("tqdm")
    return shimmed


def gpu_memory_mb() -> float | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10)
        return float(out.stdout.strip().splitlines()[0])
    except Exception:  # noqa: BLE001 - no driver tools: no figure
        return None


def preload_ort() -> list[str]:
    import onnxruntime as ort

    if hasattr(ort, "preload_dlls"):
        try:
            ort.preload_dlls()
        except Exception as exc:  # noqa: BLE001
            print(f"preload_dlls: {exc}", flush=True)
    return list(ort.get_available_providers())


def measured_rate(device: str, smoke: bool) -> dict[str, float]:
    """Dense matmul throughput in MAC/s (what a conv net can at best approach)."""
    import torch

    n = 1024 if smoke else 8192
    out = {}
    for dtype in (torch.float32, torch.float16):
        if device == "cpu" and dtype == torch.float16:
            continue
        torch.backends.cuda.matmul.allow_tf32 = False
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        for _ in range(3):
            a @ b
        if device == "cuda":
            torch.cuda.synchronize()
        reps = 3 if smoke else 20
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ b
        if device == "cuda":
            torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) / reps
        out[str(dtype).replace("torch.", "")] = n ** 3 / dt
        del a, b
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


# ----------------------------------------------------------------------------- measurements


def latency(path: Path, provider: str, reps: int, trt_fp16: bool = False) -> dict[str, Any]:
    """Median ms of session.run on random inputs (numpy in and out), batch 1."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if provider == "tensorrt":
        cache = Path(tempfile.gettempdir()) / "trt_cache"
        cache.mkdir(exist_ok=True)
        providers: list[Any] = [("TensorrtExecutionProvider", {"trt_fp16_enable": trt_fp16,
                                                              "trt_engine_cache_enable": True,
                                                              "trt_engine_cache_path": str(cache)}),
                                "CUDAExecutionProvider", "CPUExecutionProvider"]
    elif provider == "cuda":
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    else:
        providers = ["CPUExecutionProvider"]
    t0 = time.perf_counter()
    sess = ort.InferenceSession(str(path), opts, providers=providers)
    load_s = time.perf_counter() - t0
    feeds = {}
    for inp in sess.get_inputs():
        shape = [d if isinstance(d, int) else (640 if i >= 2 else 1) for i, d in enumerate(inp.shape)]
        dtype = np.float16 if "float16" in inp.type else np.float64 if "double" in inp.type else np.float32
        feeds[inp.name] = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    for _ in range(5):
        sess.run(None, feeds)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1000.0)
    return {"median_ms": round(statistics.median(times), 3), "p95_ms": round(float(np.percentile(times, 95)), 3),
            "reps": reps, "providers": sess.get_providers()[:1], "load_s": round(load_s, 1),
            "input_shapes": {k: list(v.shape) for k, v in feeds.items()}}


def source_photo() -> Path:
    """The test photo when the shared folder came along; else a synthetic picture (the replica
    detector reports its fixed face whatever the picture shows)."""
    if FACES.is_file():
        return FACES
    import cv2

    path = Path(tempfile.mkdtemp(prefix="livecam-face-")) / "face.png"
    img = np.full((720, 1280, 3), 90, np.uint8)
    cv2.ellipse(img, (640, 330), (170, 220), 0, 0, 360, (140, 170, 210), -1)
    cv2.imwrite(str(path), img)
    return path


def livecam_and_baseline(models: Path, provider: str, swap_model: str, enhance: bool, frames: int,
                         rounds: int, threads: int, resolution: str, log: Callable[[str], None]) -> dict[str, Any]:
    """bench_baseline.compare (alternating rounds); livecam alone when insightface is missing."""
    import bench_baseline as bb

    args = argparse.Namespace(models=models, trivial_models=None, source=source_photo(), provider=provider,
                              swap_model=swap_model, resolution=resolution, frames=frames, rounds=rounds,
                              threads=threads, enhance=enhance, parts=["live", "video"],
                              overhead_resolution="1920x1080", overhead_frames=0, json=None)
    try:
        import insightface  # noqa: F401
    except ImportError as exc:
        log(f"insightface cannot be imported ({exc}): livecam alone, no baseline")
        from livecam.commands.bench import run_live_bench, run_video_bench

        size = bb.parse_size(resolution)
        out: dict[str, Any] = {"baseline": f"not run: {exc}", "resolution": resolution, "provider": provider,
                               "swap_model": swap_model, "threads": threads}
        for mode, live in (("live", True), ("video", False)):
            settings = bb.livecam_settings(models, provider, swap_model, enhance, args.source, 1 if live else threads)
            lc = bb.Livecam(settings, live)
            fn = run_live_bench if live else run_video_bench
            out[f"livecam_{mode}"] = [fn(lc.job(mode, frames, size), lc.engine) for _ in range(rounds)]
        return out
    return bb.compare(args, log=log)


# ----------------------------------------------------------------------------- report


def floor_ms(macs: float, rate: float | None) -> float | None:
    return round(macs / rate * 1000.0, 3) if rate else None


def write_report(out: Path, report: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_bench.json").write_text(json.dumps(report, indent=2, default=str))
    (out / "gpu_bench.md").write_text(format_table(report))


def format_table(report: dict[str, Any]) -> str:
    lines = [f"# GPU benchmark ({'SMOKE on CPU' if report.get('smoke') else report.get('device', '?')})", ""]
    env = report.get("environment", {})
    lines.append(f"providers: {env.get('providers')}; onnxruntime {env.get('onnxruntime')}; "
                 f"torch {env.get('torch')}; shims: {env.get('shims')}")
    rate = report.get("rate_macs_per_s", {})
    if rate:
        lines.append("measured matmul rate: " + ", ".join(f"{k} {v / 1e9:.0f} GMAC/s" for k, v in rate.items()))
    lat = report.get("latency", {})
    if lat:
        lines += ["", "| model | provider | precision | input | median ms | p95 ms | floor ms |", "|---|---|---|---|---|---|---|"]
        for key, v in lat.items():
            if "error" in v:
                lines.append(f"| {key} | {v.get('provider')} | | | error: {v['error'][:80]} | | |")
                continue
            lines.append(f"| {v['model']} | {v['provider']} | {v['precision']} | {v['input_shapes']} | "
                         f"{v['median_ms']} | {v['p95_ms']} | {v.get('floor_ms')} |")
    for key in ("swap", "swap_gfpgan"):
        part = report.get(key)
        if not part:
            continue
        s = part.get("side_by_side", {})
        lines += ["", f"## {key}: {part.get('resolution')}, one face, provider {part.get('provider')}, "
                      f"swap model {part.get('swap_model')}, video workers {part.get('threads')}"]
        if s:
            bl, ll = s.get("baseline_live", {}), s.get("livecam_live", {})
            bv, lv = s.get("baseline_video", {}), s.get("livecam_video", {})
            lines.append(f"- video FPS: livecam {lv.get('fps')} vs baseline {bv.get('fps')} "
                         f"(x{s.get('video_fps_ratio')})")
            lines.append(f"- live FPS: livecam {ll.get('fps')} vs baseline {bl.get('fps')} (x{s.get('live_fps_ratio')})")
            lines.append(f"- live latency p50/p95 ms: livecam {ll.get('latency_ms_p50')}/{ll.get('latency_ms_p95')} "
                         f"vs baseline {bl.get('latency_ms_p50')}/{bl.get('latency_ms_p95')} "
                         f"(baseline/livecam x{s.get('live_latency_ratio')})")
        if part.get("floor_ms") is not None:
            lines.append(f"- physical floor (model MACs per frame / measured matmul rate, fp16 where measured): {part['floor_ms']} ms "
                         f"= {round(1000 / part['floor_ms'])} FPS")
        if part.get("gpu_mb") is not None:
            lines.append(f"- GPU memory in use after the run: {part['gpu_mb']} MB")
    o = report.get("overhead")
    if o:
        lines.append("")
        for label in ("swap", "swap+enhance"):
            if label in o:
                v = o[label]
                lines.append(f"- CPU work outside inference, {label}, {o['resolution']}: livecam {v['livecam_ms']} ms, "
                             f"baseline {v['baseline_ms']} ms per frame (x{v['livecam_over_baseline']})")
    if report.get("skipped"):
        lines += ["", "skipped (budget): " + ", ".join(report["skipped"])]
    if report.get("errors"):
        lines += ["", "errors:"] + [f"- {k}: {v}" for k, v in report["errors"].items()]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- pack (dev machine)


def pack(folder: Path) -> int:
    """Wheels and the insightface package for the GPU machine (CPython 3.12, manylinux x86_64)."""
    import tarfile

    import insightface

    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
                    "-d", str(folder), "click", "platformdirs", "av", "tqdm", "filelock", "packaging",
                    "nvidia-ml-py"], check=True)  # nvidia-ml-py: livecam's GPU-memory figure
    src = Path(insightface.__file__).resolve().parent
    with tarfile.open(folder / "insightface.tar.gz", "w:gz") as tar:
        tar.add(src, arcname="insightface", filter=lambda t: None if "__pycache__" in t.name else t)
    size = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
    print(f"{folder}: {size:.1f} MiB ({', '.join(sorted(p.name for p in folder.iterdir()))})")
    return 0


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="livecam GPU benchmarks, one run")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu_bench_out")))
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "livecam_replicas")
    ap.add_argument("--budget", type=float, default=420.0, help="seconds; later parts are skipped after it")
    ap.add_argument("--smoke", action="store_true", help="CPU, narrow replicas, short runs (check the script)")
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=4, help="video-mode workers (livecam) / pool (baseline)")
    ap.add_argument("--pack", type=Path, help="prepare the GPU machine's extra packages here and exit")
    args = ap.parse_args(argv)
    if args.pack:
        return pack(args.pack)

    started = time.perf_counter()
    os.environ.setdefault("LIVECAM_CACHE_DIR", tempfile.mkdtemp(prefix="livecam-cache-"))
    shims = install_shims()
    providers = preload_ort()
    import onnxruntime as ort
    import torch

    smoke = args.smoke
    device = "cuda" if torch.cuda.is_available() and not smoke else "cpu"
    provider = "cuda" if "CUDAExecutionProvider" in providers and not smoke else "cpu"
    frames = 10 if smoke else args.frames
    rounds = 1 if smoke else args.rounds
    reps = 3 if smoke else 100
    div = 16 if smoke else 1
    resolution = "640x360" if smoke else "1280x720"
    report: dict[str, Any] = {
        "smoke": smoke, "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "environment": {"providers": providers, "onnxruntime": ort.__version__, "torch": torch.__version__,
                        "python": sys.version.split()[0], "shims": shims, "cpu_count": os.cpu_count()},
        "errors": {}, "skipped": [],
    }
    log = lambda s: print(f"[{time.perf_counter() - started:6.1f}s] {s}", flush=True)  # noqa: E731

    def over_budget(part: str) -> bool:
        if not smoke and time.perf_counter() - started > args.budget:
            report["skipped"].append(part)
            write_report(args.out, report)
            return True
        return False

    def guarded(part: str, fn: Callable[[], Any]) -> Any:
        if over_budget(part):
            log(f"skip {part}: over the {args.budget:g} s budget")
            return None
        try:
            return fn()
        except BaseException as exc:  # noqa: BLE001 - record and go on with the next part
            if isinstance(exc, KeyboardInterrupt):
                raise
            report["errors"][part] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
            log(f"{part} failed: {report['errors'][part]}")
            return None
        finally:
            report["elapsed_s"] = round(time.perf_counter() - started, 1)
            write_report(args.out, report)

    # 1. rate
    rate = guarded("rate", lambda: measured_rate(device, smoke)) or {}
    report["rate_macs_per_s"] = rate
    peak = rate.get("float16") or rate.get("float32")
    log(f"rate: {rate}")

    # 2. replicas
    import make_replicas

    work = args.work / ("smoke" if smoke else "full")
    work.mkdir(parents=True, exist_ok=True)
    infos: dict[str, Any] = {}

    def build_all() -> None:
        # A machine kept warm between commands keeps /tmp: a rerun reuses what was built.
        done_path = work / "built.json"
        done = json.loads(done_path.read_text()) if done_path.is_file() else {}
        for name in MODELS:
            if name in done and (work / f"{name}.onnx").is_file():
                infos[name] = done[name]
                log(f"reusing {name}")
                continue
            infos[name] = make_replicas.export(name, work, device=device, div=div, do_count=True)
            done[name] = infos[name]
            done_path.write_text(json.dumps(done))
            log(f"built {name}: {infos[name]['bytes'] / 2**20:.0f} MiB in {infos[name]['export_s']} s")
        if not (work / "gfpgan_1.4_fp16.onnx").is_file():
            # GFPGAN with fp16 weights (a file for the latency table, not a catalog model)
            import onnx

            proto = make_replicas._to_fp16(onnx.load(str(work / "gfpgan_1.4.onnx")))
            onnx.save(proto, str(work / "gfpgan_1.4_fp16.onnx.part"))
            os.replace(work / "gfpgan_1.4_fp16.onnx.part", work / "gfpgan_1.4_fp16.onnx")
        if device == "cuda":
            torch.cuda.empty_cache()

    guarded("replicas", build_all)
    report["replicas"] = infos
    macs = {n: i.get("macs", 0) for n, i in infos.items()}

    # 3. per-model latency
    report["latency"] = {}

    def latencies(prov: str, trt_fp16: bool = False) -> None:
        files = [("det_10g", "fp32"), ("w600k_r50", "fp32"), ("inswapper_128", "fp32"),
                 ("inswapper_128_fp16", "fp16 weights"), ("gfpgan_1.4", "fp32"), ("gfpgan_1.4_fp16", "fp16 weights"), ("gpen_bfr_256", "fp32"), ("gpen_bfr_512", "fp32"), ("codeformer", "fp32")]
        for name, precision in files:
            key = f"{name}@{prov}" + ("-fp16" if trt_fp16 else "")
            if not smoke and time.perf_counter() - started > args.budget:
                report["skipped"].append(key)
                continue
            try:
                res = latency(work / f"{name}.onnx", prov, reps, trt_fp16)
            except Exception as exc:  # noqa: BLE001
                report["latency"][key] = {"provider": prov, "error": str(exc).splitlines()[0][:300]}
                log(f"{key}: {report['latency'][key]['error']}")
                if prov == "tensorrt":
                    return  # the same failure for every model
                continue
            base = name.replace("_fp16", "")
            res.update(model=name, provider=prov + (" fp16" if trt_fp16 else ""), precision=precision,
                       floor_ms=floor_ms(macs.get(base if base in macs else name, 0), peak))
            report["latency"][key] = res
            log(f"{key}: {res['median_ms']} ms (floor {res['floor_ms']} ms)")
            write_report(args.out, report)

    guarded("latency", lambda: latencies(provider))

    # 4-6. livecam and the baseline, side by side
    swap_model = "inswapper_128_fp16" if provider == "cuda" else "inswapper_128"
    for key, enhance in (("swap", False), ("swap_gfpgan", True)):
        def run(enhance: bool = enhance) -> dict[str, Any]:
            part = livecam_and_baseline(work, provider, swap_model, enhance, frames, rounds, args.threads,
                                        resolution, log)
            per_frame = macs.get("det_10g", 0) + macs.get("inswapper_128", 0) + (macs.get("gfpgan_1.4", 0) if enhance else 0)
            part["floor_ms"] = floor_ms(per_frame, peak)
            part["gpu_mb"] = gpu_memory_mb()
            return part

        report[key] = guarded(key, run)

    # 7. TensorRT FP16
    if "TensorrtExecutionProvider" in providers:
        guarded("tensorrt", lambda: latencies("tensorrt", trt_fp16=True))
    else:
        report["tensorrt"] = "TensorrtExecutionProvider not listed by onnxruntime: not attempted"

    # 8. CPU work outside inference (trivial models, CPU provider)
    def overhead() -> dict[str, Any]:
        import bench_baseline as bb
        import cv2

        trivial = work / "trivial"
        trivial.mkdir(exist_ok=True)
        for name in MODELS:
            make_replicas.export(name, trivial, device="cpu", div=1, do_count=False, trivial=True)
        photo = source_photo()
        ns = argparse.Namespace(trivial_models=trivial, source=photo, swap_model="inswapper_128", rounds=rounds,
                                overhead_resolution="1920x1080", overhead_frames=10 if smoke else 40)
        return bb.overhead(ns, cv2.imread(str(photo)), log)

    report["overhead"] = guarded("overhead", overhead)
    report["elapsed_s"] = round(time.perf_counter() - started, 1)
    write_report(args.out, report)
    print(format_table(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
