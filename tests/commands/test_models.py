"""`livecam models list|where|verify|download` and `livecam doctor` through the real CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from livecam.commands import doctor as doctor_module
from livecam.models import catalog as catalog_module
from livecam.models.catalog import TensorSpec
from livecam.settings import RuntimeSettings
from tests.conftest import run_cli
from tests.models.helpers import (LoopbackServer, catalog_to_json, env_without_offline, payload, python_path_env,
                                  spec_for, tiny_onnx)

EMBEDDED = ("blazeface_short_range", "blazeface_full_range", "face_landmark")


def run_patched(catalog_json: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tests.models.patched_cli", str(catalog_json), *args],
                          env=python_path_env(env), capture_output=True, text=True, timeout=120)


def offline_in(models: Path) -> RuntimeSettings:
    """Offline settings on `models`, given as the CLI tests give it (LIVECAM_MODELS_DIR): the
    commands the messages name are the plain ones, as `--models-dir` would add itself to them."""
    return RuntimeSettings(models_dir=models, models_dir_from="LIVECAM_MODELS_DIR", offline=True)


def test_models_where_prints_the_folder(isolated_env, tmp_path) -> None:
    result = run_cli(["models", "where"], env=isolated_env)
    assert result.returncode == 0
    assert result.stdout.strip() == isolated_env["LIVECAM_MODELS_DIR"]
    other = tmp_path / "elsewhere"
    result = run_cli(["--models-dir", str(other), "models", "where"], env=isolated_env)
    assert result.stdout.strip() == str(other)


def test_a_models_folder_with_a_newline_in_its_name_keeps_one_line_a_row(isolated_env, tmp_path) -> None:
    # stdout printed the folder as it is: `models list` had a row split in two, `models where` two lines
    odd = tmp_path / "my\nmodels"
    where = run_cli(["--models-dir", str(odd), "models", "where"], env=isolated_env)
    assert where.stdout == f"{tmp_path}/my\\nmodels\n", where.stdout
    listed = run_cli(["--models-dir", str(odd), "models", "list"], env=isolated_env)
    rows = listed.stdout.splitlines()
    assert listed.returncode == 0 and len(rows) == 1 + len(catalog_module.CATALOG), listed.stdout
    assert rows[-1].split()[0] in catalog_module.CATALOG
    assert any(row.endswith(f"{tmp_path}/my\\nmodels/inswapper_128.onnx") for row in rows), listed.stdout


def test_models_list_shows_every_model_with_state_and_licence(isolated_env) -> None:
    result = run_cli(["models", "list"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert set(lines) == set(catalog_module.CATALOG)
    assert "missing" in lines["inswapper_128"] and "non-commercial" in lines["inswapper_128"]
    assert "554.3 MB" in lines["inswapper_128"]
    for name in EMBEDDED:
        assert "verified" in lines[name]


def test_models_verify_on_an_empty_folder_passes(isolated_env) -> None:
    result = run_cli(["models", "verify"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert "det_10g: missing" in result.stdout
    assert all(f"{name}: verified" in result.stdout for name in EMBEDDED)


def test_models_verify_of_a_named_model_that_is_missing_fails(isolated_env) -> None:
    # `livecam models verify inswapper_128 && livecam run ...` went on (exit 0) without the model
    result = run_cli(["models", "verify", "w600k_r50", "face_landmark", "det_10g"], env=isolated_env)
    assert result.returncode == 3
    # each model said once: the verified one on stdout, the missing ones only in the error with its fix
    assert result.stdout.startswith("face_landmark: verified") and result.stdout.count("\n") == 1, result.stdout
    assert result.stderr == ("livecam: error: w600k_r50, det_10g are not downloaded "
                             "(`livecam models download w600k_r50 det_10g --accept-license`)\n"), result.stderr
    assert run_cli(["models", "verify", "face_landmark"], env=isolated_env).returncode == 0


def test_models_verify_reports_a_truncated_model_with_exit_3(isolated_env) -> None:
    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir(parents=True)
    (models / "det_10g.onnx").write_bytes(b"\x08\x07" * 500)
    result = run_cli(["models", "verify"], env=isolated_env)
    assert result.returncode == 3
    assert "det_10g: corrupt" in result.stderr and str(models / "det_10g.onnx") in result.stderr
    assert "livecam models download det_10g" in result.stderr and "Traceback" not in result.stderr
    assert "det_10g" in run_cli(["models", "list"], env=isolated_env).stdout


def test_models_verify_unknown_name_is_a_usage_error(isolated_env) -> None:
    result = run_cli(["models", "verify", "no_such_model"], env=isolated_env)
    assert result.returncode == 2 and "known models" in result.stderr


def test_models_download_offline_names_the_fetch_command(isolated_env) -> None:
    result = run_cli(["models", "download", "inswapper_128"], env=isolated_env)
    assert result.returncode == 3
    assert "livecam models download inswapper_128" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_models_download_needs_the_licence_accepted(isolated_env) -> None:
    env = env_without_offline(isolated_env)
    result = run_cli(["models", "download", "inswapper_128"], env=env)  # stdin is no TTY: no prompt
    assert result.returncode == 3
    assert "--accept-license" in result.stderr and "non-commercial" in result.stderr
    assert "inswapper_128 needs its licence accepted" in result.stderr  # was "need(s) their licence"
    assert not Path(env["LIVECAM_MODELS_DIR"], "inswapper_128.onnx.part").exists()


@pytest.mark.parametrize("args, command", [
    ((), "livecam models download det_10g w600k_r50 inswapper_128 gfpgan_1.4 --accept-license"),
    (("gfpgan_1.4", "xseg_1"), "livecam models download gfpgan_1.4 xseg_1 --accept-license"),
    (("--all",), "livecam models download --all --accept-license"),
])
def test_a_refused_licence_names_the_command_that_fetches_everything_asked(isolated_env, args, command) -> None:
    # it named only the models whose licence was refused: `livecam models download` without
    # --accept-license said to run `livecam models download det_10g w600k_r50 inswapper_128
    # --accept-license`, which left GFPGAN (Apache-2.0, asked for, never fetched) out
    result = run_cli(["models", "download", *args], env=env_without_offline(isolated_env))
    assert result.returncode == 3
    assert result.stderr.splitlines()[-1].endswith(f"rerun with --accept-license (`{command}`)"), result.stderr
    assert sorted(p.name for p in Path(isolated_env["LIVECAM_MODELS_DIR"]).glob("*") if p.name != "README.md") == []


def _nested_parentheses(line: str) -> bool:
    depth = 0
    for ch in line:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth > 1:
            return True
    return False


def test_models_verify_says_a_truncated_file_plainly(isolated_env) -> None:
    # was "corrupt (4 bytes, expected N (truncated or not this model); delete it ...) PATH"
    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir()
    (models / "inswapper_128.onnx").write_bytes(b"junk")
    result = run_cli(["models", "verify"], env=isolated_env)
    assert result.returncode == 3
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("inswapper_128:")]
    assert line.startswith(f"inswapper_128: corrupt {models / 'inswapper_128.onnx'}: 4 bytes, expected ")
    assert "livecam models download inswapper_128" in line and not _nested_parentheses(line)
    assert "livecam: error: 1 model file failed verification" in result.stderr


def test_models_download_then_verify_through_the_cli(isolated_env, tmp_path) -> None:
    data = payload(200_000, 21)
    with LoopbackServer() as server:
        url = server.serve("/m.onnx", data)
        catalog = tmp_path / "catalog.json"
        catalog.write_text(catalog_to_json([spec_for("m", (url,), data, needs_acceptance=True)]))
        env = env_without_offline(isolated_env)
        refused = run_patched(catalog, ["models", "download", "m"], env)
        assert refused.returncode == 3 and server.state.log == []
        result = run_patched(catalog, ["-q", "models", "download", "m", "--accept-license"], env)
        assert result.returncode == 0, result.stderr
    assert Path(env["LIVECAM_MODELS_DIR"], "m.onnx").read_bytes() == data
    verify = run_patched(catalog, ["models", "verify"], isolated_env)
    assert verify.returncode == 0 and "m: verified" in verify.stdout
    again = run_patched(catalog, ["models", "download", "m"], isolated_env)
    assert again.returncode == 0 and "already present" in again.stdout


def test_models_download_replaces_a_corrupt_file_once_the_licence_is_accepted(isolated_env, tmp_path) -> None:
    data = payload(200_000, 22)
    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir(parents=True)
    bad = models / "m.onnx"
    bad.write_bytes(payload(200_000, 23))  # the right size, the wrong bytes (a damaged copy)
    with LoopbackServer() as server:
        url = server.serve("/m.onnx", data)
        catalog = tmp_path / "catalog.json"
        catalog.write_text(catalog_to_json([spec_for("m", (url,), data, needs_acceptance=True)]))
        offline = run_patched(catalog, ["models", "download", "m"], isolated_env)
        assert offline.returncode == 3 and "offline mode forbids downloading m" in offline.stderr
        env = env_without_offline(isolated_env)
        refused = run_patched(catalog, ["models", "download", "m"], env)  # no TTY, no flag: never accepted
        assert refused.returncode == 3 and "--accept-license" in refused.stderr
        assert ") accepted" not in refused.stderr and server.state.log == []
        result = run_patched(catalog, ["models", "download", "m", "--accept-license"], env)
        assert result.returncode == 0, result.stderr
        assert "corrupt; downloading a fresh copy" in result.stderr
    assert bad.read_bytes() == data
    assert sorted(p.name for p in models.iterdir() if not p.name.endswith(".lock")) == [".verified.json", "m.onnx"]


def test_the_repair_a_damaged_model_is_given_is_a_command_that_replaces_it(isolated_env, tmp_path) -> None:
    # the repair said "delete it and run `livecam models download ...`", while the download replaces
    # a damaged file itself: the command the message names, run as given, leaves the good file
    import re

    data = payload(200_000, 24)
    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir(parents=True)
    bad = models / "m.onnx"
    bad.write_bytes(payload(200_000, 25))  # the right size, the wrong bytes
    with LoopbackServer() as server:
        url = server.serve("/m.onnx", data)
        catalog = tmp_path / "catalog.json"
        catalog.write_text(catalog_to_json([spec_for("m", (url,), data, needs_acceptance=True)]))
        verify = run_patched(catalog, ["models", "verify", "m"], isolated_env)
        assert verify.returncode == 3, verify.stderr
        said = re.search(r"; run `livecam (models download [^`]*)`, which replaces it", verify.stderr)
        assert said is not None and "delete" not in verify.stderr, verify.stderr
        assert said.group(1) == "models download m --accept-license"
        result = run_patched(catalog, said.group(1).split(), env_without_offline(isolated_env))
        assert result.returncode == 0, result.stderr
    assert bad.read_bytes() == data


def test_the_repair_line_of_a_run_given_models_dir_repairs_that_folder(isolated_env, tmp_path) -> None:
    # with `livecam --models-dir DIR`, the repair said `livecam models download m`: run as given, it
    # fetched into the default folder (here LIVECAM_MODELS_DIR's stands in for it) and DIR's damaged
    # file stayed, so the run kept failing. The line now names DIR, before the subcommand, quoted.
    import re
    import shlex

    data = payload(200_000, 26)
    given = tmp_path / "my models's"  # a space and a quote: the command is parsed by a shell
    given.mkdir()
    bad = given / "m.onnx"
    bad.write_bytes(payload(200_000, 27))  # the right size, the wrong bytes
    default = Path(isolated_env["LIVECAM_MODELS_DIR"])
    with LoopbackServer() as server:
        url = server.serve("/m.onnx", data)
        catalog = tmp_path / "catalog.json"
        catalog.write_text(catalog_to_json([spec_for("m", (url,), data)]))
        verify = run_patched(catalog, ["--models-dir", str(given), "models", "verify", "m"], isolated_env)
        assert verify.returncode == 3, verify.stderr
        said = re.search(r"; run `([^`]*)`, which replaces it", verify.stderr)
        assert said is not None, verify.stderr
        argv = shlex.split(said.group(1))
        assert argv[0] == "livecam", said.group(1)
        result = run_patched(catalog, argv[1:], env_without_offline(isolated_env))
        assert result.returncode == 0, result.stderr
    assert bad.read_bytes() == data and not (default / "m.onnx").exists(), said.group(1)
    assert argv == ["livecam", "--models-dir", str(given), "models", "download", "m"]  # before the subcommand


def test_models_verify_catches_a_wrong_kind_of_unpinned_model(isolated_env, tmp_path) -> None:
    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir(parents=True)
    tiny_onnx(models / "enh.onnx", [("input.1", [1, 3, 112, 112])], [("out", [1, 512])])
    spec = spec_for("enh", (), None, inputs=(TensorSpec(None, (1, 3, 512, 512)),),
                    outputs=(TensorSpec(None, (1, 3, 512, 512)),))
    catalog = tmp_path / "catalog.json"
    catalog.write_text(catalog_to_json([spec]))
    result = run_patched(catalog, ["models", "verify"], isolated_env)
    assert result.returncode == 3
    assert "enh: corrupt" in result.stderr and str(models / "enh.onnx") in result.stderr


def test_doctor_exits_0_when_the_default_run_is_possible(isolated_env) -> None:
    result = run_cli(["doctor"], env=isolated_env, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "onnxruntime" in out and "Execution providers (--execution-provider): " in out and "Python" in out
    import av
    import cv2

    assert f"Media libraries: OpenCV {cv2.__version__}, PyAV {av.__version__}" in out  # what reads the files
    assert "Models folder: " + isolated_env["LIVECAM_MODELS_DIR"] in out and "free disk" in out
    assert "Cameras:" in out and "Default run (embedded models, CPU): ready" in out  # ("NOT ready" has "ready" too)
    # a dozen "missing" models and no word on which matter: the neural swap's are named, with one command
    assert "Neural swap (--swap-model auto): inswapper_128, w600k_r50 and det_10g are not here (see above), so auto " \
           "uses the embedded mesh swapper; `livecam models download inswapper_128 w600k_r50 det_10g " \
           "--accept-license` fetches them" in out, out
    assert "Traceback" not in result.stderr


def test_doctor_says_whether_a_window_can_open(isolated_env) -> None:
    # A Wayland session without XWayland: opencv-python's Qt (xcb only) could not draw there.
    env = {k: v for k, v in isolated_env.items() if k not in ("DISPLAY", "QT_QPA_PLATFORM")}
    result = run_cli(["doctor"], env={**env, "WAYLAND_DISPLAY": "wayland-0"}, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("Window (--output window): "))
    from livecam.media.window import bundled_qt_platforms, opencv_gui

    if opencv_gui() == "NONE":  # opencv-python-headless
        assert "this OpenCV has no GUI" in line
    elif "wayland" in (bundled_qt_platforms() or {"wayland"}):
        assert line.endswith("available")
    else:
        assert "unavailable: this OpenCV build draws windows through X11 only" in line and "XWayland" in line
    env.pop("WAYLAND_DISPLAY", None)
    result = run_cli(["doctor"], env=env, timeout=180)
    assert "Window (--output window): no display" in result.stdout


def test_doctor_fails_when_an_embedded_model_is_broken(tmp_path, monkeypatch, capsys) -> None:
    broken = tmp_path / "default"
    broken.mkdir()
    (broken / "face_landmark.onnx").write_bytes(b"not a model")
    monkeypatch.setattr(catalog_module, "DEFAULT_DIR", broken)
    monkeypatch.setattr(doctor_module, "probe_cameras", lambda: [])
    code = doctor_module.run_doctor(RuntimeSettings(models_dir=tmp_path / "m", offline=True))
    out = capsys.readouterr().out
    assert code == 1
    assert "NOT ready" in out and "face_landmark" in out
    line = next(x for x in out.splitlines() if x.strip().startswith("face_landmark"))
    assert "reinstall livecam" in line  # what fixes it


def test_doctor_says_how_to_fix_a_corrupt_model(tmp_path, monkeypatch, capsys) -> None:
    models = tmp_path / "m"
    models.mkdir()
    (models / "inswapper_128.onnx").write_bytes(b"cut short")
    monkeypatch.setattr(doctor_module, "probe_cameras", lambda: [])
    assert doctor_module.run_doctor(offline_in(models)) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("inswapper_128 "))
    assert "corrupt" in line and "run `livecam models download inswapper_128 --accept-license`, which replaces it" in line


def test_doctor_and_models_list_say_a_broken_unpinned_model_is_corrupt_and_the_fix(tmp_path, monkeypatch,
                                                                                  capsys) -> None:
    # gfpgan_1.4 has no published SHA-256: a file of the right size holding zeros (an interrupted
    # copy) was "unpinned" in both, as if it were fine, while every run using it failed
    from livecam.commands.models import list_models

    models = tmp_path / "m"
    models.mkdir()
    spec = catalog_module.CATALOG["gfpgan_1.4"]
    assert spec.sha256 is None and spec.size is not None
    with open(models / spec.file_name, "wb") as fh:
        fh.truncate(spec.size)  # sparse: zeros without writing 340 MB
    fix = "run `livecam models download gfpgan_1.4`, which replaces it"
    monkeypatch.setattr(doctor_module, "probe_cameras", lambda: [])
    settings = offline_in(models)
    assert doctor_module.run_doctor(settings) == 0  # not a model of the default run
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("gfpgan_1.4 "))
    assert line.split(None, 1)[1] == ("corrupt (not a whole ONNX model, truncated or overwritten: no protobuf "
                                      f"field at byte 0); {fix}"), line
    list_models(settings)
    listed = capsys.readouterr()
    row = next(x for x in listed.out.splitlines() if x.startswith("gfpgan_1.4 "))
    assert " corrupt " in row and "unpinned" not in row, row
    assert listed.err == (f"gfpgan_1.4: {models / spec.file_name} is corrupt (not a whole ONNX model, truncated or "
                          f"overwritten: no protobuf field at byte 0); {fix}\n"), listed.err


def test_a_folder_in_a_models_place_gets_one_repair_move_it_away(tmp_path, monkeypatch, capsys) -> None:
    # doctor said "(a folder, not the model file; move it away and run `...`); delete it and run `...`":
    # the repair twice, the second deleting what may be the user's folder; a run needing it the same
    models = tmp_path / "m"
    (models / "inswapper_128.onnx").mkdir(parents=True)
    monkeypatch.setattr(doctor_module, "probe_cameras", lambda: [])
    assert doctor_module.run_doctor(offline_in(models)) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("inswapper_128 "))
    command = "`livecam models download inswapper_128 --accept-license`"
    assert line.split(None, 1)[1] == f"corrupt (a folder, not the model file); move it away and run {command}"
    from livecam.models.store import ModelStore

    damage = ModelStore(offline_in(models), progress=False).damage("inswapper_128")
    assert "delete it" not in damage and damage.count("run `livecam models download") == 1, damage


def test_a_fifo_in_a_models_place_is_named_not_missing(tmp_path, monkeypatch, capsys, isolated_env) -> None:
    # doctor, `models verify` and a run needing it said "missing" while `ls` showed the file
    from livecam.errors import ModelError
    from livecam.models.store import ModelStore

    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir(parents=True)
    os.mkfifo(models / "inswapper_128.onnx")
    command = "`livecam models download inswapper_128 --accept-license`"
    monkeypatch.setattr(doctor_module, "probe_cameras", lambda: [])
    settings = offline_in(models)
    doctor_module.run_doctor(settings)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("inswapper_128 "))
    assert line.split(None, 1)[1] == f"corrupt (not a regular file); run {command}, which replaces it"
    verify = run_cli(["models", "verify", "inswapper_128"], env=isolated_env)
    assert verify.returncode == 3 and verify.stderr.startswith(
        f"inswapper_128: corrupt {models / 'inswapper_128.onnx'}: not a regular file; run {command}, which replaces it\n")
    with pytest.raises(ModelError) as info:
        ModelStore(settings, progress=False).path("inswapper_128")
    assert info.value.message == (f"{models / 'inswapper_128.onnx'} is not a regular file, where model "
                                  f"inswapper_128's file goes; run {command}, which replaces it")


@pytest.mark.parametrize("file_name", ["blazeface_short_range.onnx", "blazeface_full_range.onnx",
                                       "face_landmark.onnx"])
def test_doctor_fails_when_any_model_of_the_default_run_is_broken(tmp_path, monkeypatch, capsys,
                                                                  file_name: str) -> None:
    # every default run opens all three: short range to try the accelerator on, full range to find faces,
    # FaceMesh for the mesh swapper
    default = tmp_path / "default"
    shutil.copytree(catalog_module.DEFAULT_DIR, default)
    (default / file_name).write_bytes(b"not a model")
    monkeypatch.setattr(catalog_module, "DEFAULT_DIR", default)
    monkeypatch.setattr(doctor_module, "probe_cameras", lambda: [])
    code = doctor_module.run_doctor(RuntimeSettings(models_dir=tmp_path / "m", offline=True))
    out = capsys.readouterr().out
    assert code == 1, out
    assert "NOT ready" in out and file_name.removesuffix(".onnx") in out


def test_doctor_prints_the_fix_for_two_onnxruntime_wheels(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(doctor_module, "installed_ort_distributions",
                        lambda: {"onnxruntime": "1.20.0", "onnxruntime-gpu": "1.20.0"})
    monkeypatch.setattr(doctor_module, "probe_cameras", lambda: [])
    doctor_module.run_doctor(RuntimeSettings(models_dir=tmp_path / "m", offline=True))
    out = capsys.readouterr().out
    assert "pip uninstall -y onnxruntime onnxruntime-gpu && pip install onnxruntime-gpu" in out
    assert "PROBLEM" in out


@pytest.mark.parametrize("dists, fix", [
    ({"onnxruntime": "1"}, None),
    ({"onnxruntime-gpu": "1"}, None),
    ({"onnxruntime": "1", "onnxruntime-openvino": "1"},
     "pip uninstall -y onnxruntime onnxruntime-openvino && pip install onnxruntime-openvino"),
])
def test_ort_conflict_fix(dists, fix) -> None:
    assert doctor_module.ort_conflict_fix(dists) == fix


def test_models_convert_without_the_extra_says_what_to_install(tmp_path, monkeypatch) -> None:
    from livecam.commands.models import convert_model
    from livecam.errors import InputError

    checkpoint = tmp_path / "GFPGANv1.4.pth"
    checkpoint.write_bytes(b"x")
    monkeypatch.setitem(sys.modules, "torch", None)  # as if `livecam[convert]` were not installed
    settings = RuntimeSettings(models_dir=tmp_path / "models")
    with pytest.raises(InputError) as info:
        convert_model(settings, checkpoint, None, False)
    assert info.value.exit_code == 2 and "pip install 'livecam[convert]'" in info.value.message
    with pytest.raises(InputError) as missing:
        convert_model(settings, tmp_path / "nope.pth", None, False)
    assert "nope.pth" in missing.value.message
    with pytest.raises(InputError, match="is a folder"):  # once "not found"
        convert_model(settings, tmp_path, None, False)
    # -o naming the checkpoint with --force replaced the user's checkpoint with its conversion
    with pytest.raises(InputError, match="is the input; write to another file"):
        convert_model(settings, checkpoint, tmp_path / "." / checkpoint.name, True)
    assert checkpoint.read_bytes() == b"x"
    fifo = tmp_path / "pipe.pth"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="pipe.pth is not a regular file"):  # was "not found"
        convert_model(settings, fifo, None, False)


def test_models_convert_fp16_takes_an_enhancers_name_and_writes_where_runs_look(isolated_env) -> None:
    result = run_cli(["models", "convert", "--fp16", "w600k_r50"], env=isolated_env)
    assert result.returncode == 2 and "--fp16 makes an enhancer's fp16 copy; give one of gfpgan_1.4" in result.stderr
    result = run_cli(["models", "convert", "--fp16", "gfpgan_1.4", "-o", "x.onnx"], env=isolated_env)
    assert result.returncode == 2 and "leave out --output" in result.stderr


def test_models_convert_refuses_to_overwrite_without_force(isolated_env, tmp_path) -> None:
    checkpoint = tmp_path / "GFPGANv1.4.pth"
    checkpoint.write_bytes(b"x")
    existing = tmp_path / "out.onnx"
    existing.write_bytes(b"keep me")
    result = run_cli(["models", "convert", str(checkpoint), "-o", str(existing)], env=isolated_env)
    assert result.returncode == 2 and "--force" in result.stderr
    assert existing.read_bytes() == b"keep me"
    # an existing file of another extension: its name is the fix, not --force (which then said it)
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"keep me")
    named = run_cli(["models", "convert", str(checkpoint), "-o", str(notes)], env=isolated_env)
    assert named.returncode == 2 and "extension .txt); name it notes.onnx" in named.stderr, named.stderr
    assert notes.read_bytes() == b"keep me"


@pytest.mark.parametrize("name,message", [
    # the missing folders were made; other outputs refuse a folder that is not there
    ("new/dir/out.onnx", "the output folder {tmp}/new/dir does not exist; create it first"),
    # any extension was written
    ("out.txt", "cannot write an ONNX model to {tmp}/out.txt (extension .txt); name it out.onnx"),
    ("out", "cannot write an ONNX model to {tmp}/out (extension missing); name it out.onnx"),
])
def test_models_convert_refuses_a_missing_folder_and_another_extension(name, message, isolated_env, tmp_path) -> None:
    checkpoint = tmp_path / "GFPGANv1.4.pth"
    checkpoint.write_bytes(b"x")
    result = run_cli(["models", "convert", str(checkpoint), "-o", str(tmp_path / name)], env=isolated_env)
    assert result.returncode == 2 and result.stderr == f"livecam: error: {message.format(tmp=tmp_path)}\n"
    assert not (tmp_path / "new").exists() and not list(tmp_path.glob("out*"))


@pytest.mark.parametrize("fault", ["truncated", "random_bytes", "wrong_kind"])
def test_a_bad_swapper_model_stops_livecam_image_before_processing(fault, faces_dir, isolated_env, tmp_path) -> None:
    """Issue 9's model faults through a real command: exit 3, the file named, no output written.
    --unverified-models skips the size/hash check, so the load and signature checks are what catch it."""
    from tests.standins.arcface import build_arcface
    from tests.standins.inswapper import build_inswapper

    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir(parents=True)
    build_arcface(models / "w600k_r50.onnx")
    slot = models / "inswapper_128.onnx"
    if fault == "truncated":
        whole = build_inswapper(tmp_path / "whole.onnx").read_bytes()
        slot.write_bytes(whole[: len(whole) // 3])
    elif fault == "random_bytes":
        slot.write_bytes(payload(20_000, 30))
    else:
        tiny_onnx(slot, [("input.1", [1, 3, 640, 640])], [(f"o{i}", [100, 1]) for i in range(9)])
    out = tmp_path / "out.jpg"
    result = run_cli(["--unverified-models", "image", str(faces_dir / "biden.jpg"), str(out),
                      "-s", str(faces_dir / "obama.jpg"), "--swap-model", "inswapper_128"], env=isolated_env)
    assert result.returncode == 3, result.stderr
    assert str(slot) in result.stderr and "Traceback" not in result.stderr
    assert "livecam models download inswapper_128" in result.stderr
    assert not out.exists()


def test_models_convert_checks_the_result_and_renames_it_into_place(tmp_path, monkeypatch) -> None:
    """The converter (livecam.models.convert, another module) is faked: good output is kept, a
    wrong-kind output is refused and nothing is left under the target name."""
    import types

    from livecam.commands.models import convert_model
    from livecam.errors import InputError, ModelError

    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))  # the real one is not needed
    produced = {"kind": "good"}

    def fake_convert(checkpoint: Path, output: Path) -> None:
        shape = [1, 3, 512, 512] if produced["kind"] == "good" else [1, 3, 112, 112]
        tiny_onnx(output, [("input", shape)], [("output", shape)])

    monkeypatch.setitem(sys.modules, "livecam.models.convert", types.SimpleNamespace(convert_gfpgan=fake_convert))
    checkpoint = tmp_path / "GFPGANv1.4.pth"
    checkpoint.write_bytes(b"x")
    settings = RuntimeSettings(models_dir=tmp_path / "models")
    convert_model(settings, checkpoint, None, False)
    assert (tmp_path / "models" / "gfpgan_1.4.onnx").is_file()
    produced["kind"] = "bad"
    target = tmp_path / "other.onnx"
    with pytest.raises(ModelError):
        convert_model(settings, checkpoint, target, False)
    assert not target.exists() and not (tmp_path / "other.onnx.part").exists()
    produced["kind"] = "good"  # -o into a missing folder made it, and wrote the model there
    with pytest.raises(InputError, match="does not exist; create it first"):
        convert_model(settings, checkpoint, tmp_path / "new" / "gfpgan.onnx", False)
    assert not (tmp_path / "new").exists()


def test_a_plain_download_fetches_the_default_set_and_all_fetches_every_model(isolated_env, tmp_path) -> None:
    """`models download` without names is what the default path runs, not every optional model
    (about 3 GB with HyperSwap, CodeFormer, GPEN, XSeg, BiSeNet); `--all` takes them all."""
    from dataclasses import replace

    core, extra = payload(50_000, 31), payload(50_000, 32)
    with LoopbackServer() as server:
        specs = [replace(spec_for("core", (server.serve("/core.onnx", core),), core), default_download=True),
                 spec_for("extra", (server.serve("/extra.onnx", extra),), extra)]
        catalog = tmp_path / "catalog.json"
        catalog.write_text(catalog_to_json(specs))
        env = env_without_offline(isolated_env)
        models = Path(env["LIVECAM_MODELS_DIR"])
        plain = run_patched(catalog, ["-q", "models", "download"], env)
        assert plain.returncode == 0, plain.stderr
        assert (models / "core.onnx").read_bytes() == core and not (models / "extra.onnx").exists()
        both = run_patched(catalog, ["models", "download", "extra", "--all"], env)
        assert both.returncode == 2 and "NAMEs or --all" in both.stderr
        every = run_patched(catalog, ["-q", "models", "download", "--all"], env)
        assert every.returncode == 0, every.stderr
        assert (models / "extra.onnx").read_bytes() == extra


def test_offline_download_all_is_one_short_line(isolated_env) -> None:
    # LIVECAM_OFFLINE=1 `models download --all` named every model twice: a line of 600 characters
    result = run_cli(["models", "download", "--all"], env=isolated_env)
    missing = [s for s in catalog_module.CATALOG.values() if s.downloadable and not s.bundled]
    assert result.returncode == 3 and result.stderr == (
        f"livecam: error: offline mode forbids downloading {len(missing)} missing models; run `livecam models "
        f"download --all --accept-license` without --offline/LIVECAM_OFFLINE\n"), result.stderr


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "http_proxy"])
def test_a_refused_proxy_fails_at_once_naming_it(isolated_env, tmp_path, variable) -> None:
    # A proxy that is not running (a stale HTTPS_PROXY) was retried 5 times per mirror, half a
    # minute of back-off each, then "connection refused" without naming the proxy.
    import socket

    scheme = variable.split("_")[0].lower()
    data = payload(1000, 33)
    urls = (f"{scheme}://livecam-test.invalid/a/m.onnx", f"{scheme}://mirror.invalid/b/m.onnx")
    catalog = tmp_path / "catalog.json"
    catalog.write_text(catalog_to_json([spec_for("m", urls, data)]))
    env = {k: v for k, v in env_without_offline(isolated_env).items() if k.lower() != "no_proxy"}
    with socket.socket() as closed:  # bound, never listening: a connection to it is refused
        closed.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{closed.getsockname()[1]}"
        result = run_patched(catalog, ["models", "download", "m"], {**env, variable: proxy})
    assert result.returncode == 3 and result.stderr == (
        f"livecam: error: could not download m.onnx: the proxy {proxy} ({variable}) refused the connection; "
        f"start it, or correct or unset {variable}\n"), result.stderr
    assert not list(Path(env["LIVECAM_MODELS_DIR"]).glob("*m.onnx*"))


def test_doctor_says_when_the_models_folder_cannot_be_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a read-only models folder was reported as fine; the first download then failed
    import errno
    import tempfile

    from livecam.commands.doctor import models_folder_problem

    assert models_folder_problem(RuntimeSettings(models_dir=tmp_path / "new" / "models")) == ""  # made on first download
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert "NOT writable" in models_folder_problem(RuntimeSettings(models_dir=blocker / "models"))

    def read_only(*args: object, **kwargs: object) -> None:  # EROFS as a read-only mount gives it, even to root
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "TemporaryFile", read_only)
    problem = models_folder_problem(RuntimeSettings(models_dir=tmp_path))
    assert "NOT writable (Read-only file system)" in problem and "--models-dir" in problem


def test_doctor_says_when_outputs_cannot_get_content_credentials(tmp_path, monkeypatch, capsys) -> None:
    # A C2PA folder that cannot be written (read-only home; here a file in its path): every
    # livecam image and video failed with "cannot create the C2PA identity", doctor said nothing,
    # then said the line and "ready", exit 0.
    pytest.importorskip("c2pa")
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(doctor_module, "probe_cameras", lambda: [])
    monkeypatch.delenv("LIVECAM_C2PA_CERT", raising=False)
    monkeypatch.delenv("LIVECAM_C2PA_KEY", raising=False)
    for folder, expected, code in (
            (blocker / "c2pa", f"NOT possible: the local identity cannot be made in {blocker / 'c2pa'}", 1),
            (tmp_path / "new" / "c2pa", "local identity to be made in", 0)):
        monkeypatch.setenv("LIVECAM_C2PA_DIR", str(folder))
        assert doctor_module.run_doctor(RuntimeSettings(models_dir=tmp_path / "m", offline=True)) == code
        lines = capsys.readouterr().out.splitlines()
        line = next(x for x in lines if x.startswith("Content credentials (C2PA): "))
        assert expected in line, line
        if code:
            assert line.endswith("set LIVECAM_C2PA_DIR to a writable folder or pass --no-c2pa")
            assert lines[-1] == "Default run (embedded models, CPU): NOT ready; see the content credentials line above"
        else:
            assert lines[-1] == "Default run (embedded models, CPU): ready"


def test_a_folder_where_a_model_file_goes_is_named_not_downloaded_over(isolated_env, tmp_path) -> None:
    # `models download` fetched the whole file, then failed renaming it onto the folder with an
    # internal error (IsADirectoryError); verify and list called the model "missing".
    data = payload(200_000, 23)
    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    (models / "m.onnx").mkdir(parents=True)
    with LoopbackServer() as server:
        url = server.serve("/m.onnx", data)
        catalog = tmp_path / "catalog.json"
        catalog.write_text(catalog_to_json([spec_for("m", (url,), data)]))
        env = env_without_offline(isolated_env)
        result = run_patched(catalog, ["models", "download", "m"], env)
        assert result.returncode == 3 and server.state.log == [], result.stderr
        assert result.stderr == f"livecam: error: {models / 'm.onnx'} is a folder, where model m's file goes; " \
                                f"move it away and run the download again\n"
    verify = run_patched(catalog, ["models", "verify", "m"], isolated_env)
    assert verify.returncode == 3 and "m: corrupt" in verify.stderr and "a folder, not the model file" in verify.stderr
    assert (models / "m.onnx").is_dir()
    # a run that needs the model says the same before fetching anything
    from livecam.errors import ModelError
    from livecam.models.store import ModelStore

    store = ModelStore(RuntimeSettings(models_dir=models), progress=False,
                       catalog={"m": spec_for("m", ("http://127.0.0.1:9/m.onnx",), data)})
    with pytest.raises(ModelError, match="m.onnx is a folder, where model m's file goes"):
        store.path("m")


def test_models_download_replaces_an_unpinned_file_that_verify_calls_corrupt(isolated_env, tmp_path) -> None:
    # gfpgan_1.4 has no published SHA-256: a file of the right size that does not load (zeros from
    # an interrupted copy) was "already present (unpinned)", exit 0, while `models verify` said
    # "corrupt; delete it and run `livecam models download`"
    models = Path(isolated_env["LIVECAM_MODELS_DIR"])
    models.mkdir(parents=True)
    good = tiny_onnx(tmp_path / "good.onnx", [("x", [1, 4])], [("y", [1, 4])]).read_bytes()
    bad = models / "m.onnx"
    bad.write_bytes(bytes(len(good)))
    with LoopbackServer() as server:
        url = server.serve("/m.onnx", good)
        catalog = tmp_path / "catalog.json"
        catalog.write_text(catalog_to_json([spec_for("m", (url,), good, pinned=False)]))
        result = run_patched(catalog, ["models", "download", "m"], env_without_offline(isolated_env))
    assert result.returncode == 0, result.stderr
    assert "corrupt; downloading a fresh copy" in result.stderr
    assert bad.read_bytes() == good
    again = run_patched(catalog, ["models", "download", "m"], isolated_env)
    assert again.returncode == 0 and "m: already present (unpinned)" in again.stdout


def test_two_downloads_replacing_one_corrupt_file_both_end_with_the_good_file(tmp_path, monkeypatch) -> None:
    # two `livecam models download m` at once over a corrupt m.onnx: the one that moved it aside
    # second found it gone, "internal error: FileNotFoundError ... -> .m.onnx.corrupt", exit 1
    from types import MappingProxyType

    from livecam.commands import models as models_command
    from livecam.models.store import ModelStore

    data = payload(200_000, 41)
    models = tmp_path / "models"
    models.mkdir()
    bad = models / "m.onnx"
    bad.write_bytes(payload(200_000, 42))
    real_verify = ModelStore.verify

    def verify_then_the_other_process_moves_it(self, name):
        state = real_verify(self, name)
        bad.replace(models / ".m.onnx.other")  # what the other process's _replace_corrupt does meanwhile
        return state

    monkeypatch.setattr(ModelStore, "verify", verify_then_the_other_process_moves_it)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with LoopbackServer() as server:
        spec = spec_for("m", (server.serve("/m.onnx", data),), data)
        monkeypatch.setattr(catalog_module, "CATALOG", MappingProxyType({"m": spec}))
        models_command.download_models(RuntimeSettings(models_dir=models, quiet=True), ("m",), accept=False)
    assert bad.read_bytes() == data


class PresentStore:
    """The model files here, as doctor's Neural swap line asks of the store; offline, as the
    engine's pick_swap_model asks of it (nothing downloadable, nothing damaged)."""

    def __init__(self, *here: str) -> None:
        self.here = set(here)

    def is_present(self, name: str) -> bool:
        return name in self.here

    can_provide = is_present

    def damage(self, name: str) -> str:
        return ""

    def download_command(self, *names: str) -> str:
        return catalog_module.download_command(*names)


