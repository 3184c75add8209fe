"""`livecam image INPUT OUTPUT --source PHOTO`: swap the faces in one image.

Every check that needs no model runs first (input readable, output free or --force, output
format known, folder writable), so mistakes are reported in a fraction of a second. A target
without a face is written unchanged (labelled and tagged) with a warning, and exits 0: scripts
that run over folders of images should not stop at a photo without a face.
"""

from __future__ import annotations

import logging
import time

from livecam.frame import FramePacket
from livecam.media.images import check_output_path, read_image, split_alpha, write_image_atomic
from livecam.settings import ImageJob

log = logging.getLogger("livecam")


def run_image(job: ImageJob) -> None:
    from livecam.pipeline.engine import Engine

    image = read_image(job.input)
    check_output_path(job.output, force=job.force)
    bgr, alpha = split_alpha(image)
    start = time.perf_counter()
    engine = Engine.create(job.processing, live=False, progress=not job.processing.runtime.quiet)
    log.debug("models: %s", engine.describe())
    packet = FramePacket(index=0, image=bgr.copy())
    engine.analyse(packet, track=False)
    if not packet.faces:
        log.warning("warning: no face found in %s; writing it unchanged to %s", job.input, job.output)
    else:
        engine.process(packet)
    write_image_atomic(job.output, packet.image, force=job.force, label=job.label, alpha=alpha)
    count = len(packet.faces)
    log.info("wrote %s (%d face%s swapped, %.1f s; %s)", job.output, count, "" if count == 1 else "s",
             time.perf_counter() - start, engine.describe())
