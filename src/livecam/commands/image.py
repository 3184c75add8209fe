"""`livecam image INPUT OUTPUT --source PHOTO`: swap the faces in one image.

Every check that needs no model runs first (input readable, output free or --force, output
format known, folder writable), so mistakes are reported in a fraction of a second. A target
without a face is written unchanged (labelled and tagged) with a warning, and exits 0: scripts
that run over folders of images should not stop at a photo without a face.
"""

from __future__ import annotations

import logging
import time
from types import MappingProxyType
from typing import Mapping

from livecam.console import agree, counted
from livecam.errors import InputError
from livecam.frame import FramePacket
from livecam.marks.credentials import available, signing_for
from livecam.marks.watermark import open_watermarker
from livecam.media.images import check_output_path, read_image_and_profile, split_alpha, write_image_atomic
from livecam.interrupt import output_done
from livecam.processors import registry
from livecam.processors.base import MIN_EYE_DISTANCE, changed_faces, usable, why_unchanged
from livecam.settings import C2paSettings, ImageJob

log = logging.getLogger("livecam")


def check_given_identity(c2pa: C2paSettings) -> None:
    """A given C2PA identity (--c2pa-cert/--c2pa-key or their variables) is loaded now, before the
    models: a bad key was found only after them (a corrupt model's exit 3 said instead). The local
    identity is still made once the models and photos are known good (signing_for), so a run that
    fails on them leaves no identity behind and says one line."""
    if c2pa.enabled and available():
        signing_for(c2pa, None, ())


# Why one frame has no use for these options (ImageJob.unused): --smoothing alone was told
# "whose models get every core", the reason of --execution-threads
ONE_FRAME: Mapping[str, str] = MappingProxyType({"--smoothing": "nothing to smooth across",
                                                 "--execution-threads": "its models get every core"})

def watermark_needs_colour(job: ImageJob) -> bool:
    """Whether a grey input is written in colour for its invisible watermark, with a note: the
    watermark lives in the colours, so a grey output drops it (no grey version of it reads)."""
    if not job.watermark:
        return False
    log.warning("note: %s is grey, but its output is written in colour: the invisible watermark is held "
                "in the colours, which a grey picture drops (--no-watermark writes it grey)", job.input.name)
    return True


def run_image(job: ImageJob) -> None:
    from livecam.pipeline.engine import Engine

    if job.input.is_dir():  # "is a folder, not an image file" left a folder run (as `video` takes) to guess
        raise InputError(f"{job.input} is a folder; `livecam image` changes one image a run: give one of its "
                         f"images (a folder in, a folder out is for videos: `livecam video`)")
    image, profile, dpi, grey = read_image_and_profile(job.input)
    check_output_path(job.output, force=job.force, input_path=job.input, processing=job.processing,
                      size=(image.shape[1], image.shape[0]))
    bgr, alpha = split_alpha(image)
    grey = grey and not watermark_needs_colour(job)
    start = time.perf_counter()
    check_given_identity(job.c2pa)
    # One frame: its sessions get every core, whatever --execution-threads says.
    engine = Engine.create(job.processing, live=False, progress=not job.processing.runtime.quiet, workers=1,
                           still=True)
    log.debug("models: %s", engine.describe())
    if job.unused:
        log.warning("warning: %s for videos and live runs; an image is one frame (%s), so %s ignored",
                    registry.listed(list(job.unused)), " and ".join(ONE_FRAME[flag] for flag in job.unused),
                    agree(len(job.unused), "it is", "they are"))
    signing = signing_for(job.c2pa, job.input, tuple(engine.model_names.values()), outputs=(job.output,))
    packet = FramePacket(index=0, image=bgr.copy())
    engine.analyse(packet, track=False)
    # The processors leave faces under MIN_EYE_DISTANCE as they are: count only the others.
    count = sum(1 for face in packet.faces if usable(face))
    small = len(packet.faces) - count
    if not packet.faces:
        log.warning("warning: no %s found in %s; writing it unchanged to %s",
                    job.processing.analysis.wanted_faces, job.input, job.output)
    elif not count:
        log.warning("warning: the %s found in %s %s too small to change (under %g px between "
                    "the eyes); writing it unchanged to %s; use a larger image",
                    agree(small, "face", "faces"), job.input, agree(small, "is", "are"),
                    MIN_EYE_DISTANCE, job.output)
    else:
        engine.process(packet)
        if packet.left_as_is == count:  # usable faces, each left by the swapper
            log.warning("warning: %s", why_unchanged(f"the {agree(count, 'face', counted(count, 'face'))} found "
                                                     f"in {job.input}", packet.unfitted > 0,
                                                     job.processing, packet.faint > 0))
        count = changed_faces(packet)
        analysis = job.processing.analysis
        others = packet.found - len(packet.faces)
        if others > 0 and not (analysis.many_faces or analysis.face_map or analysis.reference
                               or analysis.face_min_size):
            # a group photo came out with one face changed and no word on the others
            log.info("note: %s other %s in %s %s left as %s; add --many-faces to swap every face",
                     others, agree(others, "face", "faces"), job.input.name, agree(others, "was", "were"),
                     agree(others, "it was", "they were"))
    marker = open_watermarker(job.processing.runtime, engine.providers) if job.watermark else None
    write_image_atomic(job.output, packet.image, force=job.force, label=job.label, alpha=alpha,
                       watermark=marker.embed if marker else None, icc=profile, dpi=dpi,
                       faces=[face.bbox for face in packet.faces], grey=grey,
                       sign=(lambda data: signing.sign_bytes(data, job.output)) if signing else None)
    output_done()  # written and valid: a signal from now on is not an interruption
    log.info("wrote %s (%s, %.1f s; %s)", job.output, registry.changed(count, job.processing.frame_processors, small),
             time.perf_counter() - start, engine.describe())
