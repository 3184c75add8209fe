"""`livecam verify` in a subprocess on what `livecam image` and `livecam video` wrote (embedded
models, mesh swapper), on unmarked files and on unreadable ones: verdicts and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from tests.conftest import run_cli
from tests.videos import make_clip, make_icon, make_vp9_alpha


def swap_args(faces_dir: Path) -> list[str]:
    return ["--source", str(faces_dir / "biden.jpg"), "--swap-model", "mesh"]


@pytest.fixture
def photo(tmp_path: Path, faces_dir: Path) -> Path:
    image = cv2.imread(str(faces_dir / "obama.jpg"))
    path = tmp_path / "obama.jpg"
    cv2.imwrite(str(path), cv2.resize(image, (image.shape[1] // 2, image.shape[0] // 2)))
    return path


def verify(files: list[Path], env: dict[str, str]) -> tuple[int, list[dict]]:
    result = run_cli(["verify", "--json", *map(str, files)], env=env)
    assert "Traceback" not in result.stderr
    return result.returncode, json.loads(result.stdout)


def test_image_output_carries_all_three_marks(tmp_path: Path, photo: Path, faces_dir: Path,
                                              isolated_env: dict[str, str]) -> None:
    out = tmp_path / "out.jpg"
    made = run_cli(["image", str(photo), str(out), *swap_args(faces_dir)], env=isolated_env)
    assert made.returncode == 0, made.stderr
    text = run_cli(["verify", str(out)], env=isolated_env)
    assert text.returncode == 0, text.stdout + text.stderr
    assert "MARKED" in text.stdout and "self-signed" in text.stdout
    code, (found,) = verify([out], isolated_env)
    assert code == 0 and found["marked"]
    assert found["watermark"]["found"]
    assert found["c2pa"]["valid"] and found["c2pa"]["by_livecam"]
    assert found["metadata"]


def test_a_tiff_output_is_verified_with_its_xmp_source_type(tmp_path: Path, photo: Path, faces_dir: Path,
                                                             isolated_env: dict[str, str]) -> None:
    # A .tif output carries the IPTC DigitalSourceType XMP packet as the other formats do (IFD0's
    # XMP tag), but `verify` read XMP from JPEG, PNG and WebP only and listed the EXIF text alone.
    out = tmp_path / "out.tif"
    made = run_cli(["image", str(photo), str(out), *swap_args(faces_dir), "--no-watermark", "--no-c2pa"],
                   env=isolated_env)
    assert made.returncode == 0, made.stderr
    code, (found,) = verify([out], isolated_env)
    assert code == 0 and "XMP DigitalSourceType compositeWithTrainedAlgorithmicMedia" in found["metadata"], found
    # its description is the TIFF's own ImageDescription tag: it was labelled "EXIF", which a TIFF has none of
    assert "TIFF ImageDescription" in found["metadata"] and not any("EXIF" in m for m in found["metadata"]), found


def test_watermark_alone_survives_a_reencode_that_drops_the_metadata(tmp_path: Path, photo: Path,
                                                                     faces_dir: Path,
                                                                     isolated_env: dict[str, str]) -> None:
    out = tmp_path / "out.png"
    assert run_cli(["image", str(photo), str(out), *swap_args(faces_dir)], env=isolated_env).returncode == 0
    copy = tmp_path / "reshared.jpg"  # what an upload does: decoded, halved, JPEG q70, no metadata
    image = cv2.imread(str(out))
    cv2.imwrite(str(copy), cv2.resize(image, (image.shape[1] // 2, image.shape[0] // 2),
                                      interpolation=cv2.INTER_AREA), [cv2.IMWRITE_JPEG_QUALITY, 70])
    code, (found,) = verify([copy], isolated_env)
    assert code == 0 and found["watermark"]["found"]
    assert not found["c2pa"]["present"] and not found["metadata"]


def test_no_watermark_and_no_c2pa_leave_only_the_metadata(tmp_path: Path, photo: Path, faces_dir: Path,
                                                          isolated_env: dict[str, str]) -> None:
    out = tmp_path / "out.jpg"
    made = run_cli(["image", str(photo), str(out), *swap_args(faces_dir), "--no-watermark", "--no-c2pa"],
                   env=isolated_env)
    assert made.returncode == 0, made.stderr
    code, (found,) = verify([out], isolated_env)
    assert not found["watermark"]["found"] and not found["c2pa"]["present"]
    assert found["metadata"] and code == 0


def test_video_output_is_marked_and_its_input_is_not(tmp_path: Path, faces_dir: Path,
                                                     isolated_env: dict[str, str]) -> None:
    clip = make_clip(tmp_path / "in.mp4", frames=30, size=(320, 240), fps=15,
                     source_image=faces_dir / "obama.jpg")
    out = tmp_path / "out.mp4"
    made = run_cli(["video", str(clip), str(out), *swap_args(faces_dir)], env=isolated_env)
    assert made.returncode == 0, made.stderr
    code, (marked, plain) = verify([out, clip], isolated_env)
    assert code == 1  # one of the two is not marked
    assert marked["marked"] and marked["watermark"]["found"] and marked["watermark"]["frames_marked"] >= 2
    assert marked["c2pa"]["valid"] and marked["c2pa"]["by_livecam"]
    assert not plain["marked"] and not plain["watermark"]["found"] and plain["watermark"]["frames_read"] == 30


def test_unmarked_photo_exits_1(faces_dir: Path, isolated_env: dict[str, str]) -> None:
    result = run_cli(["verify", str(faces_dir / "obama.jpg")], env=isolated_env)
    assert result.returncode == 1 and "NOT MARKED" in result.stdout


def test_a_file_name_with_a_newline_or_an_escape_stays_on_its_line(tmp_path: Path, faces_dir: Path,
                                                                    isolated_env: dict[str, str]) -> None:
    # The report printed the name as it is: a newline split "NAME: NOT MARKED" over two lines
    # and an escape sequence reached the terminal (stderr messages were escaped, stdout was not).
    odd = tmp_path / "a\nb.jpg"
    odd.write_bytes((faces_dir / "obama.jpg").read_bytes())
    result = run_cli(["verify", str(odd), str(tmp_path / "gone\x1b[31m.png")], env=isolated_env)
    lines = result.stdout.splitlines()
    assert result.returncode == 2 and len(lines) == 5, result.stdout
    assert lines[0] == f"{tmp_path}/a\\nb.jpg: NOT MARKED: no livecam mark found (image)"
    assert lines[4].startswith(f"{tmp_path}/gone\\x1b[31m.png: UNREADABLE: ") and "\x1b" not in result.stdout


def test_a_file_name_that_is_not_utf8_is_valid_utf8_in_the_json_and_exact_in_hex(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # The byte 0xff was written as the lone surrogate "\\udcff", which is not UTF-8 (strict JSON
    # readers refuse it; Python's own gives a string that cannot be encoded)
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/bad\xffname.jpg"))
    odd.write_bytes((faces_dir / "obama.jpg").read_bytes())
    gone = Path(os.fsdecode(bytes(tmp_path) + b"/gone\xfe.png"))
    code, (found, missing) = verify([odd, gone], isolated_env)
    assert code == 2 and found["kind"] == "image" and "error" in missing
    assert found["file"] == f"{tmp_path}/bad\\xffname.jpg" and missing["file"] == f"{tmp_path}/gone\\xfe.png"
    assert missing["error"] == f"{tmp_path}/gone\\xfe.png does not exist; give an image or a video file"
    assert bytes.fromhex(found["file_hex"]) == os.fsencode(odd) and bytes.fromhex(missing["file_hex"]) == os.fsencode(gone)
    json.dumps([found, missing], ensure_ascii=False).encode("utf-8")  # no lone surrogate anywhere
    _, (plain,) = verify([faces_dir / "obama.jpg"], isolated_env)
    assert plain["file"] == str(faces_dir / "obama.jpg") and "file_hex" not in plain  # a UTF-8 name: as it is


def test_a_file_name_that_is_not_utf8_is_valid_utf8_in_the_report(tmp_path: Path, faces_dir: Path,
                                                                   isolated_env: dict[str, str]) -> None:
    # the plain report wrote the name's byte 0xff as it is, which no UTF-8 reader takes
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/bad\xffname.jpg"))
    odd.write_bytes((faces_dir / "obama.jpg").read_bytes())
    gone = Path(os.fsdecode(bytes(tmp_path) + b"/gone\xfe.png"))
    result = subprocess.run([sys.executable, "-m", "livecam", "verify", str(odd), str(gone)], env=isolated_env,
                            capture_output=True, timeout=120)
    lines = result.stdout.decode("utf-8").splitlines()  # strict
    assert result.returncode == 2 and len(lines) == 5, lines
    assert lines[0] == f"{tmp_path}/bad\\xffname.jpg: NOT MARKED: no livecam mark found (image)"
    assert lines[4] == f"{tmp_path}/gone\\xfe.png: UNREADABLE: {tmp_path}/gone\\xfe.png does not exist; give an image or a video file"



def test_reading_a_video_says_nothing_of_an_output_verify_does_not_write(tmp_path: Path,
                                                                        isolated_env: dict[str, str]) -> None:
    # the reader's notes for `video` came too: "has transparency, which the output cannot hold",
    # "skipped 2 corrupt video packets ...; the output leaves out what they held"
    cutout = make_vp9_alpha(tmp_path / "cutout.webm", frames=8)
    damaged = make_clip(tmp_path / "damaged.mp4", frames=30, size=(96, 64), audio=False, stamp=True)
    data = bytearray(damaged.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 600] = np.random.default_rng(1).integers(0, 256, 600, np.uint8).tobytes()  # noise
    damaged.write_bytes(bytes(data))
    result = run_cli(["verify", str(cutout), str(damaged)], env=isolated_env)
    assert result.returncode == 1, result.stderr
    assert "corrupt video packet" in result.stderr and "output" not in result.stderr, result.stderr


def test_unreadable_and_missing_files_exit_2(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video at all")
    code, found = verify([junk, tmp_path / "missing.png"], isolated_env)
    assert code == 2
    assert all("error" in item for item in found)


def test_a_dash_for_standard_input_says_to_give_a_file(isolated_env: dict[str, str]) -> None:
    code, (dash,) = verify([Path("-")], isolated_env)  # was "-: no such file"
    assert code == 2 and dash["error"].startswith("'-' (standard input) is not a file;"), dash


def test_a_file_that_is_neither_an_image_nor_a_video_is_not_called_a_bad_video(
        tmp_path: Path, isolated_env: dict[str, str]) -> None:
    # `livecam verify *` over a folder of downloads: a text file or a phone's HEIC photo was
    # "cannot read it as a video ...; expected a video file such as .mp4", as if the video were damaged
    notes = tmp_path / "notes.txt"
    notes.write_text("shopping list\n")
    heic = tmp_path / "IMG_0001.HEIC"
    heic.write_bytes(b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + bytes(2000))
    code, (text, phone) = verify([notes, heic], isolated_env)
    assert code == 2
    assert text["error"].startswith(f"{notes} is neither an image nor a video livecam can read"), text
    assert ".mp4" in text["error"] and "PNG" in text["error"], text
    assert phone["error"].startswith(f"{heic} is a HEIC image, which livecam cannot read; convert it"), phone


def _gif(path: Path, frames: int) -> Path:
    with av.open(str(path), "w") as out:
        stream = out.add_stream("gif", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "rgb8"
        for i in range(frames):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(np.full((48, 64, 3), 60 * i, np.uint8), format="rgb24")))
        out.mux(stream.encode(None))
    return path


def test_an_icon_and_a_gif_of_one_frame_are_called_images(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    # FFmpeg reads both as one-frame videos: the report said "(video)" above "watermark: ... the image"
    icon = make_icon(tmp_path / "favicon.ico", np.full((48, 64, 3), 90, np.uint8))
    still, clip = _gif(tmp_path / "still.gif", 1), _gif(tmp_path / "anim.gif", 3)
    code, found = verify([icon, still, clip], isolated_env)
    assert code == 1 and [f["kind"] for f in found] == ["image", "image", "video"], found
    text = run_cli(["verify", str(icon), str(still)], env=isolated_env).stdout.splitlines()
    assert [line for line in text if not line.startswith(" ")] == [
        f"{icon}: NOT MARKED: no livecam mark found (image)", f"{still}: NOT MARKED: no livecam mark found (image)"]


def test_a_renamed_marked_photo_is_read_as_a_photo_and_a_folder_is_called_a_folder(
        tmp_path: Path, photo: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # Without a photo extension the file was read as a video ("is a still image, not a video;
    # use `livecam image`", exit 2), and a folder was "no such file".
    out = tmp_path / "out.jpg"
    made = run_cli(["image", str(photo), str(out), *swap_args(faces_dir), "--no-c2pa"], env=isolated_env)
    assert made.returncode == 0, made.stderr
    renamed = tmp_path / "download"
    renamed.write_bytes(out.read_bytes())
    code, (found, folder) = verify([renamed, tmp_path], isolated_env)
    assert found["kind"] == "image" and found["marked"] and found["watermark"]["found"]
    assert code == 2 and "is a folder" in folder["error"]


def test_a_cut_short_marked_video_still_shows_its_tags(tmp_path: Path, faces_dir: Path,
                                                      isolated_env: dict[str, str]) -> None:
    # A partial download of a marked video was "UNREADABLE" (the reader's "looks truncated"),
    # exit 2, though its tags were there to read.
    clip = make_clip(tmp_path / "in.mp4", frames=30, size=(160, 120), fps=15, source_image=faces_dir / "obama.jpg")
    out = tmp_path / "out.mp4"
    made = run_cli(["video", str(clip), str(out), *swap_args(faces_dir), "--no-watermark", "--no-c2pa"],
                   env=isolated_env)
    assert made.returncode == 0, made.stderr
    with av.open(str(out)) as c, av.open(str(tmp_path / "faststart.mp4"), "w",
                                         options={"movflags": "+faststart+use_metadata_tags"}) as o:
        o.metadata.update(c.metadata)  # the index first, as streaming sites serve it
        streams = {s.index: o.add_stream_from_template(s) for s in c.streams}
        for packet in c.demux():
            if packet.dts is not None:
                packet.stream = streams[packet.stream.index]
                o.mux(packet)
    data = (tmp_path / "faststart.mp4").read_bytes()
    partial = tmp_path / "partial.mp4"
    partial.write_bytes(data[: len(data) * 6 // 10])
    code, (found,) = verify([partial], isolated_env)
    assert code == 0 and found["marked"] and found["metadata"]
    assert found["watermark"]["cut_short"] and 0 < found["watermark"]["frames_read"] < 30


def test_a_cut_short_marked_photo_still_shows_its_tags(tmp_path: Path, photo: Path, faces_dir: Path,
                                                      isolated_env: dict[str, str]) -> None:
    # Half a marked JPEG was "UNREADABLE ... could not be decoded", exit 2, its tags unread.
    out = tmp_path / "out.jpg"
    made = run_cli(["image", str(photo), str(out), *swap_args(faces_dir), "--no-c2pa"], env=isolated_env)
    assert made.returncode == 0, made.stderr
    partial = tmp_path / "partial.jpg"
    partial.write_bytes(out.read_bytes()[: out.stat().st_size // 2])
    code, (found,) = verify([partial], isolated_env)
    assert code == 0 and found["marked"] and found["metadata"]
    assert found["watermark"]["frames_read"] == 0 and found["watermark"]["cut_short"]
    junk = tmp_path / "half.jpg"  # no tags: still unreadable
    junk.write_bytes((faces_dir / "obama.jpg").read_bytes()[:3000])
    assert verify([junk], isolated_env)[0] == 2


@pytest.mark.parametrize("failures, state, words", [
    (("assertion.dataHash.mismatch",), "Invalid", "INVALID: assertion.dataHash.mismatch;"),
    ((), "Invalid", "INVALID: validation state Invalid;"),
    ((), "", "INVALID: validation state not given;"),
])
def test_an_invalid_manifest_always_says_why(failures: tuple[str, ...], state: str, words: str) -> None:
    # without failure codes the line read "INVALID: ; actions ..." (an operator-precedence slip)
    from livecam.commands.verify import report
    from livecam.marks.credentials import Credentials
    from livecam.marks.evidence import Evidence

    credentials = Credentials(True, state=state, failures=failures, generator="livecam 0.1.0", signer="livecam")
    line = report(Evidence(Path("x.jpg"), "image", credentials=credentials)).splitlines()[2]
    assert line == f"  C2PA:      manifest by livecam 0.1.0, signed by livecam, {words} actions none", line
