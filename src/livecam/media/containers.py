"""PyAV across its versions: opening media files for reading, and its rationals."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Protocol

import av
from av.container import InputContainer

# PyAV before 19 raises on tags in broken UTF-8 unless told metadata_errors="replace"; 19
# dropped that parameter (passing it is a TypeError) and no longer raises on such tags.
_NEEDS_METADATA_ERRORS = int(av.__version__.split(".")[0]) < 19


def open_container(file: str, **options: Any) -> InputContainer:
    """av.open(file, "r", **options), with tags in broken UTF-8 never fatal."""
    if _NEEDS_METADATA_ERRORS:
        options["metadata_errors"] = "replace"
    return av.open(file, "r", **options)


class _Rational(Protocol):
    @property
    def numerator(self) -> int: ...

    @property
    def denominator(self) -> int: ...


def as_fraction(value: _Rational) -> Fraction:
    """A Fraction from a PyAV rate or time base (a Fraction before PyAV 19, an AVRational since)."""
    return Fraction(value.numerator, value.denominator)
