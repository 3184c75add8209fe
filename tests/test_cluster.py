"""livecam.cluster on a two-node local Ray cluster (ray.cluster_utils.Cluster, started once for
the module: 1 CPU per node, about 1 GB): the output equals the single-machine run, a worker killed
mid-segment is retried to a byte-identical file, an error of livecam's own fails only its file.

This process starts Ray at most once: the `driver` fixture enters livecam's own
cluster.connected for the module and every run_on_cluster of the tests shares that connection
(a CI run on Python 3.12.1 with Ray 2.60, ray.init and ray.shutdown once per call, ten times in
one pytest process, died with SIGSEGV here); `livecam doctor --cluster` connects from a child
process of its own.

Workers build the engine with a factory from this module (pickled by reference; the nodes get
this checkout on PYTHONPATH): tests.pipeline.test_segments.SmoothingEngine, whose output depends
on the frames before it, so a missing warm-up would show.
"""

from __future__ import annotations

import functools
import gc
import importlib.util
import logging
import os
import re
import shutil
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import cv2
import numpy as np
import pytest

from livecam.errors import LivecamError
from livecam.faces.face import Face
from livecam.frame import FramePacket
from livecam.pipeline.batch import FileOutcome
from livecam.pipeline.file import process_video
from livecam.pipeline.progress import Progress
from livecam.settings import C2paSettings, ClusterSettings, VideoJob
from tests.conftest import REPO_ROOT, run_cli
from tests.doubles import NoModels
from tests.pipeline.test_segments import CASES, SmoothingEngine, job_for, make_coded_clip
from tests.videos import cut_short_lines, make_clip, probe

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                reason="Ray is not installed (pip install -e '.[dev]' or '.[ray]')")


def smoothing_engine(job: object) -> SmoothingEngine:
    return SmoothingEngine()


class KillingEngine(SmoothingEngine):
    """Kills its own worker process at frame `at`, once (a marker file remembers)."""

    def __init__(self, marker: Path, at: int) -> None:
        super().__init__()
        self.marker, self.at = marker, at

    def process(self, packet: FramePacket) -> None:
        if packet.index == self.at and not self.marker.exists():
            self.marker.touch()
            os._exit(1)  # as the OOM killer would: no exception, no clean-up
        super().process(packet)


def killing_engine(marker: Path, at: int, job: object) -> KillingEngine:
    return KillingEngine(marker, at)


class RefusingEngine(SmoothingEngine):
    """livecam's own error on one frame; every attempt is logged to `attempts`."""

    def __init__(self, attempts: Path, at: int) -> None:
        super().__init__()
        self.attempts, self.at = attempts, at

    def process(self, packet: FramePacket) -> None:
        if packet.index == self.at:
            with self.attempts.open("a") as fh:
                fh.write("attempt\n")
            raise LivecamError("the model refused this frame")
        super().process(packet)


def refusing_engine(attempts: Path, at: int, job: object) -> RefusingEngine:
    return RefusingEngine(attempts, at)


class BuggyEngine(SmoothingEngine):
    """A bug (not livecam's own error) on one frame, its message on two lines."""

    def process(self, packet: FramePacket) -> None:
        if packet.index == 50:
            raise ValueError("an index out of step\nwith its frame")
        super().process(packet)


def buggy_engine(job: object) -> BuggyEngine:
    return BuggyEngine()


class WarningEngine(SmoothingEngine):
    """Warns as it is built (as Engine.create does of a swap model it fell back from) and on the
    first frame of every segment (the same line each time)."""

    def __init__(self) -> None:
        super().__init__()
        logging.getLogger("livecam").warning("warning: the engine's own warning, as it is built")

    def process(self, packet: FramePacket) -> None:
        if packet.index % 30 == 0:
            logging.getLogger("livecam").warning("warning: a note on a segment's first frame")
        super().process(packet)


def warning_engine(job: object) -> WarningEngine:
    return WarningEngine()


class MaskedEngine(NoModels):
    """One face big enough to change in every frame; process() changes it, or leaves it as it
    is (`leave`: as the swapper does where its --face-mask came out empty)."""

    tracks = False

    def __init__(self, leave: bool) -> None:
        self.leave = leave

    def analyse(self, packet: FramePacket, track: bool) -> None:
        kps = np.array([[50, 50], [90, 50], [70, 65], [55, 80], [85, 80]], np.float32)  # 40 px between the eyes
        packet.faces = [Face(bbox=np.array([30.0, 20.0, 110.0, 100.0], np.float32), score=0.9, kps=kps)]

    def detect(self, packet: FramePacket) -> None:
        self.analyse(packet, track=False)

    def process(self, packet: FramePacket) -> None:
        if self.leave:
            packet.left_as_is = len(packet.faces)
        else:
            packet.image[16:40, 40:80] = 255


