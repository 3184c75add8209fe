"""`livecam doctor`: what is installed, what works, and how to fix what does not."""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from pathlib import Path

import click

from livecam import __version__
from livecam.console import agree, counted
from livecam.errors import LivecamError, ProviderError
from livecam.models.catalog import DEFAULT_RUN_MODELS
from livecam.paths import blocked_folder, nearest_existing
from livecam.models.store import (CORRUPT, MISSING, PRESENT, VERIFIED, ModelStore, free_bytes, models_root,
                                  other_models_root)
from livecam.pipeline.engine import FP16_HINT, PROBE_MODEL, neural_absent
from livecam.processors.registry import listed
from livecam.runtime.providers import (NO_ONNXRUNTIME, available_names, driver_cuda_version,
                                      import_onnxruntime, ort_cuda_version, resolve_providers)
from livecam.runtime.sessions import start_problem
from livecam.settings import RuntimeSettings

# Every wheel that installs the `onnxruntime` Python package; two at once overwrite each other.
ORT_DISTRIBUTIONS: tuple[str, ...] = (
    "onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino", "onnxruntime-directml",
    "onnxruntime-silicon", "onnxruntime-rocm", "onnxruntime-qnn", "onnxruntime-training",
)
CAMERA_INDEXES = range(5)


def installed_ort_distributions() -> dict[str, str]:
    found: dict[str, str] = {}
    for name in ORT_DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def ort_conflict_fix(dists: dict[str, str]) -> str | None:
    """The exact commands that leave one onnxruntime wheel, or None when there is no conflict."""
    if len(dists) < 2:
        return None
    keep = next((d for d in ("onnxruntime-gpu", "onnxruntime-openvino", "onnxruntime-directml",
                             "onnxruntime-rocm", "onnxruntime-silicon", "onnxruntime-qnn") if d in dists),
                "onnxruntime")
    return f"pip uninstall -y {' '.join(sorted(dists))} && pip install {keep}"


def probe_cameras(indexes: range = CAMERA_INDEXES) -> list[str]:
    """Cameras that open and deliver a frame. Quick: on Linux only /dev/videoN that exist."""
    try:
        import cv2
    except ImportError:
        return []
    try:
        cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)
    except AttributeError:
        pass
    found = []
    for index in indexes:
        if sys.platform.startswith("linux") and not Path(f"/dev/video{index}").exists():
            continue
        cap = cv2.VideoCapture(index)
        try:
            if cap.isOpened():
                ok, frame = cap.read()
                if ok and frame is not None:
                    found.append(f"{index} ({frame.shape[1]}x{frame.shape[0]})")
        finally:
            cap.release()
    return found


def cuda_versions_line() -> str | None:
    """The CUDA this onnxruntime-gpu needs against what the NVIDIA driver offers (None for
    builds without CUDA): a driver older than the build is the usual reason CUDA cannot start."""
    built = ort_cuda_version()
    if built is None:
        return None
    supported = driver_cuda_version()
    driver = (f"the NVIDIA driver supports up to {supported[0]}.{supported[1]}" if supported
              else "no NVIDIA driver answers (libcuda cannot be loaded)")
    return f"CUDA: this onnxruntime-gpu is built for {built[0]}.{built[1]}; {driver}"


def providers_line(ort_providers: list[str]) -> str:
    """The providers onnxruntime offers, named as --execution-provider takes them; those livecam
    has no name for (AzureExecutionProvider...) are left out, as no option can choose them."""
    names = available_names(ort_providers)
    return "Execution providers (--execution-provider): " + (", ".join(names) or "none livecam can use")


def provider_start_lines(store: ModelStore) -> list[str]:
    """Each installed accelerator started on the smallest embedded model: ORT lists a provider
    whose libraries or driver are missing, and only starting it tells."""
    try:
        names = [n for n in available_names() if n != "cpu"]
    except ProviderError:
        return []
    if not names:
        return []
    try:
        probe = store.path(PROBE_MODEL)
    except LivecamError as exc:
        return [f"Providers: not started ({exc.message})"]
    lines = ["Providers started on a small model:"]
    for name in names:
        if name == "tensorrt":  # its first engine build takes minutes
            lines.append("  tensorrt  not started here (its first engine build takes minutes); "
                         "`livecam bench --execution-provider tensorrt` tries it")
            continue
        problem = start_problem(probe, resolve_providers([name]))
        lines.append(f"  {name}  starts" if problem is None
                     else f"  {name}  cannot start ({problem.cause}); fix: {problem.fix}")
    return lines


