"""Figures from a curve file each run wrote into its folder: `kind: pr_curve` (RINCE Fig. 6).

The video retrieval evaluation writes the mean precision–recall curve of its test queries to
`video_pr_curve.csv` (cutoff, recall, precision). This module draws, per data set of the paper
profile (one panel each: UCF101 pre-training retrieval, HMDB51 retrieval with the pre-trained backbone), one line per row:
the precision at each cutoff averaged over the row's seeds (a band of ± one sample std where n > 1),
against the seeds' mean recall. Runs of one row share the database, so their cutoffs align.
CSV: row, dataset, cutoff, recall, precision, precision_std, n.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from semcl.csv_files import write_frame_csv
from semcl.files import save_figure_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import Table
from semcl.report.figure_names import figure_stem
from semcl.store import Store

CURVE_FILES = {"pr_curve": "video_pr_curve.csv"}  # figure kind -> the run-folder file it reads


def read_curve(path: Path) -> pd.DataFrame:
    """One run's curve; a truncated or malformed file is a one-line error naming it."""
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: unreadable curve file ({err})") from None
    missing = {"cutoff", "recall", "precision"} - set(df.columns)
    if missing or df.empty:
        raise ValueError(f"{path}: key {sorted(missing)[0] if missing else 'cutoff'!r} missing or no rows")
    return df


def curve_points(table: Table, profile: str, store: Store) -> pd.DataFrame:
    """Mean curve per (row, dataset) over the seeds whose run wrote the file."""
    name = CURVE_FILES[table.figure["kind"]]
    # panels follow the paper profile's data set of each row: a small profile may map every set onto one
    # (mini: UCF101 and HMDB51 are both mnist_motion), and its panels still say which curve is which
    panel = {r.row_label: r.config.data.name for r in plan_runs(table, "paper")} if "paper" in table.profiles else {}
    per_key: dict[tuple[str, str], list[pd.DataFrame]] = {}
    for run in plan_runs(table, profile):
        path = store.run_dir(run.run_id) / name
        if path.exists():
            dataset = panel.get(run.row_label, run.config.data.name)
            if dataset != run.config.data.name:
                dataset = f"{dataset} (profile {profile}: {run.config.data.name})"
            per_key.setdefault((run.row_label, dataset), []).append(read_curve(path))
    if not per_key:
        raise ValueError(f"{table.path}: no run of {table.id} (profile {profile}) wrote {name}; "
                         f"run it first: semcl run {table.id} --profile {profile}")
    frames = []
    for (row, dataset), curves in per_key.items():
        n = min(len(c) for c in curves)  # equal for one database; guards a run on a different subset
        prec = np.stack([c["precision"].to_numpy()[:n] for c in curves])
        rec = np.stack([c["recall"].to_numpy()[:n] for c in curves])
        std = prec.std(axis=0, ddof=1) if len(curves) > 1 else np.full(n, np.nan)
        frames.append(pd.DataFrame({"row": row, "dataset": dataset, "cutoff": np.arange(1, n + 1),
                                    "recall": rec.mean(axis=0), "precision": prec.mean(axis=0),
                                    "precision_std": std, "n": len(curves)}))
    return pd.concat(frames, ignore_index=True)


def write_curve_figure(table: Table, profile: str, store: Store, out_dir: Path) -> tuple[pd.DataFrame, Path]:
    """Draw the curves into `<out_dir>/<stem>.{png,csv}`; returns (one summary line per curve, the PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = curve_points(table, profile, store)
    datasets = list(dict.fromkeys(data["dataset"]))
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.6 * len(datasets), 3.8), dpi=120, squeeze=False)
    for ax, dataset in zip(axes[0], datasets, strict=True):
        for row, part in data[data["dataset"] == dataset].groupby("row", sort=False):
            line, = ax.plot(part["recall"], part["precision"], label=f"{row} (n={part['n'].iloc[0]})", lw=1.2)
            if part["n"].iloc[0] > 1:
                ax.fill_between(part["recall"], part["precision"] - part["precision_std"],
                                part["precision"] + part["precision_std"], color=line.get_color(), alpha=0.15)
        ax.set_xlabel("recall")
        ax.set_ylabel("precision")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_title(dataset, fontsize=9)
        ax.legend(fontsize=6)
    fig.suptitle(f"{table.id} ({table.source}) — profile {profile}", fontsize=9)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = figure_stem(table, profile)
    write_frame_csv(out_dir / f"{stem}.csv", data)
    save_figure_atomic(fig, out_dir / f"{stem}.png")
    plt.close(fig)
    return summarise(data), out_dir / f"{stem}.png"


def summarise(data: pd.DataFrame) -> pd.DataFrame:
    """What `semcl figure` prints: per curve, the seeds and the area under the mean curve (AP)."""
    out = []
    for (row, dataset), part in data.groupby(["row", "dataset"], sort=False):
        r, p = part["recall"].to_numpy(), part["precision"].to_numpy()
        out.append({"row": row, "dataset": dataset, "n": int(part["n"].iloc[0]), "points": len(part),
                    "AP": float(((r[1:] - r[:-1]) * p[1:]).sum())})  # the retrieval module's AP rule
    return pd.DataFrame(out)
