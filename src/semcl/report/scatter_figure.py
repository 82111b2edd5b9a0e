"""`figure: {kind: scatter, x: <column>, y: <column>[, annotate: <column>]}` (GPaCo Fig. 1(a): top-1 vs inference
latency; RINCE's alignment vs uniformity with the OOD AUROC written beside each point).

One point per row, drawn in two panels with their own axes: the paper's values on the left, ours on the
right. The panels are separate because a scatter's axes may be measured on hardware (latency in ms on the
paper's unknown GPU and batch size vs this run's device): one axis for both would invite comparing numbers
that are not comparable. Rows are compared within a panel. In the paper panel a row with both values is a
hollow point, a row with one known value a dotted line at that value (vertical: x known, horizontal: y
known); ours are filled points, mean ± sample std over seeds on both axes. Colours and markers name the
rows in one key shared by both panels.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from semcl.files import save_figure_atomic
from semcl.registry.tables import Table
from semcl.report.tables import long_table, summary
from semcl.store import Store

MARKERS = "osD^vP*Xh<>p"
CAPTION = ("Paper and ours on separate axes: the paper's values come from its own hardware and protocol, ours from "
           "this run's; compare rows within a panel, not across panels.")


def figure_points(table: Table, profile: str, store: Store) -> pd.DataFrame:
    """One line per row: ours (x, y means and stds, n) and the paper's x and y (NaN = unknown)."""
    if table.figure is None:
        raise ValueError(f"{table.path}: table {table.id} has no 'figure' entry")
    fx, fy, fa = table.figure["x"], table.figure["y"], table.figure.get("annotate")
    summ = summary(table, profile, long_table(table, profile, store)).set_index(["row", "column"])
    lines = []
    for row in table.rows:
        sx, sy = summ.loc[(row.label, fx)], summ.loc[(row.label, fy)]
        lines.append({"row": row.label, "implemented": row.implemented,
                      "x_mean": sx["mean"], "x_std": sx["std"], "y_mean": sy["mean"], "y_std": sy["std"],
                      "n": int(min(sx["n"], sy["n"])), "paper_x": sx["paper"], "paper_y": sy["paper"]})
        if fa is not None:  # the third column, written beside our point (absent otherwise: fig1a's CSV as before)
            sa = summ.loc[(row.label, fa)]
            lines[-1].update({"a_mean": sa["mean"], "a_std": sa["std"]})
    return pd.DataFrame(lines)


def paper_marks(points: pd.DataFrame) -> pd.DataFrame:
    """What the paper panel draws, one line per row with a paper value: mark `point` (x and y known),
    `vline` (x only) or `hline` (y only), at x / y (NaN where the mark has no such coordinate)."""
    out = []
    for p in points.itertuples():
        has_x, has_y = not math.isnan(p.paper_x), not math.isnan(p.paper_y)
        if has_x or has_y:
            mark = "point" if has_x and has_y else "vline" if has_x else "hline"
            out.append({"row": p.row, "mark": mark, "x": p.paper_x, "y": p.paper_y})
    return pd.DataFrame(out, columns=["row", "mark", "x", "y"])


def coincident(points: pd.DataFrame) -> dict[str, str]:
    """row -> the earlier row whose point of ours lies exactly on it (e.g. rows that collapse to one run
    in a small profile), so the key can say why only one point shows."""
    first: dict[tuple[float, float], str] = {}
    out = {}
    for p in points[points["n"] > 0].itertuples():
        key = (round(float(p.x_mean), 9), round(float(p.y_mean), 9))
        if key in first:
            out[p.row] = first[key]
        else:
            first[key] = p.row
    return out


