"""The command-line interface: help, version, unknown options, exit codes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from livecam import __version__
from livecam.errors import EXIT_BROKEN_PIPE
from tests.conftest import run_cli
from tests.videos import make_clip

COMMANDS = [[], ["run"], ["video"], ["image"], ["bench"], ["demo"], ["doctor"], ["models"],
            ["models", "list"], ["models", "download"], ["models", "verify"], ["models", "where"],
            ["models", "convert"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "livecam")
def test_help_of_every_command(command: list[str]) -> None:
    result = run_cli([*command, "--help"])
    assert result.returncode == 0, result.stderr
    assert "Usage: livecam" in result.stdout


def test_every_option_says_what_it_does() -> None:
    # `bench --help` listed --mode and --frames, and `models convert --help` --force, with no word on them
    import click

    from livecam.cli import cli

    def bare(command: click.Command, path: str) -> list[str]:
        found = [f"{path} {param.opts[0]}" for param in command.params
                 if isinstance(param, click.Option) and not param.hidden and not param.help]
        for name, sub in getattr(command, "commands", {}).items():
            found += bare(sub, f"{path} {name}")
        return found

    assert bare(cli, "livecam") == []


def test_a_word_taken_as_the_mouth_masks_size_is_named_with_the_fix() -> None:
    # `--mouth-mask in.jpg out.jpg` took the input as the optional SIZE: "'in.jpg' is not a valid integer range"
    result = run_cli(["image", "--mouth-mask", "in.jpg", "out.jpg", "-s", "x.jpg"])
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "'in.jpg' is not a SIZE from 0 to 100; --mouth-mask takes the word after it as its SIZE, so give one " \
           "(--mouth-mask 0) or put --mouth-mask after the files" in result.stderr, result.stderr
    live = run_cli(["run", "--mouth-mask", "big", "-s", "x.jpg"])  # no files to put it after
    assert live.returncode == 2 and "so give one (--mouth-mask 0) (see" in live.stderr, live.stderr
    assert "--mouth-mask [SIZE]" in run_cli(["image", "--help"]).stdout


def test_image_help_leaves_out_smoothing_which_one_frame_has_no_use_for() -> None:
    # `image --help` listed --smoothing with "not used for images" (and --execution-threads, "an
    # image ... gets every core"); they are still taken (and warned about:
    # tests/commands/test_image.py) so a command line shared with `video` keeps working.
    assert not {"--smoothing", "--execution-threads"} & set(run_cli(["image", "--help"]).stdout.split())
    for command in ("video", "run", "bench"):
        listed = run_cli([command, "--help"]).stdout.split()
        assert "--smoothing" in listed and "--execution-threads" in listed, command
    given = run_cli(["image", "in.jpg", "out.jpg", "-s", "face.jpg", "--smoothing", "0.2", "--execution-threads", "2"])
    assert given.returncode == 2 and "no such option" not in given.stderr.lower(), given.stderr
    assert "in.jpg" in given.stderr  # the missing input is the problem, not the option


def test_source_help_offers_a_folder_only_where_one_is_taken() -> None:
    # `video --help` and `image --help` said "for `run`, a folder cycles with the n key", a folder
    # those commands refuse; run's help says it, the others say the rest of the same help
    def source_help(command: str) -> str:
        said = " ".join(run_cli([command, "--help"]).stdout.split())
        return said.split("-s, --source PATH ", 1)[1].split(" --", 1)[0]

    common = ("Photo of the face to put in (repeatable: the neural swapper (inswapper, HyperSwap) averages "
              "photos of one person, the mesh swapper uses the first")
    assert source_help("run") == common + "; or a folder of photos, cycled with the n key)."
    for command in ("video", "image", "bench"):
        assert source_help(command) == common + ").", command


def test_the_size_of_every_model_is_the_catalogs() -> None:
    # `models download --all` was "about 3 GB" in its help and the README; the files are 3.5 GB
    import re

    from livecam.models.catalog import CATALOG

    total = sum(spec.size or 0 for spec in CATALOG.values() if spec.downloadable) / 1e9
    said = re.search(r"about (\S+) GB", " ".join(run_cli(["models", "download", "--help"]).stdout.split()))
    assert said is not None and said.group(1) == f"{total:.1f}"
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert f"--all: every model (~{total:.1f} GB)" in readme


def test_the_command_lists_are_not_cut_short() -> None:
    # `livecam --help` listed "demo  See a real swap in one command: bundled photos, no camera, GPU...":
    # click cuts a docstring's first sentence to fit one line, so each command has a short help
    env = {**os.environ, "COLUMNS": "80"}
    for group in ([], ["models"]):
        shown = run_cli([*group, "--help"], env=env).stdout.split("Commands:", 1)[1].splitlines()
        entries = [line for line in shown if line.startswith("  ") and not line.startswith("   ")]
        assert len(entries) >= 5 and not [line for line in shown if line.rstrip().endswith("...")], shown


def test_provider_help_says_how_several_are_given() -> None:
    # "One or more of ..." said neither how to give several (`cuda,cpu` is refused) nor what several do
    said = " ".join(run_cli(["image", "--help"]).stdout.split())
    assert ("several, as separate words: each must be installed, and each model part runs on the first "
            "of them that supports it") in said, said


def test_demo_help_says_where_its_files_go() -> None:
    # `livecam demo --help` showed [OUTPUT_DIR] without its default: the files' folder was a guess
    assert "OUTPUT_DIR (default: livecam-demo, in the current folder)" in " ".join(
        run_cli(["demo", "--help"]).stdout.split())


def test_version() -> None:
    result = run_cli(["--version"])
    assert result.returncode == 0
    assert __version__ in result.stdout


def test_unknown_option_is_usage_error() -> None:
    result = run_cli(["image", "a.jpg", "b.jpg", "--no-such-option"])
    assert result.returncode == 2
    assert "No such option" in result.stderr
    assert "Traceback" not in result.stderr
    # a global option after the command once got only "No such option"
    late = run_cli(["models", "download", "w600k_r50", "--offline"])
    assert late.returncode == 2 and "--offline is an option of livecam itself: put it before the command" in late.stderr
    assert late.stderr.count("\n") == 1, late.stderr
    # where the licence error says to add --accept-license: no guess among the command's options
    # ("Did you mean '--face-min-size'?") before the answer
    appended = run_cli(["image", "a.jpg", "b.jpg", "-s", "c.jpg", "--accept-license"])
    assert appended.returncode == 2 and "Did you mean" not in appended.stderr, appended.stderr
    assert appended.stderr.startswith("livecam: error: No such option") and appended.stderr.endswith(
        "; --accept-license is an option of livecam itself: put it before the command, "
        "`livecam --accept-license image ...`\n"), appended.stderr
    # and a command's option before the command: "No such option '--no-watermark'. (see `livecam --help`)"
    early = run_cli(["--no-watermark", "image", "a.jpg", "b.jpg", "-s", "c.jpg"])
    # (click's own first words: "No such option: --x" up to 8.2.0, "No such option '--x'" after)
    assert early.returncode == 2 and early.stderr.count("\n") == 1, early.stderr
    assert early.stderr.startswith("livecam: error: No such option") and early.stderr.endswith(
        "; --no-watermark is an option of `livecam image`: put it after the command, `livecam image ... "
        "--no-watermark`\n"), early.stderr


def test_quiet_and_verbose_together_are_a_usage_error() -> None:
    # both were taken: "only errors" and every error with its traceback
    result = run_cli(["-q", "-v", "image", "a.jpg", "b.jpg", "--source", "c.jpg"])
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "-q/--quiet and -v/--verbose ask for opposite things; give one of them" in result.stderr


def test_missing_source_is_usage_error(tmp_path) -> None:
    result = run_cli(["image", str(tmp_path / "a.jpg"), str(tmp_path / "b.jpg")])
    assert result.returncode == 2
    assert result.stderr.startswith("livecam: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "--source" in result.stderr and "Traceback" not in result.stderr


def test_unknown_provider_lists_choices() -> None:
    result = run_cli(["image", "a.jpg", "b.jpg", "-s", "x.jpg", "--execution-provider", "vulkan"])
    assert result.returncode == 2
    assert "cuda" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("argv", [
    ["image", "in.jpg", "out.jpg", "-s", "x.jpg", "--frame-processor", "face_swapper", "face_enhance"],
    ["image", "--frame-processor", "face_swapper", "face_enhance", "in.jpg", "out.jpg", "-s", "x.jpg"],
])
def test_a_mistyped_value_after_a_variadic_flag_is_named_with_the_fix(argv: list[str]) -> None:
    # It was taken as a positional argument: "Got unexpected extra argument (face_enhance)",
    # or, before INPUT, "(out.jpg)", a word the user had right.
    result = run_cli(argv)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("livecam: error: 'face_enhance' is not a --frame-processor value; "
                                    "did you mean face_enhancer?"), result.stderr
    # a word far from every choice is still click's own message
    other = run_cli(["image", "in.jpg", "out.jpg", "-s", "x.jpg", "--frame-processor", "face_swapper", "extra"])
    assert other.returncode == 2 and "unexpected extra argument (extra)" in other.stderr, other.stderr


def _float_options() -> list[tuple[str, str]]:
    """(command path, option) for every option of every command that takes a number with a point."""
    import click

    from livecam.cli import cli

    found: list[tuple[str, str]] = []

    def walk(command: click.Command, path: str) -> None:
        for param in command.params:
            if isinstance(param, click.Option) and isinstance(param.type, click.types.FloatParamType):
                found.append((path, param.opts[0]))
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, f"{path} {name}".strip())

    walk(cli, "")
    return found


def test_no_number_option_takes_nan_or_inf() -> None:
    """nan passes every range comparison: `--blend nan` wrote an image with undefined blending
    and `--fps nan` failed mid-run; every float option is a FiniteRange."""
    from livecam.cli_params import FiniteRange

    options = _float_options()
    assert ("image", "--blend") in options and ("run", "--max-latency-ms") in options
    assert [o for o in options if not isinstance(_option_type(*o), FiniteRange)] == []
    for value in ("nan", "inf", "-inf"):
        result = run_cli(["image", "a.jpg", "b.jpg", "-s", "f.jpg", "--blend", value])
        assert result.returncode == 2 and "Invalid value for '--blend'" in result.stderr, result.stderr
    assert "'nan' is not a finite number" in run_cli(["image", "a.jpg", "b.jpg", "-s", "f.jpg", "--blend", "nan"]).stderr


@pytest.mark.parametrize("command", ["image", "video", "run"])
@pytest.mark.parametrize("blend", ["0", "0.001"])
def test_a_blend_too_small_to_move_a_pixel_is_a_usage_error(command: str, blend: str, tmp_path: Path,
                                                              faces_dir: Path) -> None:
    # `image --blend 0` (and 0.001, 0.004: no pixel moved by one grey level) wrote the photo
    # unchanged yet said "1 face swapped", with the watermark and the XMP/EXIF tags of an AI
    # edit that never happened
    out = tmp_path / "out.jpg"
    given = {"image": ["image", str(faces_dir / "biden.jpg"), str(out)],
             "video": ["video", str(faces_dir / "biden.jpg"), str(out)],
             "run": ["run", "--camera", str(faces_dir / "biden.jpg"), "--output", str(out)]}[command]
    result = run_cli([*given, "-s", str(faces_dir / "obama.jpg"), "--swap-model", "mesh", "--blend", blend])
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert f"Invalid value for '--blend': {float(blend)} is not in the range 0.01<=x<=1" in lines[0], lines[0]
    assert not out.exists()


def test_the_least_blend_moves_pixels_of_a_real_swap(tmp_path: Path, faces_dir: Path) -> None:
    # the bound of the test above is not so high that it refuses a blend that shows
    import cv2
    import numpy as np

    source = tmp_path / "in.png"
    cv2.imwrite(str(source), cv2.imread(str(faces_dir / "biden.jpg")))
    out = tmp_path / "out.png"
    result = run_cli(["image", str(source), str(out), "-s", str(faces_dir / "obama.jpg"), "--swap-model", "mesh",
                      "--blend", "0.01", "--no-watermark", "--no-label", "--no-c2pa"])
    assert result.returncode == 0 and "1 face swapped" in result.stderr, result.stderr
    assert np.any(cv2.imread(str(out)) != cv2.imread(str(source)))


@pytest.mark.parametrize("blend", ["0", "0.001"])
def test_an_enhancer_blend_too_small_to_move_a_pixel_is_a_usage_error(blend: str, tmp_path: Path,
                                                                       faces_dir: Path) -> None:
    # the enhancer ran on every face and changed none (face_enhancer alone: a labelled copy)
    out = tmp_path / "out.jpg"
    result = run_cli(["image", str(faces_dir / "biden.jpg"), str(out), "--frame-processor", "face_enhancer",
                      "--enhancer-blend", blend])
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert f"Invalid value for '--enhancer-blend': {float(blend)} is not in the range 0.01<=x<=1" in lines[0], lines[0]
    assert not out.exists()


def test_a_file_name_with_a_newline_or_an_escape_keeps_every_message_on_one_line(tmp_path: Path,
                                                                                  faces_dir: Path) -> None:
    # "wrote a<newline>b.jpg (1 face swapped ...)" came out as two lines, and so did the error
    # naming such a file; an escape character reached the terminal as a colour change
    missing = tmp_path / "no\nsuch.jpg"
    refused = run_cli(["image", str(missing), str(tmp_path / "out.jpg"), "-s", str(faces_dir / "obama.jpg")])
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "no\\nsuch.jpg does not exist" in refused.stderr, refused.stderr
    out = tmp_path / "o\nut\x1b[31m.jpg"
    made = run_cli(["image", str(faces_dir / "biden.jpg"), str(out), "-s", str(faces_dir / "obama.jpg"),
                    "--swap-model", "mesh", "--no-c2pa"])
    assert made.returncode == 0 and out.exists(), made.stderr
    wrote = [line for line in made.stderr.splitlines() if "wrote" in line]
    assert wrote and wrote[0].startswith("livecam: wrote ") and "o\\nut\\x1b[31m.jpg (1 face swapped" in wrote[0], \
        made.stderr
    assert "\x1b" not in made.stderr


def _option_type(path: str, flag: str) -> object:
    from livecam.cli import cli

    command = cli
    for name in path.split():
        command = command.commands[name]  # type: ignore[attr-defined]
    return next(p.type for p in command.params if p.opts[0] == flag)


@pytest.mark.parametrize("command", [["--help"], ["video", "--help"], ["models", "list"]],
                         ids=lambda c: " ".join(c))
def test_stdout_closed_by_its_reader_exits_quietly(command: list[str]) -> None:
    """`livecam models list | head -1`: the reader is gone before the output is written (its end
    of the pipe is closed before the command starts), as for head after its first line."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "livecam", *command], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == EXIT_BROKEN_PIPE, proc.stderr  # not 1, `livecam verify`'s "not marked"
    assert proc.stderr == ""  # no traceback, no "Exception ignored ... BrokenPipeError"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command", [["models", "list"], ["--help"]], ids=" ".join)
