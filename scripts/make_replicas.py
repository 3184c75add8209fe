#!/usr/bin/env python
"""Build random-weight ONNX replicas of livecam's models, for benchmarks.

    python scripts/make_replicas.py [--out /work/replicas] [--models det_10g w600k_r50 ...]
                                    [--device cpu|cuda] [--div 1] [--no-count]

Each replica has the real model's architecture, compute, tensor names, shapes and dtypes
(scripts/replica_archs.py), exported with a fixed opset into OUT/<catalog file name>, the layout
of livecam's models folder, so that livecam and the insightface baseline load them through the
normal paths:

    livecam --models-dir /work/replicas --unverified-models bench ...

(--unverified-models: the replicas' SHA-256 and size are not the catalog's.) Prints parameter
counts and MACs next to the issue's figures and writes them to OUT/replicas.json (the benchmark
uses the MACs for the "physical floor"). `--div N` builds narrow copies (every width / N, same
I/O) for smoke tests; `--trivial` builds models of the same signatures that compute next to
nothing, to measure the CPU work around the models. Needs torch and onnx (`pip install 'livecam[convert]'`).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np


OPSET = 17
ALL = ("det_10g", "w600k_r50", "inswapper_128", "inswapper_128_fp16", "gfpgan_1.4", "2d106det",
       "gpen_bfr_256", "gpen_bfr_512", "codeformer")
# Files livecam itself never opens (the baseline's landmark_2d_106 model): not in the catalog.
BASELINE_ONLY = ("2d106det",)


def _rename_outputs(model, names: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    for node in model.graph.node:
        node.output[:] = [names.get(o, o) for o in node.output]
        node.input[:] = [names.get(i, i) for i in node.input]
    for out in model.graph.output:
        out.name = names.get(out.name, out.name)


def _append_emap(model, seed: int = 0, dtype: type = np.float32) -> None:  # type: ignore[no-untyped-def]
    """inswapper files end with `emap` [512,512], an initializer no node uses: the projection of
    ArcFace embeddings into the swapper's latent space, which readers take from the end."""
    from onnx import numpy_helper

    keep = [t for t in model.graph.initializer if t.name != "emap"]
    emap = (np.random.default_rng(seed).standard_normal((512, 512)) / np.sqrt(512)).astype(dtype)
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)
    model.graph.initializer.append(numpy_helper.from_array(emap, "emap"))


def _to_fp16(model):  # type: ignore[no-untyped-def]
    """fp16 weights and arithmetic behind float32 inputs and outputs (as the real fp16 file):
    livecam's own converter (livecam.models.fp16), the one --enhancer-precision fp16 uses."""
    from livecam.models.fp16 import convert_model

    return convert_model(model)


