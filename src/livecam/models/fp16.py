"""fp16 enhancers: an fp32 model file converted once to fp16 weights and arithmetic, with its
float32 inputs and outputs kept, and checked against the fp32 file before it is ever used.

The converter is the one that ships inside onnxruntime (`onnxruntime.transformers.float16`,
the same signature in 1.23 for Python 3.10 and in 1.32; it needs the `onnx` package: the
`fp16` extra). The result lives beside the models, `<models>/fp16/<name>.<digest>.onnx`, where
`<digest>` starts the fp32 file's SHA-256: a changed fp32 file is converted again, and an old
copy is never taken for a new one. A small json record beside it holds the check's result, so that each fp32 file is
converted and checked once, accepted or not; the record is written last, so an interrupted
conversion leaves nothing that a later run would use.

The check runs both files on the CPU provider on one fixed, seeded, face-like input and refuses
the copy when its output holds NaN/Inf or drifts from fp32 by more than MAX_DRIFT_LEVELS at the
99th percentile (see there). ONNX Runtime casts to fp32 around the nodes that have no fp16
kernel on the CPU: slow but correct, which is what the check (and an explicit fp16 on the CPU)
needs.
"""

from __future__ import annotations

import glob
import importlib
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from livecam.atomic import AtomicOutput
from livecam.errors import LivecamError, ModelError
from livecam.models.store import ModelStore, models_root_named, other_models_root
from livecam.runtime.providers import FP16_FRIENDLY, import_onnxruntime
from livecam.settings import RuntimeSettings

log = logging.getLogger("livecam")

FOLDER = "fp16"  # under the models folder
DIGEST_CHARS = 16  # of the fp32 file's SHA-256 in the copy's name
FORMAT = 1  # of the record; a record of another format (or converter, or threshold) is redone
# The check's bound on |fp16 - fp32|, in grey levels of the restored crop (the output's [-1, 1]
# is 255 levels), at the 99th percentile of its pixels. One fp16 rounding of a value in [-1, 1]
# moves it by at most 0.06 levels; the tests' one-convolution stand-ins drift 0.02 levels at
# p99 (0.04 at worst), and random-weight stacks of 3x3 convolutions with instance norm and leaky
# ReLU, which amplify small errors far more than trained restorers do, drift 0.9 levels at p99
# with 16 layers and 4.7 with 32 (tests/models/test_fp16.py builds them). A broken conversion (a
# layer that overflows 65504 and saturates, a normalisation that loses its variance) is off by
# tens of levels over whole regions. 8 levels (3 % of the range) lets the deepest sound case
# through with room and stops those; the worst pixel alone is not bounded, as a few isolated
# pixels some levels off are invisible after the paste's feathering and blend.
MAX_DRIFT_LEVELS = 8.0
DRIFT_PERCENTILE = 99.0
FIX = "use --enhancer-precision fp32"


def wanted(choice: str, provider: str) -> str:
    """--enhancer-precision as it applies on `provider` (ProviderChoice.primary): auto is fp16
    where fp16 kernels are trustworthy (as --swap-model auto picks the inswapper's fp16 file)."""
    if choice != "auto":
        return choice
    return "fp16" if provider in FP16_FRIENDLY else "fp32"


def choose(store: ModelStore, name: str, choice: str, provider: str) -> str:
    """The precision to open enhancer `name` with (wanted()), its fp16 copy made here when it is
    fp16. An explicit fp16 that cannot be had is the caller's error (store.open_session raises
    it); auto runs fp32 instead, with a warning, since fp32 is what it would run elsewhere."""
    precision = wanted(choice, provider)
    if precision != "fp16" or choice == "fp16":
        return precision
    fp32 = store.path(name)  # a missing model is an error whatever the precision
    store.describe(name)  # so is a file of another model (not a warning, then the same error in fp32)
    try:
        converted(store, name, fp32)
    except ModelError as exc:
        log.warning("warning: %s; --enhancer-precision auto runs it in fp32", exc.message.removesuffix(f"; {FIX}"))
        return "fp32"
    return "fp16"


