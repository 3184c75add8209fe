"""Frozen settings built once from the command-line options."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

HYPERSWAP_MODELS: tuple[str, ...] = ("hyperswap_1a_256", "hyperswap_1b_256", "hyperswap_1c_256")
SWAP_MODELS: tuple[str, ...] = ("auto", "inswapper_128", "inswapper_128_fp16", "mesh") + HYPERSWAP_MODELS
DETECTORS: tuple[str, ...] = ("auto", "scrfd", "blazeface")
PIXEL_BOOSTS: tuple[str, ...] = ("128", "256", "384", "512")  # --pixel-boost: crop sizes, multiples of the model's
# --face-selector-order (faces/selection.py): which face is "the one", and the order of --many-faces.
FACE_SELECTOR_ORDERS: tuple[str, ...] = ("left-right", "right-left", "top-bottom", "bottom-top", "small-large",
                                         "large-small", "best-worst")
# --enhancer-model: catalog names; how each one runs is processors/face_enhancer.ENHANCERS.
ENHANCER_MODELS: tuple[str, ...] = ("gfpgan_1.4", "gpen_bfr_256", "gpen_bfr_512", "codeformer")
# --enhancer-precision: fp16 is converted once from the fp32 file (models/fp16.py); auto is fp16
# on runtime/providers.FP16_FRIENDLY providers, fp32 elsewhere.
ENHANCER_PRECISIONS: tuple[str, ...] = ("auto", "fp32", "fp16")
# The inswapper's paste masks (processors/crop_masks.py): several at once paste their intersection.
FACE_MASK_TYPES: tuple[str, ...] = ("box", "occlusion", "region", "area")
FACE_MASK_AREAS: tuple[str, ...] = ("upper-face", "lower-face", "mouth")
FACE_MASK_REGIONS: tuple[str, ...] = ("skin", "left-eyebrow", "right-eyebrow", "left-eye", "right-eye", "glasses",
                                      "nose", "mouth", "upper-lip", "lower-lip")
DEFAULT_FACE_MASK_REGIONS: tuple[str, ...] = tuple(r for r in FACE_MASK_REGIONS if r != "glasses")  # glasses stay
DEFAULT_FACE_MASK_BLUR = 0.3  # the box's feather at this value is insightface's paste mask, exactly


def _default_processors() -> tuple[str, ...]:
    from livecam.processors.registry import default_names  # finds the processor modules: not at import

    return default_names()


@dataclass(frozen=True)
class RuntimeSettings:
    providers: tuple[str, ...] = ("auto",)
    execution_threads: int = 1
    models_dir: Path | None = None  # None: checkout models/ or the user data folder
    models_dir_from: str = "--models-dir"  # or "LIVECAM_MODELS_DIR": where models_dir was given, for messages
    offline: bool = False
    accept_license: bool = False
    unverified_models: bool = False  # accept models whose hash differs (replicas for benchmarks)
    verbose: int = 0
    quiet: bool = False
    # Lanes (runtime/lanes.py): None = on the providers in providers.LANE_PROVIDERS (CUDA,
    # TensorRT), the shared session pool elsewhere; True forces them (tests and the GPU script's
    # CPU smoke run), False keeps the shared pool.
    lanes: bool | None = None
    # CUDA graphs on a lane's fixed-shape sessions (Engine.lanes() then warms every lane in turn
    # on the source photo, as a capture fails while another lane copies). Off until
    # scripts/gpu_bench.py has measured them on a GPU.
    cuda_graphs: bool = False
    # CUDA's NHWC kernels (prefer_nhwc) for the fp16 models' sessions (inswapper_128_fp16, the
    # enhancers' fp16 copies): tensor cores take fp16 convolutions in NHWC, at the price of layout
    # transposes around them. Off until scripts/gpu_bench.py's latency matrix shows it faster.
    nhwc_fp16: bool = False
    explicit_threads: bool = False  # --execution-threads was given (lanes: it sets their number)

    @property
    def typed_models_dir(self) -> Path | None:
        """models_dir when it was given as --models-dir: what a command a message names repeats
        (catalog.livecam_command). A LIVECAM_MODELS_DIR is in the environment the command is run
        in; none, the default folder, is what the command uses without it."""
        return self.models_dir if self.models_dir_from == "--models-dir" else None


@dataclass(frozen=True)
class AnalysisSettings:
    detector: str = "auto"  # scrfd when det_10g is present, else the embedded BlazeFace
    det_size: int = 640
    det_threshold: float = 0.5
    many_faces: bool = False
    face_selector_order: str | None = None  # FACE_SELECTOR_ORDERS; None: the largest, or all as detected
    face_min_size: int = 0  # px: faces whose box's shorter side is smaller are left alone
    reference: tuple[Path, ...] = ()
    reference_distance: float = 1.0  # max L2 distance between normed embeddings
    face_map: tuple[tuple[Path, Path], ...] = ()  # (source photo, reference photo)
    smoothing: float = 0.5  # 0 off .. 1 strongest; forced off for single images
    detect_every: int = 1

    @property
    def one_face(self) -> bool:
        """Whether one face per frame is swapped ("the one", chosen by tracking in a video): the
        analyser's rule, and the segment overlap's (pipeline/segments.CHOICE_WARM_UP_S)."""
        return not self.many_faces and not self.face_map

    @property
    def wanted_faces(self) -> str:
        """What the analysis looks for, for a "none found" warning: with --reference or --map
        the frame may well hold faces, just none of those people."""
        size = f" of at least {self.face_min_size} px (--face-min-size)" if self.face_min_size else ""
        if self.face_map:
            return f"face{size} of a --map REFERENCE person"
        if self.reference:
            return f"face{size} of the --reference person (within --reference-distance {self.reference_distance:g})"
        return f"face{size}"


# The least --blend and --enhancer-blend: below it a swap moved no pixel of a real photo by one
# grey level (0.004 left biden.jpg unchanged) while the summary said "1 face swapped" and the
# marks told of an edit; at 0.01 a 50-level difference between the faces moves a pixel by one.
MIN_BLEND = 0.01


@dataclass(frozen=True)
class SwapSettings:
    model: str = "auto"
    mouth_mask: int | None = None  # None: off; 0..100 grows the kept mouth towards the chin
    color_match: bool = True
    blend: float = 1.0
    pixel_boost: int | None = None  # crop size N: (N/model size)^2 sub-pixel tiles per face; None: the model's size
    face_mask: tuple[str, ...] = ("box",)  # FACE_MASK_TYPES; the paste mask is their intersection
    face_mask_blur: float = DEFAULT_FACE_MASK_BLUR  # 0 hard edges .. 1 wide feather
    face_mask_padding: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)  # top right bottom left, % of crop
    face_mask_areas: tuple[str, ...] = FACE_MASK_AREAS
    face_mask_regions: tuple[str, ...] = DEFAULT_FACE_MASK_REGIONS


@dataclass(frozen=True)
class EnhanceSettings:
    model: str = "gfpgan_1.4"  # ENHANCER_MODELS
    blend: float = 0.8
    weight: float | None = None  # CodeFormer's fidelity input, 0 (restore more) .. 1 (keep the input); None: 1
    precision: str = "auto"  # ENHANCER_PRECISIONS


@dataclass(frozen=True)
class ProcessingSettings:
    sources: tuple[Path, ...]
    # Names from livecam.processors.registry, in order; the default is the swapper.
    frame_processors: tuple[str, ...] = field(default_factory=lambda: _default_processors())
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    analysis: AnalysisSettings = field(default_factory=AnalysisSettings)
    swap: SwapSettings = field(default_factory=SwapSettings)
    enhance: EnhanceSettings = field(default_factory=EnhanceSettings)

    def named_photos(self) -> tuple[tuple[str, Path], ...]:
        """The face photos a run reads, each with the option that names it: --source,
        --reference and both sides of --map."""
        mapped = tuple(("--map", Path(p)) for pair in self.analysis.face_map for p in pair)
        return (*(("--source", Path(p)) for p in self.sources),
                *(("--reference", Path(p)) for p in self.analysis.reference), *mapped)


@dataclass(frozen=True)
class C2paSettings:
    """C2PA content credentials (livecam.marks.credentials)."""

    enabled: bool = True
    cert: Path | None = None  # PEM chain; None: LIVECAM_C2PA_CERT or the local self-signed identity
    key: Path | None = None


@dataclass(frozen=True)
class FileJob:
    """What `image` and `video` share: one input file processed into one output file."""

    input: Path
    output: Path
    processing: ProcessingSettings
    force: bool = False  # replace an OUTPUT that exists when the run starts
    label: bool = True  # visible "AI-generated" label
    watermark: bool = True  # invisible watermark (livecam.marks.watermark)
    c2pa: C2paSettings = field(default_factory=C2paSettings)


@dataclass(frozen=True)
class ImageJob(FileJob):
    # Options given that one frame has no use for (--smoothing, --execution-threads): said once
    # the models load, so a bad input or photo is still the one line
    unused: tuple[str, ...] = ()


@dataclass(frozen=True)
class VideoJob(FileJob):
    encoder: str = "libx264"
    quality: int = 18
    fps: float | None = None  # None: keep the input's rate
    audio: bool = True
    keep_partial: bool = False
    frame_range: tuple[int, int | None] | None = None
    max_memory_gb: float | None = None
    # a folder input (pipeline/batch.py): which files, and whether an output already there is kept
    pattern: str | None = None  # None: every video extension
    skip_existing: bool = False


@dataclass(frozen=True)
class LiveJob:
    processing: ProcessingSettings
    camera: str = "0"  # index, path or URL
    resolution: tuple[int, int] = (1280, 720)
    fps: float = 30.0
    realtime: bool | None = None  # None: realtime for files, n/a for cameras
    mirror: bool = False
    output: str = "auto"  # auto | window | virtual-camera | none | FILE
    queue_depth: int = 1
    duration: float | None = None
    max_frames: int | None = None
    stats: bool = False
    stats_json: Path | None = None
    max_latency_ms: float = 40.0
    watermark: bool | None = None  # None: on for a recording file, off for the window / virtual camera
    degrade: bool = True
    label: bool | None = None  # None: on for a recording file, off for window / virtual camera
    force: bool = False
    c2pa: C2paSettings = field(default_factory=C2paSettings)  # on recordings to MP4/MOV

    def labelled(self, recording: bool) -> bool:
        """Whether output frames carry the visible label (`recording`: the sink is a file)."""
        return recording if self.label is None else self.label

    def watermarked(self, recording: bool) -> bool:
        """Whether output frames carry the invisible watermark (`recording`: the sink is a file)."""
        return recording if self.watermark is None else self.watermark


@dataclass(frozen=True)
class BenchJob:
    processing: ProcessingSettings
    mode: str = "live"  # live | video
    input: Path | None = None
    frames: int = 300
    resolution: tuple[int, int] = (1280, 720)
    json: bool = False
    compare_providers: tuple[str, ...] = ()  # run once per provider, alternating, side by side
    rounds: int = 1  # medians over this many alternating rounds
    baseline: Path | None = None  # an earlier `bench --json` report to give ratios against
    watermark: bool = False  # mark frames at the live / video cadence inside the measured run


@dataclass(frozen=True)
class DemoJob:
    output_dir: Path
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    force: bool = False
    c2pa: C2paSettings = field(default_factory=C2paSettings)  # on demo.mp4 and before_after.png


# how cluster workers get a video: auto (its path where a worker reads the same file there, else
# chunks), path (always; a worker that cannot read it fails the file), chunks (always shipped)
SHIP_INPUT = ("auto", "path", "chunks")


@dataclass(frozen=True)
class ClusterSettings:
    """Where and how `livecam video --cluster` runs (livecam.cluster)."""

    address: str  # "local" (Ray started here), "auto" (RAY_ADDRESS or a running local cluster), ray://HOST:PORT
    workers: int | None = None  # None: one per GPU, or per execution_threads cores without GPUs
    segment_seconds: float = 60.0
    overlap_seconds: float | None = None  # None: from the tracker's smoothing (pipeline.segments)
    ship_input: str = "auto"  # one of SHIP_INPUT


# The image formats `livecam image` writes (by OUTPUT's extension, media/images.WRITE_FORMATS) and
# reads; BMP and GIF are read only (they cannot carry the synthetic-media tags). Here, not in
# media/images.py, so --help names them without loading OpenCV.
IMAGE_WRITE_FORMATS = ("JPEG", "PNG", "WebP", "TIFF")
IMAGE_READ_FORMATS = (*IMAGE_WRITE_FORMATS, "BMP", "GIF")

# The capture rates `run --fps` takes, and those a camera's own report is believed in (a driver
# that said inf FPS ended the run in an internal error).
CAMERA_FPS = (1.0, 240.0)