def test_stdout_on_a_full_disk_is_one_line_not_an_internal_error(command: list[str]) -> None:
    # `livecam verify --json *.mp4 > report.json` on a full disk: "internal error: OSError ...
    # please report it"
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "livecam", *command], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr == ("livecam: error: cannot write to standard output (No space left on device); free some "
                           "space where it goes or send it elsewhere\n"), proc.stderr


@pytest.mark.parametrize("command", [["verify", "{photo}"], ["models", "list"], ["--version"]], ids=" ".join)
def test_a_closed_stdout_is_one_line_and_a_failure_not_silence(command: list[str], faces_dir: Path) -> None:
    # `livecam verify photo.jpg >&-` printed nothing and exited 0: the report was lost unseen
    argv = [word.format(photo=faces_dir / "biden.jpg") for word in command]
    proc = subprocess.run(["sh", "-c", '"$0" -m livecam "$@" >&-', sys.executable, *argv],
                          stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr == ("livecam: error: cannot write to standard output (it is closed); send it to a file, "
                           "or to /dev/null to drop it\n"), proc.stderr


def test_a_closed_stdout_fails_only_a_command_that_writes_there(tmp_path: Path) -> None:
    # a bad input keeps its exit code and line; nothing was to be written to stdout
    proc = subprocess.run(["sh", "-c", '"$0" -m livecam "$@" >&-', sys.executable, "image", str(tmp_path / "in.jpg"),
                           str(tmp_path / "out.jpg"), "-s", str(tmp_path / "face.jpg")],
                          stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "in.jpg does not exist" in proc.stderr, \
        proc.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_stderr_on_a_full_disk_keeps_the_exit_code() -> None:
    # the error line could not be written, and the exit code of a bad input became 1
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "livecam", "image", "in.jpg", "out.jpg", "-s", "missing.jpg"],
                              stdout=subprocess.PIPE, stderr=full, text=True, timeout=120)
    assert proc.returncode == 2


