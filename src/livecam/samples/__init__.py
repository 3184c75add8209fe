"""Sample photos that ship inside the package, for `livecam demo` (sources and licences in
SAMPLES.md beside this file: both are public-domain works of the US federal government)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from livecam.errors import InputError


@dataclass(frozen=True)
class Sample:
    file: str  # in this package folder
    who: str  # for the demo's summary
    focus: tuple[float, float]  # face centre as fractions of width and height (where the camera zooms in)


SAMPLES: dict[str, Sample] = {
    "astronaut": Sample("astronaut.jpg", "astronaut Eileen Collins (NASA portrait)", (0.44, 0.24)),
    "grace_hopper": Sample("grace_hopper.jpg", "Grace Hopper (US Navy portrait)", (0.52, 0.38)),
}


def sample_path(name: str) -> Path:
    """The file of a bundled sample photo; InputError when the installation lacks it."""
    sample = SAMPLES[name]
    path = Path(str(resources.files(__name__).joinpath(sample.file)))
    if not path.is_file():
        raise InputError(f"the sample photo {sample.file} is missing from the livecam package ({path.parent}); "
                         "reinstall livecam")
    return path
