"""The invisible watermark: a marked frame reads back as livecam's, an unmarked one does not,
and the mark survives what a file meets on its way (JPEG at quality 60, half the size)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from livecam.marks import watermark as wm
from livecam.models.store import ModelStore
from livecam.runtime.providers import resolve_providers
from livecam.samples import sample_path
from livecam.settings import RuntimeSettings


@pytest.fixture(scope="module")
def marker() -> wm.Watermarker:
    return wm.Watermarker.open(ModelStore(RuntimeSettings(), progress=False), resolve_providers(["cpu"]))


@pytest.fixture(scope="module")
def photo() -> np.ndarray:
    image = cv2.imread(str(sample_path("grace_hopper")))
    return cv2.resize(image, (640, 800), interpolation=cv2.INTER_AREA)


@pytest.fixture(scope="module")
def marked(marker: wm.Watermarker, photo: np.ndarray) -> np.ndarray:
    return marker.embed(photo)


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10 * np.log10(255.0 ** 2 / max(mse, 1e-12))


def test_marked_photo_reads_back_the_livecam_word(marker: wm.Watermarker, marked: np.ndarray) -> None:
    reading = marker.read(marked)
    assert reading.marked and reading.version == wm.PAYLOAD_VERSION
    assert reading.errors <= 1


def test_unmarked_photo_is_not_read_as_marked(marker: wm.Watermarker, photo: np.ndarray) -> None:
    assert not marker.read(photo).marked


def test_mark_is_invisible(photo: np.ndarray, marked: np.ndarray) -> None:
    assert marked.shape == photo.shape and marked.dtype == np.uint8
    assert psnr(photo, marked) > 38.0


def test_mark_survives_jpeg_quality_60(marker: wm.Watermarker, marked: np.ndarray) -> None:
    ok, data = cv2.imencode(".jpg", marked, [cv2.IMWRITE_JPEG_QUALITY, 60])
    assert ok
    assert marker.read(cv2.imdecode(data, cv2.IMREAD_COLOR)).marked


def test_mark_survives_half_size(marker: wm.Watermarker, marked: np.ndarray) -> None:
    half = cv2.resize(marked, (marked.shape[1] // 2, marked.shape[0] // 2), interpolation=cv2.INTER_AREA)
    assert marker.read(half).marked


def test_alpha_is_kept(marker: wm.Watermarker, photo: np.ndarray) -> None:
    alpha = np.full(photo.shape[:2], 128, np.uint8)
    out = marker.embed(np.dstack([photo, alpha]))
    assert out.shape[2] == 4 and np.array_equal(out[:, :, 3], alpha)
    assert marker.read(out).marked


def test_video_cadence_marks_runs_twice_a_second_from_frame_0() -> None:
    assert [i for i in range(30) if wm.mark_frame(i, 30.0)] == [0, 1, 2, 3, 15, 16, 17, 18]
    assert [i for i in range(24) if wm.mark_frame(i, 24.0, run=1)] == [0, 12]  # live recordings
    assert all(wm.mark_frame(i, 6.0) for i in range(12))  # runs of 4 every 3 frames: all of them
    for fps in (23.976, 25.0, 29.97, 60.0, 1.0):
        for second in range(3):
            first = int(np.ceil(second * fps))
            marked = [i for i in range(first, int(np.ceil((second + 1) * fps))) if wm.mark_frame(i, fps)]
            assert len(marked) >= min(2, int(fps))


def test_the_video_marker_says_the_frames_it_marks(marker: wm.Watermarker) -> None:
    # pipeline/file.py gives the repeats of a frame (--fps) one embed where `marks` says so
    from livecam.pipeline.file import Cadenced

    video = marker.video_marker(30.0)
    assert isinstance(video, Cadenced)
    image = np.full((48, 64, 3), 120, np.uint8)
    assert [i for i in range(20) if video.marks(i)] == [i for i in range(20) if wm.mark_frame(i, 30.0)]
    assert [i for i in range(20) if video(i, image) is not image] == [0, 1, 2, 3, 15, 16, 17, 18]


def test_chance_false_positive_rate_is_small() -> None:
    assert wm.false_positive_rate() < 2e-5


@pytest.mark.parametrize("name", ["rivagan_decoder", "rivagan_encoder"])
def test_the_models_run_2d_convolutions_without_transposes(name: str) -> None:
    # The wheel's models ran their convolutions as 3-D ones (1x11x11 on a one-frame clip), which
    # ONNX Runtime's CPU provider runs without its blocked kernels, and their channel softmax
    # between two transposes: `livecam verify` of a file without tags, 90 decoder runs, took 1.6
    # times the CPU, an encoder run 1.5 to 1.65 times (scripts/extract_rivagan.py checks that the
    # rewrites give the same outputs).
    import onnx

    graph = onnx.load(str(ModelStore(RuntimeSettings(), progress=False).path(name))).graph
    convs = [node for node in graph.node if node.op_type == "Conv"]
    kernels = [list(onnx.helper.get_attribute_value(a)) for node in convs for a in node.attribute
               if a.name == "kernel_shape"]
    assert len(convs) == 4 and kernels == [[11, 11]] * 4
    assert not {node.op_type for node in graph.node} & {"Transpose", "Softmax"}


def test_a_tensorrt_run_marks_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """RivaGAN's frame sides follow the picture, outside any TensorRT profile (which ORT's
    TensorRT provider enforces): a TensorRT run's watermarker is made on the rest of its list."""
    from livecam.runtime import sessions

    trt = resolve_providers(["tensorrt"], ort_available=["TensorrtExecutionProvider", "CUDAExecutionProvider",
                                                         "CPUExecutionProvider"])
    assert trt.names == ("tensorrt", "cuda", "cpu")
    asked: list[tuple[str, ...]] = []
    real = sessions._create

    def on_the_cpu(model_path: Any, providers: Any, threads: int, front: Any = None) -> Any:
        asked.append(providers.names)
        return real(model_path, resolve_providers(["cpu"]), threads, front)

    monkeypatch.setattr(sessions, "_create", on_the_cpu)
    sessions.clear_pool()
    try:
        marker = wm.open_watermarker(RuntimeSettings(quiet=True), trt)
    finally:
        sessions.clear_pool()
    assert asked == [("cuda", "cpu"), ("cuda", "cpu")]
    assert [p for p, _ in trt.without("tensorrt").ort_providers] == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    image = np.full((90, 300, 3), 128, np.uint8)
    assert marker.embed(image).shape == image.shape  # and the sessions it got run


