"""C2PA content credentials: signed with the local or a given identity, read back and validated
by c2pa's own Reader; bad identities are refused with one clear line."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import cv2
import numpy as np
import pytest

from livecam.errors import InputError
from livecam.marks import credentials as cr
from livecam.media.provenance import DIGITAL_SOURCE_TYPE

c2pa = pytest.importorskip("c2pa", reason="c2pa-python (the `c2pa` extra) is not installed")


def encoded(ext: str) -> bytes:
    rng = np.random.default_rng(1)
    image = cv2.GaussianBlur(rng.integers(0, 255, (96, 128, 3), dtype=np.uint8), (5, 5), 0)
    ok, data = cv2.imencode(ext, image)
    assert ok
    return data.tobytes()


@pytest.fixture
def local(tmp_path: Path) -> cr.Identity:
    return cr.load_identity(None, None, environ={"LIVECAM_C2PA_DIR": str(tmp_path / "c2pa")})


@pytest.mark.parametrize("ext", [".jpg", ".png", ".webp"])
def test_signed_image_has_a_valid_livecam_manifest(tmp_path: Path, local: cr.Identity, ext: str) -> None:
    source = tmp_path / f"input{ext}"
    source.write_bytes(encoded(ext))
    out = tmp_path / f"out{ext}"
    out.write_bytes(cr.Signing(local, source, ("mesh",)).sign_bytes(encoded(ext), out))
    with open(out, "rb") as fh, c2pa.Reader(cr.MIME_TYPES[ext], fh) as reader:  # c2pa's own reader
        assert reader.get_validation_state() == "Valid"
        active = reader.get_active_manifest()
    actions = [a for x in active["assertions"] if x["label"].startswith("c2pa.actions")
               for a in x["data"]["actions"]]
    edited = next(a for a in actions if a["action"] == "c2pa.edited")
    assert edited["digitalSourceType"] == DIGITAL_SOURCE_TYPE
    assert edited["parameters"]["models"] == ["mesh"]
    assert active["claim_generator_info"][0]["name"] == "livecam"
    found = cr.read_credentials(out)
    assert found.by_livecam and found.state == "Valid"
    assert "signingCredential.untrusted" in found.failures  # self-signed: valid, not trusted
    assert "self-signed" in found.signer


def test_file_names_that_are_not_utf8_are_signed_and_the_input_stays_the_parent(tmp_path: Path,
                                                                                local: cr.Identity) -> None:
    # A Latin-1 name (b"caf\xe9.jpg") made the manifest's JSON invalid: such an output was not
    # written at all ("could not sign ... pass --no-c2pa") and such an input was dropped as the
    # parent, so the output claimed to be created from nothing instead of edited from it.
    source = tmp_path / "caf\udce9.jpg"  # how Python names the bytes b"caf\xe9.jpg"
    source.write_bytes(encoded(".jpg"))
    out = tmp_path / "out\udce9.jpg"
    out.write_bytes(cr.Signing(local, source, ("mesh",)).sign_bytes(encoded(".jpg"), out))
    found = cr.read_credentials(out)
    assert found.by_livecam and found.state == "Valid", found
    assert found.actions == ("c2pa.opened", "c2pa.edited"), found.actions


def test_a_disk_too_full_for_the_signed_copy_says_so_and_offers_no_c2pa(tmp_path: Path, local: cr.Identity,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Signing writes a second copy of the finished file: a video that fitted the disk was lost at
    # its very end with only "the disk is full; free some space or choose another folder".
    import errno

    from livecam.errors import OutputError

    out = tmp_path / "out.jpg"
    temp = tmp_path / ".livecam-0.part.jpg"
    temp.write_bytes(encoded(".jpg"))

    class Full(io.BytesIO):  # the signed copy: ENOSPC when its last bytes are flushed, on close
        def close(self) -> None:  # closed all the same, as a real file is (else its __del__ raised again)
            was_open = not self.closed
            super().close()
            if was_open:
                raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cr, "open", lambda path, mode="r": Full() if "w" in mode else open(path, mode), raising=False)
    with pytest.raises(OutputError) as caught:
        cr.Signing(local, None, ()).sign_file(temp, out)
    assert caught.value.message == (
        f"writing {out} failed while signing its content credentials, which needs room for a second copy of it: "
        f"the disk is full (or over quota); free some space, choose another folder, or pass --no-c2pa")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "c2pa") == [temp.name]  # no signed half-copy


def test_local_identity_is_made_once_private_and_reported_self_signed(tmp_path: Path) -> None:
    env = {"LIVECAM_C2PA_DIR": str(tmp_path / "c2pa")}
    first, second = cr.load_identity(None, None, environ=env), cr.load_identity(None, None, environ=env)
    assert first == second and first.self_signed
    assert "self-signed" in first.describe()
    assert (first.origin.stat().st_mode & 0o077) == 0  # the private key is not readable by others


def test_given_certificate_and_key_are_used(tmp_path: Path, local: cr.Identity) -> None:
    cert, key = tmp_path / "chain.pem", tmp_path / "key.pem"
    cert.write_bytes(local.chain_pem)
    key.write_bytes(local.key_pem)
    given = cr.load_identity(None, None, environ={"LIVECAM_C2PA_CERT": str(cert), "LIVECAM_C2PA_KEY": str(key)})
    assert not given.self_signed and given.origin == cert and given.algorithm == "ES256"
    out = tmp_path / "out.png"
    out.write_bytes(cr.Signing(given, None, ()).sign_bytes(encoded(".png"), out))
    assert cr.read_credentials(out).valid


def test_a_traditional_pem_key_signs(tmp_path: Path, local: cr.Identity) -> None:
    # "BEGIN EC PRIVATE KEY", as `openssl ecparam -genkey` writes it: the refusal message offers
    # it, yet c2pa refused it when signing ("expecting PRIVATE KEY")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    traditional = load_pem_private_key(local.key_pem, None).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption())
    assert traditional.startswith(b"-----BEGIN EC PRIVATE KEY-----")
    cert, key = tmp_path / "chain.pem", tmp_path / "key.pem"
    cert.write_bytes(local.chain_pem)
    key.write_bytes(traditional)
    out = tmp_path / "out.jpg"
    out.write_bytes(cr.Signing(cr.load_identity(cert, key, environ={}), None, ()).sign_bytes(encoded(".jpg"), out))
    assert cr.read_credentials(out).valid


def test_half_an_identity_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="both"):
        cr.load_identity(tmp_path / "chain.pem", None, environ={})


def test_an_unreadable_file_from_the_environment_names_its_variable(tmp_path: Path, local: cr.Identity) -> None:
    # it said "check --c2pa-cert X and --c2pa-key Y", options never typed, and not which one failed
    cert = tmp_path / "chain.pem"
    cert.write_bytes(local.chain_pem)
    with pytest.raises(InputError) as info:
        cr.load_identity(None, None, environ={"LIVECAM_C2PA_CERT": str(cert), "LIVECAM_C2PA_KEY": str(tmp_path)})
    message = str(info.value)
    assert "LIVECAM_C2PA_KEY" in message and str(tmp_path) in message and "--c2pa" not in message.split(";")[0]
    assert str(cert) not in message
    with pytest.raises(InputError, match=r"\(--c2pa-cert\) .*missing\.pem"):
        cr.load_identity(tmp_path / "missing.pem", cert, environ={})


def test_a_signing_file_missing_or_a_link_loop_is_said_as_other_inputs_are(tmp_path: Path, local: cr.Identity) -> None:
    # it was the system's "Too many levels of symbolic links" and "No such file or directory"
    cert = tmp_path / "chain.pem"
    cert.write_bytes(local.chain_pem)
    (tmp_path / "a.pem").symlink_to(tmp_path / "b.pem")
    (tmp_path / "b.pem").symlink_to(tmp_path / "a.pem")
    with pytest.raises(InputError, match=r"^the C2PA private key \(--c2pa-key\) .*a\.pem is a link in a loop of links"):
        cr.load_identity(cert, tmp_path / "a.pem", environ={})
    with pytest.raises(InputError, match=r"^the C2PA private key \(--c2pa-key\) .*gone\.pem does not exist; give a "
                                         r"readable PEM file, or pass --no-c2pa$"):
        cr.load_identity(cert, tmp_path / "gone.pem", environ={})


def test_a_key_that_is_not_pem_is_refused(tmp_path: Path, local: cr.Identity) -> None:
    cert, key = tmp_path / "chain.pem", tmp_path / "key.pem"
    cert.write_bytes(local.chain_pem)
    key.write_text("not a key")
    with pytest.raises(InputError, match="PEM private key"):
        cr.load_identity(cert, key, environ={})


def test_a_lone_self_signed_certificate_is_refused_in_one_line(tmp_path: Path, local: cr.Identity) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    # c2pa wants the signer's chain: the local CA certificate alone (signing with the CA's role) fails
    ca_only = local.chain_pem[local.chain_pem.index(b"-----BEGIN CERTIFICATE-----", 10):]
    key = load_pem_private_key(local.key_pem, None)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    bad = cr.Identity(ca_only, pem, "ES256", self_signed=False, origin=tmp_path / "ca.pem")
    out = tmp_path / "out.jpg"
    with pytest.raises(InputError, match="self-signed") as info:
        cr.Signing(bad, None, ()).sign_bytes(encoded(".jpg"), out)
    assert "\n" not in str(info.value) and str(bad.origin) in str(info.value)


def test_unsigned_file_reads_as_no_manifest(tmp_path: Path) -> None:
    plain = tmp_path / "plain.jpg"
    plain.write_bytes(encoded(".jpg"))
    found = cr.read_credentials(plain)
    assert not found.present and not found.by_livecam


def test_unsupported_format_is_left_as_is(local: cr.Identity) -> None:
    data = encoded(".bmp")
    assert cr.Signing(local, None, ()).sign_bytes(data, Path("x.bmp")) == data
    assert io.BytesIO(data).read(2) == b"BM"


def _blocked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("LIVECAM_C2PA_DIR", str(blocker / "c2pa"))  # cannot be created: a file is in the way


def test_the_local_identity_is_made_before_the_work_when_an_output_gets_signed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from livecam.errors import OutputError
    from livecam.settings import C2paSettings

    monkeypatch.setenv("LIVECAM_C2PA_DIR", str(tmp_path / "c2pa"))
    unsigned = cr.signing_for(C2paSettings(), None, (), outputs=(tmp_path / "out.mkv",))
    assert unsigned is not None and unsigned.identity is None and not (tmp_path / "c2pa").exists()  # nothing to sign
    signed = cr.signing_for(C2paSettings(), None, (), outputs=(tmp_path / "a.mkv", tmp_path / "b.mp4"))
    assert signed is not None and signed.identity is not None and signed.identity.self_signed
    _blocked(tmp_path, monkeypatch)
    with pytest.raises(OutputError, match="cannot create the C2PA identity"):
        cr.signing_for(C2paSettings(), None, (), outputs=(tmp_path / "out.jpg",))


UNSIGNED_WARNING = ("warning: no C2PA content credentials in {} outputs: c2pa-python cannot write them there; "
                    "the watermark and metadata are still written; write .mp4 or .mov to have them too")


def test_outputs_c2pa_cannot_be_written_into_are_said_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    # c2pa-python writes no WebM or Matroska: those outputs went without credentials, unsaid
    from livecam.settings import C2paSettings

    monkeypatch.setenv("LIVECAM_C2PA_DIR", str(tmp_path / "c2pa"))
    with caplog.at_level(logging.WARNING, logger="livecam"):
        cr.signing_for(C2paSettings(), None, (), outputs=[tmp_path / n for n in ("a.webm", "b.MKV", "c.webm", "d.mp4")])
    warned = [r.getMessage() for r in caplog.records if r.getMessage().startswith("warning:")]
    assert warned == [UNSIGNED_WARNING.format(".mkv and .webm")]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="livecam"):
        cr.signing_for(C2paSettings(), None, (), outputs=(tmp_path / "e.mp4", tmp_path / "f.mov"))
        cr.signing_for(C2paSettings(enabled=False), None, (), outputs=(tmp_path / "g.webm",))  # --no-c2pa: asked for
    assert not [r for r in caplog.records if r.getMessage().startswith("warning:")]


def test_a_webm_video_says_it_has_no_credentials_and_keeps_the_other_marks(tmp_path: Path, faces_dir: Path,
                                                                         isolated_env: dict[str, str]) -> None:
    from tests.conftest import run_cli
    from tests.videos import make_clip

    out = tmp_path / "out.webm"
    result = run_cli(["video", str(make_clip(tmp_path / "in.mp4", frames=2, audio=False)), str(out),
                      "-s", str(faces_dir / "biden.jpg"), "--swap-model", "mesh"], env=isolated_env)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("livecam: " + UNSIGNED_WARNING.format(".webm")) == 1, result.stderr
    verified = run_cli(["verify", str(out)], env=isolated_env)
    assert verified.returncode == 0 and "MARKED as made with livecam" in verified.stdout, verified.stdout


@pytest.mark.parametrize("command", ["video", "image"])
def test_an_identity_that_cannot_be_made_stops_the_command_before_any_frame(
        tmp_path: Path, faces_dir: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    """A read-only home once failed `livecam video` after every frame was processed, losing it all."""
    from click.testing import CliRunner

    from livecam.cli import cli
    from tests.videos import make_clip

    _blocked(tmp_path, monkeypatch)
    monkeypatch.setenv("LIVECAM_MODELS_DIR", str(tmp_path / "models"))

    def no_frames(*a: object, **kw: object) -> None:
        raise AssertionError("frames were processed before the C2PA identity was made")

    monkeypatch.setattr("livecam.pipeline.engine.Engine.process", no_frames)
    monkeypatch.setattr("livecam.commands.video.process_video", no_frames)
    target = (make_clip(tmp_path / "in.mp4", frames=2, audio=False) if command == "video"
              else faces_dir / "obama.jpg")
    out = tmp_path / ("out.mp4" if command == "video" else "out.jpg")
    result = CliRunner().invoke(cli, [command, str(target), str(out), "-s", str(faces_dir / "biden.jpg"),
                                      "--swap-model", "mesh", "--no-watermark"])
    assert result.exit_code == 1, result.output
    assert "cannot create the C2PA identity" in result.output and not out.exists()


@pytest.mark.parametrize("step", ["mkdir", "write"])
def test_a_full_disk_while_making_the_identity_says_so_and_offers_no_c2pa(
        tmp_path: Path, faces_dir: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    """ENOSPC while the local identity was written said "writing .../local-signer.pem failed: the
    disk is full ...; free some space or choose another folder": no word of --no-c2pa."""
    import errno
    import os

    from click.testing import CliRunner

    from livecam.cli import cli

    folder = tmp_path / "c2pa"
    monkeypatch.setenv("LIVECAM_C2PA_DIR", str(folder))
    monkeypatch.setenv("LIVECAM_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path / "cache"))

    def full(*a: object, **kw: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    if step == "mkdir":  # Path.mkdir, not os.mkdir: Python 3.10's pathlib holds its own reference to it
        real_mkdir = Path.mkdir
        monkeypatch.setattr(Path, "mkdir", lambda p, *a, **kw: full() if p == folder else real_mkdir(p, *a, **kw))
    else:
        monkeypatch.setattr(os, "fsync", full)  # the kernel says ENOSPC when the bytes are flushed
    out = tmp_path / "out.jpg"
    result = CliRunner().invoke(cli, ["image", str(faces_dir / "obama.jpg"), str(out), "-s",
                                      str(faces_dir / "biden.jpg"), "--swap-model", "mesh"])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)  # no traceback
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0] == (f"livecam: error: cannot create the C2PA identity in {folder}: the disk is full (or over "
                        f"quota); free some space, set LIVECAM_C2PA_DIR to a folder on another disk, or pass "
                        f"--no-c2pa to write the output without content credentials")
    assert not out.exists() and not any(p.name.startswith(".livecam") for p in tmp_path.rglob("*"))


