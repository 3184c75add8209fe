"""`livecam image` where the faces to change are not what they seem: a picture with no face that
the detector's padded retry took one in, a face cut by the picture's edge that the mesh swapper
cannot fit, a --face-mask-padding that leaves nothing, one --map REFERENCE given twice. The
summary and the warning say what happened to the pixels; a mistake is one line, exit 2."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Callable

import cv2
import numpy as np
import pytest

from livecam.media.images import read_image
from tests.commands.test_image import only_error_line, small
from tests.conftest import run_cli

EXACT = ["--no-label", "--no-watermark", "--no-c2pa"]  # nothing but the swap changes pixels


def _no_face(faces_dir: Path, folder: Path) -> Path:
    """group6.jpg's lower left: a glass, cards and hands on a table, and no face. Padded with black
    (the retry for tight face crops), the embedded detector took the glass for a face (0.57)."""
    path = folder / "table.png"
    cv2.imwrite(str(path), cv2.imread(str(faces_dir / "group6.jpg"))[600:, :400])
    return path


def _letterboxed_table(faces_dir: Path, folder: Path) -> Path:
    """_no_face's table in a black frame: the detector takes the glass for a face (0.57) on the
    picture itself, no padded retry needed."""
    path = folder / "boxed.png"
    table = cv2.imread(str(_no_face(faces_dir, folder)))
    cv2.imwrite(str(path), cv2.copyMakeBorder(table, 200, 200, 200, 200, cv2.BORDER_CONSTANT, value=(0, 0, 0)))
    return path


def _refused_as_faceless(result: subprocess.CompletedProcess[str], out: Path) -> None:
    """A source photo without a face: one line, exit 2, nothing written."""
    assert result.returncode == 2, result.stderr
    assert "no face found in source photo" in only_error_line(
        "\n".join(line for line in result.stderr.splitlines() if "--unverified-models" not in line))
    assert not out.exists()


def _standins(env: dict[str, str]) -> None:
    from tests.standins import build_swap_models

    build_swap_models(Path(env["LIVECAM_MODELS_DIR"]))


# The table as it is: the padded retry (for tight face crops) took the glass for a face; in a
# black frame: the detector took it for one (0.57) on the picture itself, no retry needed.
TABLES = pytest.mark.parametrize("table", [_no_face, _letterboxed_table], ids=["table", "letterboxed"])


@TABLES
def test_a_source_photo_without_a_face_is_refused(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str],
                                                   table: Callable[[Path, Path], Path]) -> None:
    # The neural swapper put the glass's "identity" on the target, and exited 0 without a word.
    _standins(isolated_env)
    photo, target = table(faces_dir, tmp_path), small(faces_dir, "obama.jpg", tmp_path)
    out = tmp_path / "o.png"
    result = run_cli(["--unverified-models", "image", str(target), str(out), "-s", str(photo), *EXACT],
                     env=isolated_env)
    _refused_as_faceless(result, out)


@TABLES
def test_a_picture_without_a_face_is_written_unchanged(tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str],
                                                       table: Callable[[Path, Path], Path]) -> None:
    # The glass was swapped for a face ("1 face swapped") by the neural swapper.
    _standins(isolated_env)
    picture, source = table(faces_dir, tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    out = tmp_path / "o.png"
    result = run_cli(["--unverified-models", "image", str(picture), str(out), "-s", str(source), *EXACT],
                     env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert f"warning: no face found in {picture}; writing it unchanged" in result.stderr
    assert "0 faces swapped" in result.stderr
    assert np.array_equal(read_image(out), read_image(picture))


def _cut(faces_dir: Path, folder: Path) -> Path:
    """obama.jpg cut through the middle of the face (at x 480 of the box's 351..633): the
    detector still finds the face, FaceMesh cannot fit it."""
    path = folder / "cut.png"
    cv2.imwrite(str(path), cv2.imread(str(faces_dir / "obama.jpg"))[:, :480])
    return path


def test_a_face_the_mesh_swapper_cannot_fit_is_not_counted_as_swapped(tmp_path: Path, faces_dir: Path,
                                                                      isolated_env: dict[str, str]) -> None:
    # "1 face swapped", and not a pixel changed.
    cut, source = _cut(faces_dir, tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    out = tmp_path / "o.png"
    result = run_cli(["image", str(cut), str(out), "-s", str(source), "--swap-model", "mesh", *EXACT],
                     env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert (f"warning: the mesh swapper could not fit its landmarks to the face found in {cut} (cut off by the "
            "edge, or turned away), so nothing was swapped; use one where the whole face shows, or the neural "
            "swapper (--swap-model inswapper_128)") in result.stderr
    assert "0 faces swapped" in result.stderr and "--face-mask" not in result.stderr
    assert np.array_equal(read_image(out), read_image(cut))


def test_the_one_face_swapped_is_the_largest_the_swapper_can_change(tmp_path: Path, faces_dir: Path,
                                                                     isolated_env: dict[str, str]) -> None:
    # Without --many-faces the largest face, the cut one, was chosen: "could not fit", "0 faces
    # swapped", and the whole face beside it left as it was.
    photo = cv2.imread(str(_cut(faces_dir, tmp_path)))
    biden = cv2.imread(str(faces_dir / "biden.jpg"))
    biden = cv2.resize(biden, None, fx=0.25, fy=0.25, interpolation=cv2.INTER_AREA)[:275]
    photo[600:875, :biden.shape[1]] = biden  # his face at about x 110..186, y 660..736
    target, source = tmp_path / "two.png", small(faces_dir, "obama2.jpg", tmp_path)
    cv2.imwrite(str(target), photo)
    out = tmp_path / "o.png"
    result = run_cli(["image", str(target), str(out), "-s", str(source), "--swap-model", "mesh", *EXACT],
                     env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert "1 face swapped" in result.stderr and "could not fit" not in result.stderr
    changed = np.abs(read_image(out).astype(int) - read_image(target)).max(axis=2) > 8
    assert changed[680:730, 125:170].mean() > 0.3  # eyes to chin
    changed[640:760, 90:210] = False
    assert not changed.any()  # the cut face, and everything else, as it was


def test_a_padding_that_leaves_nothing_names_the_padding(tmp_path: Path, faces_dir: Path,
                                                         isolated_env: dict[str, str]) -> None:
    # It said "--face-mask left nothing to swap ...; choose other --face-mask types, regions or
    # areas" to a run that gave no --face-mask, only the padding.
    _standins(isolated_env)
    target, source = small(faces_dir, "obama.jpg", tmp_path), small(faces_dir, "biden.jpg", tmp_path)
    out = tmp_path / "o.png"
    result = run_cli(["--unverified-models", "image", str(target), str(out), "-s", str(source), *EXACT,
                      "--face-mask-padding", "49", "49", "50", "49"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert (f"warning: --face-mask-padding 49 49 50 49 left nothing of the box mask to swap of the face found "
            f"in {target}; give smaller percentages") in result.stderr
    assert "0 faces swapped" in result.stderr
    assert np.array_equal(read_image(out), read_image(target))


def test_one_reference_given_twice_to_map_is_refused(tmp_path: Path, faces_dir: Path,
                                                     isolated_env: dict[str, str]) -> None:
    # Every face of that person took the first SOURCE; the second --map did nothing, unsaid.
    group, biden, obama = faces_dir / "group6.jpg", faces_dir / "biden.jpg", faces_dir / "obama.jpg"
    again = tmp_path / "again.jpg"
    again.symlink_to(group)  # the same file by another name
    out = tmp_path / "o.png"
    result = run_cli(["image", str(group), str(out), "--map", f"{biden}={group}", "--map", f"{obama}={again}"],
                     env=isolated_env)
    assert result.returncode == 2
    assert (f"Invalid value for --map: REFERENCE {again} is given twice, for {biden} and for {obama}; one "
            "person gets one face: give each REFERENCE once") in only_error_line(result.stderr)
    assert not out.exists()


def test_a_face_just_over_the_size_limit_is_swapped_whole_in_a_picture(tmp_path: Path, faces_dir: Path,
                                                                       isolated_env: dict[str, str]) -> None:
    # The fade-in by size that keeps a video's face from popping (base.presence) left a still
    # picture's face 24.8 px between the eyes with a fifth of the swap: a ghost, "1 face swapped".
    photo = cv2.imread(str(faces_dir / "obama.jpg"))
    small_face = tmp_path / "small.png"
    cv2.imwrite(str(small_face), cv2.resize(photo, None, fx=0.235, fy=0.235, interpolation=cv2.INTER_AREA))
    source = small(faces_dir, "biden.jpg", tmp_path)
    out = tmp_path / "o.png"
    result = run_cli(["image", str(small_face), str(out), "-s", str(source), "--swap-model", "mesh", *EXACT],
                     env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert "1 face swapped" in result.stderr
    changed = np.abs(read_image(out).astype(int) - read_image(small_face)).max(axis=2) > 8
    assert changed[40:90, 90:145].mean() > 0.5  # eyes to chin (a fifth of the swap: 0.13)


def test_a_group_photo_says_the_faces_it_left_and_how_to_swap_them_all(tmp_path: Path, faces_dir: Path,
                                                                       isolated_env: dict[str, str]) -> None:
    # A group photo came out as "1 face swapped" with no word on the five others a newcomer
    # expected changed too.
    group, source = faces_dir / "group6.jpg", faces_dir / "biden.jpg"
    one = run_cli(["image", str(group), str(tmp_path / "one.png"), "-s", str(source), "--swap-model", "mesh", *EXACT],
                  env=isolated_env)
    assert one.returncode == 0, one.stderr
    assert "1 face swapped" in one.stderr
    assert "note: 5 other faces in group6.jpg were left as they were; add --many-faces to swap every face" \
        in one.stderr, one.stderr
    every = run_cli(["image", str(group), str(tmp_path / "all.png"), "-s", str(source), "--swap-model", "mesh",
                     "--many-faces", *EXACT], env=isolated_env)
    assert every.returncode == 0 and "other face" not in every.stderr, every.stderr
