"""Check livecam end to end on an older PyAV: `python scripts/check_pyav.py 17.0.0`.

Not part of the test suite (it installs packages). Run it with the dev venv's Python (PyAV 17.1
or later): that venv makes the clips (tests/videos.py uses 17.1's API) and probes every output.
A fresh venv gets `av==VERSION.*` (15, 16.1) or `av==VERSION` (15.0.0), onnxruntime and livecam
from this checkout; every case runs there and, as the reference, with the dev venv's livecam.
A case passes when both exit 0, every warning and note of the reference is said too, and the
outputs agree: frame count, size, streams, audio length, chapters, and pixels within a few levels
(two lossy encodes are never equal).

    .venv/bin/python scripts/check_pyav.py 17.0.0 [--python python3.10] [--workdir /tmp/pyav17]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import av
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tests.pipeline.test_file import _cut_recording  # noqa: E402  (needs REPO on the path)
from tests.videos import clip_with_chapters, make_clip  # noqa: E402

FACES = REPO.parent / "shared" / "faces"
SOURCE = FACES / "biden.jpg"
TARGET = FACES / "obama.jpg"
MAX_MEAN_DIFF = 4.0  # mean absolute difference of the decoded frames, in 0..255 levels


def make_inputs(folder: Path) -> None:
    """The clips every case reads (written with this Python's PyAV)."""
    folder.mkdir(parents=True, exist_ok=True)
    common = dict(frames=30, size=(320, 240), source_image=TARGET)
    make_clip(folder / "audio.mp4", audio=True, **common)
    make_clip(folder / "silent.mp4", audio=False, **common)
    make_clip(folder / "audio.mkv", audio=True, subtitle=True, **common)
    make_clip(folder / "rotated.mp4", audio=True, rotation=90, **common)
    make_clip(folder / "timecode.mov", audio=True, timecode="01:00:00:00", **common)
    clip_with_chapters(folder / "chapters.mkv")
    attach_font(folder / "audio.mkv", folder / "attached.mkv")
    (folder / "cutting").mkdir(exist_ok=True)
    shutil.copy(_cut_recording(folder / "cutting", "fragmented.mp4"), folder / "cut_fragmented.mp4")
    shutil.copy(TARGET, folder / "photo.jpg")
    (folder / "batch").mkdir(exist_ok=True)
    for name in ("audio.mp4", "silent.mp4"):
        shutil.copy(folder / name, folder / "batch" / name)


def attach_font(plain: Path, path: Path) -> None:
    """`plain` with a font attached, as mkvmerge stores one for ASS subtitles."""
    with av.open(str(plain)) as i, av.open(str(path), "w") as o:
        streams = {s.index: o.add_stream_from_template(s) for s in i.streams}
        o.add_attachment("Font.ttf", "font/ttf", bytes(range(256)) * 8)
        for packet in i.demux():
            if packet.dts is not None:
                packet.stream = streams[packet.stream.index]
                o.mux(packet)


def cases() -> list[tuple[str, list[str], str]]:
    """(name, livecam arguments, output); {i} is the input folder, {o} the output folder."""
    # no C2PA: c2pa-python is in the dev venv only; the watermark and metadata are still written
    src = ["--source", str(SOURCE), "--no-c2pa"]
    return [
        ("video mp4 + audio", ["video", "{i}/audio.mp4", "{o}/audio.mp4", *src], "audio.mp4"),
        ("video no audio", ["video", "{i}/silent.mp4", "{o}/silent.mp4", *src], "silent.mp4"),
        ("video --fps 15", ["video", "{i}/audio.mp4", "{o}/fps15.mp4", "--fps", "15", *src], "fps15.mp4"),
        ("video --frame-range 5:20", ["video", "{i}/audio.mp4", "{o}/range.mp4", "--frame-range", "5:20", *src],
         "range.mp4"),
        ("video mkv (audio, subtitles) -> mkv", ["video", "{i}/audio.mkv", "{o}/audio.mkv", *src], "audio.mkv"),
        ("video mkv subtitles -> mp4 (mov_text)", ["video", "{i}/audio.mkv", "{o}/subs.mp4", *src], "subs.mp4"),
        ("video mkv attachment -> mkv", ["video", "{i}/attached.mkv", "{o}/attached.mkv", *src], "attached.mkv"),
        ("video mp4 -> mkv", ["video", "{i}/audio.mp4", "{o}/tomkv.mkv", *src], "tomkv.mkv"),
        ("video mp4 -> webm", ["video", "{i}/audio.mp4", "{o}/audio.webm", *src], "audio.webm"),
        ("video rotated", ["video", "{i}/rotated.mp4", "{o}/rotated.mp4", *src], "rotated.mp4"),
        ("video timecode mov", ["video", "{i}/timecode.mov", "{o}/timecode.mov", *src], "timecode.mov"),
        ("video chapters", ["video", "{i}/chapters.mkv", "{o}/chapters.mkv", *src], "chapters.mkv"),
        ("video cut fragmented mp4 (one warning)", ["video", "{i}/cut_fragmented.mp4", "{o}/cut.mkv", *src],
         "cut.mkv"),
        ("video folder", ["video", "{i}/batch", "{o}/batch", *src], "batch/audio.mp4"),
        ("image", ["image", "{i}/photo.jpg", "{o}/photo.jpg", *src], "photo.jpg"),
        ("verify video", ["verify", "{o}/audio.mp4"], ""),
        ("verify image", ["verify", "{o}/photo.jpg"], ""),
        ("run --camera clip --output rec.mp4",
         ["run", "--camera", "{i}/audio.mp4", "--output", "{o}/rec.mp4", "--no-realtime", *src], "rec.mp4"),
        ("bench --mode video", ["bench", "--mode", "video", "--input", "{i}/audio.mp4", "--frames", "10",
                                 "--source", str(SOURCE)], ""),
    ]


def summary(path: Path) -> tuple[dict, list[np.ndarray]]:
    """What a user sees of an output: streams, frames, size, audio length, chapters."""
    if path.suffix.lower() == ".jpg":
        with av.open(str(path)) as c:
            image = next(c.decode(video=0)).to_ndarray(format="bgr24")
        return {"size": image.shape[1::-1]}, [image]
    with av.open(str(path)) as c:
        info: dict = {"streams": sorted(s.type for s in c.streams),
                      "chapters": len(c.chapters()) if hasattr(c, "chapters") else None}
        images = [f.to_ndarray(format="bgr24") for f in c.decode(video=0)]
    with av.open(str(path)) as c:
        audio = c.streams.audio[0] if c.streams.audio else None
        ends = [float((p.pts + (p.duration or 0)) * p.time_base) for p in c.demux(audio)
                if p.pts is not None] if audio is not None else []
    info.update(frames=len(images), size=images[0].shape[1::-1] if images else None,
                audio_s=round(max(ends), 1) if ends else None)
    return info, images


def said(stderr: str) -> set[str]:
    """The warnings and notes of a run."""
    return {line for line in stderr.splitlines() if "warning" in line or "note:" in line}


def run(livecam: Path, args: list[str], inputs: Path, outputs: Path) -> tuple[int, str]:
    outputs.mkdir(parents=True, exist_ok=True)
    argv = [str(livecam), "--offline", *(a.format(i=inputs, o=outputs) for a in args)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=outputs)
    return done.returncode, done.stderr.replace(str(outputs), "{o}")


def make_venv(version: str, python: str, folder: Path) -> Path:
    """A venv with `av` at `version` and livecam from this checkout, editable; its livecam."""
    if not (folder / ".venv").exists():
        subprocess.run([python, "-m", "venv", str(folder / ".venv")], check=True)
    pip = folder / ".venv" / "bin" / "pip"
    spec = f"av=={version}" if version.count(".") == 2 else f"av=={version}.*"
    subprocess.run([str(pip), "install", "-q", "onnxruntime", "-e", str(REPO)], check=True)
    # then `av` alone: a version under pyproject's floor installs too (pip only warns)
    subprocess.run([str(pip), "install", "-q", "--no-deps", spec], check=True)
    return folder / ".venv" / "bin" / "livecam"


def compare(name: str, ref: tuple[int, str], got: tuple[int, str], ref_out: Path | None,
            got_out: Path | None) -> list[str]:
    """The differences between the reference run and the checked one (empty: the same)."""
    problems = []
    if got[0] != ref[0]:
        problems.append(f"exit {got[0]} (reference {ref[0]}): {got[1].strip().splitlines()[-1:]} ")
    if ref_out is None or got_out is None or got[0] != 0:
        return problems
    if not got_out.exists():
        return problems + [f"no {got_out.name}"]
    (want, ref_images), (have, got_images) = summary(ref_out), summary(got_out)
    for key in want:
        if want[key] != have[key]:
            problems.append(f"{key} {have[key]} (reference {want[key]})")
    if len(ref_images) == len(got_images) and ref_images and ref_images[0].shape == got_images[0].shape:
        diff = float(np.mean([np.abs(a.astype(np.int16) - b).mean() for a, b in zip(ref_images, got_images)]))
        if diff > MAX_MEAN_DIFF:
            problems.append(f"pixels {diff:.1f} levels from the reference's on average")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", help="PyAV version: 16 or 16.1 (the newest that matches) or exact, 16.1.0")
    parser.add_argument("--python", default=sys.executable, help="interpreter for the new venv")
    parser.add_argument("--workdir", type=Path, help="default /tmp/livecam-pyav-VERSION")
    options = parser.parse_args()
    work = options.workdir or Path(f"/tmp/livecam-pyav-{options.version}")
    if not SOURCE.exists():
        print(f"needs the photos in {FACES}", file=sys.stderr)
        return 2
    livecam = make_venv(options.version, options.python, work)
    reference = Path(sys.executable).parent / "livecam"
    version = subprocess.run([str(livecam.parent / "python"), "-c", "import av; print(av.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    print(f"checking PyAV {version} against PyAV {av.__version__} (reference)", flush=True)
    inputs, ref_dir, got_dir = work / "in", work / "ref", work / "out"
    for folder in (ref_dir, got_dir):
        shutil.rmtree(folder, ignore_errors=True)
    make_inputs(inputs)
    failed = 0
    for name, args, output in cases():
        ref, got = run(reference, args, inputs, ref_dir), run(livecam, args, inputs, got_dir)
        problems = compare(name, ref, got, ref_dir / output if output else None,
                           got_dir / output if output else None)
        problems += [f"no {line!r}" for line in sorted(said(ref[1]) - said(got[1]))]
        warnings = sorted(said(got[1]) - said(ref[1]))
        failed += bool(problems)
        print(f"{'FAIL' if problems else 'ok  '} {name}: exit {got[0]}" + "".join(f"\n     {p}" for p in problems)
              + "".join(f"\n     only on {version}: {w}" for w in warnings), flush=True)
    print(f"PyAV {version}: {len(cases()) - failed} of {len(cases())} cases as on {av.__version__}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
