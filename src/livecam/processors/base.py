"""The frame processor contract (see docs/ARCHITECTURE.md)."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from livecam.faces.face import Face
# stated in faces.selection, which picks the face to swap by the same rule; passed on from here
from livecam.faces.selection import MIN_EYE_DISTANCE as MIN_EYE_DISTANCE, usable as usable
from livecam.faces.source import SourceIdentity
from livecam.frame import FramePacket
from livecam.processors.registry import swaps
from livecam.settings import ProcessingSettings

# From MIN_EYE_DISTANCE the change fades in, fully shown from this eye distance: in a video, a face whose
# eye distance hovers round the threshold (a zoom, landmark jitter) would otherwise be swapped
# in one frame and left in the next (popping).
FULL_EYE_DISTANCE = 28.0


def changed_faces(packet: FramePacket) -> int:
    """How many of packet.faces the processors changed: the usable ones, less those the swapper
    left as they were (FramePacket.left_as_is). What a summary counts as swapped or enhanced."""
    return sum(usable(face) for face in packet.faces) - packet.left_as_is


def why_unchanged(faces: str, unfitted: bool, processing: ProcessingSettings, faint: bool = False) -> str:
    """The warning, with its fix, when the swapper left every usable face of `faces` ("the face
    found in X") as it was: the mesh swapper could not fit FaceMesh to them (`unfitted`:
    FramePacket.unfitted), the swap was too faint to change a pixel (`faint`: FramePacket.faint),
    or their paste mask was empty. Without a swapper, the enhancer's paste is what was too faint."""
    swap, enhance = processing.swap, processing.enhance
    if faint and not swaps(processing.frame_processors) and enhance.blend < 1.0:
        return (f"--enhancer-blend {enhance.blend:g} is too faint to change a pixel of {faces}; "
                "give a larger --enhancer-blend")
    if unfitted:
        return (f"the mesh swapper could not fit its landmarks to {faces} (cut off by the edge, or turned "
                "away), so nothing was swapped; use one where the whole face shows, or the neural swapper "
                "(--swap-model inswapper_128)")
    if faint and swap.blend < 1.0:
        return f"--blend {swap.blend:g} is too faint to change a pixel of {faces}; give a larger --blend"
    if faint:  # a video's face fading in at the size limit (presence)
        return (f"{faces} are just over the size limit ({MIN_EYE_DISTANCE:g} px between the eyes), where the "
                "swap fades in too faintly to change a pixel; use a video where they are larger")
    if swap.face_mask == ("box",) and any(swap.face_mask_padding):
        # the box alone: what its padding left, feathered by --face-mask-blur, is empty ("choose
        # other --face-mask types" did not name the padding, the one option given)
        padding = " ".join(f"{p:g}" for p in swap.face_mask_padding)
        return (f"--face-mask-padding {padding} left nothing of the box mask to swap of {faces}; "
                "give smaller percentages")
    return (f"--face-mask left nothing to swap of {faces}: none of the parts it keeps is there; "
            "choose other --face-mask types, regions or areas")


def presence(face: Face, fade: bool = True) -> float:
    """0..1: how much of a processor's change a face gets, by its size: 0 where not usable,
    rising linearly to 1 at FULL_EYE_DISTANCE (multiplies the opacity). `fade` False (a still
    picture, which has no next frame to pop in): 1 for every usable face; a face 24.1 px between
    the eyes got 2.5 % of the swap, a ghost, and was counted as swapped."""
    if not fade:
        return 1.0 if usable(face) else 0.0
    ramp = (face.eye_distance - MIN_EYE_DISTANCE) / (FULL_EYE_DISTANCE - MIN_EYE_DISTANCE)
    return float(np.clip(ramp, 0.0, 1.0)) if usable(face) else 0.0


@runtime_checkable
class MaskModelSwitch(Protocol):
    """A processor whose paste mask runs models the live governor may turn off (the inswapper
    with --face-mask occlusion or region)."""

    @property
    def uses_mask_models(self) -> bool: ...

    def set_mask_models(self, on: bool) -> None: ...


@runtime_checkable
class FastModelSwitch(Protocol):
    """A processor that may hold a faster model the live governor can switch it to (the face
    enhancer with gpen_bfr_256 present) before switching it off."""

    @property
    def fast_model(self) -> str | None: ...  # None: no faster model held

    def set_fast_model(self, on: bool) -> None: ...


@runtime_checkable
class Warmable(Protocol):
    """A processor whose models run once per face at shapes known before the first frame (the
    swapper, the enhancer): `warm` runs them `runs` times as a face would, without a face, so
    that Engine.lanes() makes every CUDA graph capture before the first frame."""

    def warm(self, runs: int) -> None: ...


@runtime_checkable
class FrameProcessor(Protocol):
    name: str  # as given to --frame-processor

    def prepare(self, sources: Sequence[SourceIdentity]) -> None:
        """Per-source work done once (e.g. the swapper's source latent). sources[face.source_key]
        is the identity for a face; one entry unless --map is used. Called again when the
        live source changes."""

    def process(self, packet: FramePacket) -> FramePacket:
        """Process packet.faces in packet.image; may replace packet.image."""