def masked_engine(leave: bool, job: object) -> MaskedEngine:
    return MaskedEngine(leave)


def on_test_engines(monkeypatch: pytest.MonkeyPatch, factory: Callable[[Any], Any]) -> list[list[str]]:
    """livecam.cluster.run_on_cluster as the commands call it, with the test's engine factory
    (the workers' engines); the inputs of every call are kept."""
    import livecam.cluster

    ran: list[list[str]] = []
    real = livecam.cluster.run_on_cluster

    def on_test_cluster(jobs, cluster, progress=None, **kw):  # type: ignore[no-untyped-def]
        ran.append([j.input.name for j in jobs])
        return real(jobs, cluster, progress, **{**kw, "engine_factory": factory})

    monkeypatch.setattr(livecam.cluster, "run_on_cluster", on_test_cluster)
    return ran


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    from ray.cluster_utils import Cluster

    saved = os.environ.get("PYTHONPATH")
    paths = [str(REPO_ROOT / "src"), str(REPO_ROOT)] + ([saved] if saved else [])
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)  # the nodes' workers import livecam and tests
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": 150 << 20})
    cluster.add_node(num_cpus=1, object_store_memory=150 << 20)
    try:
        yield str(cluster.address)
    finally:
        cluster.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


@pytest.fixture(scope="module")
def driver(ray_cluster: str) -> Iterator[str]:
    """The cluster's address, with this process connected to it once for the module: the real
    cluster.connected is entered here, and the tests' calls of it get that connection (they
    neither init nor shut down Ray). A run's worker actors end as their handles go, with the run."""
    import livecam.cluster

    @contextmanager
    def shared(address: str, *, cpus: int | None = None) -> Iterator[Any]:
        assert address == ray_cluster, address  # the tests' runs go to this cluster, nowhere else
        yield ray

    with livecam.cluster.connected(ray_cluster) as ray, pytest.MonkeyPatch.context() as patch:
        patch.setattr(livecam.cluster, "connected", shared)
        yield ray_cluster


def settings(address: str) -> ClusterSettings:
    return ClusterSettings(address=address, workers=2, segment_seconds=1.0, overlap_seconds=0.5)


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    codec, options, audio_codec, suffix, _ = CASES["h264-bframes-long-gop"]
    return make_coded_clip(tmp_path_factory.mktemp("cluster") / f"in{suffix}", codec=codec, options=options,
                           audio_codec=audio_codec)


@dataclass(frozen=True)
class PlainRun:
    job: VideoJob
    outcome: FileOutcome
    counted: int  # the progress bar's count at the end


@pytest.fixture(scope="module")
def plain_run(clip: Path, driver: str, tmp_path_factory: pytest.TempPathFactory) -> PlainRun:
    """`clip` on the cluster with the smoothing engine, run once for the module: the output the
    retried and the chunked runs must equal byte for byte (each test ran it again)."""
    from livecam.cluster import run_on_cluster

    job = job_for(clip, tmp_path_factory.mktemp("plain") / "cluster.mp4", "libx264")
    progress = Progress(90, quiet=True)
    [outcome] = run_on_cluster([job], settings(driver), progress, engine_factory=smoothing_engine)
    return PlainRun(job, outcome, progress.done)


def test_two_nodes_give_the_single_machine_output(tmp_path: Path, clip: Path, plain_run: PlainRun) -> None:
    whole = job_for(clip, tmp_path / "whole.mp4", "libx264")
    process_video(whole, SmoothingEngine(), quiet=True)
    job, outcome = plain_run.job, plain_run.outcome
    assert outcome.error is None and outcome.frames == 90
    assert plain_run.counted == 90

    a, b = probe(whole.output), probe(job.output)
    assert b["frames"] == a["frames"] == 90
    assert b["times"] == a["times"]
    assert b["audio_duration"] == pytest.approx(a["audio_duration"], abs=1e-6)
    for i, (x, y) in enumerate(zip(a["images"], b["images"])):
        assert abs(float(x[16:40, 40:80].mean()) - float(y[16:40, 40:80].mean())) <= 1.0, i
        assert abs(float(x.mean()) - float(y.mean())) <= 1.0, i
    if shutil.which("ffmpeg") is None:
        pytest.skip("Debian's ffmpeg is not on PATH (apt-get install ffmpeg); its decode check was skipped")
    result = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", str(job.output), "-f", "null", "-"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stderr == ""