def unwritable(root: Path) -> str | None:
    """Why files cannot be written in `root` (or in the folders that would be made for it: a
    missing one is created on first use), or None when they can."""
    import tempfile

    blocked = blocked_folder(root)
    if blocked is not None:
        return blocked
    try:
        with tempfile.TemporaryFile(dir=nearest_existing(root)):  # os.access says yes to root on read-only mounts
            pass
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def models_folder_problem(settings: RuntimeSettings) -> str:
    """'' when downloads can write in the models folder (or create it), else why not and the fix:
    a read-only folder was only found out when a download failed. Not a readiness problem: the
    embedded models need no writing."""
    reason = unwritable(models_root(settings))
    return "" if reason is None else (f"; NOT writable ({reason}): downloads will fail; make it writable, or "
                                      f"{other_models_root(settings)}")


def neural_swap_state(store: ModelStore, primary: str = "cpu") -> str:
    """Whether `auto` swaps with the neural models on the `primary` provider, and if not the one
    command that fetches the ones not here: a newcomer saw a dozen "missing" models and no word on
    which matter. The files named are the mesh fallback's (engine.neural_absent)."""
    fp16_here = store.is_present("inswapper_128_fp16")
    absent = list(neural_absent(store, primary))
    if not absent:
        return "ready"
    # without the detector alone the neural swap still runs, on faces BlazeFace found
    instead = ("faces are found with the embedded BlazeFace" if absent == ["det_10g"]
               else "auto uses the embedded mesh swapper")
    fp16 = f"; {FP16_HINT}" if "inswapper_128" in absent and fp16_here and "w600k_r50" not in absent else ""
    return (f"{listed(absent)} not here (see above), so {instead}; "
            f"`{store.download_command(*absent)}` fetches {agree(len(absent), 'it', 'them')} "
            f"for a more lifelike swap{fp16}")


def auto_primary(settings: RuntimeSettings) -> str:
    """The provider --execution-provider resolves to here (not started: the providers' lines say
    whether it starts); the CPU when it cannot resolve."""
    try:
        return resolve_providers(settings.providers).primary
    except ProviderError:
        return "cpu"


def credentials_state() -> tuple[str, bool]:
    """Whether outputs can get C2PA content credentials from the local identity (made on the first
    signed output), and whether that is a readiness problem: with a read-only home every livecam
    image and video failed at once, while doctor said nothing, then said "ready" beside the line."""
    import os

    from livecam.marks import credentials

    if not credentials.available():
        return (f"off: c2pa-python is not installed ({credentials.INSTALL_HINT}): outputs are "
                "unsigned, and a typed --c2pa, --c2pa-cert or --c2pa-key is refused"), False
    if os.environ.get("LIVECAM_C2PA_CERT") or os.environ.get("LIVECAM_C2PA_KEY"):
        return "signed with LIVECAM_C2PA_CERT / LIVECAM_C2PA_KEY", False
    folder = credentials.local_folder(os.environ)
    if (folder / credentials.LOCAL_IDENTITY).is_file():
        return f"local identity in {folder}", False
    reason = unwritable(folder)
    if reason is None:
        return f"local identity to be made in {folder} on the first signed output", False
    return (f"NOT possible: the local identity cannot be made in {folder} ({reason}), so livecam image, video "
            f"and recordings will fail; set LIVECAM_C2PA_DIR to a writable folder or pass --no-c2pa"), True


def window_state() -> str:
    """Whether `--output window` can open here; not a readiness problem (files and the virtual
    camera need no display)."""
    from livecam.media.sinks import display_available
    from livecam.media.window import display_problem

    if not display_available():
        return "no display (DISPLAY and WAYLAND_DISPLAY are unset); use --output none, FILE.mp4 or virtual-camera"
    problem = display_problem()
    return "available" if problem is None else f"unavailable: {problem}"