def test_ctrl_c_while_the_models_load_is_one_line(tmp_path, monkeypatch, capsys) -> None:
    # click's own KeyboardInterrupt handling printed an empty line before "livecam: interrupted"
    from livecam.cli import cli

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("livecam.pipeline.engine.Engine.create", interrupted)
    photo = os.path.join(os.path.dirname(__file__), "..", "src", "livecam", "samples", "grace_hopper.jpg")
    with pytest.raises(SystemExit) as stopped:
        cli.main(["image", photo, str(tmp_path / "out.png"), "--source", photo])
    assert stopped.value.code == 130
    assert capsys.readouterr().err == "livecam: interrupted\n"
    assert list(tmp_path.iterdir()) == []


def test_a_tilde_the_shell_left_after_an_equals_sign_is_the_home_folder(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # the shell leaves `--source=~/face.jpg` as it is: the photo was "not found", and an output
    # under ~ was refused with "the output folder ~ does not exist; create it first"
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(faces_dir / "obama.jpg", home / "face.jpg")
    make_clip(home / "clip.mp4", frames=3, size=(160, 120), fps=10, audio=False, source_image=faces_dir / "biden.jpg")
    env = dict(isolated_env, HOME=str(home))
    image = run_cli(["image", str(faces_dir / "biden.jpg"), "~/out.png", "--source=~/face.jpg"],
                    env=env, cwd=tmp_path)
    assert image.returncode == 0, image.stderr
    live = run_cli(["run", "--source=~/face.jpg", "--camera=~/clip.mp4", "--output=~/rec.mp4",
                    "--stats-json=~/s.jsonl"], env=env, cwd=tmp_path, timeout=300)
    assert live.returncode == 0, live.stderr
    assert all((home / name).is_file() for name in ("out.png", "rec.mp4", "s.jsonl"))
    assert not (tmp_path / "~").exists()


@pytest.mark.parametrize("command, argv", [
    ("image", ["-s", "face.jpg", "-t", "target.jpg", "-o", "out.jpg"]),
    ("image", ["--source", "face.jpg", "target.jpg", "--output", "out.jpg"]),
    ("video", ["-s", "face.jpg", "-i", "in.mp4", "-o", "out.mp4"]),
])
def test_the_file_flags_of_other_face_swappers_are_told_the_arguments(command: str, argv: list[str]) -> None:
    # roop and Deep-Live-Cam take `-s FACE -t TARGET -o OUTPUT`: livecam said only "No such option '-t'"
    result = run_cli([command, *argv])
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert (f"takes the input and the output as arguments, without a flag: `livecam {command} INPUT OUTPUT "
            f"--source FACE.jpg`") in result.stderr, result.stderr
    # run has -o/--output and no input argument: no such hint there
    assert "as arguments" not in run_cli(["run", "-o", "none", "-s", "x.jpg", "-t", "x"]).stderr


def test_a_file_name_starting_with_a_dash_says_how_to_give_it() -> None:
    # `livecam image in.jpg -out.jpg` said only "No such option '-o'"
    result = run_cli(["image", "in.jpg", "-out.jpg", "-s", "face.jpg"])
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "'-out.jpg' starts with a dash, so it is read as options; give it as ./-out.jpg" in result.stderr
    assert "starts with a dash" not in run_cli(["image", "in.jpg", "out.jpg", "-x"]).stderr  # a mistyped flag


def test_a_folder_for_a_file_option_or_a_file_for_a_folder_one_names_the_fix(tmp_path: Path) -> None:
    # click's own words, "File 'x' is a directory." and "Directory 'x' is a file.", said no fix
    folder, photo = tmp_path / "stats", tmp_path / "face.jpg"
    folder.mkdir()
    photo.write_bytes(b"x")
    result = run_cli(["bench", "--baseline", str(folder)])
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert f"'{folder}' is a folder, not a file; give a file name" in result.stderr, result.stderr
    result = run_cli(["demo", str(photo)])
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert f"'{photo}' is a file, not a folder; give the name of a folder" in result.stderr, result.stderr


def test_a_signer_given_with_no_c2pa_is_a_usage_error_not_ignored(tmp_path: Path, faces_dir: Path,
                                                                  isolated_env: dict[str, str]) -> None:
    out = tmp_path / "out.jpg"
    key = tmp_path / "key.pem"
    key.write_text("x")
    result = run_cli(["image", str(faces_dir / "biden.jpg"), str(out), "-s", str(faces_dir / "obama.jpg"),
                      "--no-c2pa", "--c2pa-key", str(key)], env=isolated_env)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "--no-c2pa turns off the signing --c2pa-key would do" in result.stderr and not out.exists()
    # set in the environment, a signer is a default that --no-c2pa simply does not use
    env = {**isolated_env, "LIVECAM_C2PA_KEY": str(key), "LIVECAM_C2PA_CERT": str(key)}
    result = run_cli(["image", str(faces_dir / "biden.jpg"), str(out), "-s", str(faces_dir / "obama.jpg"),
                      "--no-c2pa", "--no-watermark"], env=env)
    assert result.returncode == 0 and out.is_file(), result.stderr


def _without_c2pa(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """`env` in which `import c2pa` fails, as where the `c2pa` extra is not installed."""
    hidden = tmp_path / "hide" / "c2pa"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('c2pa-python hidden by the test')\n")
    return {**env, "PYTHONPATH": os.pathsep.join([str(hidden.parent), env.get("PYTHONPATH", "")])}


@pytest.mark.parametrize("command", ["image", "video", "run", "demo"])
def test_signing_asked_for_without_c2pa_python_is_refused_before_any_work(command: str, tmp_path: Path,
                                                                          faces_dir: Path,
                                                                          isolated_env: dict[str, str]) -> None:
    # an explicit --c2pa without c2pa-python warned, wrote an unsigned output and exited 0
    out = tmp_path / ("demo" if command == "demo" else "out.mp4" if command != "image" else "out.jpg")
    swap = ["-s", str(faces_dir / "obama.jpg"), "--swap-model", "mesh"]
    given = {"image": ["image", str(faces_dir / "biden.jpg"), str(out), *swap],
             "video": ["video", str(faces_dir / "biden.jpg"), str(out), *swap],
             "run": ["run", "--camera", str(faces_dir / "biden.jpg"), "--output", str(out), "--max-frames", "1", *swap],
             "demo": ["demo", str(out)]}[command]
    flags = ["--c2pa-cert", "--c2pa-key"] if command == "video" else ["--c2pa"]
    typed = [word for flag in flags for word in ([flag, str(faces_dir / "biden.jpg")] if flag != "--c2pa" else [flag])]
    result = run_cli([*given, *typed], env=_without_c2pa(isolated_env, tmp_path))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    named = " and ".join(flags)
    assert lines[0] == (f"livecam: error: {named} {'asks' if len(flags) == 1 else 'ask'} for C2PA content credentials, "
                        f"but c2pa-python is not installed: pip install 'livecam[c2pa]', or drop {named}"), lines[0]
    assert not out.exists()


def test_without_c2pa_python_the_default_still_writes_unsigned_with_a_warning(tmp_path: Path, faces_dir: Path,
                                                                              isolated_env: dict[str, str]) -> None:
    out = tmp_path / "out.jpg"
    result = run_cli(["image", str(faces_dir / "biden.jpg"), str(out), "-s", str(faces_dir / "obama.jpg"),
                      "--swap-model", "mesh", "--no-watermark"], env=_without_c2pa(isolated_env, tmp_path))
    assert result.returncode == 0 and out.is_file(), result.stderr
    assert "warning: no C2PA content credentials: c2pa-python is not installed (pip install 'livecam[c2pa]')" \
           in result.stderr


def test_doctor_says_a_typed_c2pa_is_refused_without_c2pa_python(monkeypatch: pytest.MonkeyPatch) -> None:
    from livecam.commands.doctor import credentials_state
    from livecam.marks import credentials

    monkeypatch.setattr(credentials, "available", lambda: False)
    assert credentials_state() == ("off: c2pa-python is not installed (pip install 'livecam[c2pa]'): outputs are "
                                   "unsigned, and a typed --c2pa, --c2pa-cert or --c2pa-key is refused", False)


def test_a_bad_livecam_offline_names_the_variable_not_an_option_never_typed(isolated_env: dict[str, str]) -> None:
    # "Invalid value for '--offline': 'maybe' is not a valid boolean. Recognized values: , 0, 1, ..."
    result = run_cli(["models", "where"], env={**isolated_env, "LIVECAM_OFFLINE": "maybe"})
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "'maybe' is neither on nor off; give 1 (or yes, true, on) or 0 (or no, false, off) " \
           "(from $LIVECAM_OFFLINE)" in result.stderr, result.stderr
    assert run_cli(["models", "where"], env={**isolated_env, "LIVECAM_OFFLINE": "yes"}).returncode == 0


@pytest.mark.parametrize(("argv", "said"), [
    (["image", "a.jpg", "b.jpg", "-s", "x.jpg", "--blend", "0.5", "--blend", "0.9"],
     "--blend is given twice (0.5 and 0.9) and takes one value: keep the one you mean (see `livecam image --help`)"),
    (["video", "a.mp4", "b.mp4", "-s", "x.jpg", "--frame-range", "1:5", "--frame-range", "2:6", "--frame-range", "1:5"],
     "--frame-range is given 3 times (1:5 and 2:6) and takes one value: keep the one you mean"),
    (["run", "-s", "x.jpg", "-o", "a.mp4", "--output", "b.mp4"],
     "--output is given twice (a.mp4 and b.mp4) and takes one value"),
    (["bench", "--frames", "10", "--frames", "20"], "--frames is given twice (10 and 20) and takes one value"),
    (["image", "a.jpg", "b.jpg", "-s", "x.jpg", "--label", "--no-label"],
     "--label and --no-label are both given: keep the one you mean"),
    (["image", "a.jpg", "b.jpg", "-s", "x.jpg", "--face-mask-padding", "1", "2", "3", "4",
      "--face-mask-padding", "1", "2", "3", "5"], "--face-mask-padding is given twice (1 2 3 4 and 1 2 3 5)"),
    (["image", "a.jpg", "b.jpg", "-s", "x.jpg", "--mouth-mask", "--mouth-mask", "10"],
     "--mouth-mask is given twice (0 and 10)"),
    (["--models-dir", "m1", "--models-dir", "m2", "models", "list"], "--models-dir is given twice (m1 and m2)"),
])
def test_an_option_given_twice_with_two_values_is_refused(argv: list[str], said: str) -> None:
    # click kept the last without a word: `--blend 0.5 --blend 0.9` ran at 0.9, `--label --no-label` unlabelled
    result = run_cli(argv)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"livecam: error: {said}"), result.stderr


def test_every_option_of_every_command_is_checked_for_a_second_value() -> None:
    # the check lives in OnceOption: an option declared with click.option would skip it
    import click

    from livecam.cli import cli
    from livecam.cli_params import OnceOption

    def plain(command: click.Command, path: str) -> list[str]:
        found = [f"{path} {param.opts[0]}" for param in command.params
                 if isinstance(param, click.Option) and not isinstance(param, OnceOption)
                 and param.name not in ("help", "version")]
        for name, sub in getattr(command, "commands", {}).items():
            found += plain(sub, f"{path} {name}")
        return found

    assert plain(cli, "livecam") == []


def test_the_same_value_twice_and_options_of_several_values_still_run(tmp_path: Path, faces_dir: Path,
                                                                      isolated_env: dict[str, str]) -> None:
    # one value given twice (a script's defaults plus the user's) is that value; --source, --map and
    # --frame-processor take several
    out = tmp_path / "out.png"
    obama, biden = str(faces_dir / "obama.jpg"), str(faces_dir / "biden.jpg")
    result = run_cli(["image", biden, str(out), "-s", obama, "--source", obama, "--swap-model", "mesh",
                      "--swap-model", "mesh", "--blend", "0.5", "--blend", ".5", "--no-label", "--no-label",
                      "--frame-processor", "face_swapper", "--frame-processor", "face_swapper",
                      "--no-watermark", "--no-c2pa"], env=isolated_env)
    assert result.returncode == 0 and "1 face swapped" in result.stderr, result.stderr
    mapped = run_cli(["image", str(tmp_path / "none.jpg"), str(out), "--map", f"{obama}={biden}",
                      "--map", f"{biden}={obama}", "--execution-provider", "cpu", "--execution-provider", "cpu"])
    assert mapped.returncode == 2 and "none.jpg does not exist" in mapped.stderr, mapped.stderr  # past the options


@pytest.mark.parametrize("command", [[], ["models"]], ids=["livecam", "models"])
def test_a_group_given_no_command_shows_its_help_as_it_is(command: list[str]) -> None:
    # `livecam` alone, the first thing a newcomer types, gave its whole help as one error line, \n escaped
    result = run_cli(command)
    assert result.returncode == 2 and "\\n" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"Usage: {' '.join(['livecam', *command])} [OPTIONS] COMMAND"), result.stderr
    assert "Commands:\n" in result.stderr and "livecam: error" not in result.stderr


