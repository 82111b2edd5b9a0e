"""Training curves of a table's rows: per row, a history metric (default: loss) per epoch, the mean over the
seeds and a band from the seeds' minimum to maximum (with the sample std in the CSV).

A run's history is its live results/runs/<id>/history.jsonl (semcl.runtime.history) while it trains, else the
finished record's `history` (runs from before the live file). Runs with neither are left out.
CSV: row, epoch, mean, std, min, max, n, nonfinite (std empty where n = 1): the statistics are over the seeds whose
value is finite (n); `nonfinite` counts the seeds whose value is NaN or inf that epoch (a diverged run, said by
`semcl curves` in one line per row, never shown as a blank).

With other origins (`--against`, semcl.report.origins): an `origin` column first, each origin's runs read from its
own store and averaged apart; in the figure a row keeps its colour and each origin its own line style, the legend
naming the origin."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from semcl.csv_files import write_frame_csv
from semcl.errors import ConfigError, ResultsError
from semcl.files import save_figure_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import Table
from semcl.runtime.history import HISTORY_FILE, read_history
from semcl.store import Store


def run_history(store: Store, run_id: str) -> list[dict]:
    path = store.run_dir(run_id) / HISTORY_FILE
    if path.exists():
        return read_history(path)
    record = store.read_record(run_id)
    return list((record or {}).get("history") or [])


def history_curves(table: Table, profile: str, store: Store, rows: str | None = None,
                   metric: str = "loss", options: str = "", origins: list | None = None,
                   allow_empty: bool = False) -> pd.DataFrame:
    """One line per (row, epoch): the metric's mean, std, min and max over the row's seeds that reached it.
    `options`: what plans these rows besides the table and profile (a variant's `--set`), for the hint.
    `origins` (semcl.report.origins.Origin): one line per (origin, row, epoch) instead, ours first."""
    try:
        pick = re.compile(rows) if rows else None
    except re.error as err:
        raise ConfigError(f"--rows {rows!r}: not a regular expression ({err})") from None
    from semcl.report.origins import origin_stores

    values: dict[tuple[str, str], dict[int, list[float]]] = {}  # (origin, row) -> epoch -> the seeds' values
    planned = [r for r in plan_runs(table, profile) if pick is None or pick.search(r.row_label)]
    if not planned:
        raise ConfigError(f"{table.path}: no row of {table.id} (profile {profile}) matches --rows {rows!r}")
    for origin, source in origin_stores(store, origins or []).items():
        for run in planned:
            for entry in run_history(source, run.run_id):
                if metric in entry and entry[metric] is not None:
                    values.setdefault((origin, run.row_label), {}).setdefault(int(entry["epoch"]), []).append(
                        float(entry[metric]))
    if not values and not allow_empty:
        raise ResultsError(f"{store.folders.runs}: no run of {table.id} (profile {profile}) has a history with "
                           f"key {metric!r} yet; run it first: semcl run {table.id} --profile {profile}{options}")
    out = []
    for (origin, row), per_epoch in values.items():
        for epoch in sorted(per_epoch):
            every = np.asarray(per_epoch[epoch], dtype=np.float64)
            v = every[np.isfinite(every)]  # a diverged seed (NaN / inf) is counted apart, never averaged
            out.append({"origin": origin, "row": row, "epoch": epoch, "mean": v.mean() if len(v) else np.nan,
                        "std": v.std(ddof=1) if len(v) > 1 else np.nan, "min": v.min() if len(v) else np.nan,
                        "max": v.max() if len(v) else np.nan, "n": len(v), "nonfinite": len(every) - len(v)})
    data = pd.DataFrame(out, columns=["origin", "row", "epoch", "mean", "std", "min", "max", "n", "nonfinite"])
    return data if origins else data.drop(columns="origin")  # without --against: the columns it always had


STYLES = ("-", "--", ":", "-.")  # per origin, ours solid


OFFICIAL = "authors' log"  # the row name of an official training log's curve (semcl.report.official_logs)


def official_curve(log: pd.DataFrame, fmt: str, metric: str, where: str) -> pd.DataFrame:
    """An official log's `metric` per epoch in the curves' columns, as the row "authors' log (<format>)"."""
    if metric not in log.columns or log[metric].isna().all():
        raise ConfigError(f"{where}: the official log has no {metric!r} per epoch (it has: "
                          f"{', '.join(c for c in log.columns if c != 'epoch' and not log[c].isna().all())})")
    part = log[["epoch", metric]].dropna()
    return pd.DataFrame({"row": f"{OFFICIAL} ({fmt})", "epoch": part["epoch"].astype(int), "mean": part[metric],
                         "std": float("nan"), "min": part[metric], "max": part[metric], "n": 1, "nonfinite": 0})


def write_curves(table: Table, profile: str, store: Store, out_dir: Path, rows: str | None = None,
                 metric: str = "loss", options: str = "", origins: list | None = None,
                 official: tuple[str, pd.DataFrame, str] | None = None) -> tuple[pd.DataFrame, Path]:
    """`<out_dir>/<table>.<profile>.<metric>.{png,csv}`; returns the curves and the PNG's path. `origins`: the
    other origins' curves overlaid (history_curves). `official`: (format, per-epoch frame, file) of the authors'
    training log, drawn dashed in black beside ours, epoch by epoch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = history_curves(table, profile, store, rows, metric, options, origins, allow_empty=official is not None)
    if official is not None:
        fmt, log, where = official
        curve = official_curve(log, fmt, metric, where)
        data = pd.concat([data, curve.assign(origin=OFFICIAL) if origins else curve], ignore_index=True)
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    row_color = {row: colors[i % len(colors)] for i, row in enumerate(dict.fromkeys(data["row"]))}
    order = [o for o in dict.fromkeys(data["origin"]) if o != OFFICIAL] if origins else [None]
    for origin in order:
        part_of = data if origin is None else data[data["origin"] == origin]
        style = STYLES[order.index(origin) % len(STYLES)]
        for row, part in part_of.groupby("row", sort=False):
            if row.startswith(OFFICIAL):
                continue
            named = row if origin is None else f"{row} [{origin}]"
            line, = ax.plot(part["epoch"], part["mean"], lw=1.2, ls=style, color=row_color[row],
                            label=f"{named} (n={int(part['n'].max())})")
            if (part["n"] > 1).any():
                ax.fill_between(part["epoch"], part["min"], part["max"], color=line.get_color(),
                                alpha=0.15 if origin in (None, order[0]) else 0.07)
    for row, part in data[data["row"].str.startswith(OFFICIAL)].groupby("row", sort=False):
        ax.plot(part["epoch"], part["mean"], lw=1.2, ls="--", color="black", label=row)
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric)
    against = f"; origins {', '.join(f'{o} {STYLES[i % len(STYLES)]}' for i, o in enumerate(order))}" if origins else ""
    ax.set_title(f"{table.id} — profile {profile}: {metric} (mean, min–max over seeds){against}", fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    stem = f"{table.id.replace('/', '_')}.{profile}.{metric}"
    write_frame_csv(Path(out_dir) / f"{stem}.csv", data)
    save_figure_atomic(fig, Path(out_dir) / f"{stem}.png")
    plt.close(fig)
    return data, Path(out_dir) / f"{stem}.png"