def label(store: ModelStore, name: str, choice: str, provider: str) -> str:
    """The enhancer's name for the run summary and the bench JSON: "<name> fp16" when its checked
    fp16 copy is what runs (after choose()), else the name alone (the fp32 file)."""
    if wanted(choice, provider) == "fp16" and ready(store, name, store.file_path(name)):
        return f"{name} fp16"
    return name


@dataclass(frozen=True)
class Drift:
    """How the fp16 copy's output differs from the fp32 file's on the check's input."""

    nonfinite: int  # NaN/Inf values in the fp16 output
    p99_levels: float  # grey levels, at DRIFT_PERCENTILE
    max_levels: float
    mean_levels: float

    def describe(self) -> str:
        return (f"{self.p99_levels:.2f} grey levels at p{DRIFT_PERCENTILE:g} ({self.max_levels:.2f} at worst), "
                f"{self.nonfinite} NaN/Inf")

    def problem(self) -> str:
        """'' when the copy may be used, else why not, in a few words."""
        if self.nonfinite:
            return f"{self.nonfinite} NaN/Inf values in its output"
        if not self.p99_levels <= MAX_DRIFT_LEVELS:  # NaN-safe: a NaN drift fails too
            return (f"its output drifts {self.p99_levels:.2f} grey levels from fp32 at the "
                    f"{DRIFT_PERCENTILE:g}th percentile, over the {MAX_DRIFT_LEVELS:g} allowed")
        return ""


def converter_name() -> str:
    """Which converter made a copy (part of the record: another one converts again)."""
    return f"onnxruntime {import_onnxruntime().__version__}"


def cached_paths(root: Path, name: str, digest: str) -> tuple[Path, Path]:
    """(the fp16 copy, its record) in models folder `root` for the fp32 file with SHA-256 `digest`."""
    stem = f"{name}.{digest[:DIGEST_CHARS]}"
    folder = root / FOLDER
    return folder / f"{stem}.onnx", folder / f"{stem}.json"


def converted(store: ModelStore, name: str, fp32: Path, *, fresh: bool = False) -> Path:
    """The checked fp16 copy of the verified fp32 file `fp32` of model `name`: converted and
    checked on the first call for this file, read from the cache after. ModelError (one line
    naming the model and --enhancer-precision fp32) when it cannot be made or fails the check.
    `fresh` (`livecam models convert --fp16 NAME`, catalog.fp16_command): converted and checked
    anew over the copy and record there, whatever they say (a copy damaged after its check keeps
    its size and was used as it is; only this replaces it)."""
    copy, record = cached_paths(store.root, name, store.digest(fp32))
    verdict = None if fresh else _verdict(copy, record)
    if verdict == "":
        return copy
    if verdict is not None:
        raise _refused(name, verdict)
    store.describe(name)  # a file of another model is said as such, before a conversion of it is made and kept
    return _convert_and_check(name, fp32, copy, record, store.settings)


def ready(store: ModelStore, name: str, fp32: Path) -> bool:
    """Whether a checked, accepted fp16 copy of `fp32` is in the cache (nothing is converted)."""
    try:
        return _verdict(*cached_paths(store.root, name, store.digest(fp32))) == ""
    except OSError:
        return False


def _verdict(copy: Path, record: Path) -> str | None:
    """What the cache says: '' an accepted copy is there, a problem: refused before, None:
    nothing that counts (convert)."""
    known = _read_record(record)
    if known is None:
        return None
    problem = Drift(**known["drift"]).problem()
    if problem:
        return problem
    return "" if copy.is_file() and copy.stat().st_size == known.get("bytes") else None


# Every ModelError here ends in "; " + FIX (choose() drops it when auto falls back to fp32).
def _refused(name: str, problem: str) -> ModelError:
    return ModelError(f"the fp16 copy of {name} fails its check against the fp32 file ({problem}); {FIX}")


