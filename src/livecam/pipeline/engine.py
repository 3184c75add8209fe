"""Engine: everything a pipeline needs to turn frames into swapped frames, built once.

Engine.create() resolves the providers, opens the models through the model store, analyses the
source photo(s) and builds the frame processors from the settings; afterwards the live and file
pipelines only call analyse(packet) and process(packet) (plus the governor's knobs). Building
fails early with a LivecamError: bad sources exit 2, missing models 3, providers 4.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, TypeVar

import numpy as np

from livecam.console import agree
from livecam.errors import InputError, NoFaceError, ProviderStartError
from livecam.faces.analyser import FaceAnalyser
from livecam.faces.face import Face
from livecam.faces.source import SourceCache, SourceIdentity, analyse_source, check_photo_options
from livecam.frame import FramePacket
from livecam.paths import why_missing
from livecam.models.catalog import CATALOG, NEURAL_SWAP_MODELS, download_command
from livecam.processors import registry
from livecam.processors.base import FastModelSwitch, FrameProcessor, MaskModelSwitch, Warmable
from livecam.runtime.lanes import LaneThread, lane_count, uses_lanes
from livecam.runtime.providers import FP16_FRIENDLY, PROFILE_FRAME_H, PROFILE_FRAME_W, ProviderChoice, user_cache_dir
from livecam.runtime.sessions import cpu_threads_per_session, usable_choice
from livecam.settings import AnalysisSettings, ProcessingSettings

if TYPE_CHECKING:
    from livecam.models.store import ModelStore

log = logging.getLogger("livecam")
_T = TypeVar("_T")

PHOTO_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff"})
# The smallest embedded model: `auto` tries its accelerator on it before choosing it.
PROBE_MODEL = "blazeface_short_range"
# auto takes inswapper_128_fp16 on FP16_FRIENDLY providers only: elsewhere one that is here is the
# other way to the neural swap (said by the mesh-fallback warning and doctor)
FP16_HINT = "--swap-model inswapper_128_fp16 runs the fp16 inswapper that is here"


def auto_inswappers(primary: str) -> tuple[str, ...]:
    """The inswapper files `auto` takes on the `primary` provider, best first: the fp16 file only
    where fp16 kernels are trustworthy (FP16_FRIENDLY), the fp32 one everywhere. The one rule that
    pick_swap_model and doctor's Neural swap line both ask."""
    return ("inswapper_128_fp16", "inswapper_128") if primary in FP16_FRIENDLY else ("inswapper_128",)


def neural_absent(store: Any, primary: str) -> tuple[str, ...]:
    """The files of the neural path (catalog.NEURAL_SWAP_MODELS) not in the models folder, an
    inswapper file auto takes on `primary` standing for inswapper_128: what the mesh fallback's
    warning and doctor's line name, with the one command that fetches them."""
    swapper_here = any(store.is_present(name) for name in auto_inswappers(primary))
    return tuple(name for name in NEURAL_SWAP_MODELS if not store.is_present(name)
                 and not (name == "inswapper_128" and swapper_here))


def pick_swap_model(choice: str, store: ModelStore, providers: ProviderChoice) -> tuple[str, tuple[str, ...]]:
    """The swap model for --swap-model CHOICE, and when `auto` fell back to the mesh swapper the
    models of its neural path (catalog.NEURAL_SWAP_MODELS) not in the models folder (empty
    otherwise). `auto`: inswapper fp16 on providers with trustworthy fp16 kernels, fp32
    elsewhere, and the embedded mesh swapper when neither the inswapper nor the ArcFace model it
    needs can be had now."""
    if choice != "auto":
        return choice, ()
    for name in auto_inswappers(providers.primary):
        if store.can_provide(name) and store.can_provide("w600k_r50"):
            return name, ()
    # every file the neural path needs, det_10g too: fetching the two that forced the fallback
    # gave a neural swap on the embedded BlazeFace
    return "mesh", neural_absent(store, providers.primary)


def warn_provider_fallback(problem: ProviderStartError | None) -> None:
    if problem is not None:
        log.warning("warning: %s cannot start here (%s), so livecam runs on the CPU; %s",
                    problem.provider, problem.cause, problem.fix)