def export(name: str, out_dir: Path, device: str = "cpu", div: int = 1, do_count: bool = True,
           trivial: bool = False) -> dict:
    import onnx
    import torch

    from replica_archs import ISSUE_FIGURES, SCRFD_OUTPUTS, build, count, used_parameters

    base = "inswapper_128" if name == "inswapper_128_fp16" else name
    model, inputs = build(base, div, trivial)
    info: dict = {"name": name, "div": div, "trivial": trivial}
    if do_count:
        params, macs = count(model, inputs)
        used = used_parameters(base, model)
        want_p, want_m = ISSUE_FIGURES[base]
        info.update(parameters=params, parameters_used=used, macs=macs)
        if trivial:
            print(f"{name:20s} params {used} MACs {macs} [trivial stand-in]", flush=True)
        else:
            macs_note = (f"issue {want_m / 1e9:.1f} G, {100 * (macs / want_m - 1):+.2f}%" if want_m
                         else "not published: an estimate")
            basis = "from the file's size" if base in BASELINE_ONLY else "issue"
            print(f"{name:20s} params {used / 1e6:8.2f} M ({basis} {want_p / 1e6:.2f} M, {100 * (used / want_p - 1):+.2f}%)"
                  f"  MACs {macs / 1e9:8.2f} G ({macs_note})"
                  + ("" if div == 1 else f"  [narrow copy, widths / {div}]"), flush=True)
    model = model.to(device)
    inputs = tuple(t.to(device) for t in inputs)
    if base == "det_10g":
        in_names, out_names = ["input.1"], [f"o{i}" for i in range(9)]
        dynamic = {"input.1": {2: "height", 3: "width"}, **{n: {0: "rows"} for n in out_names}}
        rename = dict(zip(out_names, SCRFD_OUTPUTS))
    elif base == "w600k_r50":
        in_names, out_names = ["input.1"], ["embedding"]
        dynamic = {"input.1": {0: "None"}, "embedding": {0: "None"}}
        rename = {"embedding": "683"}
    elif base == "inswapper_128":
        in_names, out_names, dynamic, rename = ["target", "source"], ["output"], None, {}
    elif base == "2d106det":
        in_names, out_names, rename = ["data"], ["fc1"], {}
        dynamic = {"data": {0: "None"}, "fc1": {0: "None"}}
    elif base == "codeformer":
        in_names, out_names, dynamic, rename = ["input", "weight"], ["output"], None, {}
    else:  # gfpgan_1.4, gpen_bfr_256, gpen_bfr_512
        in_names, out_names, dynamic, rename = ["input"], ["output"], None, {}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        raw = Path(tmp) / "raw.onnx"
        with torch.no_grad():
            torch.onnx.export(model, inputs, str(raw), dynamo=False, opset_version=OPSET,
                              input_names=in_names, output_names=out_names, dynamic_axes=dynamic,
                              do_constant_folding=True)
        del model
        proto = onnx.load(str(raw))
        _rename_outputs(proto, rename)
        if name == "inswapper_128_fp16":
            proto = _to_fp16(proto)
        if base == "inswapper_128":  # the fp16 file's weights are all fp16, emap included
            _append_emap(proto, dtype=np.float16 if name == "inswapper_128_fp16" else np.float32)
        proto.producer_name = "livecam-replica"
        onnx.checker.check_model(proto)
        final = Path(tmp) / f"{name}.onnx"
        onnx.save(proto, str(final))
        dest = out_dir / f"{name}.onnx"
        os.replace(final, dest)
    info.update(file=str(dest), bytes=dest.stat().st_size, export_s=round(time.perf_counter() - t0, 1))
    _check_signature(name, dest)
    print(f"{'':20s} wrote {dest} ({dest.stat().st_size / 2**20:.1f} MiB) in {info['export_s']} s", flush=True)
    return info


def _check_signature(name: str, path: Path) -> None:
    """The catalog's tensor check, as livecam applies it when it opens the file; for the
    baseline's landmark model, that insightface's model router takes it for one."""
    import onnxruntime as ort

    if name in BASELINE_ONLY:
        _check_insightface_landmark(path)
        return

    from livecam.models.catalog import CATALOG
    from livecam.models.store import signature_problem

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    problem = signature_problem(CATALOG[name], sess.get_inputs(), sess.get_outputs())
    if problem:
        raise SystemExit(f"{path}: the replica does not match the catalog's {name}: {problem}")


def _check_insightface_landmark(path: Path) -> None:
    try:
        from insightface.model_zoo import get_model
    except ImportError:  # the GPU machine may lack it: the baseline itself will tell
        return
    model = get_model(str(path), providers=["CPUExecutionProvider"])
    if getattr(model, "taskname", None) != "landmark_2d_106":
        raise SystemExit(f"{path}: insightface does not load the replica as landmark_2d_106 "
                         f"(it sees {getattr(model, 'taskname', type(model).__name__)})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--out", type=Path, default=Path("/work/replicas"))
    ap.add_argument("--models", nargs="+", default=list(ALL), choices=ALL)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--div", type=int, default=1, help="divide every width (tiny smoke-test copies)")
    ap.add_argument("--trivial", action="store_true",
                    help="models of the same signatures that compute next to nothing (overhead runs)")
    ap.add_argument("--no-count", dest="count", action="store_false", help="skip parameter/MAC counting")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    summary_path = args.out / "replicas.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    for name in args.models:
        summary[name] = export(name, args.out, args.device, args.div, args.count, args.trivial)
        summary_path.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