def test_an_output_folder_removed_before_signing_is_named_not_the_temporary_file(
        tmp_path: Path, faces_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder deleted while `livecam video` ran (here: once the video is encoded, before it
    is signed) gave "writing FOLDER/.livecam-1a2b3c4d.part.mp4 failed: ...": livecam's hidden
    temporary file, not the output the user asked for."""
    import shutil

    from click.testing import CliRunner

    from livecam.cli import cli
    from livecam.media.video_writer import VideoWriter
    from tests.videos import make_clip

    monkeypatch.setenv("LIVECAM_C2PA_DIR", str(tmp_path / "c2pa"))
    monkeypatch.setenv("LIVECAM_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("LIVECAM_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "results"
    folder.mkdir()
    out = folder / "out.mp4"
    real_close = VideoWriter.close

    def close_then_remove_the_folder(self: VideoWriter, **kw: bool) -> None:
        real_close(self, **kw)
        shutil.rmtree(folder)  # what a user's `rm -r results` meanwhile does

    monkeypatch.setattr(VideoWriter, "close", close_then_remove_the_folder)
    clip = make_clip(tmp_path / "in.mp4", frames=3, audio=False)
    result = CliRunner().invoke(cli, ["-q", "video", str(clip), str(out), "-s", str(faces_dir / "biden.jpg"),
                                      "--swap-model", "mesh", "--no-watermark"])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)  # no traceback
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0] == (f"livecam: error: writing {out} failed: the folder {folder} no longer exists; "
                        f"create it and run again")
    assert not folder.exists()  # nothing written anywhere else either