def warn_mesh_fallback(missing: Sequence[str], store: Any = None) -> None:
    """One line: the mesh swapper is used, why (the files not in the models folder, and each
    damaged one with its repair), the command that fetches the absent ones, and the option
    that silences it (a ~330-character line named every model twice)."""
    if not missing:
        return
    # A damaged file is said as such, with its repair (models/store.ModelStore.damage), not as "not here".
    damage = {n: store.damage(n) if store is not None else "" for n in missing}
    absent = [n for n in missing if not damage[n]]
    folder = store.file_path(missing[0]).parent if store is not None else "the models folder"
    files = registry.listed([CATALOG[n].file_name for n in absent]) if absent else ""
    fetch = store.download_command(*absent) if store is not None else download_command(*absent)
    why = ([f"{files} not in {folder}; `{fetch}` fetches {agree(len(absent), 'it', 'them')} "
            "for the neural swap"] if absent else [])
    fp16 = (f"; {FP16_HINT}" if "inswapper_128" in missing and "w600k_r50" not in missing and store is not None
            and store.is_present("inswapper_128_fp16") else "")
    log.warning("warning: using the embedded mesh swapper: %s%s; --swap-model mesh silences this",
                "; ".join(why + [d for d in damage.values() if d]), fp16)


def warn_detector_fallback(store: Any) -> None:
    """The neural swap runs, but on the embedded BlazeFace: det_10g (SCRFD) is absent or damaged;
    it was silent, or blamed for a mesh swap that did not happen."""
    why = store.damage("det_10g") or (f"{CATALOG['det_10g'].file_name} is not in {store.file_path('det_10g').parent}; "
                                      f"`{store.download_command('det_10g')}` fetches it")
    log.warning("warning: the neural swap finds faces with the embedded BlazeFace detector: %s; "
                "--detector blazeface silences this", why)


def choose_swap_model(choice: str, store: ModelStore, providers: ProviderChoice) -> str:
    """pick_swap_model, saying at once when `auto` falls back to the mesh swapper."""
    model, missing = pick_swap_model(choice, store, providers)
    warn_mesh_fallback(missing, store)
    return model


def source_photos(folder: Path) -> list[Path]:
    """The photos in a --source folder, sorted by name."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in PHOTO_SUFFIXES
                  and not p.name.startswith("."))


@dataclass(frozen=True)
class LaneRecipe:
    """What Engine.create decided that a lane's engine is built from again (runtime/lanes.py)."""

    store: ModelStore
    specs: tuple[registry.ProcessorSpec, ...]
    threads: int
    need_landmarks: bool
    need_embedding: bool  # ArcFace on the frames' faces: --reference or --map (the sources are embedded once, here)
    live: bool
    still: bool = False


