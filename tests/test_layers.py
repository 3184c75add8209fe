"""Dependencies point one way (docs/ARCHITECTURE.md): no livecam module imports one above it, lazy
imports inside functions included (runtime/providers.py once reached up into pipeline/ that way)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "livecam"

# Higher imports lower or equal, never the reverse. A unit is a subpackage or a top-level module.
RANKS: dict[str, int] = {
    "livecam": 0, "errors": 0, "native_stderr": 0, "machine": 0, "interrupt": 0, "samples": 0,
    "atomic": 1, "paths": 1, "settings": 1, "console": 2,
    "runtime": 2, "models": 3, "media": 4,
    "faces": 5, "frame": 5, "marks": 5,
    "processors": 6, "pipeline": 7, "cluster": 8, "commands": 9,
    "cli": 10, "cli_params": 10, "cli_usage": 10, "__main__": 11,
}
# The one exception: ProcessingSettings' default processors come from the registry, looked up
# lazily when a settings object is made without them.
ALLOWED = {("settings", "processors")}


def _unit(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imported_units(path: Path) -> set[str]:
    units: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names] if node.module == "livecam" else [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "livecam":
                unit = parts[1] if len(parts) > 1 else "livecam"
                units.add(unit if unit in RANKS else "livecam")  # `from livecam import __version__`
    return units


def test_every_unit_has_a_rank() -> None:
    units = {_unit(p) for p in PACKAGE.rglob("*.py")} - {"__init__"}
    assert units <= set(RANKS), f"give these a rank in tests/test_layers.py: {sorted(units - set(RANKS))}"


def test_no_module_imports_one_above_it() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        unit = "livecam" if path == PACKAGE / "__init__.py" else _unit(path)
        for imported in _imported_units(path):
            if RANKS[imported] > RANKS[unit] and (unit, imported) not in ALLOWED:
                upward.append(f"{path.relative_to(PACKAGE)} imports livecam.{imported}")
    assert not upward, upward


def test_nothing_below_the_command_line_imports_it() -> None:
    importers = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                 if "cli" in _imported_units(p) and _unit(p) not in ("cli", "__main__")]
    assert not importers, importers