def run_doctor(settings: RuntimeSettings) -> int:
    ready = True
    echo = click.echo
    echo(f"livecam {__version__}")
    echo(f"Python {platform.python_version()} ({sys.executable}) on {platform.platform()}")

    from livecam.media.containers import library_versions

    echo(f"Media libraries: {library_versions()}")

    dists = installed_ort_distributions()
    echo("onnxruntime packages: " + (", ".join(f"{k} {v}" for k, v in dists.items()) or "none"))
    fix = ort_conflict_fix(dists)
    if fix:
        echo(f"PROBLEM: {' and '.join(sorted(dists))} are installed side by side; they overwrite each "
             f"other's files and GPU providers silently stop working. Fix:")
        echo(f"  {fix}")
    if not dists:
        ready = False
        echo(f"PROBLEM: {NO_ONNXRUNTIME}")
    try:
        ort = import_onnxruntime()
        providers = list(ort.get_available_providers())
        echo(f"onnxruntime {ort.__version__} (imported from {Path(str(ort.__file__)).parent})")
        echo(providers_line(providers))
        cuda_line = cuda_versions_line()
        if cuda_line:
            echo(cuda_line)
        if "CPUExecutionProvider" not in providers:
            ready = False
            echo("PROBLEM: the CPU execution provider is missing; reinstall onnxruntime")
    except Exception as exc:  # noqa: BLE001 - a broken install shows here, not as a traceback
        ready = False
        if dists:
            echo(f"PROBLEM: onnxruntime cannot be imported ({type(exc).__name__}: {exc}); "
                 f"fix: pip install --force-reinstall {' '.join(dists)}")

    for module, package in (("numpy", "numpy"), ("cv2", "opencv-python"), ("av", "av"), ("click", "click")):
        try:
            __import__(module)
        except Exception as exc:  # noqa: BLE001
            ready = False
            echo(f"PROBLEM: {module} cannot be imported ({exc}); fix: pip install {package}")

    store = ModelStore(settings, progress=False)
    free = free_bytes(store.root)
    echo(f"Models folder: {store.root} (free disk: {'unknown' if free is None else f'{free / 1e9:.1f} GB'})"
         + models_folder_problem(settings))
    width = max(len(n) for n in store.names())
    for name in store.names():
        st = store.state(name)
        note = {PRESENT: f" (run `{store.command('models verify')}`)", MISSING: f" (`{store.download_command(name)}`)",
                CORRUPT: f"; {store.fix_hint(store.spec(name), st.path)}"}
        detail = f" ({st.detail})" if st.detail and st.state == CORRUPT else ""
        bundled = " embedded" if store.spec(name).bundled else ""
        if bundled:  # part of the package: only a reinstall brings it back
            fix = "" if st.state == VERIFIED else "; the package is damaged: reinstall livecam"
        else:
            fix = note.get(st.state, "")
        echo(f"  {name.ljust(width)}  {st.state}{bundled}{detail}{fix}")
        if name in DEFAULT_RUN_MODELS and st.state != VERIFIED:
            ready = False

    echo("Neural swap (--swap-model auto): " + neural_swap_state(store, auto_primary(settings)))
    for line in provider_start_lines(store):
        echo(line)
    cameras = probe_cameras()
    echo("Cameras: " + (", ".join(cameras) if cameras else f"none opened (indexes {CAMERA_INDEXES[0]}-"
                                                             f"{CAMERA_INDEXES[-1]} tried)"))
    echo("Window (--output window): " + window_state())
    credentials_line, unsigned = credentials_state()
    echo("Content credentials (C2PA): " + credentials_line)
    if ready and not unsigned:
        echo("Default run (embedded models, CPU): ready")
        return 0
    seen = ["the PROBLEM lines and model states"] * (not ready) + ["the content credentials line"] * unsigned
    echo(f"Default run (embedded models, CPU): NOT ready; see {' and '.join(seen)} above")
    return 1


def run_cluster_doctor(address: str) -> int:
    """`livecam doctor --cluster ADDR`: reachable, versions, GPUs and livecam per node; exit 1 on a
    mismatch or a node that cannot run livecam (an unreachable cluster is an InputError)."""
    from livecam.cluster import describe_cluster

    lines = describe_cluster(address)
    for line in lines:
        click.echo(line)
    problems = [line for line in lines if "MISMATCH" in line or "cannot run livecam" in line]
    click.echo("Cluster: ready" if not problems else f"Cluster: NOT ready ({counted(len(problems), 'node')} above)")
    return 1 if problems else 0