class Engine:
    """Analysers, sources and processors for one run. Thread-safe for analyse(track=False),
    detect() and process(); analyse(track=True), track(), next_source() and the knobs belong to
    one controlling thread (or calls serialised in frame order)."""

    def __init__(self, settings: ProcessingSettings, analyser: FaceAnalyser, processors: Sequence[FrameProcessor],
                 sources: Sequence[SourceIdentity], *, providers: ProviderChoice, swap_model: str | None,
                 cycle: Sequence[Path] = (), cache: SourceCache | None = None,
                 model_names: dict[str, str] | None = None, recipe: LaneRecipe | None = None) -> None:
        self.settings = settings
        self.analyser = analyser
        self.processors = list(processors)
        self.sources = list(sources)
        self.providers = providers
        self.swap_model = swap_model
        self.model_names = dict(model_names or {})
        self._enabled = {p.name: True for p in self.processors}
        self._cycle = list(cycle)
        self._cycle_index = 0
        self._cache = cache
        self._source_lock = threading.Lock()
        self._recipe = recipe
        self._lanes: list[Engine] = []
        self._analysis_lane: Engine | None = None  # a live run's (lanes())
        self._thread: LaneThread | None = None  # a lane's model thread (with CUDA graphs)
        # Processors built on descriptions (Engine.create(lanes=True)): the lanes process every frame.
        self.described_only = False

    # ---- construction -----------------------------------------------------------------------------
    @classmethod
    def create(cls, settings: ProcessingSettings, *, live: bool, progress: bool = True,
               workers: int | None = None, lanes: bool = False, still: bool = False) -> "Engine":
        """`still`: the frames are single pictures (`livecam image`), whose faces are looked for
        at every roll. `workers`: frames processed at once (default --execution-threads; 1 for one image),
        which share the cores between their model sessions. `lanes`: the caller hands every
        frame to Engine.lanes() where there are lanes (video, run, bench); this engine then
        only analyses, tracks and holds the knobs, so its processors hold their models'
        descriptions, not device sessions (BuildContext.describe_only), and process() refuses
        to run. Image, demo and cluster workers process on this engine: they leave it False."""
        from livecam.models.store import ModelStore

        analysis = settings.analysis
        if analysis.face_map and (settings.sources or analysis.reference):
            raise InputError("--map gives each reference person their own source; use it without "
                             "--source and --reference")
        store = ModelStore(settings.runtime, progress=progress)
        providers, provider_problem = usable_choice(settings.runtime.providers,
                                                    lambda: store.path(PROBE_MODEL))
        # Live mode runs the analyse thread beside the process workers, so it counts as one more
        # consumer of cores; oversubscribing ORT's threads there costs latency.
        threads = cpu_threads_per_session((workers or settings.runtime.execution_threads) + (1 if live else 0))
        chosen = registry.specs(settings.frame_processors)  # cli.py only offers registered names
        swapping = any(spec.role == "swapper" for spec in chosen)
        # Check the source paths before any model is opened, downloaded or warned about.
        cycle: list[Path] = []
        if swapping and not analysis.face_map:
            cycle = _expand_sources(settings.sources, live)
        check_photo_options(analysis)
        # The fallback warning waits until the engine is built: a bad source photo or a missing
        # model is then the one line the user sees, not a warning followed by an error.
        swap_model, fallback_missing = (pick_swap_model(settings.swap.model, store, providers) if swapping
                                        else (None, ()))
        need_landmarks = any(spec.needs_landmarks(settings, swap_model) for spec in chosen)
        need_embedding = any(spec.needs_embedding(settings, swap_model) for spec in chosen)
        # The processors' models first: a missing model the user asked for is reported before
        # anything else is loaded.
        described = lanes and uses_lanes(providers, settings.runtime)
        context = registry.BuildContext(settings, store, providers, threads, swap_model, live=live,
                                        still=still, describe_only=described)
        processors: list[FrameProcessor] = [spec.build(context) for spec in chosen]
        names = {spec.name: spec.model(context) for spec in chosen}
        analyser = FaceAnalyser.create(
            analysis, store, providers, need_landmarks=need_landmarks,
            need_embedding=need_embedding or bool(analysis.reference or analysis.face_map),
            live=live, intra_op_threads=threads, still=still)
        cache = SourceCache(user_cache_dir() / "sources")
        sources: list[SourceIdentity] = []
        start = 0  # the photo of a --source folder the run starts with
        if analysis.face_map:
            references = []
            for source_path, reference_path in analysis.face_map:
                if swapping:
                    sources.append(analyse_source([source_path], analyser, cache=cache,
                                                  need_landmarks=need_landmarks))
                references.append(_reference_embedding([reference_path], analyser, cache))
            analyser.set_references(references)
        else:
            if analysis.reference:
                analyser.set_references([_reference_embedding(analysis.reference, analyser, cache)])
            if swapping and live and len(cycle) > 1 and _is_folder(settings.sources):
                found = _first_usable_source(cycle, range(len(cycle)), analyser, cache, need_landmarks, processors)
                if found is None:
                    raise NoFaceError(f"none of the {len(cycle)} photos in source folder {settings.sources[0]} "
                                      f"has a face livecam can use; add a clear, frontal photo of one face")
                start, identity = found
                sources.append(identity)
            elif swapping:
                sources.append(analyse_source(cycle, analyser, cache=cache, need_landmarks=need_landmarks))
        names["analysis"] = analyser.describe()
        for processor in processors:
            processor.prepare(sources)
        warn_provider_fallback(provider_problem)
        warn_mesh_fallback(fallback_missing, store)
        if (settings.swap.model == "auto" and swap_model not in (None, "mesh") and analysis.detector == "auto"
                and not store.is_present("det_10g")):
            warn_detector_fallback(store)
        for line in registry.unused_option_warnings(settings, swap_model):  # said once, not per lane
            log.warning("%s", line)
        if analyser.det_size is None and analysis.det_size != AnalysisSettings().det_size:
            log.warning("warning: --det-size sizes the SCRFD detector (det_10g); this run's embedded BlazeFace has a "
                        "fixed input size, so it is ignored (SCRFD runs with --detector scrfd, or by default once "
                        "det_10g is in the models folder)")
        if not (analysis.reference or analysis.face_map) and \
                analysis.reference_distance != AnalysisSettings().reference_distance:
            log.warning("warning: --reference-distance is how close a face must be to the --reference or --map "
                        "person; this run gives neither, so it is ignored")
        if analysis.face_map and analysis.many_faces:  # map mode swaps every face of the mapped people
            log.warning("warning: --many-faces is ignored with --map, which swaps every face of its REFERENCE people")
        recipe = LaneRecipe(store, tuple(chosen), threads, need_landmarks,
                            bool(analysis.reference or analysis.face_map), live, still)
        engine = cls(settings, analyser, processors, sources, providers=providers, swap_model=swap_model,
                     cycle=cycle if live and _is_folder(settings.sources) else (), cache=cache,
                     model_names=names, recipe=recipe)
        engine.described_only = described
        engine._cycle_index = start  # `n` goes on from the photo the run started with
        return engine

    # ---- lanes ---------------------------------------------------------------------------------------
    @property
    def uses_lanes(self) -> bool:
        return self._recipe is not None and uses_lanes(self.providers, self.settings.runtime)

    def lanes(self) -> list["Engine"]:
        """One engine per lane, each with its own sessions (runtime/lanes.py), built on the first
        call; empty when this run uses the shared session pool (the CPU provider). Lane i
        belongs to one thread (its sessions are bound to buffers); the sources, the references
        and the knobs are this engine's.

        A live run also gets an analysis lane, built and warmed here, on which analyse(track=True)
        (the live pipeline's one analysis thread) runs from then on: its own analyser on the
        lane's terms (the detector's uint8 frame upload and a session per det size, IO binding,
        CUDA graphs on its thread), where the shared pool's would upload a float blob a frame.
        The live lanes only process: their analysers are not warmed, and build no det_10g session."""
        if not self.uses_lanes:
            return []
        if not self._lanes:
            assert self._recipe is not None
            count = lane_count(self.settings.runtime)
            lanes = [self._build_lane(k) for k in range(count)]
            faces = self._photo_faces() if self.settings.runtime.cuda_graphs else []
            for lane in lanes:  # one after another: see _warm_lane
                if self.settings.runtime.cuda_graphs:
                    self._warm_lane(lane, faces)
                if not self._recipe.live:
                    self._warm_analyser(lane)
            if self._recipe.live:
                analysis = self._lane_engine(count, [], "analysis")
                self._warm_analyser(analysis)
                self._analysis_lane = analysis
            self._lanes = lanes
        return self._lanes

    @property
    def analysis_lane(self) -> "Engine | None":
        """A live run's analysis lane, once lanes() has built it (else None)."""
        return self._analysis_lane

    def _followers(self) -> list["Engine"]:
        """The engines this one's knobs reach: the lanes and the analysis lane."""
        return self._lanes + ([self._analysis_lane] if self._analysis_lane is not None else [])

    def _warm_analyser(self, lane: "Engine") -> None:
        """Build and run the lane's analyser models (FaceAnalyser.warm): the detector at every
        det size this run can switch to (live: the governor's steps; a file: its one size), so
        that a governor step creates no session and binds no buffers mid-stream (faces/scrfd.py:
        one session per size on a GPU), and the landmarker and the embedder, which frames run
        only now and then. Three times each with CUDA graphs (ORT captures on the third run),
        else once. On a black frame of the size the frame profile is optimised for (720p: the
        detector's buffers are bound per frame size, and a large source photo would fall outside
        the profile); the landmarker and the embedder run on FaceAnalyser.warm's made-up face."""
        from livecam.pipeline.governor import det_sizes

        assert self._recipe is not None
        size = self.analyser.det_size
        sizes = () if size is None else det_sizes(size) if self._recipe.live else (size,)
        image = np.zeros((PROFILE_FRAME_H[1], PROFILE_FRAME_W[1], 3), np.uint8)
        runs = 3 if self.settings.runtime.cuda_graphs else 1
        lane._call(lane.analyser.warm, image, sizes, runs)

    def _photo_faces(self) -> list[Face]:
        """The faces this engine finds on the first source photo (none without one): what
        _warm_lane processes on every lane."""
        if not self.sources:
            return []
        found = FramePacket(index=-1, image=np.ascontiguousarray(self.sources[0].image[..., :3]))
        self.analyse(found, track=False)
        return list(found.faces)

    def _warm_lane(self, lane: "Engine", faces: list[Face], runs: int = 3) -> None:
        """Run a lane's processors `runs` times on the first source photo with `faces` (found
        once, by this engine: _photo_faces; a live lane only processes), then its swapper's and enhancer's models
        (`Warmable.warm`: the joined sessions a GPU lane runs, at the run's one shape, the
        governor's fast enhancer too) `runs` times without a face. ORT captures a CUDA graph
        on a session's third run, and a capture fails while another lane copies to the device,
        so every capture of those happens here, lane after lane, before any frame, whether or not
        the photo's face is one the run selects. (The analyser's models: _warm_analyser.)"""
        if self.sources:
            image = self.sources[0].image[..., :3]
            for _ in range(runs):
                lane.process(FramePacket(index=-1, image=image.copy(), faces=list(faces)))
        for processor in lane.processors:
            if isinstance(processor, Warmable):
                lane._call(processor.warm, runs)

    def _build_lane(self, lane: int) -> "Engine":
        recipe = self._recipe
        assert recipe is not None
        # live as the run: a live lane holds the enhancer's fast model too (the governor's step)
        context = registry.BuildContext(self.settings, recipe.store, self.providers.for_lane(lane), recipe.threads,
                                        self.swap_model, live=recipe.live, still=recipe.still)
        processors = [spec.build(context) for spec in recipe.specs]
        for processor in processors:
            processor.prepare(self.sources)
        return self._lane_engine(lane, processors, "models")

    def _lane_engine(self, lane: int, processors: list[FrameProcessor], role: str) -> "Engine":
        """Lane `lane`'s engine: these processors, an analyser of its own on the lane's sessions
        with this engine's references and knobs, and with CUDA graphs its model thread. A live
        run's processing lane analyses nothing (its analysis lane does), so it matches no
        reference and holds no ArcFace."""
        recipe = self._recipe
        assert recipe is not None
        providers = self.providers.for_lane(lane)
        matches = recipe.need_embedding and not (recipe.live and processors)
        analyser = FaceAnalyser.create(self.settings.analysis, recipe.store, providers,
                                       need_landmarks=recipe.need_landmarks, need_embedding=matches,
                                       live=recipe.live, intra_op_threads=recipe.threads)
        if matches:
            analyser.set_references(self.analyser.references)
        analyser.set_detect_every(self.analyser.detect_every)
        if self.analyser.det_size is not None:
            analyser.set_det_size(self.analyser.det_size)
        engine = Engine(self.settings, analyser, processors, self.sources, providers=providers,
                        swap_model=self.swap_model, model_names=self.model_names)
        engine._enabled = dict(self._enabled)
        if self.settings.runtime.cuda_graphs:  # graphs are kept per calling thread: runtime/lanes.LaneThread
            engine._thread = LaneThread(f"livecam-lane-{lane}-{role}")
            weakref.finalize(engine, engine._thread.close)
        return engine

    def _call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """fn(*args) on this lane's model thread where it has one (runtime/lanes.LaneThread),
        else here."""
        return fn(*args) if self._thread is None else self._thread.call(fn, *args)

    # ---- per frame ----------------------------------------------------------------------------------
    def analyse(self, packet: FramePacket, track: bool, choose: bool = True) -> None:
        """Fill packet.faces (detected, selected, with landmarks where needed; tracked and
        smoothed when `track`) and packet.timings["detect"] and friends. `choose`: as
        FaceAnalyser.analyse's."""
        if track and self._analysis_lane is not None:  # a live run's (lanes())
            return self._analysis_lane.analyse(packet, track)
        if self._thread is not None and not self._thread.is_current():
            return self._thread.call(self.analyse, packet, track, choose)
        t0 = time.perf_counter()
        timestamp = packet.pts if packet.pts is not None else packet.captured_at
        analysis = self.analyser.analyse(packet.image, timestamp=timestamp, track=track,
                                         timings=packet.timings, choose=choose)
        packet.faces, packet.found = analysis.faces, analysis.found
        packet.timings["analyse"] = (time.perf_counter() - t0) * 1000.0

    # Video files: detect() in parallel workers, then track() in frame order, then process().
    def detect(self, packet: FramePacket) -> None:
        """analyse(packet, track=False), the one face left for track() to choose: no state,
        any thread."""
        self.analyse(packet, track=False, choose=False)

    @property
    def tracks(self) -> bool:
        """Whether track() changes faces (every video file's run; FaceAnalyser.tracks)."""
        return self.analyser.tracks

    def track(self, packet: FramePacket) -> None:
        """Confirm, choose and smooth packet.faces (from detect) over time
        (FaceAnalyser.track); one call at a time, in frame order."""
        timestamp = packet.pts if packet.pts is not None else packet.captured_at
        packet.faces = self.analyser.track(packet.faces, timestamp, packet.image, timings=packet.timings)

    def reset_tracking(self) -> None:
        """Forget every face track, this engine's and its lanes': the next file starts afresh."""
        self.analyser.reset_tracking()
        for lane in self._followers():
            lane.reset_tracking()

    def process(self, packet: FramePacket) -> None:
        """Run the enabled processors in order on packet.faces in packet.image."""
        if self.described_only:
            raise RuntimeError("Engine.process() on a run engine built for lanes (Engine.create(lanes=True)): "
                               "its processors hold model descriptions, not sessions; process on "
                               "Engine.lanes() instead (a caller bug)")
        if self._thread is not None and not self._thread.is_current():
            return self._thread.call(self.process, packet)
        for processor in self.processors:
            if not self._enabled.get(processor.name, True):
                continue
            out = processor.process(packet)
            if out is not packet and out is not None:
                packet.image, packet.faces = out.image, out.faces
                packet.timings.update(out.timings)

    # ---- knobs ---------------------------------------------------------------------------------------
    @property
    def processor_names(self) -> list[str]:
        return [p.name for p in self.processors]

    def is_enabled(self, name: str) -> bool:
        return self._enabled.get(name, False)

    def set_enabled(self, name: str, enabled: bool) -> None:
        """Switch a processor on or off (unknown names are ignored: the governor may ask to turn
        off an enhancer that this run does not have)."""
        if name in self._enabled:
            self._enabled[name] = bool(enabled)
        for lane in self._followers():
            lane.set_enabled(name, enabled)

    def set_detect_every(self, n: int) -> None:
        self.analyser.set_detect_every(n)
        for lane in self._followers():
            lane.set_detect_every(n)

    @property
    def uses_mask_models(self) -> bool:
        """Whether a processor's paste mask runs models (--face-mask occlusion or region)."""
        return any(isinstance(p, MaskModelSwitch) and p.uses_mask_models for p in self.processors)

    def set_mask_models(self, on: bool) -> None:
        for p in self.processors:
            if isinstance(p, MaskModelSwitch):
                p.set_mask_models(on)
        for lane in self._lanes:
            lane.set_mask_models(on)

    @property
    def fast_enhancer(self) -> str | None:
        """The faster model an enhancer of this run can switch to (live, when present), or None."""
        return next((p.fast_model for p in self.processors
                     if isinstance(p, FastModelSwitch) and p.fast_model), None)

    def set_fast_enhancer(self, on: bool) -> None:
        for p in self.processors:
            if isinstance(p, FastModelSwitch):
                p.set_fast_model(on)
        for lane in self._lanes:
            lane.set_fast_enhancer(on)

    def set_det_size(self, n: int) -> None:
        self.analyser.set_det_size(n)
        for lane in self._followers():
            lane.set_det_size(n)

    @property
    def det_size(self) -> int | None:
        """The detector's input size, or None when it has a fixed one (BlazeFace)."""
        return self.analyser.det_size

    @property
    def sparse_detection_saves(self) -> bool:
        """Whether detecting every 2nd frame saves work (FaceAnalyser.sparse_detection_saves)."""
        return self.analyser.sparse_detection_saves

    def next_source(self) -> str | None:
        """Switch to the next photo of a --source folder (live); returns its name, or None when
        there is nothing to cycle. Photos without a usable face are skipped with a warning."""
        with self._source_lock:
            if len(self._cycle) < 2:
                return None
            need_landmarks = self.swap_model == "mesh"  # the source mesh the mesh swapper warps from
            count = len(self._cycle)
            found = _first_usable_source(self._cycle, [(self._cycle_index + step) % count for step in range(1, count)],
                                         self.analyser, self._cache, need_landmarks,
                                         self.processors + [p for lane in self._lanes for p in lane.processors])
            if found is None:
                return None
            index, identity = found
            self.sources = [identity]
            for lane in self._lanes:
                lane.sources = [identity]
            self._cycle_index = index
            return self._cycle[index].name

    def describe(self) -> str:
        """One line: the models and the provider in use."""
        parts = [self.model_names.get("analysis", "")]
        parts += [f"{registry.spec(name).role} {model}" for name, model in self.model_names.items()
                  if name != "analysis"]
        parts.append(f"provider {self.providers.primary}")
        return "; ".join(p for p in parts if p)