@pytest.mark.parametrize(("argv", "said"), [
    (["image", "a.jpg", "b.jpg", "-s", "x.jpg", "--frame-processor", "face_swaper"],
     "Invalid value for '--frame-processor': 'face_swaper' is not one of face_swapper, face_enhancer; "
     "did you mean face_swapper?"),
    (["video", "a.mp4", "b.mp4", "-s", "x.jpg", "--swap-model", "inswapper"], "did you mean inswapper_128?"),
    (["run", "-s", "x.jpg", "--execution-provider", "CUDA12"], "did you mean cuda?"),
    (["models", "download", "inswapper"], "unknown model 'inswapper'; did you mean inswapper_128? known models: "),
])
def test_a_mistyped_choice_names_the_one_meant(argv: list[str], said: str, isolated_env: dict[str, str]) -> None:
    # each listed every choice, and the newcomer had to find the one they meant in it
    result = run_cli(argv, env=isolated_env)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert said in result.stderr, result.stderr
    far = run_cli(["image", "a.jpg", "b.jpg", "-s", "x.jpg", "--execution-provider", "vulkan"])
    assert far.returncode == 2 and "did you mean" not in far.stderr, far.stderr  # no guess when none is close


@pytest.mark.parametrize(("argv", "said"), [
    (["image"], "Missing argument 'INPUT'; give the file to read and the file to write, in that order: "
                "`livecam image INPUT OUTPUT --source FACE.jpg` (see `livecam image --help`)"),
    (["video", "in.mp4", "-s", "face.jpg"], "Missing argument 'OUTPUT'; give the file to read and the file to "
                                            "write, in that order: `livecam video INPUT OUTPUT --source FACE.jpg`"),
    (["swap", "a.jpg", "b.jpg"], "No such command 'swap'; the commands are bench, demo, doctor, image, models, run, "
                                 "verify and video (see `livecam --help`)"),
    (["models", "get", "x"], "No such command 'get'; the commands are convert, download, list, verify and where"),
])
def test_a_missing_file_argument_or_an_unknown_command_says_what_is_taken(argv: list[str], said: str) -> None:
    # "Missing argument 'OUTPUT'." and "No such command 'swap'." named nothing a newcomer could type
    result = run_cli(argv)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"livecam: error: {said}"), result.stderr


