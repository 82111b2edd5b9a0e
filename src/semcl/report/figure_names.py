"""Where a table's figure goes: one name for every writer (semcl.report.figures and its kinds' modules) and for the
page that links it without drawing it (semcl.report.reproduction, draw=False)."""

from __future__ import annotations

from pathlib import Path


def figure_stem(table, profile: str) -> str:
    """The file name, without suffix, of a table's figure and its CSV (every kind drawn from runs)."""
    return f"{table.id.replace('/', '_')}.{profile}"


def figure_png(table, profile: str, out_dir: Path) -> Path:
    """The PNG semcl.report.figures.write_figure draws the table's figure into (an analytic figure reads no runs)."""
    kind = table.figure.get("kind") if table.figure is not None else "scatter"
    return out_dir / (f"{table.id.replace('/', '_')}.png" if kind == "analytic" else f"{figure_stem(table, profile)}.png")
