"""Paper-vs-ours figures from the same per-(row, column) summary the tables use.

A registry entry with `figure: {kind: scatter, x: <column>, y: <column>}` (e.g. GPaCo Fig. 1(a):
top-1 vs inference latency) is drawn as one point per row, the paper's values and ours in separate
panels (semcl.report.scatter_figure). The plotted numbers are written next to the PNG as CSV, so the
figure can be checked or redrawn without the run records.

A registry entry with `figure: {kind: lines, columns: [...], ylabel: ...}` (e.g. HSA Fig. 3: probe
top-1 after each stage) is drawn as one line per row across those columns (mean ± std), with the
paper's values dashed where known.

A registry entry with `figure: {kind: analytic, function: <module>.<function>, args: {...}}` (e.g.
RINCE Fig. 5: `gradient_equilibrium.draw_fig5`) needs no runs: the function of semcl.analysis is
called as `function(out_dir, stem=<table id with _>, **args)` and writes `<stem>.png` and `<stem>.csv`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from semcl.csv_files import write_frame_csv
from semcl.files import save_figure_atomic
from semcl.registry.figure_kinds import CURVE_FIGURES, FEATURE_FIGURES
from semcl.registry.tables import Table
from semcl.report.figure_names import figure_stem
from semcl.report.scatter_figure import draw, figure_points
from semcl.report.tables import long_table, summary
from semcl.store import Store

__all__ = ["figure_points", "line_points", "write_figure"]


def write_analytic(table: Table, out_dir: Path) -> tuple[pd.DataFrame, Path]:
    """Draw a `kind: analytic` figure; returns (the files written, one per line, and the PNG)."""
    import importlib

    module, _, name = table.figure["function"].rpartition(".")
    try:
        fn = getattr(importlib.import_module(f"semcl.analysis.{module}"), name)
    except (ImportError, AttributeError):
        raise ValueError(f"{table.path}: figure function {table.figure['function']!r} is not in semcl.analysis") from None
    paths = [Path(p) for p in fn(out_dir, stem=table.id.replace("/", "_"), **table.figure["args"])]
    return pd.DataFrame({"file": [str(p) for p in paths]}), next(p for p in paths if p.suffix == ".png")


def line_points(table: Table, profile: str, store: Store) -> pd.DataFrame:
    """`kind: lines`: one line per (row, column) of the figure's columns: ours (mean, std, n) and the paper's value."""
    summ = summary(table, profile, long_table(table, profile, store)).set_index(["row", "column"])
    labels = {c.key: c.label for c in table.columns}
    lines = []
    for row in table.rows:
        for key in table.figure["columns"]:
            s = summ.loc[(row.label, key)]
            lines.append({"row": row.label, "implemented": row.implemented, "column": key, "label": labels[key],
                          "mean": s["mean"], "std": s["std"], "n": int(s["n"]), "paper": s["paper"]})
    return pd.DataFrame(lines)


def draw_lines(table: Table, profile: str, points: pd.DataFrame, path: Path,
               others: dict[str, pd.DataFrame] | None = None) -> None:
    """One line per row (ours solid, the paper's dashed); `others` (origin name -> its points, --against): each
    origin's line of the row in the row's colour, dotted / dash-dotted with hollow markers, the key naming it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = table.figure["columns"]
    labels = {c.key: c.label for c in table.columns}
    fig, ax = plt.subplots(figsize=(6.4, 4.6), dpi=150)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (row, grp) in enumerate(points.groupby("row", sort=False)):
        c = colors[i % len(colors)]
        grp = grp.set_index("column").loc[keys]
        xs = list(range(len(keys)))
        if (grp["n"] > 0).any():
            ax.errorbar(xs, grp["mean"], yerr=grp["std"].fillna(0.0), fmt="-o", color=c, capsize=3,
                        # seeds of the measured columns (a column this profile leaves out has n = 0)
                        label=f"{row} (ours, n={int(grp['n'][grp['n'] > 0].min())})")
        if grp["paper"].notna().any():
            ax.plot(xs, grp["paper"], "--o", mfc="none", color=c, label=f"{row} (paper)")
        for k, (name, pts) in enumerate((others or {}).items()):
            theirs = pts[pts["row"] == row].set_index("column").loc[keys]
            if (theirs["n"] > 0).any():
                ax.errorbar(xs, theirs["mean"], yerr=theirs["std"].fillna(0.0), fmt=(":", "-.")[k % 2] + "s",
                            mfc="none", color=c, capsize=3,
                            label=f"{row} ({name}, n={int(theirs['n'][theirs['n'] > 0].min())})")
    ax.set_xticks(range(len(keys)), [labels[k] for k in keys], fontsize=8)
    ax.set_ylabel(table.figure.get("ylabel") or "value")
    ax.set_title(f"{table.id} ({table.source}) — profile {profile}", fontsize=9)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6, loc="best")
    fig.tight_layout()
    save_figure_atomic(fig, path)
    plt.close(fig)


