"""How a message counts things: `counted(1, "frame")` is "1 frame", `counted(2, "frame")` "2 frames"
(a one-frame clip was "1 frames" in the summary, the interrupt and the no-face warning)."""

from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """`n` and `noun`, plural unless `n` is 1 (a regular English plural: noun + s)."""
    return f"{n} {noun}" + ("" if n == 1 else "s")