def test_doctor_says_what_the_engine_picks_for_auto_on_every_provider() -> None:
    # doctor restated pick_swap_model's rule (which inswapper file auto takes where); each set of files
    # here on each provider: doctor's line says the mesh swapper exactly when the engine picks it
    from itertools import combinations

    from livecam.pipeline.engine import pick_swap_model
    from livecam.processors.registry import listed
    from livecam.runtime.providers import PROVIDER_NAMES, ProviderChoice

    files = ("inswapper_128", "inswapper_128_fp16", "w600k_r50", "det_10g")
    sets = [c for k in range(len(files) + 1) for c in combinations(files, k)]
    for provider in PROVIDER_NAMES:
        for here in sets:
            store = PresentStore(*here)
            picked, missing = pick_swap_model("auto", store, ProviderChoice(names=(provider, "cpu"), ort_providers=()))
            line = doctor_module.neural_swap_state(store, provider)
            says_mesh = "auto uses the embedded mesh swapper" in line
            assert says_mesh == (picked == "mesh"), (provider, here, picked, line)
            assert picked == "mesh" or picked in here, (provider, here, picked)
            if picked == "mesh":  # the files the fallback's warning names are the ones doctor names
                assert line.startswith(f"{listed(list(missing))} not here"), (
                    provider, here, missing, line)


def test_doctor_counts_the_fp16_inswapper_in_place_of_the_fp32_one() -> None:
    # inswapper_128_fp16 is the other file of inswapper_128, not one more that the neural swap needs:
    # on a GPU auto takes it, so the line said "mesh swapper" where auto swapped with it
    state = doctor_module.neural_swap_state
    others = ("w600k_r50", "det_10g")
    assert state(PresentStore("inswapper_128", *others), "cpu") == "ready"
    assert state(PresentStore("inswapper_128_fp16", *others), "cuda") == "ready"
    # on the CPU auto leaves it alone: the fp32 file is fetched, and the fp16 one is the other way
    assert state(PresentStore("inswapper_128_fp16", *others), "cpu") == (
        "inswapper_128 is not here (see above), so auto uses the embedded mesh swapper; `livecam models download "
        "inswapper_128 --accept-license` fetches it for a more lifelike swap; --swap-model inswapper_128_fp16 runs "
        "the fp16 inswapper that is here")
    # never counted as a need: its absence beside the fp32 file is not named
    assert "fp16" not in state(PresentStore("inswapper_128", "w600k_r50"), "cuda")
