"""--face-mask: the inswapper's paste masks (box, occlusion, region, area) and their options.

The occluder and parser stand-ins return KNOWN masks (tests/standins/masks.py), so the composite
is checked pixel for pixel: where a mask excludes the face, the output is exactly the target's;
where every chosen mask includes it, the output is exactly the plain box swap's.
"""

from __future__ import annotations

import click
import numpy as np
import pytest
from click.testing import CliRunner

from livecam.cli import _processing, processing_options
from livecam.cli_usage import expand_variadic
from livecam.errors import ModelError
from livecam.faces.face import Face
from livecam.frame import FramePacket
from livecam.processors.crop_masks import FaceMasker
from livecam.processors.face_parser import FaceParser
from livecam.processors.face_swapper import InswapperSwapper
from livecam.processors.occluder import Occluder
from livecam.processors.paste import inswapper_mask
from livecam.settings import DEFAULT_FACE_MASK_REGIONS, FACE_MASK_AREAS, RuntimeSettings, SwapSettings
from tests.processors.test_face_swapper import OBAMA_KPS, _face, _rotated, _source
from tests.standins.inswapper import build_inswapper
from tests.standins.masks import build_bisenet, build_xseg
from tests.standins import cpu_session

MARGIN = 2.0  # crop px from a mask edge: beyond it the bilinear paste no longer mixes across
FEATHER = 10.0  # crop px inside a model mask's edge where the inward feather (and the bilinear footprint) reach 1


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    d = tmp_path_factory.mktemp("masks")
    return {"swap": cpu_session(build_inswapper(d / "inswapper_128.onnx")),
            "xseg": cpu_session(build_xseg(d / "xseg_1.onnx")),
            "hair_skin": cpu_session(build_bisenet(d / "bisenet_hair_skin.onnx", top=17, bottom=1)),
            "glasses_skin": cpu_session(build_bisenet(d / "bisenet_glasses_skin.onnx", top=6, bottom=1))}


@pytest.fixture(scope="module")
def frame():
    # Texture everywhere, so a swapped pixel differs from the target's.
    return np.random.default_rng(3).integers(0, 256, (600, 800, 3), dtype=np.uint8)


FACE = _face(_rotated(OBAMA_KPS, 12.0, 1.1) - np.float32([100, 0]))


def _swap(sessions, frame, settings: SwapSettings, masker: FaceMasker | None = None,
          face: Face = FACE) -> np.ndarray:
    sw = InswapperSwapper(sessions["swap"], settings, emap=np.eye(512, dtype=np.float32), masker=masker)
    sw.prepare([_source(1)])
    packet = FramePacket(index=0, image=frame.copy(), faces=[face])
    sw.process(packet)
    return packet.image