@pytest.mark.parametrize(("argv", "said"), [
    # click guessed among the command's own options: "No such option '--fps'. Did you mean '--map'?"
    (["image", "a.jpg", "b.jpg", "-s", "x.jpg", "--fps", "30"],
     "--fps is not an option of `livecam image`, only of `livecam run` and `livecam video` "
     "(see `livecam image --help`)"),
    (["models", "list", "--all"], "--all is not an option of `livecam models list`, only of `livecam models download`"),
    # --face-mask takes names with commas, so a user tries them here too: it was "did you mean cuda?"
    (["run", "-s", "x.jpg", "--execution-provider", "cuda,cpu"],
     "Invalid value for '--execution-provider': 'cuda,cpu': give the values as separate words, "
     "--execution-provider cuda cpu"),
])
def test_an_option_of_another_command_or_values_with_commas_say_the_fix(argv: list[str], said: str) -> None:
    result = run_cli(argv)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"livecam: error: {said}"), result.stderr


def test_the_help_starts_a_newcomer_with_commands_that_parse() -> None:
    # `livecam --help` listed the commands and options but no command line to begin with
    import click

    from livecam.cli import cli

    help_text = run_cli(["--help"]).stdout
    steps = help_text.split("First steps:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    examples = [line.split("  ")[2].split() for line in steps]  # (4 spaces, the example, 2+ spaces, what it is)
    assert [e[1] for e in examples] == ["demo", "image", "video", "run", "doctor"], steps
    assert all(len(line) <= 80 for line in steps), steps
    for example in examples:
        ctx = cli.make_context("livecam", example[1:], resilient_parsing=True)
        command = cli.get_command(ctx, example[1])
        assert isinstance(command, click.Command)
        command.make_context(example[1], example[2:])  # a usage error here fails the test


@pytest.mark.parametrize(("argv", "said"), [
    (["image", "in.jpg", "out.png", "-s"],
     "-s is missing its PATH: give it right after the flag, `-s PATH` (see `livecam image --help`)"),
    (["video", "in.mp4", "out.mp4", "-s", "x.jpg", "--frame-range"],
     "--frame-range is missing its START:END: give it right after the flag, `--frame-range START:END`"),
    (["run", "-s", "x.jpg", "--det-size"], "--det-size is missing its value: give one of 320, 480, 640 right after it"),
    # a text option names what it takes, not click's "TEXT"
    (["run", "-s", "x.jpg", "--camera"],
     "--camera is missing its INDEX|FILE|URL: give it right after the flag, `--camera INDEX|FILE|URL`"),
    (["--models-dir"], "--models-dir is missing its DIRECTORY: give it right after the flag, `--models-dir DIRECTORY` "
                       "(see `livecam --help`)"),
])
def test_a_flag_left_without_its_value_says_what_goes_after_it(argv: list[str], said: str) -> None:
    # "Option '-s' requires an argument." said neither what it takes nor where to look
    result = run_cli(argv)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"livecam: error: {said}"), result.stderr
