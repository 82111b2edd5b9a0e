"""Training curves of a table's rows: per row, a history metric (default: loss) per epoch, the mean over the
seeds and a band from the seeds' minimum to maximum (with the sample std in the CSV).

A run's history is its live results/runs/<id>/history.jsonl (semcl.runtime.history) while it trains, else the
finished record's `history` (runs from before the live file). Runs with neither are left out.
CSV: row, epoch, mean, std, min, max, n, nonfinite (std empty where n = 1): the statistics are over the seeds whose
value is finite (n); `nonfinite` counts the seeds whose value is NaN or inf that epoch (a diverged run, said by
`semcl curves` in one line per row, never shown as a blank)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from semcl.errors import ConfigError, ResultsError
from semcl.files import save_figure_atomic, write_csv_atomic
from semcl.registry.tables import Table
from semcl.runs import Store, plan_runs
from semcl.runtime.history import HISTORY_FILE, read_history


def run_history(store: Store, run_id: str) -> list[dict]:
    path = store.run_dir(run_id) / HISTORY_FILE
    if path.exists():
        return read_history(path)
    record = store.read_record(run_id)
    return list((record or {}).get("history") or [])


def history_curves(table: Table, profile: str, store: Store, rows: str | None = None,
                   metric: str = "loss", options: str = "", allow_empty: bool = False) -> pd.DataFrame:
    """One line per (row, epoch): the metric's mean, std, min and max over the row's seeds that reached it.
    `options`: what plans these rows besides the table and profile (a variant's `--set`), for the hint."""
    try:
        pick = re.compile(rows) if rows else None
    except re.error as err:
        raise ConfigError(f"--rows {rows!r}: not a regular expression ({err})") from None
    values: dict[str, dict[int, list[float]]] = {}
    planned = [r for r in plan_runs(table, profile) if pick is None or pick.search(r.row_label)]
    if not planned:
        raise ConfigError(f"{table.path}: no row of {table.id} (profile {profile}) matches --rows {rows!r}")
    for run in planned:
        for entry in run_history(store, run.run_id):
            if metric in entry and entry[metric] is not None:
                values.setdefault(run.row_label, {}).setdefault(int(entry["epoch"]), []).append(float(entry[metric]))
    if not values and not allow_empty:
        raise ResultsError(f"{store.root / 'runs'}: no run of {table.id} (profile {profile}) has a history with "
                           f"key {metric!r} yet; run it first: semcl run {table.id} --profile {profile}{options}")
    out = []
    for row, per_epoch in values.items():
        for epoch in sorted(per_epoch):
            every = np.asarray(per_epoch[epoch], dtype=np.float64)
            v = every[np.isfinite(every)]  # a diverged seed (NaN / inf) is counted apart, never averaged
            out.append({"row": row, "epoch": epoch, "mean": v.mean() if len(v) else np.nan,
                        "std": v.std(ddof=1) if len(v) > 1 else np.nan, "min": v.min() if len(v) else np.nan,
                        "max": v.max() if len(v) else np.nan, "n": len(v), "nonfinite": len(every) - len(v)})
    return pd.DataFrame(out, columns=["row", "epoch", "mean", "std", "min", "max", "n", "nonfinite"])


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
                 metric: str = "loss", options: str = "", official: tuple[str, pd.DataFrame, str] | None = None
                 ) -> tuple[pd.DataFrame, Path]:
    """`<out_dir>/<table>.<profile>.<metric>.{png,csv}`; returns the curves and the PNG's path. `official`:
    (format, per-epoch frame, file) of the authors' training log, drawn dashed beside ours, epoch by epoch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = history_curves(table, profile, store, rows, metric, options, allow_empty=official is not None)
    if official is not None:
        fmt, log, where = official
        data = pd.concat([data, official_curve(log, fmt, metric, where)], ignore_index=True)
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    for row, part in data.groupby("row", sort=False):
        if row.startswith(OFFICIAL):
            ax.plot(part["epoch"], part["mean"], lw=1.2, ls="--", color="black", label=row)
            continue
        line, = ax.plot(part["epoch"], part["mean"], lw=1.2, label=f"{row} (n={int(part['n'].max())})")
        if (part["n"] > 1).any():
            ax.fill_between(part["epoch"], part["min"], part["max"], color=line.get_color(), alpha=0.15)
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric)
    ax.set_title(f"{table.id} — profile {profile}: {metric} (mean, min–max over seeds)", fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    stem = f"{table.id.replace('/', '_')}.{profile}.{metric}"
    write_csv_atomic(Path(out_dir) / f"{stem}.csv", data, index=False)
    save_figure_atomic(fig, Path(out_dir) / f"{stem}.png")
    plt.close(fig)
    return data, Path(out_dir) / f"{stem}.png"
