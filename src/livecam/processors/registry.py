"""The frame processors livecam knows, found by module: name -> how to build it and what it needs.

Every module of livecam.processors that defines a module-level `PROCESSOR = ProcessorSpec(...)`
is a frame processor; its name is what `--frame-processor` takes. Adding a processor is adding
one such module: the CLI's choices, the engine (models, landmarks, description), the governor's
"enhancer off" step and the live e key all come from here. Helper modules (paste, color, masks,
...) and subpackages (mesh/: the mesh swapper's parts, whose __init__ defines nothing) define no
PROCESSOR and are ignored.

The modules are imported on the first question, not when this module is imported: the CLI's
--help and `livecam models` stay free of OpenCV and numpy.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal

from livecam.console import agree, counted

if TYPE_CHECKING:
    from livecam.models.store import ModelStore
    from livecam.processors.base import FrameProcessor
    from livecam.runtime.providers import ProviderChoice
    from livecam.settings import ProcessingSettings

# swapper: puts the --source face in (needs a --source, one swap model per run, --swap-model);
# enhancer: optional polish, switched off first when live latency is over budget and by the e key.
Role = Literal["swapper", "enhancer"]
ROLE_ORDER: dict[str, int] = {"swapper": 0, "enhancer": 1}


@dataclass(frozen=True)
class BuildContext:
    """What a processor may use to build itself (Engine.create makes one per run)."""

    settings: ProcessingSettings
    store: ModelStore
    providers: ProviderChoice
    threads: int  # intra-op threads per ORT session
    swap_model: str | None  # the chosen swap model (pick_swap_model) when a swapper runs
    live: bool = False  # a live run (the governor may switch models: the enhancer's fast one)
    still: bool = False  # single pictures (`livecam image`): no fade-in by face size (base.presence)
    # The run's own engine when its lanes process every frame (Engine.create(lanes=True) on a
    # lane provider): its processors keep their knobs, names and prepare() but hold no session
    # of their models, only descriptions (open_model); the lanes hold the sessions that run.
    describe_only: bool = False

    def open_model(self, name: str, front: Callable[[Any], Any] | None = None,
                   precision: str = "fp32") -> tuple[Any, Any]:
        """(model, joined) for a processor's model `name`: ModelStore.open_joined's pair; with
        describe_only, (the file's description, None), or the plain session where the CPU
        cannot describe the file."""
        if not self.describe_only:
            return self.store.open_joined(name, self.providers, self.threads, front, precision=precision)
        described = self.store.describe(name, precision)
        if described is None:
            return self.store.open_session(name, self.providers, self.threads, precision=precision), None
        return described, None


def _no(settings: ProcessingSettings, swap_model: str | None) -> bool:
    return False


def _none_unused(settings: ProcessingSettings, swap_model: str | None, runs: bool) -> tuple[str, ...]:
    return ()


def given(options: Any, flags: dict[str, str]) -> list[str]:
    """The flags (field name -> CLI flag) whose fields of the settings object `options` differ
    from its dataclass's defaults: the options the user gave. (The fields' own defaults, so a
    dataclass with required fields, such as LiveJob, is asked too.)"""
    fields = {f.name: f for f in dataclasses.fields(options)}

    def default(name: str) -> Any:
        f = fields[name]
        return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default

    return [flag for name, flag in flags.items() if getattr(options, name) != default(name)]


def listed(flags: list[str]) -> str:
    """'--a', '--a and --b', '--a, --b and --c', with 'is'/'are' to follow."""
    names = flags[0] if len(flags) == 1 else ", ".join(flags[:-1]) + " and " + flags[-1]
    return f"{names} {agree(len(flags), 'is', 'are')}"


@dataclass(frozen=True)
class ProcessorSpec:
    name: str  # as given to --frame-processor and FrameProcessor.name
    role: Role
    build: Callable[[BuildContext], FrameProcessor]  # opens its models through ctx.store
    model: Callable[[BuildContext], str]  # the model it runs, for Engine.describe()
    needs_landmarks: Callable[[ProcessingSettings, str | None], bool] = _no  # FaceMesh on target faces
    needs_embedding: Callable[[ProcessingSettings, str | None], bool] = _no  # ArcFace on target faces
    # Warning lines for the options of this processor that the run gives but will not use
    # (`runs`: whether the processor is in the chain): an option doing nothing is said, once.
    unused_options: Callable[[ProcessingSettings, str | None, bool], tuple[str, ...]] = _none_unused


@functools.lru_cache(maxsize=1)
def _discovered() -> dict[str, ProcessorSpec]:
    import livecam.processors as package

    found: list[ProcessorSpec] = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name in ("registry", "base") or info.name.startswith("_"):
            continue
        spec = getattr(importlib.import_module(f"{package.__name__}.{info.name}"), "PROCESSOR", None)
        if isinstance(spec, ProcessorSpec):
            found.append(spec)
    found.sort(key=lambda s: (ROLE_ORDER[s.role], s.name))
    return {s.name: s for s in found}


def refresh() -> None:
    """Forget what was found (a module was added to the package's path at run time: tests)."""
    _discovered.cache_clear()


def names() -> tuple[str, ...]:
    """Every processor name: swappers first, then enhancers, by name within each."""
    return tuple(_discovered())


def spec(name: str) -> ProcessorSpec:
    try:
        return _discovered()[name]
    except KeyError:
        raise KeyError(f"unknown frame processor {name!r}; known: {', '.join(names())}") from None


def specs(selected: Iterable[str]) -> list[ProcessorSpec]:
    return [spec(n) for n in selected]


def unused_option_warnings(settings: ProcessingSettings, swap_model: str | None) -> list[str]:
    """Every processor's warnings for options given that this run will not use
    (ProcessorSpec.unused_options), in registry order."""
    chain = set(settings.frame_processors)
    return [line for s in _discovered().values() for line in s.unused_options(settings, swap_model, s.name in chain)]


def default_names() -> tuple[str, ...]:
    """What runs without --frame-processor: the swapper."""
    return tuple(s.name for s in _discovered().values() if s.role == "swapper")[:1]


def with_role(selected: Iterable[str], role: Role) -> tuple[str, ...]:
    """The names in `selected` (known ones only: fakes in tests may name others) with `role`."""
    known = _discovered()
    return tuple(n for n in selected if n in known and known[n].role == role)


def swaps(selected: Iterable[str]) -> bool:
    """Whether `selected` puts a source face in (and so needs --source)."""
    return bool(with_role(selected, "swapper"))


def changed(count: int, selected: Iterable[str], small: int = 0) -> str:
    """How a summary counts the faces `selected` changed: "3 faces swapped" ("enhanced" without
    a swapper), and the `small` ones found but left as they are, under MIN_EYE_DISTANCE: "2 faces
    swapped, 4 too small to change" (when none changed, a warning says why instead); every summary
    of `image` and `video` says it so."""
    left = f", {small} too small to change" if small and count else ""
    return f"{counted(count, 'face')} {'swapped' if swaps(selected) else 'enhanced'}{left}"


def names_with_role(role: Role) -> tuple[str, ...]:
    """Every registered processor with `role` (for messages such as "add --frame-processor X")."""
    return with_role(names(), role)
