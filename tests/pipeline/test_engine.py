"""Engine: swap-model choice, building from settings, the per-frame calls and the live knobs."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.errors import InputError, ModelError, NoFaceError
from livecam.frame import FramePacket
from livecam.models.catalog import download_command
from livecam.media.images import read_image
from livecam.pipeline.engine import Engine, choose_swap_model
from livecam.runtime.providers import ProviderChoice
from livecam.settings import AnalysisSettings, ProcessingSettings, RuntimeSettings, SwapSettings

CPU = ProviderChoice(names=("cpu",), ort_providers=(("CPUExecutionProvider", ()),))
CUDA = ProviderChoice(names=("cuda", "cpu"), ort_providers=(("CUDAExecutionProvider", ()), ("CPUExecutionProvider", ())))


class FakeStore:
    def __init__(self, available: set[str], damaged: dict[str, str] | None = None) -> None:
        self.available = available
        self.damaged = damaged or {}

    def can_provide(self, name: str) -> bool:
        return name in self.available

    def is_present(self, name: str) -> bool:
        return name in self.available

    def file_path(self, name: str) -> Path:
        return Path("/m") / f"{name}.onnx"

    def damage(self, name: str) -> str:
        return self.damaged.get(name, "")

    def download_command(self, *names: str) -> str:  # the default folder's: ModelStore.download_command
        return download_command(*names)


ALL = {"inswapper_128", "inswapper_128_fp16", "w600k_r50"}


def test_auto_swap_model(caplog: pytest.LogCaptureFixture) -> None:
    assert choose_swap_model("auto", FakeStore(ALL), CUDA) == "inswapper_128_fp16"
    assert choose_swap_model("auto", FakeStore(ALL), CPU) == "inswapper_128"
    # fp16 missing on a GPU: fp32 is fine; fp32 missing on a CPU: fp16 is not used there.
    assert choose_swap_model("auto", FakeStore({"inswapper_128", "w600k_r50"}), CUDA) == "inswapper_128"
    assert not caplog.records
    with caplog.at_level(logging.WARNING, logger="livecam"):
        assert choose_swap_model("auto", FakeStore({"inswapper_128_fp16", "w600k_r50"}), CPU) == "mesh"
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert "mesh swapper" in message and "livecam models download inswapper_128" in message
    assert "--accept-license" in message and "\n" not in message
    # the fp16 file that is here was not named: the run fell back to the mesh swapper without the other way out
    assert "; --swap-model inswapper_128_fp16 runs the fp16 inswapper that is here;" in message, message
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="livecam"):
        assert choose_swap_model("auto", FakeStore({"inswapper_128"}), CPU) == "mesh"  # no ArcFace
    assert "w600k_r50" in caplog.records[0].getMessage() and "is here" not in caplog.records[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="livecam"):  # a damaged file is said as such
        store = FakeStore({"w600k_r50", "det_10g"}, {"inswapper_128": "/m/inswapper_128.onnx is corrupt (4 bytes)"})
        assert choose_swap_model("auto", store, CPU) == "mesh"
    (only,) = [r.getMessage() for r in caplog.records]
    assert "inswapper_128.onnx is corrupt (4 bytes)" in only and "not available" not in only
    assert choose_swap_model("mesh", FakeStore(ALL), CUDA) == "mesh"
    assert choose_swap_model("inswapper_128", FakeStore(set()), CPU) == "inswapper_128"



def test_the_mesh_fallback_warning_says_each_thing_once(caplog: pytest.LogCaptureFixture) -> None:
    # ~330 characters naming the models twice (names, then file names): now what is used, why,
    # the one command and the option that silences it, each once
    with caplog.at_level(logging.WARNING, logger="livecam"):
        assert choose_swap_model("auto", FakeStore(set()), CPU) == "mesh"
    (message,) = [r.getMessage() for r in caplog.records]
    assert message == ("warning: using the embedded mesh swapper: inswapper_128.onnx, w600k_r50.onnx and "
                       "det_10g.onnx are not in /m; `livecam models download inswapper_128 w600k_r50 det_10g "
                       "--accept-license` fetches them for the neural swap; --swap-model mesh silences this"), message
    assert message.count("inswapper_128") == 2 and len(message) < 260
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="livecam"):  # the option it names does silence it
        assert choose_swap_model("mesh", FakeStore(set()), CPU) == "mesh"
    assert not caplog.records
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="livecam"):  # a damaged file and an absent one: one line
        store = FakeStore({"w600k_r50"}, {"inswapper_128": "/m/inswapper_128.onnx is corrupt (4 bytes); delete it"})
        assert choose_swap_model("auto", store, CPU) == "mesh"
    (message,) = [r.getMessage() for r in caplog.records]
    assert message == ("warning: using the embedded mesh swapper: det_10g.onnx is not in /m; `livecam models download "
                       "det_10g --accept-license` fetches it for the neural swap; /m/inswapper_128.onnx is corrupt "
                       "(4 bytes); delete it; --swap-model mesh silences this"), message

def settings(tmp_path: Path, sources: tuple[Path, ...], *, models: Path | None = None, swap: str = "mesh",
             processors: tuple[str, ...] = ("face_swapper",), **analysis: object) -> ProcessingSettings:
    runtime = RuntimeSettings(providers=("cpu",), models_dir=models or tmp_path / "models", offline=True,
                              unverified_models=models is not None, quiet=True)
    return ProcessingSettings(sources=sources, frame_processors=processors, runtime=runtime,
                              analysis=AnalysisSettings(**analysis), swap=SwapSettings(model=swap))


@pytest.fixture
def cache_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path / "cache"))


def small(faces_dir: Path, name: str, tmp_path: Path) -> Path:
    """A half-size copy of a real photo (faster, still a clear face)."""
    img = cv2.imread(str(faces_dir / name))
    out = tmp_path / f"small_{Path(name).stem}.png"
    cv2.imwrite(str(out), cv2.resize(img, (img.shape[1] // 2, img.shape[0] // 2), interpolation=cv2.INTER_AREA))
    return out


def test_mesh_engine_end_to_end(tmp_path: Path, faces_dir: Path, cache_env: None) -> None:
    source = small(faces_dir, "biden.jpg", tmp_path)
    engine = Engine.create(settings(tmp_path, (source,)), live=False, progress=False)
    assert engine.processor_names == ["face_swapper"] and engine.swap_model == "mesh"
    line = engine.describe()
    assert "blazeface_full_range" in line and "mesh" in line and "cpu" in line and "\n" not in line
    assert engine.sources[0].face.landmarks is not None
    target = read_image(small(faces_dir, "obama.jpg", tmp_path))
    packet = FramePacket(index=0, image=target.copy())
    engine.analyse(packet, track=False)
    assert len(packet.faces) == 1 and {"detect", "landmarks", "analyse"} <= set(packet.timings)
    engine.process(packet)
    assert "face_swapper" in packet.timings
    x1, y1, x2, y2 = packet.faces[0].bbox.astype(int)
    changed = np.abs(packet.image.astype(int) - target).sum(axis=2) > 0
    assert changed[y1:y2, x1:x2].mean() > 0.2  # the face changed
    assert not changed[: max(0, y1 - 60)].any()  # the top of the frame did not
    # The governor's knobs.
    engine.set_enabled("face_swapper", False)
    assert not engine.is_enabled("face_swapper")
    again = FramePacket(index=1, image=target.copy())
    engine.analyse(again, track=True)
    engine.process(again)
    assert np.array_equal(again.image, target)
    engine.set_enabled("face_enhancer", False)  # not in this run: ignored
    engine.set_detect_every(2)
    engine.set_det_size(320)
    assert engine.next_source() is None  # nothing to cycle


def test_source_folder_cycles_in_live_mode(tmp_path: Path, faces_dir: Path, cache_env: None) -> None:
    folder = tmp_path / "faces"
    folder.mkdir()
    shutil.copy(small(faces_dir, "biden.jpg", tmp_path), folder / "a_biden.png")
    cv2.imwrite(str(folder / "b_blank.png"), np.full((120, 120, 3), 128, np.uint8))  # no face: skipped
    shutil.copy(small(faces_dir, "obama2.jpg", tmp_path), folder / "c_obama.png")
    (folder / "notes.txt").write_text("not a photo")
    engine = Engine.create(settings(tmp_path, (folder,)), live=True, progress=False)
    assert engine.sources[0].paths == (folder / "a_biden.png",)
    assert engine.next_source() == "c_obama.png"
    assert engine.sources[0].paths == (folder / "c_obama.png",)
    assert engine.next_source() == "a_biden.png"
    # Live analysis tracks: one stable track id, detection only every other frame.
    engine.set_detect_every(2)
    frame = read_image(folder / "c_obama.png")
    ids = []
    for i in range(4):
        packet = FramePacket(index=i, image=frame.copy(), pts=i / 30)
        engine.analyse(packet, track=True)
        assert len(packet.faces) == 1 and packet.faces[0].landmarks is not None
        ids.append(packet.faces[0].track_id)
        engine.process(packet)
    assert ids[0] is not None and len(set(ids)) == 1
    with pytest.raises(InputError, match="folder"):
        Engine.create(settings(tmp_path, (folder,)), live=False, progress=False)


def test_bad_sources(tmp_path: Path, faces_dir: Path, cache_env: None) -> None:
    with pytest.raises(InputError, match="does not exist"):
        Engine.create(settings(tmp_path, (tmp_path / "nope.jpg",)), live=False, progress=False)
    blank = tmp_path / "blank.png"
    cv2.imwrite(str(blank), np.full((120, 120, 3), 128, np.uint8))
    with pytest.raises(InputError, match="no face found in source photo .*blank.png"):
        Engine.create(settings(tmp_path, (blank,)), live=False, progress=False)
    with pytest.raises(InputError, match="--map"):
        Engine.create(settings(tmp_path, (blank,), face_map=((blank, blank),)), live=False, progress=False)


def test_missing_enhancer_model_offline_is_a_model_error(tmp_path: Path, faces_dir: Path, cache_env: None) -> None:
    source = small(faces_dir, "biden.jpg", tmp_path)
    with pytest.raises(ModelError, match="gfpgan_1.4") as info:
        Engine.create(settings(tmp_path, (source,), processors=("face_swapper", "face_enhancer")),
                      live=False, progress=False)
    assert info.value.exit_code == 3


def test_inswapper_engine_with_standins(tmp_path: Path, faces_dir: Path, cache_env: None, standin_models: Path) -> None:
    pytest.importorskip("livecam.processors.face_swapper")
    source = small(faces_dir, "biden.jpg", tmp_path)
    engine = Engine.create(settings(tmp_path, (source,), models=standin_models, swap="auto"),
                           live=False, progress=False)
    assert engine.swap_model == "inswapper_128"
    assert engine.sources[0].embedding is not None and engine.sources[0].embedding.shape == (512,)
    target = read_image(small(faces_dir, "obama.jpg", tmp_path))
    packet = FramePacket(index=0, image=target.copy())
    engine.analyse(packet, track=False)
    engine.process(packet)
    assert len(packet.faces) == 1 and not np.array_equal(packet.image, target)


def test_map_mode_with_standins(tmp_path: Path, faces_dir: Path, cache_env: None, standin_models: Path) -> None:
    """--map biden=obama: the face matching the obama reference gets the biden source; a map whose
    reference is nobody in the frame swaps nothing."""
    biden, obama = small(faces_dir, "biden.jpg", tmp_path), small(faces_dir, "obama.jpg", tmp_path)
    target = read_image(obama)
    engine = Engine.create(settings(tmp_path, (), models=standin_models, face_map=((biden, obama),),
                                    reference_distance=0.3), live=False, progress=False)
    assert len(engine.sources) == 1
    packet = FramePacket(index=0, image=target.copy())
    engine.analyse(packet, track=False)
    assert [f.source_key for f in packet.faces] == [0]
    engine = Engine.create(settings(tmp_path, (biden,), models=standin_models, reference=(biden,),
                                    reference_distance=0.3), live=False, progress=False)
    packet = FramePacket(index=0, image=target.copy())
    engine.analyse(packet, track=False)
    assert packet.faces == []  # the target is not the reference person


def test_a_source_a_processor_refuses_is_skipped_when_cycling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    # The n key: a photo whose face the mesh swapper cannot mesh used to end the live session.
    class Picky:
        name = "face_swapper"

        def __init__(self) -> None:
            self.prepared: list[str] = []

        def prepare(self, sources: list) -> None:
            if sources[0] == "b.jpg":
                raise InputError("the face in b.jpg could not be meshed")
            self.prepared.append(sources[0])

    monkeypatch.setattr("livecam.pipeline.engine.analyse_source", lambda paths, *a, **kw: paths[0].name)
    swapper = Picky()
    cycle = [tmp_path / "a.jpg", tmp_path / "b.jpg", tmp_path / "c.jpg"]
    engine = Engine(settings(tmp_path, tuple(cycle)), analyser=None, processors=[swapper],  # type: ignore[arg-type]
                    sources=[], providers=CPU, swap_model="mesh", cycle=cycle)
    with caplog.at_level(logging.WARNING, logger="livecam"):
        assert engine.next_source() == "c.jpg"
    assert swapper.prepared == ["c.jpg"] and engine.sources == ["c.jpg"]
    assert "skipping source b.jpg" in caplog.text


def test_a_source_folder_starts_with_its_first_photo_that_has_a_face(
        tmp_path: Path, faces_dir: Path, cache_env: None, caplog: pytest.LogCaptureFixture) -> None:
    # a faceless or damaged first photo (by name) refused the whole folder, while `n` skips such
    # photos with a warning
    folder = tmp_path / "faces"
    folder.mkdir()
    cv2.imwrite(str(folder / "a_blank.png"), np.full((120, 120, 3), 128, np.uint8))
    (folder / "b_cut.jpg").write_bytes((faces_dir / "obama.jpg").read_bytes()[:600])
    shutil.copy(small(faces_dir, "biden.jpg", tmp_path), folder / "c_biden.png")
    shutil.copy(small(faces_dir, "obama2.jpg", tmp_path), folder / "d_obama.png")
    with caplog.at_level(logging.WARNING, logger="livecam"):
        engine = Engine.create(settings(tmp_path, (folder,)), live=True, progress=False)
    assert engine.sources[0].paths == (folder / "c_biden.png",)
    assert "skipping source a_blank.png" in caplog.text and "skipping source b_cut.jpg" in caplog.text
    assert engine.next_source() == "d_obama.png"
    assert engine.next_source() == "c_biden.png"
    for name in ("c_biden.png", "d_obama.png"):
        (folder / name).unlink()
    with pytest.raises(NoFaceError, match=f"none of the 2 photos in source folder {folder} has a face"):
        Engine.create(settings(tmp_path, (folder,)), live=True, progress=False)


def test_an_image_gives_its_sessions_every_core_whatever_execution_threads_says(
        tmp_path: Path, faces_dir: Path, cache_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """--execution-threads splits the cores between frames processed at once; an image is one
    frame, so splitting would only slow it down."""
    from dataclasses import replace

    from livecam.commands.image import run_image
    from livecam.runtime import sessions
    from livecam.settings import ImageJob

    threads: list[int] = []
    real_get = sessions.get_session

    def get_session(path: Path, providers: ProviderChoice, intra_op_threads: int = 0) -> object:
        threads.append(intra_op_threads)
        return real_get(path, providers, intra_op_threads)

    monkeypatch.setattr(sessions, "get_session", get_session)
    monkeypatch.setattr(sessions.os, "cpu_count", lambda: 8)
    base = settings(tmp_path, (small(faces_dir, "biden.jpg", tmp_path),))
    processing = replace(base, runtime=replace(base.runtime, execution_threads=4))
    out = tmp_path / "out.png"
    try:
        run_image(ImageJob(input=small(faces_dir, "obama.jpg", tmp_path), output=out, processing=processing))
    finally:
        sessions.clear_pool()  # no 8-thread sessions for the tests that follow
    assert out.is_file() and threads and set(threads) == {8}


def test_a_neural_swap_without_det_10g_says_blazeface_finds_the_faces(
        tmp_path: Path, faces_dir: Path, standin_models: Path, cache_env: None,
        caplog: pytest.LogCaptureFixture) -> None:
    # inswapper and ArcFace here, det_10g not: auto runs the neural swap on the embedded BlazeFace,
    # silently (or, with the other two damaged, "det_10g ... so the embedded mesh swapper is used")
    source = small(faces_dir, "biden.jpg", tmp_path)
    with caplog.at_level(logging.WARNING, logger="livecam"):
        engine = Engine.create(settings(tmp_path, (source,), models=standin_models, swap="auto"),
                               live=False, progress=False)
    assert engine.swap_model == "inswapper_128" and "detector blazeface_full_range" in engine.describe()
    messages = [r.getMessage() for r in caplog.records]
    assert [m for m in messages if "det_10g" in m] == [
        f"warning: the neural swap finds faces with the embedded BlazeFace detector: det_10g.onnx is not in "
        f"{standin_models}; `livecam --models-dir {standin_models} models download det_10g --accept-license` "
        f"fetches it; "
        f"--detector blazeface silences this"], messages
    assert not any("mesh swapper" in m for m in messages), messages
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="livecam"):  # the option it names does silence it
        Engine.create(settings(tmp_path, (source,), models=standin_models, swap="auto", detector="blazeface"),
                      live=False, progress=False)
    assert not any("det_10g" in r.getMessage() for r in caplog.records)


def test_a_damaged_det_10g_is_called_damaged_beside_the_neural_swap(caplog: pytest.LogCaptureFixture) -> None:
    from livecam.pipeline.engine import warn_detector_fallback

    store = FakeStore({"inswapper_128", "w600k_r50"}, {"det_10g": "/m/det_10g.onnx is corrupt (16 bytes); delete it"})
    with caplog.at_level(logging.WARNING, logger="livecam"):
        assert choose_swap_model("auto", store, CPU) == "inswapper_128"
        warn_detector_fallback(store)
    assert [r.getMessage() for r in caplog.records] == [
        "warning: the neural swap finds faces with the embedded BlazeFace detector: /m/det_10g.onnx is corrupt "
        "(16 bytes); delete it; --detector blazeface silences this"]