def _crop_coords(sessions, frame, face: Face = FACE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every frame pixel, its crop coordinates (u, v), and the frame-to-crop matrix."""
    sw = InswapperSwapper(sessions["swap"], SwapSettings(), emap=np.eye(512, dtype=np.float32))
    m = sw.align(frame, face).matrix
    ys, xs = np.mgrid[0:frame.shape[0], 0:frame.shape[1]].astype(np.float64)
    return m[0, 0] * xs + m[0, 1] * ys + m[0, 2], m[1, 0] * xs + m[1, 1] * ys + m[1, 2], m


def _box_interior(sessions, frame, u, v, m) -> np.ndarray:
    """Frame pixels whose whole bilinear footprint lies where the box mask is exactly 255."""
    box = inswapper_mask(m, 128, frame.shape)
    assert box.interior is not None
    u0, v0, u1, v1 = box.interior
    return (u > u0 + MARGIN) & (u < u1 - MARGIN) & (v > v0 + MARGIN) & (v < v1 - MARGIN)


NO_COLOR = dict(color_match=False)


# ---- box, blur, padding ------------------------------------------------------------------------

@pytest.mark.parametrize("degrees,scale", [(0.0, 1.0), (12.0, 1.1), (-30.0, 0.6)])
def test_default_mask_is_todays_box_bit_for_bit(degrees, scale):
    face = _face(_rotated(OBAMA_KPS, degrees, scale))
    from livecam.faces.align import align_matrix, arcface_template

    m = align_matrix(face.kps, arcface_template(128))
    crop = np.zeros((128, 128, 3), np.uint8)
    today = inswapper_mask(m, 128, (720, 1280, 3))
    for settings in (SwapSettings(), SwapSettings(face_mask=("box",), face_mask_blur=0.3,
                                                  face_mask_padding=(0.0, 0.0, 0.0, 0.0))):
        got = FaceMasker(settings).mask(crop, m, face, (720, 1280, 3))
        assert np.array_equal(got.alpha8, today.alpha8)
        assert got.support == today.support and got.interior == today.interior


def test_padding_moves_each_edge_of_the_box_inwards():
    m = np.array([[0.5, 0.0, 10.0], [0.0, 0.5, 20.0]])
    plain = inswapper_mask(m, 128, (720, 1280, 3)).alpha8
    top, right, bottom, left = 25.0, 10.0, 5.0, 40.0
    padded = inswapper_mask(m, 128, (720, 1280, 3), padding=(top, right, bottom, left)).alpha8
    rows, cols = np.flatnonzero(padded.any(axis=1)), np.flatnonzero(padded.any(axis=0))
    plain_rows, plain_cols = np.flatnonzero(plain.any(axis=1)), np.flatnonzero(plain.any(axis=0))
    for got, was, pct in ((rows[0], plain_rows[0], top), (plain_cols[-1] - cols[-1], 0, right),
                          (plain_rows[-1] - rows[-1], 0, bottom), (cols[0], plain_cols[0], left)):
        shift = abs(int(got) - int(was))
        assert abs(shift - 1.28 * pct) <= 1.5, (shift, pct)


def test_blur_sets_the_width_of_the_box_fade():
    m = np.array([[0.5, 0.0, 10.0], [0.0, 0.5, 20.0]])

    def fading(blur: float) -> int:
        alpha = FaceMasker(SwapSettings(face_mask_blur=blur)).mask(np.zeros((128, 128, 3), np.uint8), m,
                                                                   FACE, (720, 1280, 3)).alpha8
        middle = alpha[64]  # one row across the face
        if blur > 0.3:
            assert middle[0] == 0 and middle[-1] == 0  # a wider fade still ends inside the crop
        return int(np.count_nonzero((middle > 0) & (middle < 255)))

    hard, default, wide = fading(0.0), fading(0.3), fading(1.0)
    assert hard <= 2 < default < wide


# ---- occlusion, region, area: the composite pixel for pixel ------------------------------------

def test_occluded_pixels_are_the_targets_and_the_rest_the_swaps(sessions, frame):
    settings = SwapSettings(face_mask=("box", "occlusion"), **NO_COLOR)
    out = _swap(sessions, frame, settings, FaceMasker(settings, occluder=Occluder(sessions["xseg"])))
    plain = _swap(sessions, frame, SwapSettings(**NO_COLOR))
    u, v, m = _crop_coords(sessions, frame)
    inside = _box_interior(sessions, frame, u, v, m)
    # The stand-in occluder: crop columns 64.. are covered.
    covered = inside & (u > 64 + MARGIN)
    seen = inside & (u < 64 - FEATHER)
    assert covered.sum() > 2_000 and seen.sum() > 2_000
    assert not np.array_equal(plain[covered], frame[covered])  # the swap did change them
    assert np.array_equal(out[covered], frame[covered])
    assert np.array_equal(out[seen], plain[seen])
    # Outside the crop nothing moved.
    outside = (u < -MARGIN) | (u > 128 + MARGIN) | (v < -MARGIN) | (v > 128 + MARGIN)
    assert np.array_equal(out[outside], frame[outside])


def test_region_keeps_what_is_not_chosen(sessions, frame):
    # Stand-in parser: crop rows 0..63 hair, 64.. skin. Default regions take skin, not hair.
    settings = SwapSettings(face_mask=("box", "region"), **NO_COLOR)
    assert settings.face_mask_regions == DEFAULT_FACE_MASK_REGIONS
    out = _swap(sessions, frame, settings, FaceMasker(settings, parser=FaceParser(sessions["hair_skin"])))
    plain = _swap(sessions, frame, SwapSettings(**NO_COLOR))
    u, v, m = _crop_coords(sessions, frame)
    inside = _box_interior(sessions, frame, u, v, m)
    hair, skin = inside & (v < 64 - MARGIN), inside & (v > 64 + FEATHER)
    assert hair.sum() > 2_000 and skin.sum() > 2_000
    assert np.array_equal(out[hair], frame[hair])
    assert np.array_equal(out[skin], plain[skin])


def test_glasses_stay_by_default_and_go_when_chosen(sessions, frame):
    parser = FaceParser(sessions["glasses_skin"])  # crop rows 0..63 glasses, 64.. skin
    u, v, m = _crop_coords(sessions, frame)
    glasses = _box_interior(sessions, frame, u, v, m) & (v < 64 - FEATHER)
    plain = _swap(sessions, frame, SwapSettings(**NO_COLOR))
    default = SwapSettings(face_mask=("region",), **NO_COLOR)
    assert np.array_equal(_swap(sessions, frame, default, FaceMasker(default, parser=parser))[glasses],
                          frame[glasses])
    chosen = SwapSettings(face_mask=("box", "region"), face_mask_regions=("glasses", "skin"), **NO_COLOR)
    assert np.array_equal(_swap(sessions, frame, chosen, FaceMasker(chosen, parser=parser))[glasses],
                          plain[glasses])


def test_several_masks_paste_their_intersection(sessions, frame):
    settings = SwapSettings(face_mask=("box", "occlusion", "region"), **NO_COLOR)
    masker = FaceMasker(settings, occluder=Occluder(sessions["xseg"]), parser=FaceParser(sessions["hair_skin"]))
    out = _swap(sessions, frame, settings, masker)
    plain = _swap(sessions, frame, SwapSettings(**NO_COLOR))
    u, v, m = _crop_coords(sessions, frame)
    inside = _box_interior(sessions, frame, u, v, m)
    both = inside & (u < 64 - FEATHER) & (v > 64 + FEATHER)  # seen and skin
    either_out = inside & ((u > 64 + MARGIN) | (v < 64 - MARGIN))
    assert both.sum() > 1_000 and either_out.sum() > 3_000
    assert np.array_equal(out[both], plain[both])
    assert np.array_equal(out[either_out], frame[either_out])


def test_area_masks_split_the_face_at_the_nose(sessions, frame):
    u, v, m = _crop_coords(sessions, frame)
    nose_v = float(m[1, 0] * FACE.kps[2, 0] + m[1, 1] * FACE.kps[2, 1] + m[1, 2])
    inside = _box_interior(sessions, frame, u, v, m)
    plain = _swap(sessions, frame, SwapSettings(**NO_COLOR))
    upper = SwapSettings(face_mask=("box", "area"), face_mask_areas=("upper-face",), **NO_COLOR)
    out = _swap(sessions, frame, upper, FaceMasker(upper))
    above, below = inside & (v < nose_v - FEATHER), inside & (v > nose_v + MARGIN + 1)
    assert above.sum() > 2_000 and below.sum() > 2_000
    assert np.array_equal(out[above], plain[above])
    assert np.array_equal(out[below], frame[below])
    lower = SwapSettings(face_mask=("box", "area"), face_mask_areas=("lower-face",), **NO_COLOR)
    out = _swap(sessions, frame, lower, FaceMasker(lower))
    assert np.array_equal(out[inside & (v < nose_v - MARGIN - 1)], frame[inside & (v < nose_v - MARGIN - 1)])
    assert np.array_equal(out[inside & (v > nose_v + FEATHER)], plain[inside & (v > nose_v + FEATHER)])


def test_area_mouth_alone_swaps_only_the_mouth(sessions, frame):
    from livecam.processors.masks import mouth_polygon

    mouth_only = SwapSettings(face_mask=("box", "area"), face_mask_areas=("mouth",), **NO_COLOR)
    out = _swap(sessions, frame, mouth_only, FaceMasker(mouth_only))
    changed = np.any(out != frame, axis=2)
    polygon = mouth_polygon(None, FACE.kps, 0)
    _, _, m = _crop_coords(sessions, frame)
    reach = int(np.ceil(MARGIN / np.hypot(m[0, 0], m[0, 1])))  # MARGIN crop px in frame px
    x0, y0 = np.floor(polygon.min(axis=0)).astype(int) - reach
    x1, y1 = np.ceil(polygon.max(axis=0)).astype(int) + reach
    assert changed.sum() > 300
    outside = np.ones_like(changed)
    outside[y0:y1, x0:x1] = False
    assert not changed[outside].any()


def test_all_areas_by_default_cover_the_face(sessions, frame):
    settings = SwapSettings(face_mask=("area", "box"), **NO_COLOR)
    assert settings.face_mask_areas == FACE_MASK_AREAS
    out = _swap(sessions, frame, settings, FaceMasker(settings))
    u, v, m = _crop_coords(sessions, frame)
    deep = (u > FEATHER) & (u < 128 - FEATHER) & (v > FEATHER) & (v < 128 - FEATHER)
    plain = _swap(sessions, frame, SwapSettings(**NO_COLOR))
    assert np.array_equal(out[deep & _box_interior(sessions, frame, u, v, m)],
                          plain[deep & _box_interior(sessions, frame, u, v, m)])


# ---- errors and the command line ----------------------------------------------------------------

def test_a_mask_model_that_is_not_there_is_a_model_error_naming_the_download():
    with pytest.raises(ModelError, match="livecam models download xseg_1"):
        FaceMasker(SwapSettings(face_mask=("box", "occlusion")))
    with pytest.raises(ModelError, match="livecam models download bisenet_resnet_34"):
        FaceMasker(SwapSettings(face_mask=("region",)))


def test_a_wrong_model_is_a_model_error(sessions):
    with pytest.raises(ModelError, match="NHWC"):
        Occluder(sessions["hair_skin"])
    with pytest.raises(ModelError, match="face parser"):
        FaceParser(sessions["xseg"])


def _parsed(args: list[str]) -> SwapSettings:
    got: list[SwapSettings] = []

    @click.command()
    @processing_options
    @click.pass_context
    def probe(ctx: click.Context, **kw: object) -> None:
        got.append(_processing(ctx, dict(kw)).swap)

    result = CliRunner().invoke(probe, expand_variadic(args), obj=RuntimeSettings())
    assert result.exit_code == 0, result.output
    return got[0]


def test_cli_options_reach_the_swap_settings():
    assert _parsed([]) == SwapSettings()
    s = _parsed(["--face-mask", "box", "occlusion", "--face-mask", "region,area", "--face-mask-blur", "0.5",
                 "--face-mask-padding", "1", "2", "3", "4", "--face-mask-areas", "mouth,upper-face",
                 "--face-mask-regions", "skin,glasses"])
    assert s.face_mask == ("box", "occlusion", "region", "area")
    assert s.face_mask_blur == 0.5 and s.face_mask_padding == (1.0, 2.0, 3.0, 4.0)
    assert s.face_mask_areas == ("mouth", "upper-face") and s.face_mask_regions == ("skin", "glasses")


def test_cli_rejects_unknown_mask_names():
    @click.command()
    @processing_options
    def probe(**kw: object) -> None:
        pass

    result = CliRunner().invoke(probe, ["--face-mask-regions", "skin,hair"])
    assert result.exit_code == 2 and "unknown hair" in result.output


@pytest.mark.parametrize("masks", [["area"], ["box", "area"]])
def test_the_mouth_mask_on_an_area_mask_of_the_mouth_alone_is_refused(tmp_path, faces_dir, isolated_env, masks):
    # The one area swapped is the one kept: it ran, said "1 face swapped" and wrote the target unchanged.
    from tests.conftest import run_cli
    from tests.processors.test_face_enhancer_cli import cli_setup

    setup = cli_setup(tmp_path, faces_dir, isolated_env, lambda models: None)  # ArcFace and inswapper stand-ins
    target, source = setup["target"], setup["source"]
    out = tmp_path / "o.png"
    result = run_cli(["--unverified-models", "image", str(target), str(out), "-s", str(source), "--swap-model",
                      "inswapper_128", "--face-mask", *masks, "--face-mask-areas", "mouth", "--mouth-mask"],
                     env=isolated_env)
    assert result.returncode == 2 and not out.exists()
    assert result.stderr.splitlines()[-1] == (
        "livecam: error: --mouth-mask keeps the target's mouth, and --face-mask area with --face-mask-areas mouth "
        "swaps only the mouth: nothing would be swapped; leave one of them out")


@pytest.mark.parametrize("padding", [("50", "0", "50", "0"), ("0", "60", "0", "40"), ("100", "0", "0", "0")])
def test_cli_rejects_a_padding_that_leaves_no_box(isolated_env, padding):
    # It ran, said "1 face swapped" and wrote the target unchanged.
    from tests.conftest import run_cli

    result = run_cli(["image", "in.jpg", "out.jpg", "-s", "face.jpg", "--face-mask-padding", *padding], env=isolated_env)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (f"livecam: error: Invalid value for '--face-mask-padding': {' '.join(padding)} leaves "
                             "nothing of the box to swap; TOP + BOTTOM and RIGHT + LEFT must each stay under 100 "
                             "(% of the crop) (see `livecam image --help`)\n")
    assert _parsed(["--face-mask-padding", "49", "0", "50", "99"]).face_mask_padding == (49.0, 0.0, 50.0, 99.0)


@pytest.mark.parametrize("option", ["--face-mask", "--face-mask-areas", "--face-mask-regions"])
@pytest.mark.parametrize("value", ["", ",", " , "])
def test_cli_rejects_an_empty_list_of_mask_names(isolated_env, option, value):
    # An unset shell variable (--face-mask-regions "$PARTS") quietly meant the default.
    from tests.conftest import run_cli

    result = run_cli(["image", "in.jpg", "out.jpg", "-s", "face.jpg", option, value], env=isolated_env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"livecam: error: Invalid value for '{option}': no names given; choose from ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_models_list_shows_the_mask_models(isolated_env):
    from tests.conftest import run_cli

    result = run_cli(["models", "list"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert "missing" in lines["xseg_1"] and "GPL-3.0" in lines["xseg_1"] and "--accept-license" in lines["xseg_1"]
    assert "70.3 MB" in lines["xseg_1"]
    assert "missing" in lines["bisenet_resnet_34"] and "MIT" in lines["bisenet_resnet_34"]
    assert "--accept-license" not in lines["bisenet_resnet_34"] and "93.6 MB" in lines["bisenet_resnet_34"]


def test_end_to_end_through_the_cli_with_standin_mask_models(tmp_path, faces_dir, isolated_env):
    from pathlib import Path

    from livecam.media.images import read_image
    from tests.commands.test_image import small
    from tests.conftest import run_cli
    from tests.standins.arcface import build_arcface

    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir()
    build_arcface(models / "w600k_r50.onnx")
    build_inswapper(models / "inswapper_128.onnx")
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    base = ["--unverified-models", "image", str(target), "-s", str(source), "--no-watermark", "--no-c2pa",
            "--no-label", "--swap-model", "inswapper_128"]
    missing = run_cli([*base[:3], str(tmp_path / "m.png"), *base[3:], "--face-mask", "box", "occlusion"],
                      env=isolated_env)
    errors = [line for line in missing.stderr.splitlines() if line.startswith("livecam: error:")]
    assert missing.returncode == 3 and len(errors) == 1 and "livecam models download xseg_1" in errors[0]
    assert "Traceback" not in missing.stderr
    assert not (tmp_path / "m.png").exists()

    build_xseg(models / "xseg_1.onnx")
    build_bisenet(models / "bisenet_resnet_34.onnx")
    before = read_image(target)
    changed = {}
    for name, masks in (("box", []), ("occlusion", ["--face-mask", "box", "occlusion"]),
                        ("all", ["--face-mask", "box", "occlusion", "region", "area"])):
        out = tmp_path / f"{name}.png"
        result = run_cli([*base[:3], str(out), *base[3:], *masks], env=isolated_env)
        assert result.returncode == 0, result.stderr
        changed[name] = np.any(read_image(out) != before, axis=2).sum()
    # The occluder stand-in covers half the crop, the parser half again: fewer pixels swapped each time.
    assert changed["box"] > 0.0 and 0.3 < changed["occlusion"] / changed["box"] < 0.7
    assert 0.0 < changed["all"] < 0.7 * changed["occlusion"]


@pytest.mark.parametrize("size", [0, 100])
def test_mouth_mask_is_cut_from_the_same_mask_and_combines(sessions, frame, size):
    from livecam.processors.masks import mouth_polygon

    import cv2

    settings = SwapSettings(face_mask=("box", "occlusion"), mouth_mask=size, **NO_COLOR)
    out = _swap(sessions, frame, settings, FaceMasker(settings, occluder=Occluder(sessions["xseg"])))
    mouth = np.zeros(frame.shape[:2], np.uint8)
    cv2.fillPoly(mouth, [np.round(mouth_polygon(None, FACE.kps, size)).astype(np.int32)], 1)
    mouth = cv2.erode(mouth, np.ones((3, 3), np.uint8)).astype(bool)
    assert mouth.sum() > 500
    assert np.array_equal(out[mouth], frame[mouth])  # the mouth (grown with SIZE) stays the target's
    plain = _swap(sessions, frame, SwapSettings(**NO_COLOR))
    u, v, m = _crop_coords(sessions, frame)
    seen = _box_interior(sessions, frame, u, v, m) & (u < 64 - FEATHER) & (v < 60)  # above the mouth
    assert seen.sum() > 1_000 and np.array_equal(out[seen], plain[seen])


def test_the_catalog_takes_the_mask_standins_which_have_the_real_signatures(tmp_path):
    from livecam.models.catalog import CATALOG
    from livecam.models.store import signature_problem

    xseg = cpu_session(build_xseg(tmp_path / "xseg_1.onnx"))
    parser = cpu_session(build_bisenet(tmp_path / "bisenet.onnx"))
    assert signature_problem(CATALOG["xseg_1"], xseg.get_inputs(), xseg.get_outputs()) == ""
    assert signature_problem(CATALOG["bisenet_resnet_34"], parser.get_inputs(), parser.get_outputs()) == ""
    assert signature_problem(CATALOG["xseg_1"], parser.get_inputs(), parser.get_outputs()) != ""
    # The real parser has three outputs, the occluder one of each, with these names.
    one_head = cpu_session(build_bisenet(tmp_path / "one_head.onnx", heads=("output",)))
    assert "3 outputs" in signature_problem(CATALOG["bisenet_resnet_34"], one_head.get_inputs(), one_head.get_outputs())
    renamed = cpu_session(build_xseg(tmp_path / "renamed.onnx", names=("in_face", "out_mask")))
    assert signature_problem(CATALOG["xseg_1"], renamed.get_inputs(), renamed.get_outputs()) != ""


@pytest.mark.parametrize("heads", [("output", "0", "1"), ("0", "1", "output"), ("logits",), ("logits", "aux")])
def test_the_parser_reads_the_class_logits_whatever_the_order_of_its_outputs(tmp_path, heads):
    # `output` by name wherever it is; in a re-export without that name, the first 19-class output.
    parser = FaceParser(cpu_session(build_bisenet(tmp_path / "bisenet.onnx", heads=heads)))
    regions = parser.regions(np.zeros((128, 128, 3), np.uint8), ("skin",))
    assert regions[:60].max() == 0.0 and regions[68:].min() == 1.0  # rows 64.. are skin in the logits


def test_the_occluder_reads_its_tensor_names_from_the_file(tmp_path, sessions):
    crop = np.random.default_rng(5).integers(0, 256, (96, 96, 3), dtype=np.uint8)
    real = Occluder(sessions["xseg"]).visible(crop)
    renamed = Occluder(cpu_session(build_xseg(tmp_path / "renamed.onnx", names=("in_face", "out_mask"))))
    assert np.array_equal(renamed.visible(crop), real)
    assert real[:, :44].min() == 1.0 and real[:, 52:].max() == 0.0  # the left half is "face"


def test_mask_models_that_answer_in_another_shape_are_a_model_error_not_a_traceback():
    from types import SimpleNamespace

    class Answers:  # a session whose signature fits but whose answer does not
        def __init__(self, inputs, output, answer):
            self._inputs, self._outputs, self._answer = inputs, [output], answer

        def get_inputs(self):
            return self._inputs

        def get_outputs(self):
            return self._outputs

        def run(self, names, feeds):
            return [self._answer]

    crop = np.zeros((64, 64, 3), np.uint8)
    xseg = Answers([SimpleNamespace(name="input", shape=[1, 256, 256, 3])],
                   SimpleNamespace(name="output", shape=[1, 256, 256, 1]), np.zeros((1, 128, 128, 1), np.float32))
    with pytest.raises(ModelError, match="occluder gave a \\[1, 128, 128, 1\\] mask"):
        Occluder(xseg).visible(crop)
    parser = Answers([SimpleNamespace(name="input", shape=["batch", 3, 512, 512])],
                     SimpleNamespace(name="output", shape=["batch", "classes", 512, 512]),
                     np.zeros((1, 18, 512, 512), np.float32))
    with pytest.raises(ModelError, match="not 19 class logits"):
        FaceParser(parser).labels(crop)


def test_the_mask_models_time_is_its_own_stage_for_bench(sessions, frame):
    # livecam bench shows each stage's cost: the occluder's share is recorded apart from the swap.
    def timings(settings: SwapSettings, masker: FaceMasker | None = None) -> dict[str, float]:
        sw = InswapperSwapper(sessions["swap"], settings, emap=np.eye(512, dtype=np.float32), masker=masker)
        sw.prepare([_source(1)])
        packet = FramePacket(index=0, image=frame.copy(), faces=[FACE])
        sw.process(packet)
        return packet.timings

    masked = SwapSettings(face_mask=("box", "occlusion"), **NO_COLOR)
    with_mask = timings(masked, FaceMasker(masked, occluder=Occluder(sessions["xseg"])))
    assert 0.0 < with_mask["face_mask"] <= with_mask["face_swapper"]
    assert "face_mask" not in timings(SwapSettings(**NO_COLOR))  # the plain box: nothing to show


def test_the_governors_mask_step_keeps_the_box_and_drops_the_occluder(sessions, frame):
    settings = SwapSettings(face_mask=("box", "occlusion"), **NO_COLOR)
    sw = InswapperSwapper(sessions["swap"], settings, emap=np.eye(512, dtype=np.float32),
                          masker=FaceMasker(settings, occluder=Occluder(sessions["xseg"])))
    sw.prepare([_source(1)])
    assert sw.uses_mask_models
    sw.set_mask_models(False)
    packet = FramePacket(index=0, image=frame.copy(), faces=[FACE])
    sw.process(packet)
    u, v, m = _crop_coords(sessions, frame)
    covered = _box_interior(sessions, frame, u, v, m) & (u > 64 + MARGIN)
    plain = _swap(sessions, frame, SwapSettings(**NO_COLOR))
    # The occluded half is swapped now (the occluder is off), as under the plain box.
    assert np.array_equal(packet.image[covered], plain[covered])
    sw.set_mask_models(True)
    again = FramePacket(index=1, image=frame.copy(), faces=[FACE])
    sw.process(again)
    assert np.array_equal(again.image[covered], frame[covered])  # back on: the occluded half is kept


@pytest.mark.parametrize("types", [("occlusion",), ("region",), ("occlusion", "region")])
def test_the_governors_mask_step_without_the_box_falls_back_to_it(sessions, frame, types):
    # A mask of models alone, with the models off, was "everything": the whole crop square,
    # background and all, was pasted with a hard edge on every live frame the step lasted.
    settings = SwapSettings(face_mask=types, **NO_COLOR)
    masker = FaceMasker(settings, occluder=Occluder(sessions["xseg"]), parser=FaceParser(sessions["hair_skin"]))
    sw = InswapperSwapper(sessions["swap"], settings, emap=np.eye(512, dtype=np.float32), masker=masker)
    sw.prepare([_source(1)])
    sw.set_mask_models(False)
    packet = FramePacket(index=0, image=frame.copy(), faces=[FACE])
    sw.process(packet)
    assert np.array_equal(packet.image, _swap(sessions, frame, SwapSettings(**NO_COLOR)))  # the plain box swap
    sw.set_mask_models(True)
    again = FramePacket(index=1, image=frame.copy(), faces=[FACE])
    sw.process(again)
    assert not np.array_equal(again.image, packet.image)  # back on: the models' mask again


@pytest.mark.parametrize("types", [("region",), ("box", "region")])
def test_a_face_whose_region_mask_is_empty_is_left_and_not_counted(sessions, frame, types):
    # Regions the parser does not see there (glasses, on a crop of hair and skin): the face
    # stayed exactly the target's, but was still counted as swapped.
    from livecam.processors.base import changed_faces

    settings = SwapSettings(face_mask=types, face_mask_regions=("glasses",), **NO_COLOR)
    sw = InswapperSwapper(sessions["swap"], settings, emap=np.eye(512, dtype=np.float32),
                          masker=FaceMasker(settings, parser=FaceParser(sessions["hair_skin"])))
    sw.prepare([_source(1)])
    packet = FramePacket(index=0, image=frame.copy(), faces=[FACE, FACE.with_(kps=FACE.kps + np.float32([350, 0]))])
    sw.process(packet)
    assert np.array_equal(packet.image, frame)
    assert changed_faces(packet) == 0
    skin = SwapSettings(face_mask=types, face_mask_regions=("skin",), **NO_COLOR)
    sw = InswapperSwapper(sessions["swap"], skin, emap=np.eye(512, dtype=np.float32),
                          masker=FaceMasker(skin, parser=FaceParser(sessions["hair_skin"])))
    sw.prepare([_source(1)])
    packet = FramePacket(index=0, image=frame.copy(), faces=[FACE])
    sw.process(packet)
    assert not np.array_equal(packet.image, frame) and changed_faces(packet) == 1


def test_an_image_whose_region_mask_is_empty_says_no_face_was_swapped(tmp_path, faces_dir, isolated_env):
    from pathlib import Path

    from livecam.media.images import read_image
    from tests.commands.test_image import small
    from tests.conftest import run_cli
    from tests.standins.arcface import build_arcface

    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir()
    build_arcface(models / "w600k_r50.onnx")
    build_inswapper(models / "inswapper_128.onnx")
    build_bisenet(models / "bisenet_resnet_34.onnx")  # hair above, skin below: never glasses
    target, source, out = (small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path),
                           tmp_path / "out.png")
    result = run_cli(["--unverified-models", "image", str(target), str(out), "-s", str(source), "--no-watermark",
                      "--no-c2pa", "--no-label", "--swap-model", "inswapper_128", "--face-mask", "box", "region",
                      "--face-mask-regions", "glasses"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert np.array_equal(read_image(out), read_image(target))
    assert "(0 faces swapped," in result.stderr
    assert (f"warning: --face-mask left nothing to swap of the face found in {target}: none of the parts it keeps "
            "is there; choose other --face-mask types, regions or areas") in result.stderr
