"""Signals to the real CLI (its entry point, in a subprocess): SIGTERM is Ctrl-C in every command and at
every moment (one line, exit 130, no partial output); a finished output is done (exit 0); a
second or third signal while cleaning up or exiting is never a traceback; an interrupted import
is an interrupt. Each driver sends the signal from inside livecam at a fixed point, so no test
depends on timing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

# The patch named by argv[1] sends signals to this process at one point of a run, then the
# real CLI runs with the rest of argv.
DRIVER = textwrap.dedent("""
    import atexit, importlib.abc, os, signal, sys, threading, time

    def send(*sigs):
        for sig in sigs:
            os.kill(os.getpid(), sig)
            time.sleep(0.002)
        time.sleep(2)  # a handled signal interrupts this at once

    patch, args = sys.argv[1], sys.argv[2:]
    if patch in ("term-in-write", "int-in-write-and-cleanup"):
        from livecam.atomic import AtomicOutput
        write, discard = AtomicOutput.write_bytes, AtomicOutput.discard
        def half_write(self, data):
            write(self, data[: len(data) // 2])  # the hidden temporary file holds half an image
            send(signal.SIGTERM if patch == "term-in-write" else signal.SIGINT)
        def second_ctrl_c(self):
            if patch == "int-in-write-and-cleanup":
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C again, while the first is cleaned up
                time.sleep(0.05)
            discard(self)
        AtomicOutput.write_bytes, AtomicOutput.discard = half_write, second_ctrl_c
    elif patch == "term-while-models-load":
        from livecam.commands import video
        video.create_engine = lambda job: send(signal.SIGTERM)
    elif patch == "term-after-the-output":
        from livecam.commands import image
        class Log:  # the summary line, once the image is written
            def __getattr__(self, name):
                return getattr(image.logging.getLogger("livecam"), name)
            def info(self, *args):
                send(signal.SIGTERM)
                image.logging.getLogger("livecam").info(*args)
        image.log = Log()
    elif patch in ("term-while-signing-hangs", "int-then-term-while-signing-hangs"):
        import ctypes, c2pa
        if patch.startswith("int-then"):  # Ctrl-C at the first recorded frame: `run`'s clean stop
            from livecam.media.sinks import FileRecorderSink
            encode = FileRecorderSink._encode
            def encode_then_stop(self, image, *when):  # (time, duration): FileRecorderSink._encode's
                encode(self, image, *when)
                if self.written == 1:
                    os.kill(os.getpid(), signal.SIGINT)
            FileRecorderSink._encode = encode_then_stop
        def native_hang(*args, **kwargs):
            # stuck in native code that never returns to Python (a deadlock: signals do not end it)
            def later():
                for _ in range(2):  # `run` takes a first signal for the clean stop of a run that ended
                    time.sleep(0.5)  # once this thread is inside the native call
                    send(signal.SIGTERM)
            threading.Thread(target=later, daemon=True).start()
            mutex = ctypes.create_string_buffer(64)  # PTHREAD_MUTEX_INITIALIZER is zeros (glibc)
            libc = ctypes.CDLL(None)
            libc.pthread_mutex_lock(mutex)
            libc.pthread_mutex_lock(mutex)
        c2pa.Builder.sign = native_hang
    elif patch == "term-while-signing-is-slow":
        import c2pa
        sign = c2pa.Builder.sign
        def slow_sign(*args, **kwargs):
            threading.Thread(target=send, args=(signal.SIGTERM,), daemon=True).start()
            time.sleep(1.0)  # slow, not stuck: the signal comes while the run's recording is signed
            return sign(*args, **kwargs)
        c2pa.Builder.sign = slow_sign
    elif patch == "int-while-a-url-opens":
        from livecam.media import camera
        camera.VideoFileSource.__init__.__defaults__ = (True, 300.0)  # the server is silent for longer than this test
        open_container = camera.open_container
        def interrupt_later():
            time.sleep(0.5)  # FFmpeg is then waiting for the server
            send(signal.SIGINT)
        def open_and_interrupt(*args, **kwargs):
            threading.Thread(target=interrupt_later, daemon=True).start()
            return open_container(*args, **kwargs)
        camera.open_container = open_and_interrupt
    elif patch == "int-while-a-pipe-opens":
        from livecam.media import video_reader
        open_input = video_reader.open_input
        def open_and_interrupt(*args, **kwargs):
            threading.Thread(target=lambda: (time.sleep(0.5), send(signal.SIGINT)), daemon=True).start()
            return open_input(*args, **kwargs)  # FFmpeg waits for the pipe's first bytes
        video_reader.open_input = open_and_interrupt
    elif patch == "int-after-the-first-frame-note":
        from livecam.media import camera
        camera.FIRST_FRAME_WAIT_S = 0.2  # the pipe sends nothing: the note comes, then Ctrl-C
        say = camera.VideoFileSource._say_waiting
        def say_and_interrupt(self):
            say(self)
            threading.Thread(target=send, args=(signal.SIGINT,), daemon=True).start()
        camera.VideoFileSource._say_waiting = say_and_interrupt
    elif patch == "int-while-a-url-read-waits":
        from livecam.media import camera
        camera.VideoFileSource.__init__.__defaults__ = (True, 300.0)  # the read outlasts the test
        read = camera.VideoFileSource.read
        def read_or_interrupt(self):
            returned = threading.Event()
            def interrupt_if_blocked():
                if not returned.wait(0.5):  # the server went quiet: the read waits for it
                    os.kill(os.getpid(), signal.SIGINT)
            threading.Thread(target=interrupt_if_blocked, daemon=True).start()
            try:
                return read(self)
            finally:
                returned.set()
        camera.VideoFileSource.read = read_or_interrupt
    elif patch == "term-at-exit":
        atexit.register(send, signal.SIGTERM)
    elif patch == "int-int-int-at-shutdown":
        from livecam.commands import video
        def keep_busy():  # interpreter shutdown waits for this thread while Ctrl-C comes twice more
            time.sleep(0.3)
            for _ in range(2):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.002)
            time.sleep(0.3)
        def load(job):
            threading.Thread(target=keep_busy).start()
            send(signal.SIGINT)
        video.create_engine = load
    elif patch == "int-while-importing-onnxruntime":
        class Interrupted(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name != "onnxruntime":
                    return None
                try:
                    send(signal.SIGINT)
                except KeyboardInterrupt as exc:
                    # what a C extension's import does with it (numpy's import_array, ...)
                    raise ImportError("numpy.core.multiarray failed to import") from exc
                return None
        sys.meta_path.insert(0, Interrupted())
    elif patch == "term-while-the-cli-loads":
        class Loading(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "click":
                    send(signal.SIGTERM)
                return None
        sys.meta_path.insert(0, Loading())
    from livecam.__main__ import main  # the `livecam` command's entry point
    sys.argv = ["livecam", *args]
    main()
""")


def run_driver(tmp_path: Path, patch: str, args: list[str], env: dict[str, str],
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = dict(env, PYTHONPATH=os.pathsep.join([str(REPO_ROOT / "src"), str(REPO_ROOT)]))
    return subprocess.run([sys.executable, str(script), patch, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def interrupted_in_one_line(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1:] == ["livecam: interrupted"], proc.stderr


def image_args(faces_dir: Path, out: Path) -> list[str]:
    return ["image", str(faces_dir / "obama.jpg"), str(out), "--source", str(faces_dir / "biden.jpg"),
            "--swap-model", "mesh", "--no-watermark", "--no-c2pa"]


@pytest.mark.parametrize("patch", ["term-in-write", "int-in-write-and-cleanup"])
def test_a_signal_inside_the_image_write_leaves_nothing_and_exits_130(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], patch: str) -> None:
    out = tmp_path / "out" / "swapped.png"
    out.parent.mkdir()
    proc = run_driver(tmp_path, patch, image_args(faces_dir, out), isolated_env)
    interrupted_in_one_line(proc)
    assert list(out.parent.iterdir()) == []  # no output, no hidden partial file


@pytest.mark.parametrize("patch", ["term-after-the-output", "term-at-exit"])
def test_sigterm_after_the_image_is_written_is_done_exit_0(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], patch: str) -> None:
    out = tmp_path / "out" / "swapped.png"
    out.parent.mkdir()
    proc = run_driver(tmp_path, patch, image_args(faces_dir, out), isolated_env)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)
    assert list(out.parent.iterdir()) == [out]


@pytest.mark.parametrize("patch", ["term-while-the-cli-loads", "term-while-models-load", "int-int-int-at-shutdown"])
def test_signals_while_a_video_starts_exit_130_in_one_line(
        tmp_path: Path, isolated_env: dict[str, str], patch: str) -> None:
    from tests.videos import make_clip

    clip = make_clip(tmp_path / "in.mp4", frames=2, size=(64, 48), fps=30)
    out = tmp_path / "out" / "out.mp4"
    out.parent.mkdir()
    proc = run_driver(tmp_path, patch, ["video", str(clip), str(out), "--source", str(clip)], isolated_env)
    interrupted_in_one_line(proc)
    assert list(out.parent.iterdir()) == []


def _clip_and_an_old_output(tmp_path: Path) -> tuple[Path, Path]:
    """A two-frame clip, and the output path in a folder of its own, holding the user's old file."""
    from tests.videos import make_clip

    clip = make_clip(tmp_path / "in.mp4", frames=2, size=(64, 48), fps=30)
    out = tmp_path / "out" / "out.mp4"
    out.parent.mkdir()
    out.write_bytes(b"the user's old file")
    return clip, out


def interrupted_keeping_the_old_output(proc: subprocess.CompletedProcess[str], out: Path) -> None:
    interrupted_in_one_line(proc)
    assert list(out.parent.iterdir()) == [out]  # no temporary file beside it
    assert out.read_bytes() == b"the user's old file"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the stand-in hang is a glibc mutex")
def test_sigterm_while_signing_hangs_in_native_code_exits_130_and_keeps_the_old_file(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # c2pa signing stuck in native code never ran Python's handler: SIGTERM and Ctrl-C went
    # unheard, and the SIGKILL that followed left the hidden temporary files beside the output.
    clip, out = _clip_and_an_old_output(tmp_path)
    try:
        proc = run_driver(tmp_path, "term-while-signing-hangs",
                          ["video", str(clip), str(out), "--source", str(faces_dir / "biden.jpg"), "--force",
                           "--no-watermark"],
                          isolated_env, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("SIGTERM did not stop a run whose signing hangs")
    interrupted_keeping_the_old_output(proc, out)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the stand-in hang is a glibc mutex")
@pytest.mark.parametrize("watermark", ["--no-watermark", "--watermark"])  # closed on the main / marking thread
@pytest.mark.parametrize("patch", ["term-while-signing-hangs", "int-then-term-while-signing-hangs"])
def test_sigterm_while_a_run_recording_is_signed_and_signing_hangs_exits_130_and_keeps_the_old_file(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], watermark: str, patch: str) -> None:
    # `run` took the SIGTERM for its clean stop, or ignored it after a Ctrl-C's, and waited for the
    # hung signing for ever (the stuck-output rescue backs off while the recording is being closed;
    # with the watermark, 60 s until the marking thread gave up): the SIGKILL that followed left
    # the recording's and the signed copy's temporary files beside the output.
    clip, out = _clip_and_an_old_output(tmp_path)
    try:
        proc = run_driver(tmp_path, patch,
                          ["run", "--camera", str(clip), "--output", str(out), "--source",
                           str(faces_dir / "biden.jpg"), "--force", watermark, "--no-realtime"],
                          isolated_env, timeout=40)
    except subprocess.TimeoutExpired:
        pytest.fail("SIGTERM did not stop a `run` whose signing hangs")
    interrupted_keeping_the_old_output(proc, out)


@pytest.mark.parametrize("watermark", ["--no-watermark", "--watermark"])
def test_one_sigterm_while_a_finished_run_recording_is_signed_keeps_it(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str], watermark: str) -> None:
    # The run had ended on its own; one signal while its recording was signed discarded it (the
    # signal raised inside the close). It is the clean stop already under way: said, and kept.
    from tests.videos import make_clip

    clip = make_clip(tmp_path / "in.mp4", frames=2, size=(64, 48), fps=30)
    out = tmp_path / "out.mp4"
    proc = run_driver(tmp_path, "term-while-signing-is-slow",
                      ["run", "--camera", str(clip), "--output", str(out), "--source",
                       str(faces_dir / "biden.jpg"), watermark, "--no-realtime"], isolated_env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "finishing the output (SIGTERM received); another SIGTERM abandons it" in proc.stderr, proc.stderr
    assert out.stat().st_size > 0 and not list(tmp_path.glob(".livecam-*"))


def test_ctrl_c_while_onnxruntime_is_imported_is_an_interrupt(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    out = tmp_path / "swapped.png"
    proc = run_driver(tmp_path, "int-while-importing-onnxruntime", image_args(faces_dir, out), isolated_env)
    interrupted_in_one_line(proc)
    assert "not installed" not in proc.stderr and not out.exists()


def test_an_import_error_caused_by_an_interrupt_is_the_interrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    # In-process (no handler of main's): the chain alone says it was Ctrl-C, not a missing package.
    import importlib.abc

    from livecam.runtime.providers import available_ort_providers

    class CutShort(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
            if name == "onnxruntime":
                try:
                    raise KeyboardInterrupt
                except KeyboardInterrupt as exc:
                    raise ImportError("numpy.core.multiarray failed to import") from exc
            return None

    monkeypatch.delitem(sys.modules, "onnxruntime", raising=False)
    monkeypatch.setattr(sys, "meta_path", [CutShort(), *sys.meta_path])
    with pytest.raises(KeyboardInterrupt):
        available_ort_providers()


def test_ctrl_c_while_a_camera_url_opens_is_heard_at_once(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # FFmpeg waiting for a silent server holds the main thread in native code: Ctrl-C was heard
    # only when the open timed out (5 s; with this test's 300 s, never)
    import socket

    with socket.socket() as server:  # accepts the connection (the kernel does) and never answers
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        proc = run_driver(tmp_path, "int-while-a-url-opens",
                          ["run", "--camera", f"http://127.0.0.1:{server.getsockname()[1]}/live.mp4", "--output",
                           "none", "--swap-model", "mesh", "--source", str(faces_dir / "obama.jpg")],
                          isolated_env, timeout=100)
    interrupted_in_one_line(proc)


def run_on_a_silent_pipe(tmp_path: Path, faces_dir: Path, env: dict[str, str], mode: str,
                         fails: str) -> subprocess.CompletedProcess[str]:
    """`run --camera FIFO` whose writer is there but never writes, interrupted by the driver's `mode`;
    `fails`: what a run that does not end in time means."""
    fifo = tmp_path / "camera.fifo"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # (Linux: opens at once) a writer that never writes
    try:
        proc = run_driver(tmp_path, mode, ["run", "--camera", str(fifo), "--output", "none", "--swap-model", "mesh",
                                           "--source", str(faces_dir / "obama.jpg")], env, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(fails)
    finally:
        os.close(writer)
    interrupted_in_one_line(proc)
    return proc


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_ctrl_c_while_a_camera_pipe_opens_is_heard_at_once(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # --camera FIFO whose writer is there but sends nothing (a capture tool still starting): FFmpeg's
    # probe held the main thread, and Ctrl-C was heard only once the writer closed (here never)
    run_on_a_silent_pipe(tmp_path, faces_dir, isolated_env, "int-while-a-pipe-opens",
                         "Ctrl-C did not end a run whose camera pipe sends nothing")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_camera_pipe_that_sends_nothing_says_once_that_it_waits_and_ctrl_c_still_ends_it(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # the run waited silently for the writer's first bytes, as if hung (a URL times out in 5 s)
    proc = run_on_a_silent_pipe(tmp_path, faces_dir, isolated_env, "int-after-the-first-frame-note",
                                "no note of the wait came, or Ctrl-C did not end the run")
    assert proc.stderr.strip().splitlines()[-2:] == [
        "livecam: note: waiting for the first frame from --camera camera.fifo (nothing has come for 0.2 s: its writer "
        "has sent nothing yet?); Ctrl-C stops", "livecam: interrupted"], proc.stderr


def test_ctrl_c_while_a_camera_url_read_waits_is_one_interrupt_keeping_the_recording(
        tmp_path: Path, faces_dir: Path, isolated_env: dict[str, str]) -> None:
    # Ctrl-C while a stalled stream's read waited: the capture thread, still blocked after the
    # shutdown's wait, added "stages still running 2 s after the stop: livecam-capture" and
    # "... not released: its read is still blocked" to the interrupt's lines.
    from tests.videos import count_frames, make_clip, stalling_server

    clip = make_clip(tmp_path / "live.ts", frames=60, size=(160, 120), fps=30, audio=False,
                     source_image=faces_dir / "biden.jpg")
    rec = tmp_path / "out" / "rec.mp4"
    rec.parent.mkdir()
    with stalling_server(clip.read_bytes()) as url:
        try:
            proc = run_driver(tmp_path, "int-while-a-url-read-waits",
                              ["run", "--camera", url, "--output", str(rec), "--no-watermark", "--no-c2pa",
                               "--swap-model", "mesh", "--source", str(faces_dir / "obama.jpg")],
                              isolated_env, timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("Ctrl-C did not end a run whose stream read waits")
    assert proc.returncode == 130, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    frames = count_frames(rec)  # the recording is finished and kept, as on any interrupt
    assert frames >= 1 and list(rec.parent.iterdir()) == [rec]
    assert lines[-1] == f"livecam: error: interrupted (Ctrl-C); stopped cleanly after {frames} frames", proc.stderr
    assert not [line for line in lines if "still running" in line or "not released" in line], proc.stderr
