"""`livecam verify FILE...`: which of livecam's marks each file carries, and a verdict.

Exit status: 0 when every file is marked, 1 when one is not, 2 when one cannot be read.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from livecam.console import one_line  # a file name may hold a newline
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
            results.append({"file": str(path), "error": exc.message})
            if not as_json:
                click.echo(one_line(f"{path}: UNREADABLE: {exc.message}"))
            continue
        if not evidence.marked:
            status = max(status, 1)
        results.append(evidence.as_dict())
        if not as_json:
            click.echo(report(evidence))
    if as_json:
        click.echo(json.dumps(results, indent=2))
    return status


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