def test_a_worker_killed_mid_segment_is_retried_to_the_same_bytes(tmp_path: Path, clip: Path, driver: str,
                                                                  plain_run: PlainRun) -> None:
    from livecam.cluster import run_on_cluster

    plain = plain_run.job
    assert plain_run.outcome.error is None
    marker = tmp_path / "killed"
    killed = job_for(clip, tmp_path / "killed.mp4", "libx264")
    progress = Progress(90, quiet=True)
    [outcome] = run_on_cluster([killed], settings(driver), progress,
                               engine_factory=functools.partial(killing_engine, marker, 45))
    assert marker.exists()  # the worker did die in segment 2
    assert outcome.error is None and outcome.frames == 90
    assert progress.done == 90  # the retried segment is not counted twice
    assert killed.output.read_bytes() == plain.output.read_bytes()


def test_livecam_errors_fail_their_file_only_and_are_not_retried(tmp_path: Path, clip: Path,
                                                                 driver: str) -> None:
    from livecam.cluster import run_on_cluster

    attempts = tmp_path / "attempts"
    corrupt = tmp_path / "corrupt.mp4"
    corrupt.write_bytes(b"\x00\x00\x00\x18ftypmp42" + os.urandom(2000))
    failing = job_for(clip, tmp_path / "failing.mp4", "libx264")
    fine = job_for(clip, tmp_path / "fine.mp4", "libx264", frame_range=(0, 10))
    broken = job_for(corrupt, tmp_path / "broken.mp4", "libx264")
    outcomes = run_on_cluster([failing, broken, fine], settings(driver), Progress(None, quiet=True),
                              engine_factory=functools.partial(refusing_engine, attempts, 50))
    assert [o.job for o in outcomes] == [failing, broken, fine]
    assert outcomes[0].error is not None
    assert "in.mp4 segment 2 of 3" in outcomes[0].error.message
    assert "the model refused this frame" in outcomes[0].error.message
    assert attempts.read_text().count("attempt") == 1  # not retried
    assert not failing.output.exists()
    assert outcomes[1].error is not None and "corrupt.mp4" in outcomes[1].error.message
    assert not broken.output.exists()
    assert outcomes[2].error is None and probe(fine.output)["frames"] == 90


def test_doctor_lists_every_node_with_its_versions(ray_cluster: str) -> None:
    """`livecam doctor --cluster ADDR`, in a child process: its own ray.init and shutdown."""
    result = run_cli(["doctor", "--cluster", ray_cluster], timeout=180)  # PYTHONPATH: ray_cluster's
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "reachable" in lines[0], lines
    nodes = [line for line in lines[1:] if line.strip().startswith("node ")]
    assert len(nodes) == 2, lines
    assert all("0 GPUs" in line and line.endswith(": OK") for line in nodes), lines
    assert lines[-1] == "Cluster: ready", lines


