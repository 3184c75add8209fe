"""ModelStore against a real HTTP server on 127.0.0.1: download, resume, faults, licence, offline."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from livecam.errors import DownloadError, LicenseNotAcceptedError, ModelError
from livecam.models import store as store_module
from livecam.models.catalog import ArchiveSpec, download_command
from livecam.models.store import ModelStore, extract_members
from livecam.settings import RuntimeSettings
from tests.models.conftest import FAST
from tests.models.helpers import (Fault, LoopbackServer, catalog_to_json, make_zip, payload, python_path_env,
                                  sha, spec_for)

SIZE = 300_000


def make_store(settings: RuntimeSettings, *specs, **kw) -> ModelStore:
    return ModelStore(settings, progress=False, catalog={s.name: s for s in specs}, policy=FAST, **kw)


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.endswith(".part")) if root.exists() else []


def test_full_download_is_verified_and_renamed_into_place(server: LoopbackServer, online, models_dir) -> None:
    data = payload(SIZE)
    spec = spec_for("m", (server.serve("/m.onnx", data),), data)
    path = make_store(online, spec).path("m")
    assert path == models_dir / "m.onnx"
    assert path.read_bytes() == data
    assert leftovers(models_dir) == []
    assert [s for _, _, s in server.state.requests("/m.onnx")] == [200]


def test_resume_after_a_cut_asks_for_the_rest_only(server, online, models_dir) -> None:
    data = payload(SIZE, seed=1)
    url = server.serve("/m.onnx", data, Fault(cut_after=120_000))
    path = make_store(online, spec_for("m", (url,), data)).path("m")
    assert path.read_bytes() == data
    log = server.state.requests("/m.onnx")
    assert [(r, s) for _, r, s in log] == [(None, 200), ("bytes=120000-", 206)]


def test_a_part_left_by_an_earlier_run_is_resumed(server, online, models_dir) -> None:
    data = payload(SIZE, seed=2)
    models_dir.mkdir(parents=True)
    (models_dir / "m.onnx.part").write_bytes(data[:50_000])
    url = server.serve("/m.onnx", data)
    assert make_store(online, spec_for("m", (url,), data)).path("m").read_bytes() == data
    assert [r for _, r, _ in server.state.requests("/m.onnx")] == ["bytes=50000-"]


def test_server_ignoring_range_restarts_from_zero(server, online, models_dir) -> None:
    data = payload(SIZE, seed=3)
    url = server.serve("/m.onnx", data, Fault(cut_after=100_000, ignore_range=True))
    assert make_store(online, spec_for("m", (url,), data)).path("m").read_bytes() == data
    assert [s for _, _, s in server.state.requests("/m.onnx")] == [200, 200]


def test_file_changed_on_server_between_cut_and_resume_is_caught_and_restarted(server, online, models_dir) -> None:
    old, new = payload(SIZE, seed=4), payload(SIZE, seed=5)
    url = server.serve("/m.onnx", old, Fault(cut_after=100_000, change_to=new))
    path = make_store(online, spec_for("m", (url,), new)).path("m")  # the catalog pins the new file
    assert path.read_bytes() == new
    ranges = [r for _, r, _ in server.state.requests("/m.onnx")]
    assert ranges == [None, "bytes=100000-", None]  # resumed, hash failed, fetched again whole


def test_sha256_mismatch_deletes_the_file_and_says_so(server, online, models_dir) -> None:
    data = payload(SIZE, seed=6)
    spec = replace(spec_for("m", (server.serve("/m.onnx", data),), data), sha256="0" * 64)
    with pytest.raises(DownloadError) as info:
        make_store(online, spec).path("m")
    assert info.value.exit_code == 3
    assert "SHA-256 mismatch" in info.value.message and "deleted" in info.value.message
    assert "m.onnx" in info.value.message
    assert not (models_dir / "m.onnx").exists() and leftovers(models_dir) == []


def test_size_mismatch_is_refused(server, online, models_dir) -> None:
    data = payload(SIZE, seed=7)
    spec = replace(spec_for("m", (server.serve("/m.onnx", data),), data), size=SIZE + 10)
    with pytest.raises(DownloadError) as info:
        make_store(online, spec).path("m")
    assert f"{SIZE} bytes" in info.value.message and str(SIZE + 10) in info.value.message
    assert not (models_dir / "m.onnx").exists() and leftovers(models_dir) == []


def test_404_is_an_error_naming_the_status(server, online, models_dir) -> None:
    data = payload(1000)
    with pytest.raises(DownloadError) as info:
        make_store(online, spec_for("m", (server.url("/nowhere.onnx"),), data)).path("m")
    assert "404" in info.value.message and info.value.exit_code == 3
    assert len(server.state.requests("/nowhere.onnx")) == 1  # a 404 is not retried


def test_mirror_is_used_when_the_primary_fails(server, online) -> None:
    data = payload(SIZE, seed=8)
    mirror = server.serve("/mirror/m.onnx", data)
    path = make_store(online, spec_for("m", (server.url("/gone.onnx"), mirror), data)).path("m")
    assert path.read_bytes() == data


def test_transient_server_errors_are_retried(server, online) -> None:
    data = payload(SIZE, seed=9)
    url = server.serve("/m.onnx", data, Fault(status=503, times=2))
    assert make_store(online, spec_for("m", (url,), data)).path("m").read_bytes() == data
    assert [s for _, _, s in server.state.requests("/m.onnx")] == [503, 503, 200]


def test_a_host_that_does_not_resolve_is_not_retried(server, online, caplog) -> None:
    # Without a network every address fails to resolve: retrying with back-off only made the
    # user wait half a minute for the same error. The next mirror is tried at once.
    data = payload(SIZE, seed=10)
    mirror = server.serve("/mirror/m.onnx", data)
    unresolvable = "http://livecam-test.invalid/m.onnx"  # .invalid never resolves (RFC 6761)
    policy = replace(FAST, attempts=5)
    with caplog.at_level("INFO", logger="livecam"):
        path = ModelStore(online, progress=False, catalog={"m": spec_for("m", (unresolvable, mirror), data)},
                          policy=policy).path("m")
    assert path.read_bytes() == data
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]
    with pytest.raises(DownloadError, match=r"livecam-test\.invalid .*connect this machine to the network"):
        ModelStore(online, progress=False, catalog={"n": spec_for("n", (unresolvable,), data)},
                   policy=policy).path("n")


def test_offline_never_touches_the_network(server, models_dir) -> None:
    data = payload(1000)
    url = server.serve("/m.onnx", data)
    offline = RuntimeSettings(models_dir=models_dir, models_dir_from="LIVECAM_MODELS_DIR", offline=True,
                              accept_license=True, quiet=True)
    store = make_store(offline, spec_for("m", (url,), data))
    assert not store.can_provide("m")
    with pytest.raises(ModelError) as info:
        store.path("m")
    assert info.value.exit_code == 3
    assert "livecam models download m" in info.value.message and "offline" in info.value.message
    assert server.state.log == []


@pytest.mark.parametrize("licensed", [False, True])
def test_the_offline_message_gives_the_download_command_that_works(server, models_dir, licensed: bool) -> None:
    """A licensed model's command carries --accept-license: without it (and no terminal to ask
    on) the download the message advises is refused."""
    data = payload(1000)
    offline = RuntimeSettings(models_dir=models_dir, models_dir_from="LIVECAM_MODELS_DIR", offline=True, quiet=True)
    store = make_store(offline, spec_for("m", (server.serve("/m.onnx", data),), data, needs_acceptance=licensed))
    with pytest.raises(ModelError) as info:
        store.path("m")
    flag = " --accept-license" if licensed else ""
    assert f"`livecam models download m{flag}` while online" in info.value.message


def test_download_commands_name_the_licence_flag_only_where_a_licence_needs_it() -> None:
    assert download_command("gfpgan_1.4", "bisenet_resnet_34") == "livecam models download gfpgan_1.4 bisenet_resnet_34"
    assert download_command("gfpgan_1.4", "xseg_1") == "livecam models download gfpgan_1.4 xseg_1 --accept-license"
    assert download_command("not_a_model") == "livecam models download not_a_model"


def test_the_commands_a_message_names_repeat_a_typed_models_dir_before_the_subcommand() -> None:
    # a user of --models-dir DIR who ran the named command as given fetched into the default folder;
    # the default folder (and a LIVECAM_MODELS_DIR, still in the shell) keep the plain command
    spec = spec_for("m", (), None)
    typed = ModelStore(RuntimeSettings(models_dir=Path("/x y/m's"), offline=True), progress=False, catalog={"m": spec})
    assert typed.fix_hint(spec) == "run `livecam --models-dir '/x y/m'\"'\"'s' models download m`, which replaces it"
    assert typed.fix_hint(spec, precision="fp16") == (
        "run `livecam --models-dir '/x y/m'\"'\"'s' models convert --fp16 m`, which replaces it")
    for settings in (RuntimeSettings(offline=True),
                     RuntimeSettings(models_dir=Path("/x"), models_dir_from="LIVECAM_MODELS_DIR", offline=True)):
        plain = ModelStore(settings, progress=False, catalog={"m": spec})
        assert plain.fix_hint(spec) == "run `livecam models download m`, which replaces it"
        assert plain.fix_hint(spec, precision="fp16") == "run `livecam models convert --fp16 m`, which replaces it"


def test_licence_must_be_accepted_before_downloading(server, online, models_dir) -> None:
    data = payload(1000)
    spec = spec_for("m", (server.serve("/m.onnx", data),), data, needs_acceptance=True)
    store = make_store(online, spec)
    assert not store.can_provide("m")
    with pytest.raises(LicenseNotAcceptedError) as info:
        store.path("m")
    assert info.value.exit_code == 3 and "--accept-license" in info.value.message
    # livecam's own option, refused after the command: the message shows where it goes
    assert "rerun with --accept-license before the command (`livecam --accept-license COMMAND ...`)" in info.value.message
    assert "non-commercial" in info.value.message
    assert server.state.log == []
    asked = []
    assert make_store(online, spec, confirm=lambda s: asked.append(s.name) or True).path("m").is_file()
    assert asked == ["m"]
    (models_dir / "m.onnx").unlink()
    accepted = replace(online, accept_license=True)
    assert make_store(accepted, spec).path("m").read_bytes() == data


def test_verification_is_remembered_and_redone_when_the_file_changes(server, online, monkeypatch) -> None:
    data = payload(SIZE, seed=10)
    spec = spec_for("m", (server.serve("/m.onnx", data),), data)
    path = make_store(online, spec).path("m")
    calls = []
    real = store_module.sha256_file
    monkeypatch.setattr(store_module, "sha256_file", lambda p: calls.append(p) or real(p))
    assert make_store(online, spec).path("m") == path
    assert calls == []  # remembered: no re-hash on startup
    assert make_store(online, spec).state("m").state == "verified"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 5_000_000_000))
    make_store(online, spec).path("m")
    assert calls == [path]


# ---- buffalo_l-style archives -------------------------------------------------------------

def _archive_catalog(server: LoopbackServer, members: dict[str, bytes], det: bytes, rec: bytes):
    blob = make_zip(members)
    archive = ArchiveSpec("pack.zip", (server.serve("/pack.zip", blob),), len(blob), sha(blob),
                          ("det.onnx", "rec.onnx"))
    det_spec = replace(spec_for("det", (), det, needs_acceptance=True), archive=archive)
    rec_spec = replace(spec_for("rec", (), rec, needs_acceptance=True), archive=archive)
    return det_spec, rec_spec


def test_archive_extracts_only_the_expected_members(server, models_dir) -> None:
    det, rec = payload(5000, 11), payload(7000, 12)
    specs = _archive_catalog(server, {"pack/det.onnx": det, "pack/rec.onnx": rec, "pack/extra.onnx": b"x" * 99,
                                      "README.txt": b"hello"}, det, rec)
    settings = RuntimeSettings(models_dir=models_dir, accept_license=True, quiet=True)
    store = make_store(settings, *specs)
    assert store.path("det").read_bytes() == det
    assert sorted(p.name for p in models_dir.iterdir() if not p.name.startswith(".")) == ["det.onnx", "rec.onnx"]
    assert store.path("rec").read_bytes() == rec
    assert len(server.state.requests("/pack.zip")) == 1  # one archive gave both members


def test_archive_member_climbing_out_of_the_folder_is_refused(server, tmp_path, models_dir) -> None:
    det, rec = payload(5000, 13), payload(7000, 14)
    specs = _archive_catalog(server, {"../det.onnx": det, "../../rec.onnx": rec}, det, rec)
    settings = RuntimeSettings(models_dir=models_dir, accept_license=True, quiet=True)
    with pytest.raises(DownloadError) as info:
        make_store(settings, *specs).path("det")
    assert "refusing member" in info.value.message and info.value.exit_code == 3
    assert not (tmp_path / "det.onnx").exists() and not (tmp_path.parent / "rec.onnx").exists()
    assert not (models_dir / "det.onnx").exists() and not (models_dir / "pack.zip").exists()


def test_extract_members_writes_only_catalog_names(tmp_path) -> None:
    det = payload(100, 15)
    zip_path = tmp_path / "a.zip"
    zip_path.write_bytes(make_zip({"sub/det.onnx": det, "/etc/evil.onnx": b"e", "other.bin": b"o"}))
    spec = spec_for("det", (), det)
    out = tmp_path / "out"
    out.mkdir()
    assert extract_members(zip_path, out, {"det.onnx": spec}) == [out / "det.onnx"]
    assert sorted(p.name for p in out.iterdir()) == ["det.onnx"]


def test_archive_member_with_wrong_content_is_not_kept(server, models_dir) -> None:
    det, rec = payload(5000, 16), payload(7000, 17)
    specs = _archive_catalog(server, {"det.onnx": payload(5000, 99), "rec.onnx": rec}, det, rec)
    settings = RuntimeSettings(models_dir=models_dir, accept_license=True, quiet=True)
    with pytest.raises(DownloadError):
        make_store(settings, *specs).path("det")
    assert not (models_dir / "det.onnx").exists() and leftovers(models_dir) == []


# ---- two processes ------------------------------------------------------------------------

def test_two_processes_downloading_the_same_model_share_one_download(server, tmp_path, models_dir) -> None:
    data = payload(400_000, seed=18)
    url = server.serve("/m.onnx", data, Fault(throttle_s=0.1))  # ~0.7 s: the two overlap
    catalog = tmp_path / "catalog.json"
    catalog.write_text(catalog_to_json([spec_for("m", (url,), data)]))
    code = ("import sys; from types import MappingProxyType; from pathlib import Path;"
            "from livecam.models import catalog as c; from tests.models.helpers import catalog_from_json;"
            "from livecam.models.store import ModelStore; from livecam.settings import RuntimeSettings;"
            "c.CATALOG = MappingProxyType(catalog_from_json(Path(sys.argv[1]).read_text()));"
            "print(ModelStore(RuntimeSettings(models_dir=Path(sys.argv[2]), quiet=True)).path('m'))")
    env = python_path_env({**os.environ, "NO_PROXY": "127.0.0.1"})
    procs = [subprocess.Popen([sys.executable, "-c", code, str(catalog), str(models_dir)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    assert all(out.strip() == str(models_dir / "m.onnx") for out, _ in results)
    assert (models_dir / "m.onnx").read_bytes() == data
    assert [s for _, _, s in server.state.requests("/m.onnx")] == [200]  # one download, the other waited
    assert leftovers(models_dir) == []


def test_not_enough_disk_space_is_refused_before_downloading(server, online, monkeypatch) -> None:
    data = payload(SIZE, seed=19)
    spec = spec_for("m", (server.serve("/m.onnx", data),), data)
    monkeypatch.setattr(store_module, "free_bytes", lambda path: 1000)
    with pytest.raises(DownloadError) as info:
        make_store(online, spec).path("m")
    assert "not enough free disk space" in info.value.message and "--models-dir" in info.value.message
    assert server.state.log == []


def test_a_disk_write_failure_is_a_clear_error(server, online, models_dir, monkeypatch) -> None:
    import errno

    from livecam.models import download as download_module

    data = payload(SIZE, seed=20)
    spec = spec_for("m", (server.serve("/m.onnx", data),), data)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(download_module, "_copy", full)
    with pytest.raises(DownloadError) as info:
        make_store(online, spec).path("m")
    assert "No space left on device" in info.value.message and not (models_dir / "m.onnx").exists()


def test_only_a_full_disk_is_told_to_free_space_and_a_folder_as_the_part_is_named(server, online, models_dir,
                                                                                   monkeypatch) -> None:
    # every write error said "free some disk space"; a folder at NAME.part first said "server ignored
    # the resume request; starting again from zero", then that
    import errno

    from livecam.models import download as download_module

    data = payload(SIZE, seed=25)
    spec = spec_for("m", (server.serve("/m.onnx", data),), data)
    (models_dir / "m.onnx.part").mkdir(parents=True)
    with pytest.raises(DownloadError) as info:
        make_store(online, spec).path("m")
    assert info.value.message == (f"{models_dir / 'm.onnx.part'} is a folder, where the partial download goes; "
                                  f"move it away and run the download again")
    assert server.state.log == []
    (models_dir / "m.onnx.part").rmdir()

    def refused(*args, **kwargs):
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(download_module, "_copy", refused)
    with pytest.raises(DownloadError) as info:
        make_store(online, spec).path("m")
    assert f"in the models folder {models_dir} (--models-dir): Permission denied; give --models-dir another " \
           f"folder" in info.value.message
    assert "disk space" not in info.value.message


@pytest.mark.parametrize("errno_name, fix_start", [("EACCES", "Permission denied; "),
                                                    ("ENOSPC", "No space left on device; free some disk space")])
@pytest.mark.parametrize("source, other", [
    ("LIVECAM_MODELS_DIR", "set LIVECAM_MODELS_DIR to another folder"),
    ("default", "pass --models-dir (or set LIVECAM_MODELS_DIR) to use another one"),
])
def test_a_write_error_names_where_the_models_folder_came_from(server, tmp_path, monkeypatch, errno_name, fix_start,
                                                               source, other) -> None:
    # it said "choose another folder with --models-dir" to a user who had set LIVECAM_MODELS_DIR, or
    # had given nothing (the default folder), without naming the folder
    import errno

    from livecam.models import download as download_module

    if source == "default":  # an installed package's default: the user data folder
        fake_pkg = tmp_path / "lib" / "site-packages" / "livecam"
        fake_pkg.mkdir(parents=True)
        monkeypatch.setattr(store_module, "PACKAGE_DIR", fake_pkg)
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
        settings = RuntimeSettings(quiet=True)
    else:
        settings = RuntimeSettings(models_dir=tmp_path / "models", models_dir_from=source, quiet=True)
    root = store_module.models_root(settings)
    data = payload(SIZE, seed=26)
    spec = spec_for("m", (server.serve("/m.onnx", data),), data)

    def failed(*args, **kwargs):
        raise OSError(getattr(errno, errno_name), os.strerror(getattr(errno, errno_name)))

    monkeypatch.setattr(download_module, "_copy", failed)
    with pytest.raises(DownloadError) as info:
        make_store(settings, spec).path("m")
    said = "the default" if source == "default" else source
    assert f"cannot write m.onnx.part in the models folder {root} ({said}): {fix_start}" in info.value.message
    assert info.value.message.endswith(other)
    if source != "default":
        assert "--models-dir" not in info.value.message


def test_direct_mirror_is_used_when_the_archive_cannot_be_had(server, models_dir) -> None:
    det, rec = payload(5000, 21), payload(7000, 22)
    det_spec, rec_spec = _archive_catalog(server, {"det.onnx": det, "rec.onnx": rec}, det, rec)
    server.state.files.pop("/pack.zip")  # the archive's host answers 404
    det_spec = replace(det_spec, urls=(server.serve("/direct/det.onnx", det),))
    settings = RuntimeSettings(models_dir=models_dir, accept_license=True, quiet=True)
    assert make_store(settings, det_spec, rec_spec).path("det").read_bytes() == det
    with pytest.raises(DownloadError) as info:  # no direct mirror for rec: the archive's 404 is reported
        make_store(settings, det_spec, rec_spec).path("rec")
    assert "404" in info.value.message


def test_progress_bar_shows_bytes_and_rate_unless_quiet(server, models_dir, capsys, monkeypatch) -> None:
    from livecam.models import download as download_module

    monkeypatch.setattr(download_module, "is_terminal", lambda stream: True)  # a bar on a terminal only
    data = payload(SIZE, seed=23)
    spec = spec_for("m", (server.serve("/m.onnx", data),), data)
    loud = RuntimeSettings(models_dir=models_dir)
    ModelStore(loud, progress=True, catalog={"m": spec}, policy=FAST).path("m")
    err = capsys.readouterr().err
    assert "m.onnx" in err and "293k" in err and "B/s" in err  # 300,000 bytes in KiB, and a rate
    (models_dir / "m.onnx").unlink()
    quiet = RuntimeSettings(models_dir=models_dir, quiet=True)
    ModelStore(quiet, progress=True, catalog={"m": spec}, policy=FAST).path("m")
    assert capsys.readouterr().err == ""


def test_a_download_logged_to_a_file_gets_lines_not_a_bar(server, models_dir, capsys, caplog) -> None:
    # stderr not a terminal (a CI job, a Docker build, 2>log): the bar's carriage returns made one
    # endless line of redrawn bars there
    data = payload(SIZE, seed=24)
    spec = spec_for("m", (server.serve("/m.onnx", data),), data)
    with caplog.at_level("INFO", logger="livecam"):
        ModelStore(RuntimeSettings(models_dir=models_dir), progress=True, catalog={"m": spec}, policy=FAST).path("m")
    err = capsys.readouterr().err
    assert "\r" not in err and "B/s" not in err, repr(err)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("m.onnx: downloading, ")]
    assert len(lines) == 1 and re.search(r" of 0\.3 MB \(\d+%\)$", lines[0]), lines  # the first at once, with the total


def test_no_network_says_its_reason_once_and_leaves_no_lock_file(online, models_dir) -> None:
    # `models download` without a network printed the same reason once per mirror on the same
    # host, and left a zero-byte .m.onnx.lock in the models folder.
    data = payload(1000, seed=30)
    urls = ("http://livecam-test.invalid/a/m.onnx", "http://livecam-test.invalid/b/m.onnx")
    with pytest.raises(DownloadError) as info:
        ModelStore(online, progress=False, catalog={"m": spec_for("m", urls, data)}, policy=FAST).path("m")
    assert info.value.message.count("cannot reach livecam-test.invalid") == 1, info.value.message
    assert info.value.message.count("livecam-test.invalid") == 1, info.value.message
    assert sorted(p.name for p in models_dir.iterdir()) == []


def test_without_a_network_every_source_is_said_once_with_the_fix(models_dir, monkeypatch) -> None:
    # `models download` with no network: "could not download buffalo_l.zip: cannot reach github.com
    # (...); is this machine offline?; could not download det_10g.onnx: cannot reach huggingface.co
    # (...); is this machine offline?", a question twice and nothing to do about it
    import re

    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    data = payload(1000, seed=31)
    archive = ArchiveSpec("pack.zip", ("http://archive.livecam-test.invalid/pack.zip",), 100, sha(b"x" * 100),
                          ("det.onnx",))
    spec = replace(spec_for("det", ("http://direct.livecam-test.invalid/det.onnx",), data), archive=archive)
    settings = RuntimeSettings(models_dir=models_dir, models_dir_from="LIVECAM_MODELS_DIR", quiet=True)
    with pytest.raises(DownloadError) as info:
        make_store(settings, spec).path("det")
    assert re.fullmatch(r"could not download det\.onnx: cannot reach archive\.livecam-test\.invalid or "
                        r"direct\.livecam-test\.invalid \([^()\[\];]+\); connect this machine to the network \(or "
                        r"set HTTPS_PROXY to your proxy\), or copy det\.onnx into the models folder "
                        + re.escape(f"{models_dir} (LIVECAM_MODELS_DIR)"), info.value.message), info.value.message
    converted = replace(spec, converted_from="det.pth")  # a model `livecam models convert` makes: said so too
    with pytest.raises(DownloadError) as info:
        make_store(settings, converted).path("det")
    assert info.value.message.endswith(f"or copy det.onnx into the models folder {models_dir} (LIVECAM_MODELS_DIR), "
                                       "or make it from det.pth with `livecam models convert det.pth`"), info.value.message


def test_a_finished_download_leaves_only_the_model_and_its_memo(server, online, models_dir) -> None:
    data = payload(SIZE, seed=31)
    url = server.serve("/m.onnx", data)
    make_store(online, spec_for("m", (url,), data)).path("m")
    assert sorted(p.name for p in models_dir.iterdir()) == [".verified.json", "m.onnx"]


def test_an_unwritable_models_folder_is_one_clear_line(server, online, models_dir, monkeypatch) -> None:
    # a read-only models folder that exists once ended in "internal error: OSError" on the lock file
    import errno

    data = payload(SIZE, seed=40)
    spec = spec_for("m", (server.serve("/m.onnx", data),), data)
    models_dir.mkdir(parents=True, exist_ok=True)
    real_open = os.open

    def read_only(path, *args, **kwargs):  # EROFS as a read-only mount gives it (chmod does not stop root)
        if Path(path).parent == models_dir:
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(ModelError) as info:
        make_store(online, spec).path("m")
    assert "Read-only file system" in info.value.message and str(models_dir) in info.value.message
    assert "--models-dir" in info.value.message and server.state.requests("/m.onnx") == []


def test_the_free_space_check_counts_what_the_partial_file_already_holds(server, online, models_dir,
                                                                          monkeypatch) -> None:
    # a disk that filled up at 90 % was told "free some disk space (the partial file resumes)"; once
    # it was freed, the resume was refused for want of space for the whole file
    data = payload(SIZE, seed=40)
    models_dir.mkdir(parents=True)
    (models_dir / "m.onnx.part").write_bytes(data[:SIZE - 10_000])
    spec = spec_for("m", (server.serve("/m.onnx", data),), data)
    monkeypatch.setattr(store_module, "free_bytes", lambda path: 20_000)
    assert make_store(online, spec).path("m").read_bytes() == data
    assert [r for _, r, _ in server.state.requests("/m.onnx")] == [f"bytes={SIZE - 10_000}-"]


def test_a_body_without_a_length_is_not_read_past_the_catalog_size(server, online, models_dir) -> None:
    # a server (or proxy) that sends no Content-Length and far more than the model, or never ends:
    # it was all written to the partial file (a disk filled, or a hang) before the size was checked
    data = payload(SIZE, seed=43)
    url = server.serve("/m.onnx", data + bytes(60_000_000), Fault(no_length=True))
    with pytest.raises(DownloadError) as info:
        make_store(online, spec_for("m", (url,), data)).path("m")
    assert f"more than the {SIZE} bytes" in info.value.message
    assert server.state.sent["/m.onnx"] < 20_000_000
    assert leftovers(models_dir) == []


def test_a_stalled_transfer_keeps_what_arrived_for_the_resume(server, online, models_dir) -> None:
    # a read of a whole 1 MiB block that timed out dropped the bytes of it already received: the
    # retry asked for them again (on a slow line, up to a MiB at each stall; so did Ctrl-C)
    data = payload(SIZE, seed=44)
    url = server.serve("/m.onnx", data, Fault(cut_after=120_000, stall_s=2.0))
    spec = spec_for("m", (url,), data)
    path = ModelStore(online, progress=False, catalog={"m": spec}, policy=replace(FAST, timeout_s=0.5)).path("m")
    assert path.read_bytes() == data
    assert [(r, s) for _, r, s in server.state.requests("/m.onnx")] == [(None, 200), ("bytes=120000-", 206)]


def test_a_stale_archive_left_in_the_folder_is_fetched_again_not_trusted(server, models_dir) -> None:
    # a zip under its final name (a run killed while extracting it, or one copied in by hand) was
    # used unchecked: "pack.zip: det.onnx failed its size/SHA-256 check; nothing was kept", exit 3
    det, rec = payload(5000, 45), payload(7000, 46)
    specs = _archive_catalog(server, {"pack/det.onnx": det, "pack/rec.onnx": rec}, det, rec)
    models_dir.mkdir(parents=True)
    (models_dir / "pack.zip").write_bytes(make_zip({"pack/det.onnx": payload(5000, 47)}))
    store = make_store(RuntimeSettings(models_dir=models_dir, accept_license=True, quiet=True), *specs)
    assert store.path("det").read_bytes() == det and store.path("rec").read_bytes() == rec
    # checked as a partial download: resumed, its hash failed, fetched again whole
    assert [s for _, _, s in server.state.requests("/pack.zip")] == [206, 200]
    assert sorted(p.name for p in models_dir.iterdir()) == [".verified.json", "det.onnx", "rec.onnx"]