def _write_features(table: Table, profile: str, store: Store, out_dir: Path) -> tuple[pd.DataFrame, Path]:
    from semcl.report.feature_figures import write_feature_figure

    return write_feature_figure(table, profile, store, out_dir)


def _write_curves(table: Table, profile: str, store: Store, out_dir: Path) -> tuple[pd.DataFrame, Path]:
    from semcl.report.curve_figures import write_curve_figure

    return write_curve_figure(table, profile, store, out_dir)


def _write_points(table: Table, profile: str, store: Store, out_dir: Path,
                  origins: list | None = None) -> tuple[pd.DataFrame, Path]:
    """scatter (one point per row) and lines (one line per row): the table's cells, CSV + PNG; with `origins`
    (--against) each origin's points too, drawn beside ours, and the CSV gains an `origin` column."""
    lines = table.figure is not None and table.figure.get("kind") == "lines"
    points_of = line_points if lines else figure_points
    points = points_of(table, profile, store)
    others = {o.name: points_of(table, profile, o.store) for o in origins or []}
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = figure_stem(table, profile)
    shown = points if not others else pd.concat(
        [points.assign(origin="ours"), *[p.assign(origin=name) for name, p in others.items()]], ignore_index=True)
    if others:
        shown = shown[["origin", *points.columns]]
    write_frame_csv(out_dir / f"{stem}.csv", shown)
    (draw_lines if lines else draw)(table, profile, points, out_dir / f"{stem}.png", others=others)
    return shown, out_dir / f"{stem}.png"


# figure kind (semcl.registry.figure_kinds.FIGURE_KINDS, the same keys) -> its writer: (table, profile, store, out_dir)
FIGURE_WRITERS = {
    "scatter": _write_points,
    "lines": _write_points,
    "analytic": lambda table, profile, store, out_dir: write_analytic(table, out_dir),  # no runs, no profile
    **dict.fromkeys(FEATURE_FIGURES, _write_features),
    **dict.fromkeys(CURVE_FIGURES, _write_curves),
}


AGAINST_KINDS = ("scatter", "lines")  # the kinds drawn from the tables' cells, so from any origin's records




def write_figure(table: Table, profile: str, store: Store, out_dir: Path | None = None,
                 origins: list | None = None) -> tuple[pd.DataFrame, Path]:
    """`origins` (--against, semcl.report.origins): the scatter and lines kinds drawn with each origin beside
    ours; any other kind is refused in one line (it reads per-run files or no runs)."""
    out_dir = out_dir or store.folders.figures()
    kind = table.figure.get("kind") if table.figure is not None else "scatter"
    if origins:
        if kind not in AGAINST_KINDS:
            from semcl.errors import ConfigError

            raise ConfigError(f"{table.path}: figure kind {kind!r} of {table.id}: --against draws the "
                              f"{' and '.join(AGAINST_KINDS)} kinds (a table's cells), not this one")
        return _write_points(table, profile, store, out_dir, origins)
    return FIGURE_WRITERS[kind](table, profile, store, out_dir)
