"""The catalog: every model livecam uses, where to get it, how to check it, under which licence.

Facts only (URLs, sizes, digests, tensor names): nothing here touches the disk except reading the
SHA256SUMS that ships beside the embedded default models.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

DEFAULT_DIR = Path(__file__).resolve().parent / "default"

FLOAT = "tensor(float)"
FLOAT16 = "tensor(float16)"
DOUBLE = "tensor(double)"


@dataclass(frozen=True)
class TensorSpec:
    """One model input or output. None in name/shape/dims means "any" (unchecked)."""

    name: str | None
    shape: tuple[int | None, ...] | None
    dtypes: tuple[str, ...] = (FLOAT,)

    def describe(self) -> str:
        shape = "?" if self.shape is None else "[" + ",".join("?" if d is None else str(d) for d in self.shape) + "]"
        dtype = "|".join(d.removeprefix("tensor(").removesuffix(")") for d in self.dtypes)
        return f"{self.name or '*'} {shape} {dtype}"


@dataclass(frozen=True)
class ArchiveSpec:
    """A zip that carries the model file as one of its members (buffalo_l.zip)."""

    file_name: str
    urls: tuple[str, ...]
    size: int
    sha256: str
    members: tuple[str, ...]  # the members livecam extracts (nothing else is ever written)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    file_name: str
    urls: tuple[str, ...]  # direct download of file_name: primary first, then mirrors
    size: int | None  # bytes; None: unknown (not checked)
    sha256: str | None  # None: unpinned (no published digest); size and signature still checked
    licence: str
    licence_url: str
    needs_acceptance: bool  # non-commercial licence: download needs --accept-license or a yes
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    description: str = ""
    archive: ArchiveSpec | None = None  # tried before `urls` when set
    bundled: bool = False  # shipped in the package (src/livecam/models/default), never downloaded
    pin_note: str = ""  # why the digest is missing, shown by `models verify`
    extra_outputs: bool = False  # the file may have more outputs than listed (training heads left in)
    # fetched by a plain `livecam models download`: what the default neural path (--swap-model
    # auto, the enhancer's default) runs; the optional models are fetched by name or with --all
    default_download: bool = False
    # a checkpoint `livecam models convert` turns into this file, for the messages of a missing one
    converted_from: str = ""

    @property
    def downloadable(self) -> bool:
        return not self.bundled and bool(self.urls or self.archive)


INSIGHTFACE_LICENCE = "InsightFace: non-commercial research only"
INSIGHTFACE_URL = "https://github.com/deepinsight/insightface#license"
APACHE = "Apache-2.0"
GPEN_LICENCE = "GPEN: (c) Alibaba, academic and non-commercial use only"
GPEN_URL = "https://github.com/yangxy/GPEN#license"
FACEFUSION_300 = "https://github.com/facefusion/facefusion-assets/releases/download/models-3.0.0"
FACEFUSION_300_HF = "https://huggingface.co/facefusion/models-3.0.0/resolve/main"

BUFFALO_L = ArchiveSpec(
    file_name="buffalo_l.zip",
    urls=("https://github.com/deepinsight/insightface/releases/download/v0.7/buffalo_l.zip",),
    # The foundation issue states 281,906,913 bytes; every independent source found (three
    # download tools pinning this same SHA-256) states 288,621,354, so that is used here.
    size=288_621_354,
    sha256="80ffe37d8a5940d59a7384c201a2a38d4741f2f3c51eef46ebb28218a7b0ca2f",
    members=("det_10g.onnx", "w600k_r50.onnx"),
)


def _embedded_hashes() -> dict[str, str]:
    """sha256sum-format lines written by scripts/convert_default_models.py."""
    sums = DEFAULT_DIR / "SHA256SUMS"
    if not sums.is_file():
        return {}
    out: dict[str, str] = {}
    for line in sums.read_text(encoding="utf-8").splitlines():
        digest, _, name = line.strip().partition("  ")
        if digest and name:
            out[name.lstrip("*")] = digest.lower()
    return out


# FaceFusion's HyperSwap (2025), published as ONNX only, at the facefusion-assets release
# models-3.3.0 and its Hugging Face mirror facefusion/models-3.3.0 (FaceFusion's own download
# providers). Licence: FaceFusion labels the files "ResearchRAIL"; the training code's licence
# file (facefusion-labs hyperswap/LICENSE.md) holds only the words "ResearchRAIL-MS license" and a
# copyright line, with no terms. A Responsible AI Licence for research restricts use to research
# and forbids listed harmful uses, but which text applies is not stated, so the download asks for
# acceptance and says so. Facts, and how they were established:
# - Signature, from FaceFusion Labs' exporter (hyperswap/src/exporting.py): inputs `source`
#   [1, 512] and `target` [1, 3, 256, 256], outputs `output` [1, 3, 256, 256] and `mask`
#   [1, 1, 256, 256]; static shapes; float32 at the edges even for the half-precision export (the
#   wrapper casts inside). The generator already blends its face into the target by that mask
#   (output = face * mask + target * (1 - mask), hyperswap/src/models/generator.py).
# - Source: the raw ArcFace (w600k_r50) embedding, L2-normalised, with no emap: FaceFusion's
#   face_swapper passes `embedding_norm` for type "hyperswap" (its inswapper branch multiplies by
#   the initializer instead), and the labs code normalises the embedder's output the same way.
# - Target: the ArcFace 112 template shifted +8 px in x, scaled to 256 (FaceFusion's
#   "arcface_128"), RGB, (x / 255 - 0.5) / 0.5; the output is in [-1, 1] the same way.
# - Digests and sizes are not published by FaceFusion (its .hash files are CRC32). SHA-256 of 1a
#   is stated in issue 19 and by two download tools; 1b and 1c by two independent download tools
#   each (one of them beside the file's size). Size 402,742,682 bytes: for 1a and 1c by several
#   independent model lists, for 1b by two (the three files share one architecture and precision).
_HYPERSWAP_SHA256 = {
    "1a": "c0e98a8a03a238f461ed3d2570e426b49f46745ee400854a60dceeb70c246add",
    "1b": "5124031789c42f71b9558fb71954ef7aedb6da7ed9fac79293e23c61a792a73e",
    "1c": "5528c2d76fe9986c99d829278987ef9f3a630cb606db7628d02b57b330f406a5",
}
HYPERSWAP_LICENCE = "ResearchRAIL (FaceFusion HyperSwap; terms not published with the files)"
HYPERSWAP_LICENCE_URL = "https://github.com/facefusion/facefusion-labs/blob/master/hyperswap/LICENSE.md"


def _hyperswap_specs() -> list[ModelSpec]:
    edge = (FLOAT, FLOAT16)  # float32 per the exporter; a float16-edged export is cast to by the swapper
    return [
        ModelSpec(
            name=f"hyperswap_{variant}_256", file_name=f"hyperswap_{variant}_256.onnx",
            urls=(f"https://github.com/facefusion/facefusion-assets/releases/download/models-3.3.0/hyperswap_{variant}_256.onnx",
                  f"https://huggingface.co/facefusion/models-3.3.0/resolve/main/hyperswap_{variant}_256.onnx"),
            size=402_742_682, sha256=digest,
            licence=HYPERSWAP_LICENCE, licence_url=HYPERSWAP_LICENCE_URL, needs_acceptance=True,
            inputs=(TensorSpec("source", (1, 512), edge), TensorSpec("target", (1, 3, 256, 256), edge)),
            outputs=(TensorSpec("output", (1, 3, 256, 256), edge), TensorSpec("mask", (1, 1, 256, 256), edge)),
            description=f"FaceFusion HyperSwap {variant} 256 swapper",
        )
        for variant, digest in _HYPERSWAP_SHA256.items()
    ]


def _build() -> Mapping[str, ModelSpec]:
    embedded = _embedded_hashes()
    mediapipe: dict[str, Any] = dict(
        licence=APACHE, licence_url="https://github.com/google-ai-edge/mediapipe/blob/master/LICENSE",
        needs_acceptance=False, urls=(), size=None, bundled=True)
    rivagan: dict[str, Any] = dict(
        licence="MIT", licence_url="https://github.com/ShieldMnt/invisible-watermark/blob/main/LICENSE",
        needs_acceptance=False, urls=(), size=None, bundled=True)
    specs = [
        ModelSpec(
            name="det_10g", file_name="det_10g.onnx",
            urls=("https://huggingface.co/deepghs/insightface/resolve/main/buffalo_l/det_10g.onnx",),  # if the zip fails
            size=16_923_827,
            sha256="5838f7fe053675b1c7a08b633df49e7af5495cee0493c7dcf6697200b85b5b91",
            licence=INSIGHTFACE_LICENCE, licence_url=INSIGHTFACE_URL, needs_acceptance=True,
            inputs=(TensorSpec("input.1", (None, 3, None, None)),),
            outputs=tuple(TensorSpec(None, None) for _ in range(9)),  # scores, boxes, kps x 3 strides
            description="SCRFD-10GF face detector (buffalo_l)", archive=BUFFALO_L,
            default_download=True,
        ),
        ModelSpec(
            name="w600k_r50", file_name="w600k_r50.onnx",
            urls=("https://huggingface.co/deepghs/insightface/resolve/main/buffalo_l/w600k_r50.onnx",),  # if the zip fails
            size=174_383_860,
            sha256="4c06341c33c2ca1f86781dab0e829f88ad5b64be9fba56e56bc9ebdefc619e43",
            licence=INSIGHTFACE_LICENCE, licence_url=INSIGHTFACE_URL, needs_acceptance=True,
            inputs=(TensorSpec("input.1", (None, 3, 112, 112)),),
            outputs=(TensorSpec(None, (None, 512)),),
            description="ArcFace R50 face embedder (buffalo_l)", archive=BUFFALO_L,
            default_download=True,
        ),
        ModelSpec(
            name="inswapper_128", file_name="inswapper_128.onnx",
            urls=("https://huggingface.co/hacksider/deep-live-cam/resolve/main/inswapper_128.onnx",
                  "https://huggingface.co/ezioruan/inswapper_128.onnx/resolve/main/inswapper_128.onnx"),
            size=554_253_681, sha256="e4a3f08c753cb72d04e10aa0f7dbe3deebbf39567d4ead6dce08e98aa49e16af",
            licence=INSIGHTFACE_LICENCE, licence_url=INSIGHTFACE_URL, needs_acceptance=True,
            inputs=(TensorSpec("target", (1, 3, 128, 128)), TensorSpec("source", (1, 512))),
            outputs=(TensorSpec(None, (1, 3, 128, 128)),),
            description="InsightFace inswapper 128 (fp32)",
            default_download=True,
        ),
        ModelSpec(
            name="inswapper_128_fp16", file_name="inswapper_128_fp16.onnx",
            urls=("https://huggingface.co/hacksider/deep-live-cam/resolve/main/inswapper_128_fp16.onnx",
                  "https://github.com/Alucard24/rope-assets/releases/download/v1.0.8/inswapper_128.fp16.onnx"),
            size=277_680_638, sha256="6d51a9278a1f650cffefc18ba53f38bf2769bf4bbff89267822cf72945f8a38b",
            licence=INSIGHTFACE_LICENCE, licence_url=INSIGHTFACE_URL, needs_acceptance=True,
            inputs=(TensorSpec("target", (1, 3, 128, 128), (FLOAT, FLOAT16)),
                    TensorSpec("source", (1, 512), (FLOAT, FLOAT16))),
            outputs=(TensorSpec(None, (1, 3, 128, 128), (FLOAT, FLOAT16)),),
            description="InsightFace inswapper 128 (fp16, for GPUs)",
        ),
        ModelSpec(
            name="gfpgan_1.4", file_name="gfpgan_1.4.onnx",
            urls=("https://github.com/facefusion/facefusion-assets/releases/download/models-3.0.0/gfpgan_1.4.onnx",
                  "https://huggingface.co/facefusion/models-3.0.0/resolve/main/gfpgan_1.4.onnx"),
            size=340_299_087, sha256=None,
            pin_note="no SHA-256 is published for this file (only a CRC32 beside it); size and tensor "
                     "signature checked",
            licence=APACHE, licence_url="https://github.com/TencentARC/GFPGAN/blob/master/LICENSE",
            needs_acceptance=False,
            # `input` by name, as the enhancer feeds it: `models verify` then calls a file named
            # otherwise corrupt, so `models download` replaces it (catalog.repair says so)
            inputs=(TensorSpec("input", (1, 3, 512, 512)),),
            outputs=(TensorSpec(None, (1, 3, 512, 512)),),
            description="GFPGAN v1.4 face restorer (ONNX)",
            default_download=True, converted_from="GFPGANv1.4.pth",
        ),
        # The enhancers below as FaceFusion publishes them (models-3.0.0): input `input` float32
        # NCHW RGB in [-1, 1] at the crop size, the restored crop first among the outputs.
        ModelSpec(
            name="gpen_bfr_256", file_name="gpen_bfr_256.onnx",
            urls=(f"{FACEFUSION_300}/gpen_bfr_256.onnx", f"{FACEFUSION_300_HF}/gpen_bfr_256.onnx"),
            size=75_792_988, sha256="bad8bf0426873828df2dbf4e3b3d9ababba9da7965b8b72426569486f7ae5c25",
            licence=GPEN_LICENCE, licence_url=GPEN_URL, needs_acceptance=True,
            inputs=(TensorSpec("input", (1, 3, 256, 256)),),
            outputs=(TensorSpec(None, (1, 3, 256, 256)),),
            description="GPEN-BFR 256 face restorer, the fastest enhancer (ONNX)",
        ),
        ModelSpec(
            name="gpen_bfr_512", file_name="gpen_bfr_512.onnx",
            urls=(f"{FACEFUSION_300}/gpen_bfr_512.onnx", f"{FACEFUSION_300_HF}/gpen_bfr_512.onnx"),
            size=284_340_240, sha256="d5f066b9068a8b74217f9712e28e875a6144629b108a6f7355acbdb3a2832c54",
            licence=GPEN_LICENCE, licence_url=GPEN_URL, needs_acceptance=True,
            inputs=(TensorSpec("input", (1, 3, 512, 512)),),
            outputs=(TensorSpec(None, (1, 3, 512, 512)),),
            description="GPEN-BFR 512 face restorer (ONNX)",
        ),
        ModelSpec(
            name="codeformer", file_name="codeformer.onnx",
            urls=(f"{FACEFUSION_300}/codeformer.onnx", f"{FACEFUSION_300_HF}/codeformer.onnx"),
            size=376_951_650, sha256="21710e7ab61c82683576c428e9c1b6fe1ed419586b7b39e394c3449c294b550f",
            licence="NTU S-Lab License 1.0 (non-commercial)",
            licence_url="https://github.com/sczhou/CodeFormer/blob/master/LICENSE", needs_acceptance=True,
            # `weight`: the fidelity w, float64; FaceFusion feeds it as shape [1], another runner of
            # this file as [1, 1], so its shape is left unchecked (livecam feeds the declared one).
            inputs=(TensorSpec("input", (1, 3, 512, 512)), TensorSpec("weight", None, (DOUBLE,))),
            outputs=(TensorSpec(None, (1, 3, 512, 512)),), extra_outputs=True,
            description="CodeFormer face restorer with a fidelity weight (ONNX)",
        ),
        ModelSpec(
            name="xseg_1", file_name="xseg_1.onnx",
            urls=("https://github.com/facefusion/facefusion-assets/releases/download/models-3.1.0/xseg_1.onnx",
                  "https://huggingface.co/facefusion/models-3.1.0/resolve/main/xseg_1.onnx"),
            size=70_324_286, sha256="c4d1498b8a03b5fe2a3a5d2ef2a0402ab03bd51edaf5b2d8d5fb764702a97dd3",
            licence="GPL-3.0 (DeepFaceLab XSeg weights)",
            licence_url="https://github.com/iperov/DeepFaceLab/blob/master/LICENSE", needs_acceptance=True,
            # The file's graph has exactly one input `input` and one output `output`, float32:
            # NHWC [1,256,256,3] BGR in [0, 1] -> [1,256,256,1], ending in a Sigmoid (checked
            # against this SHA-256 by 006shido/Hackathena
            # ml/experiments/reference_backend/torch_occlusion.py; FaceFusion feeds `input`).
            # Whether the batch dimension is fixed or symbolic is not published: any is accepted.
            inputs=(TensorSpec("input", (None, 256, 256, 3)),),
            outputs=(TensorSpec("output", (None, 256, 256, 1)),),
            description="XSeg face occluder (--face-mask occlusion)",
        ),
        ModelSpec(
            name="bisenet_resnet_34", file_name="bisenet_resnet_34.onnx",
            urls=("https://github.com/facefusion/facefusion-assets/releases/download/models-3.0.0/bisenet_resnet_34.onnx",
                  "https://huggingface.co/facefusion/models-3.0.0/resolve/main/bisenet_resnet_34.onnx"),
            size=93_632_546, sha256="4a0b8c958a3c938913bd06a8365dbb3c8761afba6ecbf0d14b3b1f77eb230c96",
            licence="MIT", licence_url="https://github.com/yakhyo/face-parsing/blob/main/LICENSE",
            needs_acceptance=False,
            # yakhyo/face-parsing's export (onnx_export.py: input_names ['input'], output_names
            # ['output'], dynamic batch) of a BiSeNet whose forward returns three heads: input
            # `input` float32 [batch,3,512,512] (RGB, ImageNet mean/std); outputs `output` (the
            # CelebAMask-HQ class logits) and two auxiliary heads of the same shape, named `0` and
            # `1` by Nodensss/faceswaps docs/MODEL_CARD.md §8.2, which pins this SHA-256 and runs
            # only `output`. The auxiliary names are not checked (one source); the count is.
            inputs=(TensorSpec("input", (None, 3, 512, 512)),),
            outputs=(TensorSpec("output", (None, 19, 512, 512)), TensorSpec(None, (None, 19, 512, 512)),
                     TensorSpec(None, (None, 19, 512, 512))),
            description="BiSeNet face parser, 19 classes (--face-mask region)",
        ),
        *_hyperswap_specs(),
        ModelSpec(
            name="blazeface_short_range", file_name="blazeface_short_range.onnx",
            sha256=embedded.get("blazeface_short_range.onnx"),
            inputs=(TensorSpec(None, (1, 3, 128, 128)),),
            outputs=(TensorSpec(None, (1, 896, 16)), TensorSpec(None, (1, 896, 1))),
            description="MediaPipe BlazeFace short range (embedded default)", **mediapipe,
        ),
        ModelSpec(
            name="blazeface_full_range", file_name="blazeface_full_range.onnx",
            sha256=embedded.get("blazeface_full_range.onnx"),
            inputs=(TensorSpec(None, (1, 3, 192, 192)),),
            outputs=(TensorSpec(None, (1, 2304, 16)), TensorSpec(None, (1, 2304, 1))),
            description="MediaPipe BlazeFace full range (embedded default)", **mediapipe,
        ),
        ModelSpec(
            name="face_landmark", file_name="face_landmark.onnx",
            sha256=embedded.get("face_landmark.onnx"),
            inputs=(TensorSpec(None, (1, 3, 192, 192)),),
            outputs=(TensorSpec(None, (1, 1404, 1, 1)), TensorSpec(None, (1, 1, 1, 1))),
            description="MediaPipe FaceMesh 468 landmarks (embedded default)", **mediapipe,
        ),
        ModelSpec(
            name="rivagan_encoder", file_name="rivagan_encoder.onnx",
            sha256=embedded.get("rivagan_encoder.onnx"),
            inputs=(TensorSpec("frame", (None, 3, 1, None, None)), TensorSpec("data", (None, 32))),
            outputs=(TensorSpec("output", (None, 3, 1, None, None)),),
            description="RivaGAN invisible watermark encoder, 32 bits (embedded)", **rivagan,
        ),
        ModelSpec(
            name="rivagan_decoder", file_name="rivagan_decoder.onnx",
            sha256=embedded.get("rivagan_decoder.onnx"),
            inputs=(TensorSpec("frame", (None, 3, 1, None, None)),),
            outputs=(TensorSpec("output", (None, 32)),),
            description="RivaGAN invisible watermark decoder, 32 bits (embedded)", **rivagan,
        ),
    ]
    return MappingProxyType({s.name: s for s in specs})


CATALOG: Mapping[str, ModelSpec] = _build()


def every_model_bytes() -> int:
    """What `livecam models download --all` leaves in the models folder (its --help says it)."""
    return sum(spec.size or 0 for spec in CATALOG.values() if spec.downloadable)


def livecam_command(words: str, models_dir: Path | None = None) -> str:
    """The livecam command line a message names: `livecam WORDS`, with `--models-dir DIR` (quoted
    for the shell) when the run was given one (RuntimeSettings.typed_models_dir): without it the
    command, run as given, fetched into the default folder and the run failed again. It goes
    before WORDS, as every livecam option does (after the subcommand it is "No such option")."""
    folder = "" if models_dir is None else f" --models-dir {shlex.quote(str(models_dir))}"
    return f"livecam{folder} {words}"


def download_command(*names: str, catalog: Mapping[str, ModelSpec] | None = None, every: bool = False,
                     models_dir: Path | None = None) -> str:
    """The command that fetches these models (of `catalog`, by default CATALOG) into `models_dir`
    (livecam_command), `--accept-license` included where a licence needs it: without the flag and a
    terminal to ask on, the download is refused. `every`: they are all the missing ones, fetched
    by `--all` rather than named."""
    known = CATALOG if catalog is None else catalog
    licensed = any(known[name].needs_acceptance for name in names if name in known)
    asked = "--all" if every else " ".join(map(shlex.quote, names))
    return livecam_command(f"models download {asked}" + (" --accept-license" if licensed else ""), models_dir)


def fp16_command(name: str, models_dir: Path | None = None) -> str:
    """The command that makes model `name`'s fp16 copy (models/fp16.py) in `models_dir` again from
    its fp32 file, over the copy that is there."""
    return livecam_command(f"models convert --fp16 {shlex.quote(name)}", models_dir)


def repair(name: str, catalog: Mapping[str, ModelSpec] | None = None, folder: bool = False,
           precision: str = "fp32", models_dir: Path | None = None) -> str:
    """The one repair line for a bad model file `name` (of `catalog`, by default CATALOG) in
    `models_dir` (livecam_command): its download replaces a file that fails its checks by itself
    (commands/models._replace_corrupt), so there is nothing to delete first; a folder in the
    file's place is the user's to move away (the download refuses to touch it); an embedded
    model comes back only with a reinstall. `precision` "fp16": the file is the model's fp16
    copy, converted here from the fp32 file (which a download leaves as it is): converted again."""
    if precision == "fp16":
        return f"run `{fp16_command(name, models_dir)}`, which replaces it"
    known = CATALOG if catalog is None else catalog
    spec = known.get(name)
    if spec is not None and spec.bundled:
        return "reinstall livecam to restore the embedded models"
    command = download_command(name, catalog=known, models_dir=models_dir)
    return f"move it away and run `{command}`" if folder else f"run `{command}`, which replaces it"

# What the default run (embedded models, mesh swapper) opens: short range to try `auto`'s
# accelerator on (pipeline.engine.PROBE_MODEL), full range to find faces in every command,
# FaceMesh for the landmarks.
DEFAULT_RUN_MODELS: tuple[str, ...] = ("blazeface_short_range", "blazeface_full_range", "face_landmark")

# What `--swap-model auto`'s neural path runs (pipeline.engine.pick_swap_model): the inswapper
# (its fp16 copy on fp16-friendly providers), the ArcFace embedder it cannot swap without, and
# the SCRFD detector (BlazeFace finds the faces while det_10g is absent). The mesh fallback's
# warning names each file that is not there.
NEURAL_SWAP_MODELS: tuple[str, ...] = ("inswapper_128", "w600k_r50", "det_10g")