def draw(table: Table, profile: str, points: pd.DataFrame, path: Path,
         others: dict[str, pd.DataFrame] | None = None) -> None:
    """Paper and ours, and with `others` (origin name -> its points, semcl.report.origins) one more panel per
    origin: like the paper's, their axes may be measured on other hardware."""
    import matplotlib

    matplotlib.use("Agg")  # files only; no display on cluster nodes
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    labels = {c.key: c.label for c in table.columns}
    xl, yl = labels[table.figure["x"]], labels[table.figure["y"]]
    colours = _colours(plt, len(points))
    style = {row: (colours[i], MARKERS[i % len(MARKERS)]) for i, row in enumerate(points["row"])}
    others = others or {}
    fig, axes = plt.subplots(1, 2 + len(others), figsize=(5.5 * (2 + len(others)), 4.8), dpi=150)
    ax_p, ax_o = axes[0], axes[1]

    marks = paper_marks(points)
    for m in marks.itertuples():
        c, mk = style[m.row]
        if m.mark == "point":
            ax_p.plot(m.x, m.y, mk, mfc="none", mec=c, ms=7, mew=1.5)
        elif m.mark == "vline":
            ax_p.axvline(m.x, ls=":", color=c, lw=1.6)
        else:
            ax_p.axhline(m.y, ls=":", color=c, lw=1.6)
    if marks.empty:
        ax_p.text(0.5, 0.5, "no paper value known", ha="center", va="center", transform=ax_p.transAxes)
    ax_p.margins(0.12)  # points off the frame: the lines at known values count in the limits
    ax_p.set_title(f"Paper ({table.source})", fontsize=9)
    ax_p.set_xlabel(f"{xl}, paper")
    ax_p.set_ylabel(f"{yl}, paper")

    same = coincident(points)
    title = f"Ours (profile {profile}; n = seeds, in the key)"
    if table.figure.get("annotate"):
        title += f"; beside each point: mean {labels[table.figure['annotate']]}"
    _draw_ours(ax_o, points, style, title, f"{xl}, ours", f"{yl}, ours")
    for (name, pts), ax in zip(others.items(), axes[2:], strict=True):  # --against: each origin on its own axes
        _draw_ours(ax, pts, style, f"{name} (profile {profile}; read only)", f"{xl}, {name}", f"{yl}, {name}")
    for ax in axes:
        ax.grid(alpha=0.3)

    key = []
    for p in points.itertuples():
        c, mk = style[p.row]
        note = f" (n={p.n})" if p.n > 0 else " (not run)"
        note += "".join(f"; {name} n={int(pts.loc[pts['row'] == p.row, 'n'].iloc[0])}" for name, pts in others.items())
        if p.row in same:
            note += f", on the point of {same[p.row]}"
        key.append(Line2D([], [], color=c, marker=mk, ls="none", label=p.row + note))
    key += [Line2D([], [], color="grey", marker="o", mfc="none", ls="none", label="paper: both values known"),
            Line2D([], [], color="grey", ls=":", label="paper: one value known (line at it)"),
            Line2D([], [], color="grey", marker="o", ls="none", label="ours: mean ± sample std over seeds")]
    fig.legend(handles=key, loc="upper left", bbox_to_anchor=(1.0, 0.95), fontsize=6, frameon=False)
    fig.suptitle(f"{table.id} ({table.source}): {table.title}", fontsize=9)
    fig.text(0.5, 0.005, CAPTION, ha="center", va="bottom", fontsize=7, style="italic")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    save_figure_atomic(fig, path, bbox_inches="tight")
    plt.close(fig)


def _draw_ours(ax, points: pd.DataFrame, style: dict, title: str, xlabel: str, ylabel: str) -> None:
    """One origin's points: mean ± sample std over seeds on both axes."""
    for p in points[points["n"] > 0].itertuples():
        c, mk = style[p.row]
        ax.errorbar(p.x_mean, p.y_mean, xerr=_err(p.x_std), yerr=_err(p.y_std), fmt=mk, color=c, capsize=3, ms=6)
        if "a_mean" in points and not math.isnan(p.a_mean):  # the figure's `annotate:` column beside each point
            ax.annotate(f"{p.a_mean:.1f}", (p.x_mean, p.y_mean), xytext=(5, 4), textcoords="offset points",
                        fontsize=7, color=c)
    ax.margins(0.08)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def _colours(plt, n: int) -> list:
    """n distinct colours: tab10, or past 10 rows tab20's strong shades first, then its pale ones."""
    if n <= 10:
        return [plt.get_cmap("tab10")(i) for i in range(n)]
    tab20 = plt.get_cmap("tab20")
    order = list(range(0, 20, 2)) + list(range(1, 20, 2))
    return [tab20(order[i % 20]) for i in range(n)]


def _err(std: float) -> float | None:
    return None if math.isnan(std) else std
