"""What the pipelines need from the engine, written once.

livecam.pipeline.engine.Engine satisfies every protocol here (tests/test_typing.py checks it with
mypy); tests drive the pipelines with small fakes that satisfy only the one they need.

    FrameEngine    analyse + process: every pipeline (and `livecam image`)
    FileEngine     + tracking in frame order (detect in any thread, track in order, reset
                   between files), the models and providers in use (for the watermark's
                   sessions and C2PA), and the lanes (one engine per worker; none on the
                   shared session pool): files
    Knobs          what the live governor turns
    LiveEngine     FrameEngine + Knobs + the live controls (n key, banner, det-size and
                   every-2nd-frame steps)

Thread rules (Engine's docstring): analyse(track=False), detect and process are thread-safe;
analyse(track=True), track, next_source and the knobs belong to one thread each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Protocol, Sequence

from livecam.frame import FramePacket

if TYPE_CHECKING:
    from livecam.runtime.providers import ProviderChoice


class FrameEngine(Protocol):
    def analyse(self, packet: FramePacket, track: bool) -> None:
        """Fill packet.faces (tracked and smoothed over time when `track`)."""

    def process(self, packet: FramePacket) -> None:
        """Run the enabled processors on packet.faces in packet.image."""


class FileEngine(FrameEngine, Protocol):
    @property
    def tracks(self) -> bool:
        """Whether faces are tracked over time: then detect() in any thread, track() in order."""

    def detect(self, packet: FramePacket) -> None:
        """analyse(packet, track=False), the one face left for track(): no state, any thread."""

    def track(self, packet: FramePacket) -> None:
        """Confirm, choose (the one face) and smooth packet.faces over time; one call at a time,
        in frame order."""

    def reset_tracking(self) -> None:
        """Forget the face tracks (every lane's too): the next track() starts afresh, as at the
        start of another file or segment. Between runs, from the thread that calls track()."""

    @property
    def model_names(self) -> Mapping[str, str]:
        """The models in use by role (analysis, swapper, ...): named in the C2PA manifest."""

    @property
    def providers(self) -> ProviderChoice:
        """The execution providers the models run on (the watermark's sessions use them too)."""

    def lanes(self) -> Sequence[FileEngine]:
        """One engine per worker, each with its own sessions (runtime/lanes.py), built on the
        first call (models load); empty when the workers share this engine (the CPU provider)."""


class Knobs(Protocol):
    @property
    def processor_names(self) -> Sequence[str]: ...

    def set_enabled(self, name: str, enabled: bool) -> None: ...

    def set_detect_every(self, n: int) -> None: ...

    def set_det_size(self, n: int) -> None: ...

    @property
    def uses_mask_models(self) -> bool:
        """Whether the paste masks run models (the governor's first step turns them off)."""

    def set_mask_models(self, on: bool) -> None: ...

    @property
    def fast_enhancer(self) -> str | None:
        """The faster enhancer model the governor may switch to before "enhancer off", or None."""

    def set_fast_enhancer(self, on: bool) -> None: ...


class LiveEngine(FrameEngine, Knobs, Protocol):
    @property
    def det_size(self) -> int | None:
        """The detector's input size; None when it is fixed (no det-size step for the governor)."""

    @property
    def sparse_detection_saves(self) -> bool:
        """Whether detecting every 2nd frame saves work (else the governor leaves that step out)."""

    def next_source(self) -> str | None:
        """Switch to the next photo of a --source folder; its name, or None when there is none."""

    def describe(self) -> str:
        """One line: the models and the provider in use."""


class ForwardingEngine:
    """Passes every contract method on to `engine`; wrappers (bench's timing recorder, the soak
    test's analysis replay) subclass it and override only what they change."""

    def __init__(self, engine: ForwardedEngine) -> None:
        self.engine = engine

    def analyse(self, packet: FramePacket, track: bool = True) -> None:
        self.engine.analyse(packet, track=track)

    def process(self, packet: FramePacket) -> None:
        self.engine.process(packet)

    @property
    def tracks(self) -> bool:
        return self.engine.tracks

    def detect(self, packet: FramePacket) -> None:
        self.engine.detect(packet)

    def track(self, packet: FramePacket) -> None:
        self.engine.track(packet)

    def reset_tracking(self) -> None:
        self.engine.reset_tracking()

    @property
    def model_names(self) -> Mapping[str, str]:
        return self.engine.model_names

    @property
    def providers(self) -> ProviderChoice:
        return self.engine.providers

    def lanes(self) -> Sequence[FileEngine]:
        # the wrapped engine's own lanes, unwrapped: a wrapper that changes per-frame calls
        # wraps each lane itself (bench: RecordingEngine.for_lane)
        return self.engine.lanes()

    @property
    def processor_names(self) -> Sequence[str]:
        return self.engine.processor_names

    def set_enabled(self, name: str, enabled: bool) -> None:
        self.engine.set_enabled(name, enabled)

    def set_detect_every(self, n: int) -> None:
        self.engine.set_detect_every(n)

    def set_det_size(self, n: int) -> None:
        self.engine.set_det_size(n)

    @property
    def uses_mask_models(self) -> bool:
        return self.engine.uses_mask_models

    def set_mask_models(self, on: bool) -> None:
        self.engine.set_mask_models(on)

    @property
    def fast_enhancer(self) -> str | None:
        return self.engine.fast_enhancer

    def set_fast_enhancer(self, on: bool) -> None:
        self.engine.set_fast_enhancer(on)

    @property
    def det_size(self) -> int | None:
        return self.engine.det_size

    @property
    def sparse_detection_saves(self) -> bool:
        return self.engine.sparse_detection_saves

    def next_source(self) -> str | None:
        return self.engine.next_source()

    def describe(self) -> str:
        return self.engine.describe()


class ForwardedEngine(LiveEngine, FileEngine, Protocol):
    """What ForwardingEngine passes on: every contract at once (the real Engine)."""


if TYPE_CHECKING:  # mypy (tests/test_typing.py) checks that the real Engine fulfils every contract
    from livecam.pipeline.engine import Engine

    def _engine_fulfils_the_contracts(engine: Engine) -> tuple[FrameEngine, FileEngine, Knobs, LiveEngine, ForwardedEngine]:
        return engine, engine, engine, engine, engine