def test_doctor_counts_the_nodes_that_are_not_ready(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # it said "Cluster: NOT ready (1 node(s) above)"
    from livecam import cluster
    from livecam.commands.doctor import run_cluster_doctor

    lines = ["cluster local: reachable; here livecam 0.1.0, Ray 2.60.0, Python 3.11",
             "  node a (10.0.0.1): 1 GPU, livecam 0.1.0, Ray 2.60.0, Python 3.11: OK",
             "  node b (10.0.0.2): 2 GPUs, livecam 0.0.9 (here 0.1.0), Ray 2.60.0, Python 3.11: MISMATCH: livecam"]
    monkeypatch.setattr(cluster, "describe_cluster", lambda address: lines)
    assert run_cluster_doctor("local") == 1
    assert capsys.readouterr().out.splitlines()[-1] == "Cluster: NOT ready (1 node above)"


def test_a_folder_runs_every_segment_on_the_cluster_and_sums_up(tmp_path: Path, clip: Path, driver: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """`livecam video FOLDER OUT --cluster ADDR`: the folder's runner is the cluster's (one queue
    for both files' segments); a corrupt file is its own failure, the good ones are written, and
    the total counts the faces swapped in them, as a folder run on this machine does."""
    from livecam.commands.video import run_folder

    folder = tmp_path / "clips"
    folder.mkdir()
    shutil.copy(clip, folder / "a.mp4")
    shutil.copy(clip, folder / "b.mp4")
    (folder / "c.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + os.urandom(2000))
    ran = on_test_engines(monkeypatch, functools.partial(masked_engine, False))
    template = job_for(folder, tmp_path / "out", "libx264", c2pa=C2paSettings(enabled=False))
    with pytest.raises(LivecamError) as failed:
        run_folder(template, settings(driver))
    assert sorted(ran[0]) == ["a.mp4", "b.mp4"]  # c.mp4 failed its checks before any worker
    assert "1 failed" in failed.value.message and failed.value.exit_code == 2
    assert failed.value.message.startswith(f"2 of 3 files written to {tmp_path / 'out'} (180 frames in ")
    assert " fps, 180 faces swapped), 1 failed" in failed.value.message  # the segments' counts, summed
    for name in ("a.mp4", "b.mp4"):
        assert probe(tmp_path / "out" / name)["frames"] == 90
    assert not (tmp_path / "out" / "c.mp4").exists()


def test_workers_without_the_input_get_chunks_and_write_the_same_bytes(
        tmp_path: Path, clip: Path, driver: str, plain_run: PlainRun, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """No shared storage: a worker whose node does not hold the driver's file (here: the plan's
    size and mtime say another file) asks for chunks (auto), or gets them anyway (chunks); the
    output is byte for byte the one of workers reading the path."""
    from dataclasses import replace

    import livecam.cluster
    from livecam.cluster import run_on_cluster

    by_path = plain_run.job
    assert plain_run.outcome.error is None
    forced = job_for(clip, tmp_path / "chunks.mp4", "libx264")
    [outcome] = run_on_cluster([forced], replace(settings(driver), ship_input="chunks"),
                               Progress(90, quiet=True), engine_factory=smoothing_engine)
    assert outcome.error is None and outcome.frames == 90
    assert forced.output.read_bytes() == by_path.output.read_bytes()

    real_plan = livecam.cluster.plan_job
    monkeypatch.setattr(livecam.cluster, "plan_job",
                        lambda *a, **kw: replace(real_plan(*a, **kw), stamp=(1, 1)))  # a file no node has
    elsewhere = job_for(clip, tmp_path / "auto.mp4", "libx264")
    progress = Progress(90, quiet=True)
    with caplog.at_level("INFO", logger="livecam"):
        [outcome] = run_on_cluster([elsewhere], settings(driver), progress, engine_factory=smoothing_engine)
    assert outcome.error is None and progress.done == 90
    assert "does not read" in caplog.text  # the chunks were used
    assert elsewhere.output.read_bytes() == by_path.output.read_bytes()

    only_path = job_for(clip, tmp_path / "only-path.mp4", "libx264")
    [failed] = run_on_cluster([only_path], replace(settings(driver), ship_input="path"),
                              Progress(90, quiet=True), engine_factory=smoothing_engine)
    assert failed.error is not None and "cannot read" in failed.error.message
    assert "--ship-input auto" in failed.error.message
    assert not only_path.output.exists()


def test_a_worker_with_other_versions_is_refused(tmp_path: Path, clip: Path, driver: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver compares every worker's livecam and Ray versions with its own (here the
    driver's are made to differ) and refuses in one line naming the node and both versions."""
    import livecam.cluster
    from livecam.cluster import run_on_cluster
    from livecam.errors import InputError

    real = livecam.cluster.versions()
    monkeypatch.setattr(livecam.cluster, "versions", lambda: {**real, "livecam": "0.0.1"})
    job = job_for(clip, tmp_path / "out.mp4", "libx264")
    with pytest.raises(InputError) as refused:
        run_on_cluster([job], settings(driver), Progress(90, quiet=True), engine_factory=smoothing_engine)
    message = refused.value.message
    assert "\n" not in message
    assert f"livecam {real['livecam']} (here 0.0.1)" in message and "node " in message
    assert not job.output.exists()


def test_version_mismatch_names_the_node_and_both_versions() -> None:
    from livecam.cluster import version_mismatch

    want = {"livecam": "1.2.0", "ray": "2.60.0", "python": "3.12"}
    assert version_mismatch(want, {**want, "node": "gpu-7", "pid": "9"}) is None
    message = version_mismatch(want, {**want, "ray": "2.59.1", "node": "gpu-7"})
    assert message is not None and "\n" not in message
    assert "node gpu-7" in message and "ray 2.59.1 (here 2.60.0)" in message and "livecam" not in message.split(";")[0]
    both = version_mismatch(want, {"livecam": "1.1.0", "ray": "2.59.1", "python": "3.12", "node": "n"})
    assert both is not None and "livecam 1.1.0 (here 1.2.0)" in both and "ray 2.59.1 (here 2.60.0)" in both


@pytest.mark.parametrize("leave", [False, True], ids=["swapped", "masks left every face"])
def test_a_cluster_run_says_how_many_faces_it_swapped_as_one_machine_does(
        tmp_path: Path, clip: Path, driver: str, leave: bool, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """`video --cluster`'s summary counts the faces changed, summed over the segments (it said
    '90 frames on the cluster' and nothing of the faces), and a run whose --face-mask left every
    face as it was warns once, as `video` without --cluster does."""
    from livecam.commands.video_cluster import run_video_on_cluster

    here = process_video(job_for(clip, tmp_path / "here.mp4", "libx264"), MaskedEngine(leave), quiet=True)
    assert here.stats.faces_changed == (0 if leave else 90)
    on_test_engines(monkeypatch, functools.partial(masked_engine, leave))
    job = job_for(clip, tmp_path / "cluster.mp4", "libx264", c2pa=C2paSettings(enabled=False))
    caplog.clear()  # the run here warned too
    with caplog.at_level("INFO", logger="livecam"):
        run_video_on_cluster(job, settings(driver))
    said = [r.getMessage() for r in caplog.records]
    wrote = [line for line in said if line.startswith(f"wrote {job.output}: ")]
    assert len(wrote) == 1, said
    assert wrote[0].startswith(f"wrote {job.output}: 90 frames ({here.stats.faces_changed} faces swapped) on the "
                               f"cluster {driver} in "), wrote
    warning = ("warning: --face-mask left nothing to swap of the faces found in 90 of the 90 processed frames: "
               "none of the parts it keeps is there; choose other --face-mask types, regions or areas")
    assert said.count(warning) == (1 if leave else 0), said  # once for the file, not once a segment


def test_a_cluster_run_says_its_audio_and_subtitle_tracks_as_one_machine_does(
        tmp_path: Path, driver: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """`video --cluster`'s summary ended at the seconds; `video` here ends with what became of
    the sound and the subtitles ("audio copied, 1 subtitle track"), and so does it now."""
    import livecam.commands.video as video
    from livecam.commands.video_cluster import run_video_on_cluster

    clip = make_clip(tmp_path / "subs.mkv", frames=45, subtitle=True)
    monkeypatch.setattr(video, "create_engine", lambda job: MaskedEngine(True))
    on_test_engines(monkeypatch, functools.partial(masked_engine, True))
    with caplog.at_level("INFO", logger="livecam"):
        video.run_video(job_for(clip, tmp_path / "here.mkv", "libx264", c2pa=C2paSettings(enabled=False)))
        run_video_on_cluster(job_for(clip, tmp_path / "cluster.mkv", "libx264", c2pa=C2paSettings(enabled=False)),
                             settings(driver))
    here, there = [r.getMessage() for r in caplog.records if r.getMessage().startswith("wrote ")]
    assert here.endswith(" fps, audio copied, 1 subtitle track"), here
    assert there.startswith(f"wrote {tmp_path / 'cluster.mkv'}: 45 frames (0 faces swapped) on the cluster "), there
    assert there.endswith(" s, audio copied, 1 subtitle track"), there


def test_a_mirrored_selfie_clip_sent_in_chunks_comes_out_as_players_show_it(tmp_path: Path, driver: str) -> None:
    """A selfie app's MP4 (its track header's display matrix mirrors) given to workers as chunks
    (--ship-input chunks: the segments' packets in Matroska, which holds no mirror) comes out
    mirrored as players show it, as `video` without --cluster writes it; it came out unmirrored."""
    from dataclasses import replace

    from livecam.cluster import run_on_cluster
    from tests.videos import as_displayed, set_display_matrix

    plain = make_clip(tmp_path / "plain.mp4", frames=60, size=(160, 120), audio=False, stamp=True)
    selfie = tmp_path / "selfie.mp4"  # the same encoded pictures, only the matrix differs
    selfie.write_bytes(plain.read_bytes())
    set_display_matrix(selfie, -1, 0, 0, 1)
    job = job_for(selfie, tmp_path / "out.mp4", "libx264")
    [outcome] = run_on_cluster([job], replace(settings(driver), ship_input="chunks"), Progress(60, quiet=True),
                               engine_factory=functools.partial(masked_engine, True))  # changes no pixel
    assert outcome.error is None and outcome.frames == 60
    stored = probe(plain)["images"]
    written = probe(job.output)["images"]
    assert len(written) == 60
    for i, (image, before) in enumerate(zip(written, stored)):
        shown = as_displayed(before, -1, 0, 0, 1)
        assert np.abs(image.astype(int) - shown).mean() < 2, i  # lossless libx264 (quality 0), yuv420p twice
        assert np.abs(image.astype(int) - before).mean() > 10, i  # the stored picture is not what players show


def test_a_local_run_starts_its_own_ray_where_another_cluster_runs(tmp_path: Path, clip: Path, ray_cluster: str,
                                                                  faces_dir: Path) -> None:
    """`--cluster local` starts Ray for this run even where a cluster was started on the machine
    (here the module's, in a child process); ray.init without an address joins the last one
    started (`ray start`'s, another user's), which refused livecam's num_cpus ('cannot connect to
    the Ray cluster at 'local'') and would otherwise have run the video there."""
    out = tmp_path / "out.mp4"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(LIVECAM_MODELS_DIR=str(tmp_path / "models"), LIVECAM_CACHE_DIR=str(tmp_path / "cache"),
               LIVECAM_OFFLINE="1")
    proc = run_cli(["video", str(clip), str(out), "--source", str(faces_dir / "obama.jpg"), "--swap-model", "mesh",
                    "--execution-threads", "1", "--segment-seconds", "1", "--no-c2pa", "--cluster", "local"],
                   env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}: 90 frames (0 faces swapped) on the cluster local in " in proc.stderr, proc.stderr
    assert probe(out)["frames"] == 90


def test_ctrl_c_in_a_folder_run_names_the_files_written_before_it(tmp_path: Path, clip: Path, driver: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C after one file of a folder was joined said 'interrupted; no output written' while that
    file stayed written; a folder run on this machine says how many were written before it."""
    import livecam.cluster
    from livecam.commands.video import run_folder
    from livecam.errors import Interrupted

    folder = tmp_path / "clips"
    folder.mkdir()
    shutil.copy(clip, folder / "a.mp4")
    shutil.copy(clip, folder / "b.mp4")
    joins: list[Path] = []
    real = livecam.cluster.write_joined

    def interrupted_at_the_second(plan, results, **kw):  # type: ignore[no-untyped-def]
        joins.append(plan.job.output)
        if len(joins) == 2:
            raise KeyboardInterrupt  # as Ctrl-C lands in the driver, before the second file is joined
        return real(plan, results, **kw)

    monkeypatch.setattr(livecam.cluster, "write_joined", interrupted_at_the_second)
    on_test_engines(monkeypatch, functools.partial(masked_engine, False))
    template = job_for(folder, tmp_path / "out", "libx264", c2pa=C2paSettings(enabled=False))
    with pytest.raises(Interrupted) as stopped:
        run_folder(template, settings(driver))
    assert stopped.value.message == f"interrupted; 1 of 2 files was written to {tmp_path / 'out'} before it"
    assert stopped.value.exit_code == 130
    assert [p.name for p in (tmp_path / "out").iterdir()] == [joins[0].name]
    assert probe(joins[0])["frames"] == 90
    # The run's workers end with their handles, which the error's traceback holds (its frames); a
    # real run's go with its ray.shutdown. Kept, they held the CPUs the next test's workers waited for.
    del stopped
    gc.collect()


def test_a_bug_in_a_worker_is_named_as_a_folder_run_here_names_it(tmp_path: Path, clip: Path, driver: str) -> None:
    """An exception of the worker's code that is not livecam's own was said by the last line of
    Ray's text ('the cluster worker failed (with its frame)': the second line of its message);
    it is now the internal error a folder run on this machine gives, type and first line."""
    from livecam.cluster import run_on_cluster

    job = job_for(clip, tmp_path / "out.mp4", "libx264")
    [outcome] = run_on_cluster([job], settings(driver), Progress(90, quiet=True), engine_factory=buggy_engine)
    assert outcome.error is not None and outcome.error.exit_code == 1
    assert outcome.error.message == ("in.mp4 segment 2 of 3 (frames 30-59): internal error: ValueError: an index out "
                                     "of step (rerun with -v for details and please report it)")
    assert not job.output.exists()


def _with_a_corrupt_packet(clip: Path, out: Path, at: int) -> Path:
    """`clip`'s video remuxed to `out` with packet `at` (decode order) overwritten: a decoder skips it."""
    import av

    with av.open(str(clip)) as src, av.open(str(out), "w") as dst:
        stream = dst.add_stream_from_template(src.streams.video[0])
        for n, packet in enumerate(src.demux(src.streams.video[0])):
            if packet.dts is None:
                continue
            if n == at:
                garbage = av.Packet(b"\xff" * packet.size)
                garbage.pts, garbage.dts, garbage.time_base = packet.pts, packet.dts, packet.time_base
                packet = garbage
            packet.stream = stream
            dst.mux(packet)
    return out


def test_a_segments_own_error_names_the_segment_once(tmp_path: Path, driver: str) -> None:
    """A damaged input whose middle segment decodes a frame fewer than planned (a corrupt packet
    skipped): the message named the segment twice over."""
    from livecam.cluster import run_on_cluster

    whole = make_clip(tmp_path / "whole.mkv", frames=90, size=(96, 64), fps=30, audio=False)
    job = job_for(_with_a_corrupt_packet(whole, tmp_path / "bad.mkv", 45), tmp_path / "out.mp4", "libx264")
    [outcome] = run_on_cluster([job], settings(driver), Progress(None, quiet=True), engine_factory=smoothing_engine)
    assert outcome.error is not None and outcome.error.exit_code == 2
    # which segment meets the damage differs by PyAV (17 skips the packet a segment later)
    assert re.fullmatch(r"bad\.mkv segment [23] of 3 \(frames \d+-\d+\): [^;]+; (the file is damaged there: )?"
                        r"run (it|this file) without --cluster", outcome.error.message), outcome.error.message
    assert outcome.error.message.count("segment") == 1
    assert not job.output.exists() and not list(tmp_path.glob(".livecam-*"))


def test_a_cut_short_input_on_the_cluster_is_written_as_one_machine_writes_it(
        tmp_path: Path, driver: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A cut MP4 whose last packet was cut through (38 packets, 37 frames decode): `video` writes
    the 37 frames with one warning; `video --cluster` failed, exit 2, 'cut.mp4 segment 2 of 2
    (frames 30-37): decoded 7 frames where the plan has 8', after a warning that counted 38."""
    import livecam.commands.video as video
    from livecam.commands.video_cluster import run_video_on_cluster
    from tests.pipeline.test_file import _truncated_faststart

    cut = _truncated_faststart(tmp_path)
    monkeypatch.setattr(video, "create_engine", lambda job: SmoothingEngine())
    on_test_engines(monkeypatch, smoothing_engine)

    def run(runner: Callable[[VideoJob], object], out: Path) -> list[str]:
        caplog.clear()
        with caplog.at_level("WARNING", logger="livecam"):
            runner(job_for(cut, out, "libx264", c2pa=C2paSettings(enabled=False)))  # raises where it fails
        return cut_short_lines([r.getMessage() for r in caplog.records])

    said_here = run(video.run_video, tmp_path / "here.mp4")
    said_there = run(lambda job: run_video_on_cluster(job, settings(driver)), tmp_path / "there.mp4")
    assert len(said_here) == 1 and said_there == said_here, (said_here, said_there)
    here, there = probe(tmp_path / "here.mp4"), probe(tmp_path / "there.mp4")
    assert there["frames"] == here["frames"] < 60


def test_the_workers_warnings_are_said_by_the_driver_once_each(tmp_path: Path, clip: Path, driver: str,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """A worker's log is not shown: the engine's warnings (the mesh swapper used as inswapper is
    not there, options it ignores) and a segment's were never said; now each once, however many
    workers built an engine and segments said it. In a folder run a segment's starts with its
    file's name (it did not: with several files, which one?), as a folder run here names a
    file's; the engine's, of no one file, does not, as a folder run here says its engine's."""
    from livecam.cluster import run_on_cluster

    jobs = []
    for name in ("a.mp4", "b.mp4"):
        shutil.copy(clip, tmp_path / name)
        jobs.append(job_for(tmp_path / name, tmp_path / "out" / name, "libx264"))
    (tmp_path / "out").mkdir()
    with caplog.at_level("WARNING", logger="livecam"):
        outcomes = run_on_cluster(jobs, settings(driver), Progress(180, quiet=True), engine_factory=warning_engine,
                                  folder=True)
    assert [(o.error, o.frames) for o in outcomes] == [(None, 90), (None, 90)]
    said = [r.getMessage() for r in caplog.records]
    assert said.count("warning: the engine's own warning, as it is built") == 1, said
    for name in ("a.mp4", "b.mp4"):
        assert said.count(f"{name}: warning: a note on a segment's first frame") == 1, said
    assert all(line.startswith(("a.mp4: ", "b.mp4: ")) for line in said if "engine's own" not in line), said


def test_an_input_removed_after_it_was_planned_fails_only_its_file(tmp_path: Path, clip: Path, driver: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Moved away while the others were planned (before the workers start): the driver's order
    by size read the file again and raised FileNotFoundError for the whole run."""
    import livecam.cluster
    from livecam.cluster import run_on_cluster

    gone = tmp_path / "gone.mp4"
    shutil.copy(clip, gone)
    real = livecam.cluster.plan_job

    def then_removed(job, *args, **kw):  # type: ignore[no-untyped-def]
        plan = real(job, *args, **kw)
        if job.input == gone:
            gone.unlink()
        return plan

    monkeypatch.setattr(livecam.cluster, "plan_job", then_removed)
    lost = job_for(gone, tmp_path / "lost.mp4", "libx264")
    kept = job_for(clip, tmp_path / "kept.mp4", "libx264")
    first, second = run_on_cluster([lost, kept], settings(driver), Progress(None, quiet=True),
                                   engine_factory=smoothing_engine)
    assert first.error is not None and "gone.mp4" in first.error.message and "does not exist" in first.error.message
    assert not lost.output.exists()
    assert second.error is None and probe(kept.output)["frames"] == 90


def test_workers_swap_in_the_drivers_photo_where_their_node_does_not_hold_it(
        tmp_path: Path, driver: str, faces_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers built their engine from the --source path as the driver named it: a node
    without that file failed the segment ('source ... does not exist'), one holding another
    file there swapped in another face. The driver ships the photo's bytes; a worker's error
    still names the photo the user gave. Here the photo leaves the driver's path once the
    driver has read it (as the run plans its file), before any worker builds its engine."""
    import livecam.cluster
    from livecam.cluster import build_engine, run_on_cluster
    from livecam.settings import ProcessingSettings, RuntimeSettings, SwapSettings

    src = make_clip(tmp_path / "biden.mp4", frames=60, size=(320, 240), fps=30, audio=False,
                    source_image=faces_dir / "biden.jpg", moving_crop=True)
    gone = tmp_path / "gone"
    gone.mkdir()
    real_plan = livecam.cluster.plan_job

    def plan_then_take_the_photo(job: VideoJob, *args: Any, **kw: Any) -> Any:
        for photo in job.processing.sources:
            photo.rename(gone / photo.name)
        return real_plan(job, *args, **kw)

    monkeypatch.setattr(livecam.cluster, "plan_job", plan_then_take_the_photo)
    runtime = RuntimeSettings(execution_threads=1, quiet=True, models_dir=tmp_path / "models", offline=True)

    def job_with(photo: Path, output: Path) -> VideoJob:
        processing = ProcessingSettings(sources=(photo,), runtime=runtime, swap=SwapSettings(model="mesh"))
        return job_for(src, output, "libx264", processing=processing)

    photo = tmp_path / "photos" / "obama.jpg"
    photo.parent.mkdir()
    shutil.copy(faces_dir / "obama.jpg", photo)
    job = job_with(photo, tmp_path / "swapped.mp4")
    [outcome] = run_on_cluster([job], settings(driver), Progress(60, quiet=True), engine_factory=build_engine)
    assert not photo.exists()  # the workers could not have read it
    assert outcome.error is None, outcome.error.message
    assert outcome.frames == 60 and outcome.faces_changed == 60
    a, b = probe(src), probe(job.output)
    assert b["frames"] == 60
    face = np.abs(a["images"][45][60:160, 120:230].astype(int) - b["images"][45][60:160, 120:230]).mean()
    assert face > 5  # the face swapped in the second segment too (8.0 on PyAV 17, 9+ on 18)

    faceless = tmp_path / "photos" / "grey.png"
    cv2.imwrite(str(faceless), np.full((200, 200, 3), 128, np.uint8))
    failed = job_with(faceless, tmp_path / "failed.mp4")
    [outcome] = run_on_cluster([failed], settings(driver), Progress(60, quiet=True), engine_factory=build_engine)
    assert outcome.error is not None and f"no face found in source photo {faceless};" in outcome.error.message, \
        outcome.error.message
    assert "livecam-photos-" not in outcome.error.message and not failed.output.exists()
