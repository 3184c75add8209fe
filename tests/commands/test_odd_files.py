"""Files a user brings to `livecam image` and `livecam video` that once got a vague or no message
(session 10's hostile pass): each test failed before its fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.commands.test_image import only_error_line
from tests.conftest import run_cli
from tests.videos import make_clip


@pytest.mark.parametrize("name", ["out.gif", "OUT.GIF"])
def test_an_image_output_named_gif_says_why_and_what_to_write(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], name: str) -> None:
    # it was "cannot tell which format to write for out.gif (extension .gif)", as for a typo
    out = tmp_path / name
    result = run_cli(["image", str(faces_dir / "biden.jpg"), str(out), "-s", str(faces_dir / "obama.jpg")],
                     env=isolated_env)
    line = only_error_line(result.stderr)
    assert result.returncode == 2 and not out.exists()
    assert "256 colours" in line and f"write {out.stem}.png" in line and "JPEG, PNG, WebP, TIFF" in line, line


def test_an_image_output_with_a_video_extension_says_to_use_livecam_video(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    out = tmp_path / "out.mp4"
    result = run_cli(["image", str(faces_dir / "biden.jpg"), str(out), "-s", str(faces_dir / "obama.jpg")],
                     env=isolated_env)
    line = only_error_line(result.stderr)
    assert result.returncode == 2 and not out.exists()
    assert ".mp4 is a video's extension" in line and "out.png" in line and "`livecam video`" in line, line


@pytest.mark.parametrize("name, words", [("out.gif", "does not write animated GIFs"),
                                         ("out.png", ".png is a picture's extension")])
def test_a_video_output_named_as_a_gif_or_picture_says_to_write_mp4(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], name: str, words: str) -> None:
    pytest.importorskip("av", reason="PyAV writes the test clip")
    clip = make_clip(tmp_path / "in.mp4", frames=4, audio=False)
    out = tmp_path / name
    result = run_cli(["video", str(clip), str(out), "-s", str(faces_dir / "obama.jpg")], env=isolated_env)
    line = only_error_line(result.stderr)
    assert result.returncode == 2 and not out.exists()
    assert words in line and "out.mp4 " in line, line


def test_an_empty_input_folder_argument_runs_nothing_in_the_current_folder(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # `livecam video "$IN" out/` with IN unset: Path("") is ".", so every video here was swapped
    pytest.importorskip("av", reason="PyAV writes the test clip")
    make_clip(tmp_path / "holiday.mp4", frames=4, audio=False)
    result = run_cli(["video", "", "out", "-s", str(faces_dir / "obama.jpg")], env=isolated_env, cwd=tmp_path)
    line = only_error_line(result.stderr)
    assert result.returncode == 2 and "INPUT" in line and "the path is empty" in line, line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args", [["image", "in.jpg", ""], ["image", "in.jpg", "o.png", "-s", ""], ["demo", ""],
                                  ["bench", "--input", ""], ["--models-dir", "", "models", "list"]],
                         ids=["output", "source", "demo-folder", "bench-input", "models-dir"])
def test_an_empty_path_is_a_usage_error_naming_it(tmp_path: Path, isolated_env: dict[str, str], args: list[str]) -> None:
    # each was taken for the current folder: `demo ""` wrote its files there, `-s ""` read it
    # as a folder of source photos, `--models-dir ""` listed (and would download into) it
    result = run_cli(args, env=isolated_env, cwd=tmp_path)
    line = only_error_line(result.stderr)
    assert result.returncode == 2 and "the path is empty (an unset shell variable?)" in line, line
    assert [p.name for p in tmp_path.iterdir() if p.name not in ("cache", "models")] == []


@pytest.mark.parametrize("command, args, words", [
    ("image", ["-", "o.png"], "/dev/stdin for a pipe"),
    ("video", ["-", "o.mp4"], "save the stream to a file first"),
    ("image", ["in.jpg", "-"], "give a file name such as out.png"),
    ("video", ["in.mp4", "-"], "give a file name such as out.mp4")], ids=["image-in", "video-in", "image-out", "video-out"])
def test_a_dash_for_standard_input_or_output_says_what_to_give(
        tmp_path: Path, isolated_env: dict[str, str], command: str, args: list[str], words: str) -> None:
    # they were "- does not exist; check the path", "input video not found: -" and "cannot tell
    # which format to write for -"
    result = run_cli([command, *args, "-s", "face.jpg"], env=isolated_env, cwd=tmp_path)
    line = only_error_line(result.stderr)
    assert result.returncode == 2 and "(standard " in line and words in line, line


@pytest.mark.parametrize("args", [["image", "in.jpg", "N.png", "-s", "face.jpg"], ["video", "N.mp4", "o.mp4", "-s", "face.jpg"],
                                  ["image", "in.jpg", "o.png", "-s", "N.jpg"],
                                  ["run", "--camera", "/dev/null", "--output", "N.mp4", "-s", "face.jpg"],
                                  ["run", "--camera", "N.mp4", "--output", "none", "-s", "face.jpg"]],
                         ids=["output", "input", "source", "run-output", "run-camera"])
def test_a_name_longer_than_the_file_system_allows_is_a_usage_error(
        tmp_path: Path, isolated_env: dict[str, str], args: list[str]) -> None:
    # each was "internal error: OSError: [Errno 36] File name too long" (Path.is_dir raises it)
    long = "a" * 300
    result = run_cli([a.replace("N", long) for a in args], env=isolated_env, cwd=tmp_path)
    line = only_error_line(result.stderr)
    assert result.returncode == 2 and "the name is longer than the file system allows (304 bytes in one part" in line, line


def test_a_path_refused_from_an_environment_variable_names_it(tmp_path: Path, isolated_env: dict[str, str]) -> None:
    # LIVECAM_MODELS_DIR naming a file said only "Invalid value for '--models-dir'", an option
    # the user never typed
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(b"x")
    result = run_cli(["models", "list"], env=dict(isolated_env, LIVECAM_MODELS_DIR=str(photo)))
    line = only_error_line(result.stderr)
    assert result.returncode == 2 and "is a file" in line and "(from $LIVECAM_MODELS_DIR)" in line, line


@pytest.mark.parametrize("command, output", [("image", "out.png"), ("video", "out.mp4")])
def test_a_bad_c2pa_key_is_refused_before_any_model_loads(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], command: str, output: str) -> None:
    # it was found only after the models loaded: here a corrupt inswapper (exit 3) was said instead
    pytest.importorskip("c2pa", reason="c2pa-python signs the outputs")
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    (models / "inswapper_128.onnx").write_bytes(b"not a model")
    key = tmp_path / "key.pem"
    key.write_text("not a key")
    target = faces_dir / "biden.jpg" if command == "image" else make_clip(tmp_path / "in.mp4", frames=4, audio=False)
    result = run_cli(["--models-dir", str(models), command, str(target), str(tmp_path / output), "-s",
                      str(faces_dir / "obama.jpg"), "--swap-model", "inswapper_128", "--c2pa-cert", str(key),
                      "--c2pa-key", str(key)], env=isolated_env)
    line = only_error_line(result.stderr)
    assert result.returncode == 2 and "key.pem is not an unencrypted PEM private key" in line, line
    assert not (tmp_path / output).exists()


def test_a_gif_of_one_frame_is_a_still_image_for_livecam_video(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # it came out as a one-frame video, where a PNG is refused with a pointer to `livecam image`
    Image = pytest.importorskip("PIL.Image", reason="Pillow writes the GIF")
    still = tmp_path / "still.gif"
    Image.new("RGB", (64, 48), (90, 120, 150)).save(still)
    out = tmp_path / "out.mp4"
    result = run_cli(["video", str(still), str(out), "-s", str(faces_dir / "obama.jpg")], env=isolated_env)
    line = only_error_line(result.stderr)
    assert result.returncode == 2 and "still.gif is a still image (a GIF of one frame)" in line, line
    assert "`livecam image`" in line and not out.exists()


def test_a_folder_or_several_images_given_to_livecam_image_say_it_takes_one(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # `livecam image photos/ out/` was "photos is a folder, not an image file", and
    # `livecam image *.jpg out/` (or the face as an argument) only "Got unexpected extra argument"
    photos = tmp_path / "photos"
    photos.mkdir()
    shutil.copy(faces_dir / "biden.jpg", photos / "a.jpg")
    (tmp_path / "out").mkdir()
    folder = run_cli(["image", str(photos), str(tmp_path / "out"), "-s", str(faces_dir / "obama.jpg")],
                     env=isolated_env)
    line = only_error_line(folder.stderr)
    assert folder.returncode == 2 and f"{photos} is a folder; `livecam image` changes one image a run" in line, line
    assert "`livecam video`" in line, line
    several = run_cli(["image", str(faces_dir / "obama.jpg"), str(photos / "a.jpg"), str(tmp_path / "out.png")],
                      env=isolated_env)
    line = only_error_line(several.stderr)
    assert several.returncode == 2 and "takes one INPUT image and one OUTPUT file, with the face photo after " \
        "--source" in line, line
    assert list((tmp_path / "out").iterdir()) == [] and not (tmp_path / "out.png").exists()


@pytest.mark.parametrize("pictures", [1, 4])
def test_a_file_of_jpegs_one_after_another_is_an_mjpeg_video_unless_it_is_one_picture(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], pictures: int) -> None:
    # `livecam video in.mjpeg` (JPEGs concatenated, or `ffmpeg -f mjpeg`) was refused as a still image,
    # where `run --camera in.mjpeg` played it; one JPEG still is a photo, whatever its name
    import av

    clip = tmp_path / "in.mjpeg"
    clip.write_bytes((faces_dir / "obama.jpg").read_bytes() * pictures)
    out = tmp_path / "out.mp4"
    result = run_cli(["video", str(clip), str(out), "-s", str(faces_dir / "biden.jpg")], env=isolated_env)
    if pictures == 1:
        line = only_error_line(result.stderr)
        assert result.returncode == 2 and line.endswith("in.mjpeg is a still image, not a video; use `livecam image` "
                                                        "for images"), line
        assert not out.exists()
        return
    assert result.returncode == 0, result.stderr
    with av.open(str(out)) as c:  # no timestamps in MJPEG: FFmpeg's 25 fps, every JPEG one frame
        stream = c.streams.video[0]
        times = [round(float(f.pts * f.time_base), 3) for f in c.decode(stream)]
        assert stream.average_rate == 25 and round(float(stream.duration * stream.time_base), 3) == 0.16
    assert times == [0.0, 0.04, 0.08, 0.12]


@pytest.mark.parametrize("command", ["image", "video", "run", "run --stats-json", "video batch"])
def test_an_output_under_a_file_says_its_folder_is_a_file_and_to_choose_another_path(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], command: str) -> None:
    # `--output face.mp4/x.mp4` said only "face.mp4 is not a folder" (and batch mode "Not a directory")
    clip = make_clip(tmp_path / "clip.mp4", frames=3, audio=False)
    (tmp_path / "face.mp4").write_bytes(b"a file")
    face = str(faces_dir / "obama.jpg")
    args = {"image": ["image", face, "face.mp4/x.png", "-s", face],
            "video": ["video", str(clip), "face.mp4/x.mp4", "-s", face],
            "run": ["run", "--camera", str(clip), "--output", "face.mp4/x.mp4", "-s", face],
            "run --stats-json": ["run", "--camera", str(clip), "--output", "none", "--stats-json", "face.mp4/x.mp4",
                                 "-s", face],
            "video batch": ["video", str(tmp_path / "in"), "face.mp4/x", "-s", face]}[command]
    if command == "video batch":
        (tmp_path / "in").mkdir()
        shutil.copy(clip, tmp_path / "in" / "clip.mp4")
    result = run_cli(args, env=isolated_env, cwd=tmp_path)
    line = only_error_line(result.stderr)
    assert result.returncode == 2, result.stderr
    if command == "video batch":
        assert line.endswith("cannot create the output folder face.mp4/x (face.mp4 is a file, not a folder); choose "
                             "another output folder"), line
    else:
        output = next(arg for arg in args if arg.startswith("face.mp4/"))
        assert line.endswith(f"cannot write {output}: its folder face.mp4 is a file, not a folder; choose another "
                             "output path, not under a file"), line
    assert (tmp_path / "face.mp4").read_bytes() == b"a file"