def _read_record(path: Path) -> dict[str, Any] | None:
    """The record when it is of this format, converter and threshold; else None (redo)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("drift"), dict):
        return None
    if (data.get("format") != FORMAT or data.get("converter") != converter_name()
            or data.get("max_drift_levels") != MAX_DRIFT_LEVELS):
        return None
    try:
        Drift(**data["drift"]).problem()
    except TypeError:  # fields missing, extra or not numbers: a record from elsewhere
        return None
    return data


def _convert_and_check(name: str, fp32: Path, copy: Path, record: Path, settings: RuntimeSettings) -> Path:
    log.info("converting %s to fp16 once (%s)", name, copy)
    model = convert(name, fp32)
    data = model.SerializeToString()
    try:
        drift = measure(fp32, data)
    except Exception as exc:  # noqa: BLE001 - ORT's own types: a kernel the CPU lacks in fp16, ...
        first = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise ModelError(f"the fp16 copy of {name} cannot be checked on the CPU ({first}); {FIX}") from exc
    log.info("%s fp16 against fp32 on the CPU: %s", name, drift.describe())
    problem = drift.problem()
    try:
        copy.parent.mkdir(parents=True, exist_ok=True)
        if not problem:
            with AtomicOutput(copy, cache=True) as out:
                out.write_bytes(data)
        entry = {"format": FORMAT, "model": name, "fp32": fp32.name, "converter": converter_name(),
                 "max_drift_levels": MAX_DRIFT_LEVELS, "drift": asdict(drift), "bytes": len(data)}
        # The record goes last: it is what makes the copy (or the refusal) count.
        with AtomicOutput(record, cache=True) as out:
            out.write_bytes(json.dumps(entry, indent=1, sort_keys=True).encode("utf-8"))
    except (OSError, LivecamError) as exc:
        reason = exc.message if isinstance(exc, LivecamError) else (exc.strerror or str(exc))
        raise ModelError(f"cannot keep the fp16 copy of {name} in {models_root_named(settings)}: {reason} "
                         f"({copy.parent}); {other_models_root(settings)}; {FIX}") from exc
    _drop_stale(name, copy, record)
    if problem:
        raise _refused(name, problem)
    return copy


def _drop_stale(name: str, copy: Path, record: Path) -> None:
    """Remove this model's copies of earlier fp32 files (a few hundred MB each): never used again."""
    for path in copy.parent.glob(f"{glob.escape(name)}.*"):
        if path not in (copy, record) and path.suffix in (".onnx", ".json") and path.name.count(".") == name.count(".") + 2:
            try:
                path.unlink()
            except OSError as exc:  # in use elsewhere (Windows): a later conversion tries again
                log.debug("could not remove the stale fp16 copy %s: %s", path, exc)


# ---- conversion -----------------------------------------------------------------------------
def convert(name: str, fp32: Path) -> Any:
    """The fp16 ModelProto of `fp32`, inputs and outputs kept float32, nodes in graph order."""
    try:
        import onnx
        importlib.import_module("onnxruntime.transformers.float16")  # the converter, which needs onnx too
    except ImportError as exc:
        raise ModelError(f"converting {name} to fp16 needs the onnx package ({exc.name or exc} is missing: "
                         f"pip install 'livecam[fp16]'); {FIX}") from exc
    try:
        return convert_model(onnx.load(str(fp32)))
    except Exception as exc:  # noqa: BLE001 - the converter raises whatever its graph walk meets
        first = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise ModelError(f"converting {name} to fp16 failed ({first}); {FIX}") from exc


def convert_model(model: Any) -> Any:
    """`model` (a ModelProto) with fp16 weights and arithmetic behind float32 inputs and outputs,
    nodes in graph order (scripts/make_replicas.py builds its fp16 replicas with it too)."""
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = convert_float_to_float16(model, keep_io_types=True)
    _sort_nodes(model.graph)
    return model


