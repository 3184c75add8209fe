"""Run the real CLI in a subprocess with the catalog replaced by a test catalog.

Usage: python -m tests.models.patched_cli CATALOG.json [livecam args...]
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import MappingProxyType

from livecam.models import catalog
from tests.models.helpers import catalog_from_json


def main() -> None:
    specs = catalog_from_json(Path(sys.argv[1]).read_text(encoding="utf-8"))
    catalog.CATALOG = MappingProxyType(specs)  # read by ModelStore at construction
    from livecam.cli import cli

    cli.main(args=sys.argv[2:], prog_name="livecam")


if __name__ == "__main__":
    main()