class _Session:
    """A stand-in RivaGAN session that records the frames it is given: the encoder changes
    nothing, the decoder reads 32 zero logits."""

    def __init__(self, encoder: bool) -> None:
        self.encoder = encoder
        self.frames: list[tuple[int, ...]] = []

    def run(self, _names: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        self.frames.append(feeds["frame"].shape)
        return [feeds["frame"]] if self.encoder else [np.zeros((1, 32), np.float32)]


def test_the_model_sees_a_bounded_copy_of_any_frame() -> None:
    """The encoder and decoder run on a copy at most 160 high and 640 wide, whatever the frame
    (a 20000x100 strip ran them at full size: 15 s to mark, 24 s to verify), and ordinary
    frames keep the copy they were always marked at, so their marks still read."""
    encoder, decoder = _Session(True), _Session(False)
    marker = wm.Watermarker(encoder, decoder)
    for width, height in [(20000, 100), (60000, 400), (1280, 720), (8000, 2000), (300, 90), (1080, 1920)]:
        image = np.full((height, width, 3), 128, np.uint8)
        assert marker.embed(image).shape == image.shape
        marker.read(image)
    sides = [frame[-2:] for frame in encoder.frames]
    assert [frame[-2:] for frame in decoder.frames] == sides
    # a 9:16 phone portrait is copied 160 wide, as a landscape frame is 160 high (its copy 96 wide
    # read 3 to 7 bits off through H.264)
    assert sides == [(100, 640), (160, 640), (160, 284), (160, 640), (90, 300), (284, 160)]


@pytest.fixture(scope="module")
def photo_48mp(photo: np.ndarray) -> np.ndarray:
    return cv2.resize(photo, (8000, 6000), interpolation=cv2.INTER_LINEAR)


def test_a_48_mp_photo_is_marked_beside_its_copy_and_verifies(marker: wm.Watermarker, photo_48mp: np.ndarray,
                                                               tmp_path: Path) -> None:
    """Marking needs the marked copy and bands of BAND_PIXELS, not float planes of the whole
    frame (upscaling the change whole peaked at 1.9 GB for a 144 MB frame and took 12 s)."""
    from livecam.marks.evidence import examine

    tracemalloc.start()
    try:
        marked = marker.embed(photo_48mp)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < photo_48mp.nbytes + 128 * 2 ** 20, f"{peak / 2 ** 20:.0f} MiB"
    assert marked.shape == photo_48mp.shape and int(cv2.absdiff(marked, photo_48mp).max()) <= 12
    path = tmp_path / "big.jpg"
    assert cv2.imwrite(str(path), marked, [cv2.IMWRITE_JPEG_QUALITY, 85])
    assert examine(path, marker).watermark.found
    half = cv2.resize(marked, (4000, 3000), interpolation=cv2.INTER_AREA)
    assert marker.read(cv2.convertScaleAbs(half, alpha=1.0, beta=20)).marked  # half size, brighter


@pytest.mark.parametrize("size", [(20000, 100), (300, 1600), (100, 20000)])
def test_a_long_strip_is_marked_and_survives_jpeg_and_brightness(marker: wm.Watermarker, photo: np.ndarray,
                                                                 size: tuple[int, int]) -> None:
    """A strip is marked and read on a copy squeezed to at most 640 wide and stretched to at
    least 80 (a picture taller than 1:2 was marked on a copy too narrow to read back)."""
    strip = cv2.resize(photo, size, interpolation=cv2.INTER_AREA)
    marked = marker.embed(strip)
    assert not marker.read(strip).marked
    ok, data = cv2.imencode(".jpg", marked, [cv2.IMWRITE_JPEG_QUALITY, 60])
    assert ok
    assert marker.read(cv2.imdecode(data, cv2.IMREAD_COLOR)).marked
    assert marker.read(cv2.convertScaleAbs(marked, alpha=1.0, beta=20)).marked


@pytest.mark.parametrize("size, jpeg", [((96, 120), True), ((100, 100), True), ((64, 80), False),
                                        ((40, 30), False)])
def test_a_small_picture_is_marked_so_that_it_reads_back(marker: wm.Watermarker, faces_dir: Path,
                                                         size: tuple[int, int], jpeg: bool) -> None:
    """A picture under 128 px was marked at its own size, where the mark did not read back even
    unchanged (`livecam verify` on a 96x120 PNG output: watermark not found); it is marked
    enlarged: it reads back as written (PNG), and from 96 px through JPEG at quality 95."""
    picture = cv2.resize(cv2.imread(str(faces_dir / "obama.jpg")), size, interpolation=cv2.INTER_AREA)
    marked = marker.embed(picture)
    assert marked.shape == picture.shape
    for ext, params in [(".png", []), (".jpg", [cv2.IMWRITE_JPEG_QUALITY, 95])][:2 if jpeg else 1]:
        ok, data = cv2.imencode(ext, marked, params)
        assert ok and marker.read(cv2.imdecode(data, cv2.IMREAD_COLOR)).marked, ext


@pytest.mark.parametrize("size", [(360, 640), (720, 1280)])
def test_a_phone_portrait_picture_is_marked_so_that_it_reads_back(marker: wm.Watermarker, faces_dir: Path,
                                                                  size: tuple[int, int]) -> None:
    """9:16 (a phone held upright, photo or video) was marked on a 90x160 copy, too narrow to
    read back this portrait (5 bits off, lossless): copies are at least 3:5 now (3 off)."""
    picture = cv2.resize(cv2.imread(str(faces_dir / "obama.jpg")), size, interpolation=cv2.INTER_AREA)
    marked = marker.embed(picture)
    assert marker.read(marked).marked
    ok, data = cv2.imencode(".jpg", marked, [cv2.IMWRITE_JPEG_QUALITY, 90])
    assert ok and marker.read(cv2.imdecode(data, cv2.IMREAD_COLOR)).marked


def test_a_phone_portrait_video_keeps_its_mark_through_h264(marker: wm.Watermarker, faces_dir: Path,
                                                            tmp_path: Path) -> None:
    """A 9:16 video (a phone held upright) was marked on a 96x160 copy: its frames read 3 to 7
    bits off after H.264 at CRF 23, most of them not marked; on a 160x284 copy, 1 to 2."""
    import av

    from tests.videos import make_clip

    clip = make_clip(tmp_path / "portrait.mp4", frames=4, size=(360, 640), audio=False,
                     source_image=faces_dir / "obama.jpg")
    with av.open(str(clip)) as src, av.open(str(tmp_path / "marked.mp4"), "w") as out:
        stream = out.add_stream("libx264", rate=30, options={"crf": "23"})
        stream.width, stream.height, stream.pix_fmt = 360, 640, "yuv420p"
        for frame in src.decode(video=0):
            marked = marker.embed(frame.to_ndarray(format="bgr24"))
            out.mux(stream.encode(av.VideoFrame.from_ndarray(marked, format="bgr24")))
        out.mux(stream.encode())
    with av.open(str(tmp_path / "marked.mp4")) as result:
        errors = [marker.read(frame.to_ndarray(format="bgr24")).errors for frame in result.decode(video=0)]
    assert len(errors) == 4 and max(errors) <= wm.MAX_BIT_ERRORS - 1  # with a bit to spare
