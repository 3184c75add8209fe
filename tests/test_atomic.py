"""The one atomic-output helper: temporary name, cleanup, no-clobber rename, messages."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from livecam.atomic import AtomicOutput, OutputConflictError, os_error_message
from livecam.errors import InputError, OutputError, OutputExistsError


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_clean_exit_renames_the_temporary_file_into_place(tmp_path: Path) -> None:
    out = tmp_path / "result.mp4"
    with AtomicOutput(out) as target:
        assert target.temp.parent == tmp_path and target.temp.exists()
        target.write_bytes(b"frames")
        assert not out.exists()
    assert out.read_bytes() == b"frames"
    assert _hidden(tmp_path) == []


def test_an_exception_removes_the_temporary_file_and_keeps_the_old_output(tmp_path: Path) -> None:
    out = tmp_path / "result.png"
    out.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with AtomicOutput(out, force=True) as target:
            target.write_bytes(b"new")
            raise RuntimeError("encoder broke")
    assert out.read_bytes() == b"old"
    assert _hidden(tmp_path) == []


def test_existing_output_without_force_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    out = tmp_path / "result.jpg"
    out.write_bytes(b"mine")
    with pytest.raises(OutputExistsError, match="--force"):
        AtomicOutput(out).open()
    assert out.read_bytes() == b"mine" and _hidden(tmp_path) == []


def test_force_replaces_the_file_that_was_there_at_start(tmp_path: Path) -> None:
    out = tmp_path / "result.jpg"
    out.write_bytes(b"old")
    with AtomicOutput(out, force=True) as target:
        target.write_bytes(b"new")
    assert out.read_bytes() == b"new"


def test_a_file_that_appears_during_the_run_is_not_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "result.mp4"
    with pytest.raises(OutputConflictError) as info:
        with AtomicOutput(out) as target:
            target.write_bytes(b"ours")
            out.write_bytes(b"someone else's")  # a second run finished first
    assert out.read_bytes() == b"someone else's"
    kept = info.value.kept
    assert kept is not None and kept.read_bytes() == b"ours"
    assert str(out) in info.value.message and str(kept) in info.value.message
    # exit 1, as when --force cannot replace the old file: not a usage error (it was 2)
    assert info.value.exit_code == 1
    assert _hidden(tmp_path) == []


def test_force_covers_only_the_file_seen_at_start(tmp_path: Path) -> None:
    out = tmp_path / "result.mp4"
    out.write_bytes(b"old")
    with pytest.raises(OutputConflictError):
        with AtomicOutput(out, force=True) as target:
            target.write_bytes(b"ours")
            out.unlink()
            out.write_bytes(b"replaced meanwhile")  # a new file (new inode), not the one --force covered
    assert out.read_bytes() == b"replaced meanwhile"


def test_a_long_legal_output_name_fits(tmp_path: Path) -> None:
    out = tmp_path / ("n" * 246 + ".mp4")  # 250 bytes: legal; a temporary name built on it was not
    with AtomicOutput(out) as target:
        target.write_bytes(b"x")
    assert out.read_bytes() == b"x"


def test_a_removed_output_folder_is_one_line_naming_the_output(tmp_path: Path) -> None:
    folder = tmp_path / "gone"
    folder.mkdir()
    out = folder / "result.mp4"
    with pytest.raises(InputError) as info:
        with AtomicOutput(out) as target:
            target.temp.unlink()
            folder.rmdir()
            target.write_bytes(b"x")
    assert str(out) in info.value.message and ".part" not in info.value.message
    assert "no longer exists" in info.value.message


def test_a_folder_that_takes_no_new_name_is_not_called_removed(tmp_path: Path) -> None:
    # /proc answers ENOENT to a new name though it exists: it was "the folder /proc no longer
    # exists; create it and run again" (the demo writing into /proc with --force)
    out = tmp_path / "result.mp4"
    assert os_error_message(out, OSError(errno.ENOENT, "No such file or directory")) == (
        f"cannot write {out}: {tmp_path} is on a kernel file system, which takes no new files; "
        "choose another output path")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="Linux's /proc")
def test_an_output_in_proc_is_one_line_with_the_fix() -> None:
    out = Path("/proc/result.mp4")
    with pytest.raises((InputError, OutputError)) as info:
        with AtomicOutput(out) as target:
            target.write_bytes(b"x")
    message = info.value.message
    assert message.startswith(f"cannot write {out}") and message.endswith("; choose another output path"), message


def test_a_folder_as_output_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a folder"):
        AtomicOutput(tmp_path).open()


@pytest.mark.parametrize("code, words", [(errno.ENOSPC, "disk is full"), (errno.EFBIG, "file size limit"),
                                         (errno.EACCES, "permission denied")])
def test_os_errors_name_the_output_not_the_temporary_file(tmp_path: Path, code: int, words: str) -> None:
    out = tmp_path / "result.mp4"
    message = os_error_message(out, OSError(code, os.strerror(code), str(tmp_path / ".livecam-1.part.mp4")))
    assert words in message and str(out) in message and ".part" not in message


def test_an_os_error_inside_the_block_becomes_an_output_error(tmp_path: Path) -> None:
    out = tmp_path / "result.mp4"
    with pytest.raises(OutputError, match="disk is full"):
        with AtomicOutput(out):
            raise OSError(errno.ENOSPC, "No space left on device")
    assert not out.exists() and _hidden(tmp_path) == []


def test_a_cache_entry_replaces_whatever_another_run_wrote_meanwhile(tmp_path: Path) -> None:
    # Caches are livecam's own files: two runs caching the same photo need no set-aside copy.
    entry = tmp_path / "face.npz"
    with AtomicOutput(entry, cache=True) as target:
        target.write_bytes(b"ours")
        entry.write_bytes(b"the other run's")
    assert entry.read_bytes() == b"ours"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["face.npz"]


@pytest.mark.parametrize("dangling", [True, False])
def test_force_writes_through_a_link_and_keeps_the_link(tmp_path: Path, dangling: bool) -> None:
    """--force onto a link replaced the link with a file and left the linked file as it was; as
    cp and ffmpeg -y do, the linked file (in another folder, reached through a chain of two
    links) gets the result, written beside it, and the links stay. A dangling link is written
    through when the folder it points into exists, as cp does."""
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    target = there / "elsewhere.mp4"
    if not dangling:
        target.write_bytes(b"theirs")
    (here / "hop.mp4").symlink_to(Path("..") / "there" / "elsewhere.mp4")
    out = here / "out.mp4"
    out.symlink_to("hop.mp4")
    with pytest.raises(OutputExistsError, match="--force"):  # a link is a name the user made, dangling or not
        AtomicOutput(out).open()
    with AtomicOutput(out, force=True) as result:
        assert result.temp.parent == there
        result.write_bytes(b"frames")
    assert out.is_symlink() and os.readlink(out) == "hop.mp4" and (here / "hop.mp4").is_symlink()
    assert target.read_bytes() == b"frames" and not target.is_symlink()
    assert sorted(p.name for p in here.iterdir()) == ["hop.mp4", "out.mp4"]
    assert sorted(p.name for p in there.iterdir()) == ["elsewhere.mp4"]


@pytest.mark.parametrize("case", ["missing_folder", "loop"])
def test_a_link_that_cannot_be_written_through_is_one_line(tmp_path: Path, case: str) -> None:
    # A link into a missing folder failed creating the temporary file, named as the link's folder.
    out = tmp_path / "out.mp4"
    if case == "loop":
        (tmp_path / "other.mp4").symlink_to("out.mp4")
        out.symlink_to("other.mp4")
        expect = r"out\.mp4 is a link in a loop of links .*; fix or remove the link$"
    else:
        out.symlink_to(tmp_path / "gone" / "out.mp4")
        expect = rf"out\.mp4 is a link into the folder {tmp_path / 'gone'}, which does not exist; create it or fix the link$"
    with pytest.raises(InputError, match=expect):
        with AtomicOutput(out, force=True) as result:
            result.write_bytes(b"frames")
    assert out.is_symlink() and _hidden(tmp_path) == []


@pytest.mark.parametrize("code", [errno.EPERM, errno.EACCES, errno.EBUSY])
def test_a_result_that_cannot_replace_the_old_output_is_kept_beside_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    # --force over a file that cannot be replaced (immutable, another user's in /tmp, open in a
    # player on Windows) deleted the finished result: a whole recording or video lost at the end
    out = tmp_path / "rec.mp4"
    out.write_bytes(b"old")
    real_replace = os.replace

    def refuse(src: object, dst: object) -> None:
        if Path(str(dst)) == out:
            raise OSError(code, os.strerror(code))
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OutputError, match=f"cannot replace {out} .*; the result was kept as "
                                          f"{tmp_path / 'rec.livecam-1.mp4'}$"):
        with AtomicOutput(out, force=True) as target:
            target.write_bytes(b"an hour of frames")
    assert out.read_bytes() == b"old"
    assert (tmp_path / "rec.livecam-1.mp4").read_bytes() == b"an hour of frames"
    assert _hidden(tmp_path) == []
