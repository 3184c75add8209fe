"""`livecam verify FILE...`: which of livecam's marks each file carries, and a verdict.

Exit status: 0 when every file is marked, 1 when one is not, 2 when one cannot be read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from livecam.console import as_utf8, one_line  # a file name may hold a newline, or bytes that are not UTF-8
from livecam.errors import EXIT_USAGE, LivecamError
from livecam.marks.evidence import Evidence, examine
from livecam.marks.watermark import open_watermarker
from livecam.settings import RuntimeSettings


def run_verify(runtime: RuntimeSettings, files: tuple[Path, ...], as_json: bool) -> int:
    marker = open_watermarker(runtime)
    status = 0
    results: list[dict[str, object]] = []
    for path in files:
        try:
            evidence = examine(path, marker)
        except LivecamError as exc:
            status = EXIT_USAGE
            results.append({**_named(path), "error": exc.message})
            if not as_json:
                click.echo(one_line(f"{path}: UNREADABLE: {exc.message}"))
            continue
        if not evidence.marked:
            status = max(status, 1)
        results.append({**_named(path), **evidence.as_dict()})
        if not as_json:
            click.echo(report(evidence))
    if as_json:
        click.echo(json.dumps(_utf8(results), indent=2))
    return status


def _named(path: Path) -> dict[str, str]:
    """How the JSON names a file: "file", its name as text (as_utf8: a byte that is not UTF-8 as
    \\xff), and for such a name "file_hex" too, its exact bytes, which a literal "\\xff" in a
    name cannot be told from otherwise."""
    text = as_utf8(str(path))
    return {"file": text} if text == str(path) else {"file": text, "file_hex": os.fsencode(path).hex()}


def _utf8(value: object) -> object:
    """`value` with every string valid UTF-8 (as_utf8): a name is in the error messages too."""
    if isinstance(value, str):
        return as_utf8(value)
    if isinstance(value, dict):
        return {key: _utf8(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_utf8(item) for item in value]
    return value


def report(evidence: Evidence) -> str:
    verdict = "MARKED as made with livecam" if evidence.marked else "NOT MARKED: no livecam mark found"
    cred = evidence.credentials
    if cred.present:
        signer = f"signed by {cred.signer or 'an unnamed signer'}"
        # without failure codes, the state itself (it was "INVALID: " and nothing)
        reasons = ", ".join(f for f in cred.failures if f) or f"validation state {cred.state or 'not given'}"
        trust = {"Trusted": "on the trust list", "Valid": "signer not on the C2PA trust list"}.get(
            cred.state, f"INVALID: {reasons}")
        c2pa = (f"manifest by {cred.generator or 'an unknown tool'}, {signer}, {trust}; actions "
                f"{', '.join(cred.actions) or 'none'}"
                + (f" ({cred.digital_source_type.rsplit('/', 1)[-1]})" if cred.digital_source_type else ""))
    else:
        c2pa = f"none ({cred.note})" if cred.note else "none"
    lines = [f"{evidence.path}: {verdict} ({evidence.kind})",
             f"  watermark: {evidence.watermark.describe()}",
             f"  C2PA:      {c2pa}",
             f"  metadata:  {', '.join(evidence.metadata) or 'no livecam tags'}"]
    return "\n".join(one_line(line) for line in lines)  # one line per line, whatever a name holds