def _first_usable_source(cycle: Sequence[Path], order: Iterable[int], analyser: FaceAnalyser,
                         cache: SourceCache | None, need_landmarks: bool,
                         processors: Sequence[FrameProcessor]) -> tuple[int, SourceIdentity] | None:
    """The first photo of a --source folder's `cycle`, taken in `order` (indexes), whose face the
    run can use, with its index; None when there is none. A photo without one is skipped with a
    warning, at the start of a run as on `n` (a faceless first photo refused the whole folder)."""
    for index in order:
        path = cycle[index]
        try:
            identity = analyse_source([path], analyser, cache=cache, need_landmarks=need_landmarks)
            # A processor refuses a source before it changes anything (the mesh swapper: a face
            # it cannot mesh); the live session goes on with the next photo.
            for processor in processors:
                processor.prepare([identity])
        except InputError as exc:
            log.warning("skipping source %s: %s", path.name, exc.message)
            continue
        return index, identity
    return None


def _is_folder(sources: Sequence[Path]) -> bool:
    return len(sources) == 1 and Path(sources[0]).is_dir()


def _expand_sources(sources: Sequence[Path], live: bool) -> list[Path]:
    """Check the --source paths; a single folder becomes its photos (live only)."""
    if not sources:
        raise InputError("missing --source PATH: give a photo of the face to put in")
    paths = [Path(s) for s in sources]
    for path in paths:
        if not path.exists():
            raise InputError(f"source {path} {why_missing(path)}")
    if any(p.is_dir() for p in paths):
        if not live:
            raise InputError(f"source {next(p for p in paths if p.is_dir())} is a folder; a folder of "
                             f"photos can only be cycled in `livecam run`; give photo files here")
        if len(paths) > 1:
            raise InputError("give either one --source folder (to cycle its photos) or photo files, not both")
        photos = source_photos(paths[0])
        if not photos:
            raise InputError(f"source folder {paths[0]} holds no photos ({', '.join(sorted(PHOTO_SUFFIXES))})")
        return photos
    return paths


def _reference_embedding(paths: Sequence[Path], analyser: FaceAnalyser, cache: SourceCache) -> Any:
    identity = analyse_source(list(paths), analyser, cache=cache, role="reference")
    return identity.embedding
