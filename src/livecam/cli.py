"""The click command line. Each command builds frozen settings and calls one function.

No processing logic lives here; this is the only module that prints errors and sets the exit
code (see errors.py).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

import click

from livecam import __version__
from livecam.atomic import trailing_slash_problem
from livecam.cli_params import (
    EnvFlag,
    FiniteRange,
    GivenPath,
    GuessedChoice,
    NameOrPath,
    OptionalSize,
    ProcessorChoice,
    option,
)
from livecam.cli_usage import expand_variadic, usage_message
from livecam.console import (
    ClosedStdout,
    agree,
    StdoutClosed,
    StdoutUnwritable,
    one_line,
    print_cause_chain,
    say,
    setup_logging,
    stdout_failures,
    stdout_to_devnull,
)
from livecam.errors import EXIT_BROKEN_PIPE, EXIT_FAILURE, EXIT_INTERRUPTED, Interrupted, LivecamError
from livecam.interrupt import interrupted, output_done
from livecam.models.catalog import every_model_bytes
from livecam.pipeline.signals import ignore_stop_signals, stop_signals
from livecam.pipeline.budget import check_execution_threads
from livecam.processors import registry
from livecam.runtime.providers import CHOICES as PROVIDER_CHOICES
from livecam.settings import (
    CAMERA_FPS,
    DEFAULT_FACE_MASK_BLUR,
    DEFAULT_FACE_MASK_REGIONS,
    DETECTORS,
    ENHANCER_MODELS,
    ENHANCER_PRECISIONS,
    FACE_MASK_AREAS,
    FACE_MASK_REGIONS,
    FACE_MASK_TYPES,
    FACE_SELECTOR_ORDERS,
    IMAGE_READ_FORMATS,
    IMAGE_WRITE_FORMATS,
    MIN_BLEND,
    PIXEL_BOOSTS,
    SHIP_INPUT,
    SWAP_MODELS,
    AnalysisSettings,
    BenchJob,
    C2paSettings,
    ClusterSettings,
    DemoJob,
    EnhanceSettings,
    ImageJob,
    LiveJob,
    ProcessingSettings,
    RuntimeSettings,
    SwapSettings,
    VideoJob,
)

log = logging.getLogger("livecam")


class _NeverRaised(click.UsageError):
    """Stands for NoArgsIsHelpError under click 8.1, which printed the help itself."""


# click 8.2+ raises this usage error, whose message is the whole help, for a group given no command
_NO_ARGS_IS_HELP: type[click.UsageError] = getattr(click.exceptions, "NoArgsIsHelpError", _NeverRaised)


def _quiet_exit_stdout_closed() -> None:
    """Exit like `git log | head -1`: no line (nobody asked for more), status 141."""
    stdout_to_devnull()
    sys.exit(EXIT_BROKEN_PIPE)


class LivecamGroup(click.Group):
    """Adds variadic options and turns every error into one line and an exit code."""

    # --help and --version write while the context is made, a command's output while it is invoked
    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        with stdout_failures():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with stdout_failures():
            try:
                return super().invoke(ctx)
            except KeyboardInterrupt as exc:  # click's main prints an empty line for it before ours
                raise click.exceptions.Abort() from exc

    def main(self, args: Sequence[str] | None = None, **kwargs: Any) -> Any:  # type: ignore[override]
        strays: list[tuple[str, str]] = []
        argv = expand_variadic(list(sys.argv[1:] if args is None else args), strays)
        kwargs.pop("standalone_mode", None)
        verbose = any(a in ("-v", "--verbose") or (a.startswith("-v") and set(a[1:]) == {"v"}) for a in argv)
        if sys.stdout is None:  # started with stdout closed (`>&-`)
            sys.stdout = ClosedStdout()
        try:
            rv = super().main(args=argv, standalone_mode=False, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except StdoutClosed:
            _quiet_exit_stdout_closed()
        except StdoutUnwritable as exc:
            stdout_to_devnull()
            say(f"livecam: error: cannot write to standard output ({exc.reason}); {exc.fix}")
            sys.exit(EXIT_FAILURE)
        except _NO_ARGS_IS_HELP as exc:  # `livecam`, `livecam models`: the help, not it escaped as one error line
            click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message(), err=True)
            sys.exit(exc.exit_code)
        except click.UsageError as exc:  # one line like every other error, not click's three
            say(f"livecam: error: {usage_message(self, argv, strays, exc)}")
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except (click.exceptions.Abort, KeyboardInterrupt):
            say("livecam: interrupted")
            sys.exit(EXIT_INTERRUPTED)
        except LivecamError as exc:
            if interrupted() and not isinstance(exc, Interrupted):  # e.g. an import cut short by Ctrl-C
                say("livecam: interrupted")
                sys.exit(EXIT_INTERRUPTED)
            say(f"livecam: error: {exc.message}")
            if verbose:
                print_cause_chain(exc)
            sys.exit(exc.exit_code)
        except Exception as exc:  # noqa: BLE001 - the last line of defence: no tracebacks
            if interrupted():  # an error raised by the interrupt (or the cleanup after it)
                say("livecam: interrupted")
                sys.exit(EXIT_INTERRUPTED)
            first = str(exc).splitlines()[0] if str(exc) else ""
            say(f"livecam: internal error: {type(exc).__name__}: {first} "
                 f"(rerun with -v for details and please report it)")
            if verbose:
                traceback.print_exc()
            sys.exit(EXIT_FAILURE)
        if isinstance(rv, int):
            sys.exit(rv)
        sys.exit(0)


@click.group(cls=LivecamGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="livecam")
@option("--models-dir", type=GivenPath(file_okay=False, path_type=Path), envvar="LIVECAM_MODELS_DIR",
              help="Folder holding the models [env LIVECAM_MODELS_DIR].")
@option("--offline", is_flag=True, type=EnvFlag(), envvar="LIVECAM_OFFLINE", help="Never touch the network [env LIVECAM_OFFLINE=1].")
@option("--accept-license", is_flag=True, help="Accept the licences of models downloaded on first use.")
@option("--unverified-models", is_flag=True,
              help="Use model files whose SHA-256 differs from the catalog (benchmark replicas).")
@option("-v", "--verbose", count=True, help="More detail; errors show their cause chain.")
@option("-q", "--quiet", is_flag=True, help="Only errors; no progress bars.")
@click.pass_context
def cli(ctx: click.Context, models_dir: Path | None, offline: bool, accept_license: bool,
        unverified_models: bool, verbose: int, quiet: bool) -> None:
    """livecam: put the face from one photo on every face in a webcam stream, video or image.

    Use it only with the consent of the people whose faces you use.

    \b
    First steps:
      livecam demo                               bundled photos, nothing to set up
      livecam image in.jpg out.png -s face.jpg   one picture
      livecam video in.mp4 out.mp4 -s face.jpg   a video (audio kept)
      livecam run -s face.jpg                    the webcam
      livecam doctor                             what this machine has and lacks
    """
    if verbose and quiet:  # "only errors" and "more detail": the errors came with their tracebacks
        raise click.UsageError("-q/--quiet and -v/--verbose ask for opposite things; give one of them")
    setup_logging(verbose, quiet)
    if unverified_models:
        log.warning("warning: --unverified-models: model files are used without checking their SHA-256")
    from_env = ctx.get_parameter_source("models_dir") is click.core.ParameterSource.ENVIRONMENT
    ctx.obj = RuntimeSettings(models_dir=models_dir, offline=offline, accept_license=accept_license,
                              models_dir_from="LIVECAM_MODELS_DIR" if from_env else "--models-dir",
                              unverified_models=unverified_models, verbose=verbose, quiet=quiet)


def _settings(ctx: click.Context) -> RuntimeSettings:
    """The settings `cli` stored for every subcommand (it always runs first)."""
    settings = ctx.find_object(RuntimeSettings)
    if settings is None:
        raise click.UsageError("run this command through `livecam` (its global options are missing)")
    return settings


def _given(ctx: click.Context, name: str) -> bool:
    """Whether the user gave the option `name` (on the command line or in its variable), not left its default."""
    return ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)


def _runtime(ctx: click.Context, providers: tuple[str, ...], threads: int, explicit_threads: bool = False) -> RuntimeSettings:
    base: RuntimeSettings = ctx.obj
    check_execution_threads(threads)  # 64 on 2 cores only adds memory and contention
    return RuntimeSettings(providers=providers or ("auto",), execution_threads=threads, explicit_threads=explicit_threads,
                           models_dir=base.models_dir, models_dir_from=base.models_dir_from, offline=base.offline,
                           accept_license=base.accept_license, unverified_models=base.unverified_models,
                           verbose=base.verbose, quiet=base.quiet)


def _parse_map(values: tuple[str, ...]) -> tuple[tuple[Path, Path], ...]:
    pairs = []
    for value in values:
        splits = [(value[:at], value[at + 1:]) for at, char in enumerate(value) if char == "="]
        splits = [(source, reference) for source, reference in splits if source and reference]
        if not splits:
            raise click.BadParameter(f"expected SOURCE=REFERENCE, got {value!r}", param_hint="--map")
        # a photo's name may hold '=' itself (face=1.jpg): the split naming two files that exist
        source, reference = next(((s, r) for s, r in splits if Path(s).is_file() and Path(r).is_file()), splits[0])
        pairs.append((Path(source), Path(reference)))
    # The same person twice: their faces all took the first SOURCE, the second never used, unsaid.
    for at, (face, person) in enumerate(pairs):
        earlier = next((s for s, r in pairs[:at] if _same_file(r, person)), None)
        if earlier is not None:
            raise click.BadParameter(f"REFERENCE {person} is given twice, for {earlier} and for {face}; "
                                     "one person gets one face: give each REFERENCE once", param_hint="--map")
    return tuple(pairs)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:  # one is missing: the photo checks say so, by name
        return False


def _names(choices: tuple[str, ...]) -> Callable[[click.Context, click.Parameter, Any], tuple[str, ...]]:
    """Click callback: repeated and/or comma-separated names from `choices`, in order, once each."""
    def parse(ctx: click.Context, param: click.Parameter, values: Any) -> tuple[str, ...]:
        names = [n.strip().lower() for v in values or () for n in str(v).split(",") if n.strip()]
        if values and not names:  # "" (an unset shell variable) or ",": not the default without a word
            raise click.BadParameter(f"no names given; choose from {', '.join(choices)}, or leave the option out")
        bad = [n for n in names if n not in choices]
        if bad:
            raise click.BadParameter(f"unknown {', '.join(bad)}; choose from {', '.join(choices)}")
        return tuple(dict.fromkeys(names))
    return parse


def _padding(ctx: click.Context, param: click.Parameter, value: Any) -> tuple[float, ...]:
    """Click callback: TOP RIGHT BOTTOM LEFT that leave some of the box (at 100% or more on one
    axis the box mask is empty and nothing would be swapped)."""
    top, right, bottom, left = (float(v) for v in value)
    if top + bottom >= 100 or left + right >= 100:
        raise click.BadParameter(f"{top:g} {right:g} {bottom:g} {left:g} leaves nothing of the box to swap; "
                                 f"TOP + BOTTOM and RIGHT + LEFT must each stay under 100 (% of the crop)")
    return (top, right, bottom, left)


def _source_help(live: bool) -> str:
    """--source's help: a folder of photos is only `run`'s (cycled with the n key); the other
    commands refuse one, so their help does not offer it."""
    folder = "; or a folder of photos, cycled with the n key" if live else ""
    return ("Photo of the face to put in (repeatable: the neural swapper (inswapper, HyperSwap) "
            f"averages photos of one person, the mesh swapper uses the first{folder}).")


def processing_options(func: Callable[..., Any], *, still: bool = False, live: bool = False) -> Callable[..., Any]:
    """Options shared by run, video, image and bench; `still` (image's): --smoothing and
    --execution-threads, which one frame has no use for, are accepted (and warned about) but not
    listed in --help; `live` (run's): what only a live run offers is said in the help."""
    options = [
        option("--source", "-s", "sources", multiple=True, type=GivenPath(path_type=Path),
               help=_source_help(live)),
        option("--execution-provider", "providers", multiple=True,
                     type=GuessedChoice(PROVIDER_CHOICES, case_sensitive=False),
                     help="One or more of " + ", ".join(PROVIDER_CHOICES) + " (default auto: the best available; "
                          "several, as separate words: each must be installed, and each model part runs on the "
                          "first of them that supports it)."),
        option("--execution-threads", type=click.IntRange(1, 64), default=None, hidden=still,
                     help="Processing workers on consecutive frames (default: 1 live; for video files "
                          "the number of cores, at most 4). "
                          "On cuda/tensorrt the workers are lanes with their own model sessions (default 3)."),
        option("--frame-processor", "frame_processors", multiple=True,
                     type=ProcessorChoice(), help="Processors in order (default: the swapper)."),
        option("--many-faces", is_flag=True, help="Swap every face, not only the largest."),
        option("--face-selector-order", type=GuessedChoice(FACE_SELECTOR_ORDERS), default=None,
                     help="Which face is the one swapped (the first in this order; default: the largest), "
                          "and with --many-faces or --map the order faces are swapped in (a later one is "
                          "pasted over an earlier one where they overlap); best-worst: detector confidence."),
        option("--face-min-size", type=click.IntRange(0, 10000), default=0, show_default=True, metavar="PX",
                     help="Leave faces alone whose box is under PX pixels on its shorter side (0: none)."),
        option("--reference", type=GivenPath(path_type=Path), multiple=True,
                     help="Only swap faces of the person in this photo."),
        option("--reference-distance", type=FiniteRange(0, 2), default=1.0, show_default=True,
                     help="Max embedding distance to count as the reference person."),
        option("--map", "face_map", multiple=True, metavar="SOURCE=REFERENCE",
                     help="Give the person in REFERENCE the face in SOURCE (repeatable)."),
        option("--detector", type=GuessedChoice(DETECTORS), default="auto", show_default=True,
                     help="scrfd (the det_10g model) or the embedded blazeface; auto picks scrfd when det_10g is present."),
        option("--det-size", type=GuessedChoice(["320", "480", "640"]), default="640", show_default=True,
                     help="SCRFD input size (smaller is faster); the embedded BlazeFace has a fixed size."),
        option("--swap-model", type=GuessedChoice(SWAP_MODELS), default="auto", show_default=True,
                     help="auto: inswapper fp16 on GPUs, fp32 on CPU, the embedded mesh swapper without them; "
                          "hyperswap_1a/1b/1c_256: FaceFusion's 256 px HyperSwap (ResearchRAIL licence)."),
        option("--mouth-mask", type=OptionalSize(), default=None, is_flag=False, flag_value=0, metavar="[SIZE]",
                     help="Keep the target's mouth; SIZE 0..100 (0 when left out) grows it towards the chin."),
        option("--color-match/--no-color-match", default=True, show_default=True,
                     help="Match the swapped face's colour to the target's skin."),
        # -- face masks (inswapper paste-back; processors/crop_masks.py) --
        option("--face-mask", "face_mask", multiple=True, callback=_names(FACE_MASK_TYPES), metavar="TYPES",
                     help="Paste mask(s), comma-separated or repeated; several paste their intersection: "
                          "box (default), occlusion (XSeg: whatever covers the face stays), region (BiSeNet "
                          "face parts), area (from landmarks)."),
        option("--face-mask-blur", type=FiniteRange(0, 1), default=DEFAULT_FACE_MASK_BLUR,
                     show_default=True,
                     help="Feather of the masks' edges (0 hard, 1 wide; the default is insightface's own paste mask)."),
        option("--face-mask-padding", type=FiniteRange(0, 100), nargs=4, default=(0, 0, 0, 0),
                     callback=_padding, metavar="TOP RIGHT BOTTOM LEFT",
                     help="Shrink the box mask by these percentages of the crop (TOP + BOTTOM and RIGHT + LEFT "
                          "under 100)."),
        option("--face-mask-areas", multiple=True, callback=_names(FACE_MASK_AREAS), metavar="AREAS",
                     help="For --face-mask area: " + ",".join(FACE_MASK_AREAS) + " (default all)."),
        option("--face-mask-regions", multiple=True, callback=_names(FACE_MASK_REGIONS), metavar="REGIONS",
                     help="For --face-mask region: " + ",".join(FACE_MASK_REGIONS) + " (default all but glasses)."),
        # Not under MIN_BLEND (0 included): it left every face as it was while the output still said
        # "1 face swapped" and carried the AI-edit watermark and credentials of a swap that never happened.
        option("--blend", type=FiniteRange(MIN_BLEND, 1), default=1.0, show_default=True,
                     help=f"Opacity of the swapped face ({MIN_BLEND} to 1)."),
        option("--pixel-boost", type=GuessedChoice(PIXEL_BOOSTS), default=None,
                     help="Neural swapper crop size N, a multiple of the model's size (inswapper 128: 128-512; "
                          "HyperSwap 256: 256 or 512): the face is swapped as (N/size)^2 sub-pixel-shifted tiles, "
                          "so it costs (N/size)^2 swapper calls per face for N x N detail (default: the model's "
                          "size; the mesh swapper ignores it)."),
        option("--enhancer-model", type=GuessedChoice(ENHANCER_MODELS), default="gfpgan_1.4", show_default=True,
                     help="Face enhancer (--frame-processor face_enhancer): gpen_bfr_256 is the fastest."),
        # Not under MIN_BLEND, as --blend: the enhancer would change nothing yet run, and be reported, on every face
        option("--enhancer-blend", type=FiniteRange(MIN_BLEND, 1), default=0.8, show_default=True,
                     help=f"Mix of the restored face over the swapped one ({MIN_BLEND} to 1)."),
        option("--enhancer-weight", type=FiniteRange(0, 1), default=None,
                     help="CodeFormer's fidelity: 0 restores most, 1 (default) keeps the input face most."),
        option("--enhancer-precision", type=GuessedChoice(ENHANCER_PRECISIONS), default="auto", show_default=True,
                     help="Enhancer weights: fp16 is converted once from the fp32 file and checked against it; "
                          "auto: fp16 on cuda, tensorrt and coreml, fp32 elsewhere."),
        option("--smoothing", type=FiniteRange(0, 1), default=0.5, show_default=True, hidden=still,
                     help="Keypoint smoothing across frames (0 off)."),
    ]
    for add in reversed(options):
        func = add(func)
    return func


def file_job_options(func: Callable[..., Any], *, still: bool = False) -> Callable[..., Any]:
    """INPUT OUTPUT, the processing options, --force and --label: shared by video and image
    (`still`: processing_options')."""
    decorators: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
        click.argument("input", type=GivenPath(path_type=Path)),
        click.argument("output", type=GivenPath(path_type=str)),  # str: Path drops a trailing slash
        functools.partial(processing_options, still=still),
        option("--force", is_flag=True, help="Overwrite OUTPUT if it exists."),
        option("--label/--no-label", default=True, show_default=True, help="Visible AI-generated label."),
        option("--watermark/--no-watermark", default=True, show_default=True,
                     help="Invisible watermark (read back by `livecam verify`)."),
        c2pa_options,
    ]
    for add in reversed(decorators):
        func = add(func)
    return func


def c2pa_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--c2pa/--no-c2pa, --c2pa-cert, --c2pa-key: shared by video, image, run (recordings) and demo."""
    options = [
        option("--c2pa/--no-c2pa", default=True, show_default=True,
                     help=f"Signed C2PA content credentials ({', '.join(IMAGE_WRITE_FORMATS)}, MP4, MOV)."),
        option("--c2pa-cert", type=GivenPath(dir_okay=False, path_type=Path),
                     help="PEM certificate chain to sign with [env LIVECAM_C2PA_CERT; default: a local self-signed one]."),
        option("--c2pa-key", type=GivenPath(dir_okay=False, path_type=Path),
                     help="PEM private key of --c2pa-cert [env LIVECAM_C2PA_KEY]."),
    ]
    for add in reversed(options):
        func = add(func)
    return func


def _c2pa(ctx: click.Context, kw: dict[str, Any]) -> C2paSettings:
    # a signer typed beside --no-c2pa was ignored without a word (one set in the environment is a default)
    typed = [f"--{k.replace('_', '-')}" for k in ("c2pa_cert", "c2pa_key")
             if ctx.get_parameter_source(k) is click.core.ParameterSource.COMMANDLINE]
    if not kw["c2pa"] and typed:
        raise click.UsageError(f"--no-c2pa turns off the signing {' and '.join(typed)} would do: give one or the other")
    if kw["c2pa"] and ctx.get_parameter_source("c2pa") is click.core.ParameterSource.COMMANDLINE:
        typed.insert(0, "--c2pa")
    if typed:  # signing asked for, not the default: refused without c2pa-python, before any work
        from livecam.marks.credentials import check_requested

        check_requested(typed)
    return C2paSettings(enabled=kw["c2pa"], cert=kw["c2pa_cert"], key=kw["c2pa_key"])


def file_workers() -> int:
    """Default workers for video files: decode and encode overlap with processing on every core."""
    return max(1, min(4, os.cpu_count() or 1))


def _processing(ctx: click.Context, kw: dict[str, Any], *, smoothing_allowed: bool = True,
                default_threads: int = 1) -> ProcessingSettings:
    return ProcessingSettings(
        sources=tuple(kw.pop("sources")),
        frame_processors=tuple(dict.fromkeys(kw.pop("frame_processors"))) or registry.default_names(),
        runtime=_runtime(ctx, tuple(p.lower() for p in kw.pop("providers")), kw.get("execution_threads") or default_threads,
                         explicit_threads=kw.pop("execution_threads") is not None),
        analysis=AnalysisSettings(
            detector=kw.pop("detector"), det_size=int(kw.pop("det_size")), many_faces=kw.pop("many_faces"),
            face_selector_order=kw.pop("face_selector_order"), face_min_size=kw.pop("face_min_size"),
            reference=tuple(kw.pop("reference")), reference_distance=kw.pop("reference_distance"),
            face_map=_parse_map(kw.pop("face_map")),
            smoothing=kw.pop("smoothing") if smoothing_allowed else 0.0,
        ),
        swap=SwapSettings(model=kw.pop("swap_model"), mouth_mask=kw.pop("mouth_mask"),
                          color_match=kw.pop("color_match"), blend=kw.pop("blend"),
                          pixel_boost=int(boost) if (boost := kw.pop("pixel_boost")) is not None else None,
                          face_mask=kw.pop("face_mask") or ("box",), face_mask_blur=kw.pop("face_mask_blur"),
                          face_mask_padding=kw.pop("face_mask_padding"),
                          face_mask_areas=kw.pop("face_mask_areas") or FACE_MASK_AREAS,
                          face_mask_regions=kw.pop("face_mask_regions") or DEFAULT_FACE_MASK_REGIONS),
        enhance=EnhanceSettings(model=kw.pop("enhancer_model"), blend=kw.pop("enhancer_blend"),
                                weight=kw.pop("enhancer_weight"), precision=kw.pop("enhancer_precision")),
    )


def _pattern(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback of video's --pattern: an empty one (an unset shell variable) took every video."""
    if value is not None and not value.strip():
        raise click.BadParameter("the pattern is empty (an unset shell variable?); give file names such as "
                                 "'*.mp4', or leave the option out for every video")
    return value


def _cluster_address(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback of video's and doctor's --cluster: None when not given; an empty or unknown
    address is a usage error (`--cluster ""`, an unset shell variable, ran on this machine)."""
    if value is None:
        return None
    address = value.strip()
    source = ctx.get_parameter_source(param.name or "")
    where = f" (from ${param.envvar})" if source is click.core.ParameterSource.ENVIRONMENT else ""
    if not address:
        raise click.BadParameter(f"the address is empty{where}; give local, auto, ray://HOST:PORT or "
                                 "HOST:PORT, or none to run on this machine")
    if address.lower() not in ("local", "auto", "none") and ":" not in address:
        raise click.BadParameter(f"{address!r}{where} is not local, auto, none, ray://HOST:PORT or HOST:PORT")
    return address


def _file_output(output: str, input: Path, command: str) -> Path:
    """OUTPUT as a Path. A trailing slash means a folder, and Path drops it: `out.jpg/` wrote the
    file out.jpg. (A folder INPUT's OUTPUT is a folder; an existing folder gets its own message.)
    `-` is the usual spelling of standard input or output, which a file command does not take
    (it was 'cannot tell the output format' or 'input video not found: -'). `command`: image or video."""
    example = "out.png" if command == "image" else "out.mp4"
    if str(input) == "-" and not input.exists():
        fix = ("give a photo file, or /dev/stdin for a pipe (`cat photo.jpg | livecam image /dev/stdin out.png`)"
               if command == "image" else "save the stream to a file first and give that file "
               "(a video is read more than once, which a pipe cannot give)")
        raise click.BadParameter(f"'-' (standard input) is not a file; {fix}", param_hint="INPUT")
    if output == "-" and not Path(output).exists():
        raise click.BadParameter(f"'-' (standard output) is not a file; outputs are written to a file, whole or "
                                 f"not at all: give a file name such as {example}", param_hint="OUTPUT")
    path = Path(output)
    problem = trailing_slash_problem(output)
    if problem and not input.is_dir() and not path.is_dir():
        raise click.BadParameter(problem, param_hint="OUTPUT")
    return path


def _stats_json(value: str | None) -> Path | None:
    """--stats-json as a Path; a trailing slash means a folder, as for OUTPUT (`s.jsonl/` wrote s.jsonl)."""
    if value is None:
        return None
    problem = trailing_slash_problem(value)
    if problem and not Path(value).is_dir():
        raise click.BadParameter(problem, param_hint="--stats-json")
    return Path(value)


def _require_source(processing: ProcessingSettings) -> None:
    # an enhancer alone needs no face photo
    if registry.swaps(processing.frame_processors) and not processing.sources and not processing.analysis.face_map:
        raise click.UsageError("missing --source PATH: give a photo of the face to put in")


def _parse_resolution(value: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in value.lower().split("x"))
        if w <= 0 or h <= 0:
            raise ValueError
        return w, h
    except ValueError:
        raise click.BadParameter(f"expected WIDTHxHEIGHT such as 1280x720, got {value!r}",
                                 param_hint="--resolution") from None


def _parse_frame_range(ctx: click.Context, param: click.Parameter,
                       value: str | None) -> tuple[int, int | None] | None:
    """A click callback, so a value is checked before click looks for extra arguments:
    `--frame-range 2 5` said only "Got unexpected extra argument (5)"."""
    if value is None:
        return None
    start, sep, end = value.partition(":")
    try:
        s = int(start) if start else 0
        e = int(end) if end else None
    except ValueError:
        s, e = 0, None
        sep = ""  # not numbers: said as a missing colon is
    # The one problem the value has: -1:5 said "expected ... with END > START", which it is.
    if not sep:
        one_word = f", in one word ({start}:END)" if start.isdigit() and not end else ", such as 10:250"
        problem = f"expected START:END frame numbers{one_word}"
    elif s < 0:
        problem = "START must be 0 or more"
    elif e is not None and e <= s:
        problem = "END must be more than START (END is excluded)"
    else:
        return s, e
    raise click.BadParameter(f"{problem}, got {value!r}", ctx, param_hint="--frame-range")


@cli.command(short_help="Swap faces live: camera in; window, file or virtual camera out.")
@functools.partial(processing_options, live=True)
@option("--camera", type=NameOrPath(), default="0", show_default=True, metavar="INDEX|FILE|URL",
              help="Camera index (on Linux also its /dev/videoN), or a video file path or URL (a file plays "
                   "once: the run ends with it).")
@option("--resolution", default="1280x720", show_default=True, metavar="WxH", help="Capture size WIDTHxHEIGHT.")
@option("--fps", type=FiniteRange(*CAMERA_FPS), default=30.0, show_default=True, help="Capture rate.")
@option("--realtime/--no-realtime", default=None,
              help="File sources: play at their own rate (default) or as fast as possible.")
@option("--mirror", is_flag=True, help="Flip horizontally (selfie view).")
@option("--output", "-o", type=NameOrPath(), default="auto", show_default=True, metavar="SINK|FILE",
              help="window, virtual-camera, none, or a FILE.mp4 to record (auto: window when a display exists).")
@option("--queue-depth", type=click.IntRange(1, 2), default=1, show_default=True,
              help="Frames each live queue holds: 1 for the lowest latency, 2 to ride out uneven stage times.")
@option("--duration", type=FiniteRange(min=0, min_open=True),
              help="Stop SECONDS after the first frame shown or recorded (at least that frame); a "
                   "--no-realtime file's own seconds, as its recording keeps them.")
@option("--max-frames", type=click.IntRange(min=1), help="Stop after N frames.")
@option("--stats", is_flag=True, help="Draw live metrics on the output.")
@option("--stats-json", type=GivenPath(dir_okay=False, path_type=str),  # str: Path drops a trailing slash
              help="Write one JSON object per second and a summary line (- for stdout).")
@option("--max-latency-ms", type=FiniteRange(min=1), default=40.0, show_default=True,
              help="Latency budget the governor defends.")
@option("--degrade/--no-degrade", default=True, show_default=True,
              help="Degrade gracefully (enhancer off, sparser detection) when over budget.")
@option("--label/--no-label", default=None,
              help="Draw the AI-generated label (default: on when recording to a file, off in the window "
                   "and the virtual camera).")
@option("--force", is_flag=True, help="Overwrite a recording or --stats-json file that exists.")
@option("--watermark/--no-watermark", default=None,
              help="Invisible watermark, marked off the output thread (default: on when recording to a file, "
                   "off in the window and the virtual camera).")
@c2pa_options
@click.pass_context
def run(ctx: click.Context, **kw: Any) -> None:
    """Swap faces live: camera (or a clip) in, window / virtual camera / file out."""
    processing = _processing(ctx, kw)
    _require_source(processing)
    job = LiveJob(processing=processing, camera=kw["camera"],
                  resolution=_parse_resolution(kw["resolution"]), fps=kw["fps"], realtime=kw["realtime"],
                  mirror=kw["mirror"], output=kw["output"],
                  queue_depth=kw["queue_depth"], duration=kw["duration"], max_frames=kw["max_frames"],
                  stats=kw["stats"], stats_json=_stats_json(kw["stats_json"]), max_latency_ms=kw["max_latency_ms"],
                  degrade=kw["degrade"], label=kw["label"], force=kw["force"],
                  watermark=kw["watermark"], c2pa=_c2pa(ctx, kw))
    from livecam.commands.live import run_live

    return run_live(job)


@cli.command(short_help="Swap faces in a video, or in every video of a folder.")
@file_job_options
@option("--video-encoder", default="auto", show_default=True, metavar="ENCODER",
              help="auto (libx264; libvpx-vp9 for .webm), libx265, libvpx-vp9, or a hardware encoder "
                   "such as h264_nvenc.")
@option("--video-quality", type=click.IntRange(0, 51), default=18, show_default=True,
              help="CRF-like quality, lower is better.")
@option("--keep-fps", "keep_fps", is_flag=True, help="Keep the input's frame rate (the default).")
# From 0.01 (a frame per 100 s; the rate becomes a fraction over at most 1001, and below 1/2002
# that is 0) to 1000 (high-speed camera rates).
@option("--fps", type=FiniteRange(0.01, 1000), help="Output frame rate instead.")
@option("--audio/--no-audio", default=True, show_default=True, help="Keep the audio.")
@option("--keep-partial", is_flag=True, help="On Ctrl-C or error, keep a valid shorter video.")
@option("--frame-range", metavar="START:END", callback=_parse_frame_range,
              help="Output frames START (from 0) up to END (excluded) to process, numbered after --fps; "
                   "the rest is passed through unchanged (re-encoded with the rest of the video).")
@option("--max-memory", type=FiniteRange(min=0.1),
              help="Most memory the run may hold, in GB, models included [default: the RAM available].")
@option("--pattern", metavar="GLOB", callback=_pattern,
              help="With a folder INPUT: the file names to take, e.g. '*.mp4' (default: every video extension).")
@option("--skip-existing", is_flag=True,
              help="Keep an output that is already there and go on (resumes a folder run).")
@option("--cluster", "cluster", envvar="LIVECAM_CLUSTER", metavar="ADDR", callback=_cluster_address,
              help="Run in segments on a Ray cluster: local (start Ray here), auto (RAY_ADDRESS or the "
                   "cluster running here) or ray://HOST:10001; none: on this machine. Default: "
                   "$LIVECAM_CLUSTER. Needs livecam[ray].")
@option("--segment-seconds", type=FiniteRange(min=0, min_open=True), default=60.0, show_default=True,
              help="With --cluster: length of the segments the workers share.")
@option("--overlap-seconds", type=FiniteRange(min=0),
              help="With --cluster: frames before each segment that warm up the face tracker "
                   "(default: from --smoothing, about 2.7 s at 0.5; at least 0.5 s when one face is swapped, "
                   "so it is kept across a join) and the label's placement (at least 1 s).")
@option("--workers", type=click.IntRange(min=1),
              help="With --cluster: worker processes (default: one per GPU, or per --execution-threads cores).")
@option("--ship-input", type=GuessedChoice(SHIP_INPUT),
              help="With --cluster: how workers get the video. auto (default): its path where a node reads the "
                   "same file there (shared storage), else each segment's packets copied from here (no shared "
                   "storage needed); path: always the path; chunks: always copied.")
@click.pass_context
def video(ctx: click.Context, input: Path, output: str, **kw: Any) -> None:
    """Swap faces in a video file, or in every video of a folder INPUT into a folder OUTPUT; audio is kept."""
    if kw["keep_fps"] and kw["fps"] is not None:
        raise click.UsageError("--keep-fps and --fps exclude each other: give one")
    if kw["force"] and kw["skip_existing"]:
        raise click.UsageError("--force and --skip-existing exclude each other: give one")
    processing = _processing(ctx, kw, default_threads=file_workers())
    _require_source(processing)
    job = VideoJob(input=input, output=_file_output(output, input, "video"), processing=processing, force=kw["force"], label=kw["label"],
                   encoder=kw["video_encoder"], quality=kw["video_quality"], fps=kw["fps"], audio=kw["audio"],
                   keep_partial=kw["keep_partial"], frame_range=kw["frame_range"],
                   max_memory_gb=kw["max_memory"], watermark=kw["watermark"], c2pa=_c2pa(ctx, kw),
                   pattern=kw["pattern"], skip_existing=kw["skip_existing"])
    from livecam.commands.video import run_video

    return run_video(job, cluster=_cluster(ctx, kw))


def _cluster(ctx: click.Context, kw: dict[str, Any]) -> ClusterSettings | None:
    """--cluster and its options (None: this machine; the options then are a usage error)."""
    address = kw["cluster"]
    if address is None or address.lower() == "none":  # (--segment-seconds has a default: given, not set)
        given = [f"--{k.replace('_', '-')}" for k in ("segment_seconds", "overlap_seconds", "workers", "ship_input")
                 if _given(ctx, k)]
        if given:
            raise click.UsageError(f"{' and '.join(given)} {agree(len(given), 'applies', 'apply')} to --cluster runs only: "
                                   "add --cluster ADDR")
        return None
    return ClusterSettings(address=address, workers=kw["workers"], segment_seconds=kw["segment_seconds"],
                           overlap_seconds=kw["overlap_seconds"], ship_input=kw["ship_input"] or "auto")


@cli.command(short_help="Swap faces in one image.",
             help=f"Swap faces in one image (reads {', '.join(IMAGE_READ_FORMATS)}; "
                  f"writes {', '.join(IMAGE_WRITE_FORMATS)}).")
@functools.partial(file_job_options, still=True)
@click.pass_context
def image(ctx: click.Context, input: Path, output: str, **kw: Any) -> None:
    # One frame: nothing to smooth across, and its models get every core (commands/image.py).
    unused = [flag for flag, given in (("--smoothing", _given(ctx, "smoothing")),
                                       ("--execution-threads", kw["execution_threads"] is not None)) if given]
    processing = _processing(ctx, kw, smoothing_allowed=False)
    _require_source(processing)
    job = ImageJob(input=input, output=_file_output(output, input, "image"), processing=processing, force=kw["force"], label=kw["label"],
                   watermark=kw["watermark"], c2pa=_c2pa(ctx, kw), unused=tuple(unused))
    from livecam.commands.image import run_image

    return run_image(job)


@cli.command(short_help="Measure the pipeline on a clip: stage ms, FPS, latency.")
@processing_options
@option("--mode", type=GuessedChoice(["live", "video"]), default="live", show_default=True,
              help="live: the pipeline of `livecam run` (nothing dropped, latency measured); video: the file "
                   "pipeline of `livecam video` (workers, in-order encode).")
@option("--input", "bench_input", type=GivenPath(path_type=Path), help="Clip to run (default: generated).")
@option("--frames", type=click.IntRange(min=10), default=300, show_default=True,
              help="Frames measured (a few warm-up frames run first, uncounted; an --input clip gives at most "
                   "its own).")
@option("--resolution", default="1280x720", show_default=True, metavar="WxH", help="Size of the generated clip.")
@option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@option("--compare-providers", default="", metavar="P1,P2,...",
              help="Run the same clip on each execution provider in turn (alternating over --rounds) "
                   "and print them side by side with ratios to the first.")
@option("--rounds", type=click.IntRange(min=1), default=1, show_default=True,
              help="Repeat the run (alternating providers) and report medians.")
@option("--baseline", type=GivenPath(dir_okay=False, path_type=Path),
              help="An earlier `livecam bench --json` report: print this run's ratios against it.")
@option("--watermark", is_flag=True,
              help="Run without and with the watermark, alternating (see --rounds), side by side; marked "
                   "as the outputs are (live: every frame, the encoder beside the stream; video: runs twice "
                   "a second). The cost shows as the watermark stages. With --compare-providers: every "
                   "provider runs marked.")
@click.pass_context
def bench(ctx: click.Context, **kw: Any) -> None:
    """Measure the real pipeline on a clip: per-stage ms, FPS, latency, memory.

    The clip is --input, or one generated from the --source photo; without --source, one of the
    bundled sample photos of `livecam demo` is put on a clip of the other.
    """
    mode, bench_input, frames = kw.pop("mode"), kw.pop("bench_input"), kw.pop("frames")
    resolution, as_json = _parse_resolution(kw.pop("resolution")), kw.pop("as_json")
    processing = _processing(ctx, kw, default_threads=file_workers() if mode == "video" else 1)
    listed = kw.pop("compare_providers")
    named = [p.strip().lower() for p in listed.split(",") if p.strip()]
    compare = tuple(dict.fromkeys(named))
    if listed.strip() and not compare:  # "," or " ": a comparison asked for, of nothing
        raise click.BadParameter(f"{listed!r} names no provider; list them as cpu,cuda",
                                 param_hint="--compare-providers")
    twice = next((p for p in compare if named.count(p) > 1), None)
    if twice:  # cpu,cpu ran one plain bench, the comparison silently dropped
        raise click.BadParameter(f"{listed!r} names {twice} twice; list each provider once (--rounds repeats the "
                                 "runs)", param_hint="--compare-providers")
    unknown = [p for p in compare if p not in PROVIDER_CHOICES]  # a typo, found before the clip is made
    if unknown:
        raise click.BadParameter(f"unknown execution provider {unknown[0]!r}; choose from {', '.join(PROVIDER_CHOICES)}",
                                 param_hint="--compare-providers")
    job = BenchJob(processing=processing, mode=mode, input=bench_input, frames=frames,
                   resolution=resolution, json=as_json, compare_providers=compare, rounds=kw.pop("rounds"),
                   baseline=kw.pop("baseline"), watermark=kw.pop("watermark"))
    from livecam.commands.bench import run_bench

    return run_bench(job)


@cli.command(short_help="A real swap from bundled photos: nothing to set up.")
@click.argument("output_dir", type=GivenPath(file_okay=False, path_type=Path), default="livecam-demo")
@option("--force", is_flag=True, help="Overwrite files in OUTPUT_DIR.")
@c2pa_options
@click.pass_context
def demo(ctx: click.Context, output_dir: Path, force: bool, **kw: Any) -> None:
    """See a real swap in one command: bundled photos, no camera, GPU or network needed.

    Writes the swapped clip, the clip before it and a before/after picture into OUTPUT_DIR
    (default: livecam-demo, in the current folder).
    """
    from livecam.commands.demo import run_demo

    return run_demo(DemoJob(output_dir=output_dir, runtime=ctx.obj, force=force, c2pa=_c2pa(ctx, kw)))


@cli.command(short_help="Check packages, providers, models, cameras and disk.")
@option("--cluster", metavar="ADDR", callback=_cluster_address, help="Check a Ray cluster instead (local, auto, ray://HOST:PORT): "
              "reachable, Ray and Python versions, GPUs and livecam version per node.")
@click.pass_context
def doctor(ctx: click.Context, cluster: str | None) -> int:
    """Check the installation: packages, providers, models, cameras, disk."""
    if cluster is not None and cluster.lower() != "none":
        from livecam.commands.doctor import run_cluster_doctor

        return run_cluster_doctor(cluster)
    from livecam.commands.doctor import run_doctor

    return run_doctor(ctx.obj)


@cli.command(short_help="Which livecam marks files carry (exit 0 marked, 1 not).")
@click.argument("files", nargs=-1, required=True, type=GivenPath(path_type=Path))
@option("--json", "as_json", is_flag=True, help="One JSON list with every file's evidence.")
@click.pass_context
def verify(ctx: click.Context, files: tuple[Path, ...], as_json: bool) -> int:
    """Which livecam marks FILES carry (watermark, C2PA, metadata): exit 0 marked, 1 not, 2 unreadable."""
    from livecam.commands.verify import run_verify

    return run_verify(_settings(ctx), files, as_json)


@cli.group()
def models() -> None:
    """List, download, verify and convert models."""


@models.command("list")
@click.pass_context
def models_list(ctx: click.Context) -> None:
    """Every model livecam knows, with size, licence and state."""
    from livecam.commands.models import list_models

    list_models(_settings(ctx))


@models.command("download", short_help="Download the default set, the NAMEs given, or --all.")
@click.argument("names", nargs=-1)
@option("--accept-license", "accept", is_flag=True, help="Accept the models' licences.")
@option("--all", "every", is_flag=True,
              help=f"Every downloadable model (about {every_model_bytes() / 1e9:.1f} GB), not only the default set.")
@click.pass_context
def models_download(ctx: click.Context, names: tuple[str, ...], accept: bool, every: bool) -> None:
    """Download models: the NAMEs given, else what the default neural path runs (detector, ArcFace,
    inswapper, GFPGAN), or every downloadable one with --all."""
    from livecam.commands.models import download_models

    if names and every:
        raise click.UsageError("give model NAMEs or --all, not both")
    download_models(_settings(ctx), names, accept, every)


@models.command("verify", short_help="Re-hash present models and report each.")
@click.argument("names", nargs=-1)
@click.pass_context
def models_verify(ctx: click.Context, names: tuple[str, ...]) -> int:
    """Re-hash present models and report each as verified, unpinned, corrupt or missing."""
    from livecam.commands.models import verify_models

    return verify_models(_settings(ctx), names)


@models.command("where")
@click.pass_context
def models_where(ctx: click.Context) -> None:
    """Print the models folder."""
    from livecam.commands.models import where_models

    where_models(_settings(ctx))


@models.command("convert", short_help="Convert GFPGANv1.4.pth to ONNX (needs livecam[convert]), or --fp16 NAME.")
@click.argument("checkpoint", type=GivenPath(path_type=Path))
@option("--output", "-o", type=GivenPath(dir_okay=False, path_type=Path),
              help="ONNX file to write (default: gfpgan_1.4.onnx in the models folder).")
@option("--force", is_flag=True, help="Overwrite the ONNX file if it exists.")
@option("--fp16", is_flag=True,
        help="CHECKPOINT is an enhancer's name: make its fp16 copy (--enhancer-precision fp16) again from its "
             "fp32 file and check it, replacing the copy in the models folder.")
@click.pass_context
def models_convert(ctx: click.Context, checkpoint: Path, output: Path | None, force: bool, fp16: bool) -> None:
    """Convert GFPGANv1.4.pth to ONNX once (needs `pip install 'livecam[convert]'`); with --fp16,
    remake an enhancer's fp16 copy (`livecam models convert --fp16 gfpgan_1.4`)."""
    from livecam.commands.models import convert_model

    convert_model(_settings(ctx), checkpoint, output, force, fp16)


def _stranded_error(args: threading.ExceptHookArgs, previous: Callable[[threading.ExceptHookArgs], Any]) -> None:
    """A LivecamError raised on the one thread that no caller joins: the window's exit guard, while the
    main thread is held inside Qt's exit() (media.exit_guard). Nothing else will report it: its
    line and its exit code end the process, as on the main thread. Anything else goes to
    `previous`."""
    from livecam.media.exit_guard import THREAD_NAME

    exc = args.exc_value
    if not isinstance(exc, LivecamError) or args.thread is None or args.thread.name != THREAD_NAME:
        previous(args)  # a pipeline thread hands its errors to the caller: one escaping it is a bug
        return
    try:
        click.echo(one_line(f"livecam: error: {exc.message}"), err=True)
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed stream: the exit status still says it
        pass
    os._exit(exc.exit_code)


def main() -> None:
    # From the first line to exit SIGTERM is Ctrl-C (one line, exit 130, outputs cleaned up); once
    # exiting, a further signal would only break interpreter shutdown with a traceback.
    previous = threading.excepthook
    threading.excepthook = lambda args: _stranded_error(args, previous)
    try:
        with stop_signals():
            try:
                cli.main(prog_name="livecam")
            finally:
                output_done()  # whatever the outcome, it is decided: a signal now changes nothing
    finally:
        ignore_stop_signals()


if __name__ == "__main__":
    main()