def _sort_nodes(graph: Any) -> None:
    """Put every node after the nodes it reads from. The converter appends the input casts at the
    end of the graph; ONNX Runtime does not mind, but the ONNX checker and TensorRT's parser do."""
    produced_by = {out: i for i, node in enumerate(graph.node) for out in node.output if out}
    waiting_on = [len({produced_by[x] for x in node.input if x in produced_by}) for node in graph.node]
    readers: dict[int, list[int]] = {}
    for i, node in enumerate(graph.node):
        for j in {produced_by[x] for x in node.input if x in produced_by}:
            readers.setdefault(j, []).append(i)
    order = [i for i, n in enumerate(waiting_on) if n == 0]
    for i in order:  # grows while it is walked: each node joins once its producers have
        for j in readers.get(i, []):
            waiting_on[j] -= 1
            if waiting_on[j] == 0:
                order.append(j)
    if len(order) != len(graph.node):
        raise ValueError("the converted graph has a cycle")
    nodes = [graph.node[i] for i in order]
    del graph.node[:]
    graph.node.extend(nodes)


# ---- the check --------------------------------------------------------------------------------
def measure(fp32: Path, fp16: bytes | Path) -> Drift:
    """Both models on the CPU provider, on one fixed input: the fp16 output's drift."""
    ort = import_onnxruntime()
    options = ort.SessionOptions()
    options.log_severity_level = 3
    sessions = [ort.InferenceSession(m if isinstance(m, bytes) else str(m), sess_options=options,
                                     providers=["CPUExecutionProvider"]) for m in (fp32, fp16)]
    feeds = probe_feeds(sessions[0])
    want, got = (np.asarray(s.run([s.get_outputs()[0].name], feeds)[0], dtype=np.float64) for s in sessions)
    nonfinite = int(np.count_nonzero(~np.isfinite(got)))
    # The restorer's output is clamped to [-1, 1] before it becomes pixels: compare what is used.
    diff = np.abs(np.clip(want, -1, 1) - np.clip(np.nan_to_num(got), -1, 1)) * 127.5
    return Drift(nonfinite=nonfinite, p99_levels=round(float(np.percentile(diff, DRIFT_PERCENTILE)), 4),
                 max_levels=round(float(np.max(diff)), 4), mean_levels=round(float(diff.mean()), 4))


def probe_feeds(session: Any) -> dict[str, np.ndarray]:
    """The check's input: for the NCHW image input, a seeded smooth picture in [-1, 1] (soft
    colour patches with a little grain, closer to a face crop than white noise, whose
    statistics a restorer was never trained on); every other input (CodeFormer's fidelity) 0.5.
    Dynamic dimensions are 1."""
    from livecam.runtime.sessions import input_dtype

    rng = np.random.default_rng(20260)
    feeds: dict[str, np.ndarray] = {}
    for arg in session.get_inputs():
        dims = [d if isinstance(d, int) and d > 0 else 1 for d in (arg.shape or [1])]
        dtype = input_dtype(arg.type)
        if len(dims) == 4 and dims[1] == 3:
            smooth = _upsample(rng.uniform(-0.7, 0.7, (8, 8, 3)), dims[2], dims[3])
            grain = rng.normal(0.0, 0.03, smooth.shape).astype(np.float32)
            image = np.clip(smooth + grain, -1.0, 1.0).transpose(2, 0, 1)[None]
            feeds[arg.name] = np.repeat(image, dims[0], axis=0).astype(dtype)
        else:
            feeds[arg.name] = np.full(dims, 0.5, dtype=dtype)
    return feeds


def _upsample(coarse: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear resize of a small HxWxC grid (numpy only: `livecam models` stays free of OpenCV)."""
    ys = np.linspace(0.0, coarse.shape[0] - 1.0, height)
    xs = np.linspace(0.0, coarse.shape[1] - 1.0, width)
    y0 = np.minimum(ys.astype(int), coarse.shape[0] - 2)
    x0 = np.minimum(xs.astype(int), coarse.shape[1] - 2)
    wy, wx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    top = coarse[y0][:, x0] * (1 - wx) + coarse[y0][:, x0 + 1] * wx
    bottom = coarse[y0 + 1][:, x0] * (1 - wx) + coarse[y0 + 1][:, x0 + 1] * wx
    return ((1 - wy) * top + wy * bottom).astype(np.float32)
