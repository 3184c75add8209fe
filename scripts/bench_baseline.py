#!/usr/bin/env python
"""livecam against a Deep-Live-Cam-style frame loop, side by side, on the same replica models.

    python scripts/bench_baseline.py --models /work/replicas --trivial-models /work/replicas_trivial \
        [--source ../shared/faces/obama.jpg] [--provider cpu] [--resolution 1280x720] [--frames 20] \
        [--rounds 2] [--threads 2] [--enhance] [--parts live video overhead] [--json out.json]

The baseline does what Deep-Live-Cam does with the insightface library (2.1, here a test oracle):
`FaceAnalysis` with detection, recognition and landmark_2d_106 (the 2d106det replica of
scripts/make_replicas.py; without a 2d106det.onnx in the models folder the module is skipped and
the report says so) at det_size 640, the leftmost face, `INSwapper.get(frame, face, source, paste_back=True)`, then (--enhance) a
GFPGAN pass done the usual way: FFHQ-512 crop, the model, and a full-frame inverse warp and
blend. Live: one frame after another on one thread. Video: frames as PNG files in a temporary
folder, processed by a thread pool (read PNG, process, write PNG), as its video mode does; the
ffmpeg extraction and encoding around that are not counted (in the baseline's favour).

livecam runs its real pipelines (livecam.commands.bench: the live pipeline with --no-realtime
semantics, the file pipeline with decode and encode) with the same models, provider and clip.
The two alternate within each round, so both see the same machine state; medians over rounds.

`overhead`: the same loops at 1920x1080 with the trivial models (same signatures, next to no
compute; scripts/make_replicas.py --trivial): the per-frame time left is each program's own CPU
work outside inference (resizes, warps, paste-back, conversions, Python). One frame after another
on one thread, for both, alternating frame by frame (baseline, livecam, baseline, ...). Goal:
livecam at most a third of the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import cv2
import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

from livecam.commands.bench import GeneratedClip, run_live_bench, run_video_bench  # noqa: E402
from livecam.faces.align import FFHQ_512  # noqa: E402  (a published template: a fact)
from livecam.settings import (  # noqa: E402
    AnalysisSettings,
    BenchJob,
    EnhanceSettings,
    ProcessingSettings,
    RuntimeSettings,
    SwapSettings,
)

ORT_PROVIDERS = {"cpu": ["CPUExecutionProvider"], "cuda": ["CUDAExecutionProvider", "CPUExecutionProvider"],
                 "tensorrt": ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]}


def parse_size(text: str) -> tuple[int, int]:
    w, _, h = text.lower().partition("x")
    return int(w), int(h)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if values else float("nan")


# ----------------------------------------------------------------------------- the baseline


class Baseline:
    """The Deep-Live-Cam-style processing of one frame, with insightface on the given models."""

    def __init__(self, models: Path, provider: str, swap_model: str, enhance: bool, source: np.ndarray) -> None:
        import insightface
        import onnxruntime as ort
        from insightface.app import FaceAnalysis

        providers = ORT_PROVIDERS[provider]
        self.pack = self._pack_folder(models)
        modules = ["detection", "recognition"]
        self.landmark_106 = any("2d106" in p.name for p in self.pack.iterdir())
        if self.landmark_106:
            modules.append("landmark_2d_106")
        self.app = FaceAnalysis(name=str(self.pack), allowed_modules=modules, providers=providers)
        self.app.prepare(ctx_id=0 if provider != "cpu" else -1, det_size=(640, 640))
        self.swapper = insightface.model_zoo.get_model(str(models / f"{swap_model}.onnx"), providers=providers)
        self.enhancer = None
        if enhance:
            opts = ort.SessionOptions()
            opts.log_severity_level = 3
            self.enhancer = ort.InferenceSession(str(models / "gfpgan_1.4.onnx"), opts, providers=providers)
            self.enhancer_input = self.enhancer.get_inputs()[0].name
        faces = self.app.get(source)
        if not faces:
            raise SystemExit("baseline: no face in the source photo (is det_10g a replica with its face prior?)")
        self.source_face = faces[0]

    def _pack_folder(self, models: Path) -> Path:
        """FaceAnalysis loads every .onnx of one folder: give it only the analysis models."""
        pack = Path(tempfile.mkdtemp(prefix="baseline-pack-"))
        for name in ("det_10g.onnx", "w600k_r50.onnx", "2d106det.onnx"):
            if (models / name).is_file():
                os.symlink((models / name).resolve(), pack / name)
        return pack

    def process(self, frame: np.ndarray, timings: dict[str, float] | None = None) -> np.ndarray:
        t0 = time.perf_counter()
        faces = self.app.get(frame)
        t1 = time.perf_counter()
        if not faces:
            return frame
        target = min(faces, key=lambda f: f.bbox[0])  # Deep-Live-Cam's get_one_face
        frame = self.swapper.get(frame, target, self.source_face, paste_back=True)
        t2 = time.perf_counter()
        if self.enhancer is not None:
            frame = self.enhance(frame, target.kps)
        if timings is not None:
            timings.update(analyse=(t1 - t0) * 1000, swap=(t2 - t1) * 1000, enhance=(time.perf_counter() - t2) * 1000)
        return frame

    def enhance(self, frame: np.ndarray, kps: np.ndarray) -> np.ndarray:
        """GFPGAN as face-restoration helpers usually paste it: whole-frame warps and blend."""
        m, _ = cv2.estimateAffinePartial2D(kps.astype(np.float32), FFHQ_512.astype(np.float32), method=cv2.LMEDS)
        crop = cv2.warpAffine(frame, m, (512, 512), borderMode=cv2.BORDER_REPLICATE)
        blob = ((crop[:, :, ::-1].astype(np.float32) / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)[None]
        out = self.enhancer.run(None, {self.enhancer_input: np.ascontiguousarray(blob)})[0][0]
        restored = ((np.clip(out, -1, 1) + 1) / 2 * 255).transpose(1, 2, 0)[:, :, ::-1].round().astype(np.uint8)
        h, w = frame.shape[:2]
        inv = cv2.invertAffineTransform(m)
        back = cv2.warpAffine(restored, inv, (w, h))
        mask = cv2.warpAffine(np.ones((512, 512), np.float32), inv, (w, h))
        mask = cv2.GaussianBlur(cv2.erode(mask, np.ones((5, 5), np.uint8)), (21, 21), 0)[:, :, None]
        return (mask * back + (1 - mask) * frame).astype(np.uint8)


def baseline_live(base: Baseline, clip: GeneratedClip, frames: int) -> dict[str, Any]:
    base.process(clip.image(0))  # warm-up
    times = []
    start = time.perf_counter()
    for i in range(frames):
        t0 = time.perf_counter()
        base.process(clip.image(i))
        times.append((time.perf_counter() - t0) * 1000.0)
    wall = time.perf_counter() - start
    return {"fps": round(frames / wall, 2), "latency_ms_p50": round(pct(times, 50), 2),
            "latency_ms_p95": round(pct(times, 95), 2)}


def baseline_video(base: Baseline, clip: GeneratedClip, frames: int, threads: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="baseline-frames-") as tmp:
        paths = []
        for i in range(frames):
            path = Path(tmp) / f"{i:06d}.png"
            cv2.imwrite(str(path), clip.image(i))
            paths.append(path)
        base.process(clip.image(0))

        def one(path: Path) -> None:
            frame = cv2.imread(str(path))
            cv2.imwrite(str(path), base.process(frame))

        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=threads) as pool:
            list(pool.map(one, paths))
        wall = time.perf_counter() - start
    return {"fps": round(frames / wall, 2)}


# ----------------------------------------------------------------------------- livecam


def livecam_settings(models: Path, provider: str, swap_model: str, enhance: bool, source: Path,
                     threads: int) -> ProcessingSettings:
    processors = ("face_swapper", "face_enhancer") if enhance else ("face_swapper",)
    return ProcessingSettings(
        sources=(source,), frame_processors=processors,
        runtime=RuntimeSettings(providers=(provider,), execution_threads=threads, models_dir=models,
                                offline=True, unverified_models=True, quiet=True),
        analysis=AnalysisSettings(detector="scrfd", det_size=640),
        swap=SwapSettings(model=swap_model), enhance=EnhanceSettings())


class Livecam:
    def __init__(self, settings: ProcessingSettings, live: bool) -> None:
        import logging

        from livecam.pipeline.engine import Engine

        logging.getLogger("livecam").setLevel(logging.ERROR)  # replica warnings, once per model
        self.settings = settings
        self.engine = Engine.create(settings, live=live, progress=False)

    def job(self, mode: str, frames: int, size: tuple[int, int]) -> BenchJob:
        return BenchJob(processing=self.settings, mode=mode, frames=frames, resolution=size, json=True)


def livecam_sequential(lc: Livecam, clip: GeneratedClip, frames: int) -> dict[str, Any]:
    """engine.analyse + engine.process one frame after another on this thread (overhead runs)."""
    from livecam.frame import FramePacket

    times = []
    stages: list[dict[str, float]] = []
    for i in range(frames + 3):
        packet = FramePacket(index=i, image=clip.image(i), captured_at=time.perf_counter())
        t0 = time.perf_counter()
        lc.engine.analyse(packet, track=True)
        lc.engine.process(packet)
        if i >= 3:
            times.append((time.perf_counter() - t0) * 1000.0)
            stages.append(dict(packet.timings))
    return {"ms_per_frame_p50": round(pct(times, 50), 3), "ms_per_frame_p95": round(pct(times, 95), 3),
            "faces": len(packet.faces), "stages_p50": stage_medians(stages)}


def stage_medians(records: list[dict[str, float]]) -> dict[str, float]:
    keys = dict.fromkeys(k for r in records for k in r)
    return {k: round(pct([r[k] for r in records if k in r], 50), 2) for k in keys}


def baseline_sequential(base: Baseline, clip: GeneratedClip, frames: int) -> dict[str, Any]:
    times = []
    stages: list[dict[str, float]] = []
    for i in range(frames + 3):
        frame = clip.image(i)
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        base.process(frame, timings)
        if i >= 3:
            times.append((time.perf_counter() - t0) * 1000.0)
            stages.append(timings)
    return {"ms_per_frame_p50": round(pct(times, 50), 3), "ms_per_frame_p95": round(pct(times, 95), 3),
            "stages_p50": stage_medians(stages)}


def alternating(base: Baseline, lc: Livecam, clip: GeneratedClip, frames: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """baseline_sequential and livecam_sequential interleaved frame by frame (overhead runs):
    on a shared machine both then see the same load, so their ratio is far steadier."""
    from livecam.frame import FramePacket

    b_times, l_times = [], []
    b_stages: list[dict[str, float]] = []
    l_stages: list[dict[str, float]] = []
    packet = None
    for i in range(frames + 3):
        timings: dict[str, float] = {}
        frame = clip.image(i)  # a fresh copy each call
        t0 = time.perf_counter()
        base.process(frame, timings)
        t1 = time.perf_counter()
        packet = FramePacket(index=i, image=clip.image(i), captured_at=time.perf_counter())
        t2 = time.perf_counter()
        lc.engine.analyse(packet, track=True)
        lc.engine.process(packet)
        t3 = time.perf_counter()
        if i >= 3:
            b_times.append((t1 - t0) * 1000.0)
            b_stages.append(timings)
            l_times.append((t3 - t2) * 1000.0)
            l_stages.append(dict(packet.timings))
    b = {"ms_per_frame_p50": round(pct(b_times, 50), 3), "ms_per_frame_p95": round(pct(b_times, 95), 3),
         "stages_p50": stage_medians(b_stages)}
    lv = {"ms_per_frame_p50": round(pct(l_times, 50), 3), "ms_per_frame_p95": round(pct(l_times, 95), 3),
          "faces": len(packet.faces) if packet is not None else 0, "stages_p50": stage_medians(l_stages)}
    return b, lv


# ----------------------------------------------------------------------------- the run


def median_of(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return round(statistics.median(values), 2) if values else None


def landmark_status(base: Baseline) -> str:
    return "used" if base.landmark_106 else "skipped: no 2d106det.onnx in the models folder"


def compare(args: argparse.Namespace, log: Callable[[str], None] = print) -> dict[str, Any]:
    photo = cv2.imread(str(args.source))
    if photo is None:
        raise SystemExit(f"cannot read {args.source}")
    size = parse_size(args.resolution)
    report: dict[str, Any] = {"provider": args.provider, "resolution": args.resolution, "frames": args.frames,
                              "rounds": args.rounds, "swap_model": args.swap_model, "enhance": args.enhance,
                              "threads": args.threads}
    clip = GeneratedClip(photo, size, args.frames)
    if {"live", "video"} & set(args.parts):
        base = Baseline(args.models, args.provider, args.swap_model, args.enhance, photo)
        report["baseline_landmark_2d_106"] = landmark_status(base)
        lc_live = Livecam(livecam_settings(args.models, args.provider, args.swap_model, args.enhance,
                                           args.source, 1), live=True) if "live" in args.parts else None
        lc_video = Livecam(livecam_settings(args.models, args.provider, args.swap_model, args.enhance,
                                            args.source, args.threads), live=False) if "video" in args.parts else None
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in ("baseline_live", "livecam_live",
                                                                "baseline_video", "livecam_video")}
        for r in range(args.rounds):
            if lc_live is not None:
                runs["baseline_live"].append(baseline_live(base, clip, args.frames))
                log(f"round {r + 1} baseline live: {runs['baseline_live'][-1]}")
                res = run_live_bench(lc_live.job("live", args.frames, size), lc_live.engine)
                runs["livecam_live"].append(res)
                log(f"round {r + 1} livecam live: fps {res['fps']} latency p50 {res['latency_ms_p50']} "
                    f"p95 {res['latency_ms_p95']} faces/frame {res['faces_per_frame']}")
            if lc_video is not None:
                runs["baseline_video"].append(baseline_video(base, clip, args.frames, args.threads))
                log(f"round {r + 1} baseline video: {runs['baseline_video'][-1]}")
                res = run_video_bench(lc_video.job("video", args.frames, size), lc_video.engine)
                runs["livecam_video"].append(res)
                log(f"round {r + 1} livecam video: fps {res['fps']} faces/frame {res['faces_per_frame']}")
        summary: dict[str, Any] = {}
        for key, values in runs.items():
            if values:
                summary[key] = {"fps": median_of(values, "fps"), "latency_ms_p50": median_of(values, "latency_ms_p50"),
                                "latency_ms_p95": median_of(values, "latency_ms_p95")}
        if "live" in args.parts:
            b, lv = summary["baseline_live"], summary["livecam_live"]
            summary["live_fps_ratio"] = round(lv["fps"] / b["fps"], 2)
            summary["live_latency_ratio"] = round(b["latency_ms_p50"] / lv["latency_ms_p50"], 2)
            summary["livecam_live_stages"] = runs["livecam_live"][-1]["stages"]
        if "video" in args.parts:
            summary["video_fps_ratio"] = round(summary["livecam_video"]["fps"] / summary["baseline_video"]["fps"], 2)
            summary["livecam_video_stages"] = runs["livecam_video"][-1]["stages"]
        report["side_by_side"] = summary
        report["runs"] = runs
    if "overhead" in args.parts:
        report["overhead"] = overhead(args, photo, log)
    return report


def overhead(args: argparse.Namespace, photo: np.ndarray, log: Callable[[str], None]) -> dict[str, Any]:
    size = parse_size(args.overhead_resolution)
    clip = GeneratedClip(photo, size, args.overhead_frames)
    out: dict[str, Any] = {"resolution": args.overhead_resolution, "frames": args.overhead_frames,
                           "models": str(args.trivial_models)}
    for enhance in (False, True):
        label = "swap+enhance" if enhance else "swap"
        base = Baseline(args.trivial_models, "cpu", args.swap_model, enhance, photo)
        lc = Livecam(livecam_settings(args.trivial_models, "cpu", args.swap_model, enhance, args.source, 1),
                     live=True)
        b_runs, l_runs = [], []
        for _ in range(args.rounds):
            b_run, l_run = alternating(base, lc, clip, args.overhead_frames)
            b_runs.append(b_run)
            l_runs.append(l_run)
        b = median_of(b_runs, "ms_per_frame_p50")
        lv = median_of(l_runs, "ms_per_frame_p50")
        out[label] = {"baseline_ms": b, "livecam_ms": lv, "livecam_over_baseline": round(lv / b, 3),
                      "baseline_landmark_2d_106": landmark_status(base),
                      "livecam_faces": l_runs[-1]["faces"], "baseline_stages_p50": b_runs[-1]["stages_p50"],
                      "livecam_stages_p50": l_runs[-1]["stages_p50"]}
        log(f"overhead {label} at {args.overhead_resolution}: baseline {b} ms/frame, livecam {lv} ms/frame "
            f"(ratio {lv / b:.2f}; goal <= 0.33; baseline landmark_2d_106 {landmark_status(base)})")
    return out


def format_report(report: dict[str, Any]) -> str:
    lines = [f"provider {report['provider']}, clip {report['resolution']} x {report['frames']} frames, "
             f"{report['rounds']} rounds, swap model {report['swap_model']}, enhancer {report['enhance']}, "
             f"video threads {report['threads']}"]
    s = report.get("side_by_side")
    if s:
        lines.append(f"baseline landmark_2d_106: {report['baseline_landmark_2d_106']}")
        lines.append(f"{'':16}{'baseline':>22}{'livecam':>22}{'ratio':>10}")
        if "baseline_live" in s:
            b, lv = s["baseline_live"], s["livecam_live"]
            lines.append(f"{'live FPS':16}{b['fps']:>22}{lv['fps']:>22}{s['live_fps_ratio']:>10}")
            lines.append(f"{'live p50/p95 ms':16}{str(b['latency_ms_p50']) + ' / ' + str(b['latency_ms_p95']):>22}"
                         f"{str(lv['latency_ms_p50']) + ' / ' + str(lv['latency_ms_p95']):>22}"
                         f"{s['live_latency_ratio']:>10}")
        if "baseline_video" in s:
            lines.append(f"{'video FPS':16}{s['baseline_video']['fps']:>22}{s['livecam_video']['fps']:>22}"
                         f"{s['video_fps_ratio']:>10}")
    o = report.get("overhead")
    if o:
        for label in ("swap", "swap+enhance"):
            if label in o:
                v = o[label]
                lines.append(f"CPU work outside inference, {label}, {o['resolution']}: baseline {v['baseline_ms']} ms, "
                             f"livecam {v['livecam_ms']} ms per frame (livecam/baseline {v['livecam_over_baseline']})")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description="livecam vs a Deep-Live-Cam-style loop on the same models")
    ap.add_argument("--models", type=Path, default=Path("/work/replicas"))
    ap.add_argument("--trivial-models", type=Path, default=Path("/work/replicas_trivial"))
    ap.add_argument("--source", type=Path, default=REPO.parent / "shared" / "faces" / "obama.jpg")
    ap.add_argument("--provider", default="cpu", choices=sorted(ORT_PROVIDERS))
    ap.add_argument("--swap-model", default="inswapper_128", choices=["inswapper_128", "inswapper_128_fp16"])
    ap.add_argument("--resolution", default="1280x720")
    ap.add_argument("--frames", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2, help="video mode: livecam workers / baseline pool size")
    ap.add_argument("--enhance", action="store_true", help="also run GFPGAN after the swap")
    ap.add_argument("--parts", nargs="+", default=["live", "video", "overhead"], choices=["live", "video", "overhead"])
    ap.add_argument("--overhead-resolution", default="1920x1080")
    ap.add_argument("--overhead-frames", type=int, default=40)
    ap.add_argument("--json", type=Path, help="also write the report here")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("LIVECAM_CACHE_DIR", tempfile.mkdtemp(prefix="livecam-bench-cache-"))
    report = compare(args, log=lambda s: print(s, flush=True))
    print(format_report(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
