"""`livecam video IN OUT --cluster ADDR`: one file on a Ray cluster (livecam.cluster), checked
here first as `livecam video` checks it (commands/video.py calls this after check_job)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable

from livecam.console import counted
from livecam.marks.credentials import signing_for
from livecam.pipeline.file import say_tracks
from livecam.pipeline.segments import check_segmentable
from livecam.interrupt import output_done
from livecam.pipeline.signals import stop_signals
from livecam.processors import registry
from livecam.settings import ClusterSettings, VideoJob

log = logging.getLogger("livecam")


def cluster_signer(job: VideoJob, models: tuple[str, ...]) -> Callable[[Path], None] | None:
    """C2PA credentials for a joined output (on the driver, over the finished temporary file),
    naming the models the workers used; None with --no-c2pa."""
    # no outputs: the local identity was made, and a .webm said unsigned, before the run started
    signing = signing_for(job.c2pa, job.input, models)
    if signing is None:
        return None
    return lambda temp: signing.sign_file(temp, job.output)


def run_video_on_cluster(job: VideoJob, cluster: ClusterSettings) -> None:
    """job (encoder resolved, checked) in segments on the cluster; raises the file's error."""
    from livecam.cluster import run_on_cluster

    check_segmentable(job)
    signing_for(job.c2pa, None, (), outputs=(job.output,))  # the local identity made now, not at the join
    started = time.monotonic()
    with stop_signals():
        [outcome] = run_on_cluster([job], cluster, sign_for=cluster_signer)
    if outcome.error is not None:
        raise outcome.error
    output_done()  # written and valid: a signal from now on is not an interruption
    # the count `video` gives without --cluster, summed over the segments (the driver warned as it joined)
    log.info("wrote %s: %s (%s) on the cluster %s in %.1f s, %s", job.output, counted(outcome.frames, "frame"),
             registry.changed(outcome.faces_changed, job.processing.frame_processors, outcome.stats.faces_small),
             cluster.address,
             time.monotonic() - started, say_tracks(outcome.audio, outcome.tracks))
