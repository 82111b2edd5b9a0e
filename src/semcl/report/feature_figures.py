"""Figures from the rows' saved test features (`eval: features` -> test_features.pt), RINCE Fig. 2/7/8.

- `tsne` (Fig. 2 / 8): one panel per row, a 2-D t-SNE (scikit-learn, PCA init, fixed seed) of the
  L2-normalised test features, coloured by superclass (coarse label; the fine label when the set
  has none), with one key naming each colour's superclass (or class). CSV: row, run_id, x, y, label,
  coarse (the colour's group id), group (its name).
- `similarity_hist` (Fig. 7): one panel per row, histograms (density) of the cosine similarity
  h(q, k) = <q, k> / (|q| |k|) between test pairs q != k by rank: same class / same superclass
  (other class) / other, each rank's mean marked (dashed, and in the key). The panels share their
  axes, and x spans the occupied bins of all panels (`x_range`), not the whole [-1, 1].
  CSV: row, run_id, rank, bin_lo, bin_hi, count, density.

Each row uses the first seed of the profile whose run saved its features. `max_points` caps the
test points (a seeded subsample, the same rows for every method) for t-SNE's cost and the
O(n^2) pairs of the histogram.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from semcl.csv_files import write_frame_csv
from semcl.evals.protocols.features import FEATURES_FILE
from semcl.files import save_figure_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import Table
from semcl.report.figure_names import figure_stem
from semcl.store import Store

RANKS = ("same class", "same superclass", "other")


def feature_runs(table: Table, profile: str, store: Store) -> list[tuple[str, str, Path]]:
    """(row, run_id, features file) for each row: its first seed whose run saved test features."""
    out, seen = [], set()
    for run in plan_runs(table, profile):
        path = store.run_dir(run.run_id) / FEATURES_FILE
        if run.row_label not in seen and path.exists():
            seen.add(run.row_label)
            out.append((run.row_label, run.run_id, path))
    return out


def load_features(path: Path) -> dict:
    import torch

    from semcl.errors import ResultsError
    from semcl.files import inflation_problem

    if problem := inflation_problem(path):
        raise ResultsError(f"{path}: refused: {problem}")
    return torch.load(path, map_location="cpu", weights_only=True)


def subsample(n: int, max_points: int | None, seed: int = 0) -> np.ndarray:
    """Sorted row indices: all rows, or `max_points` of them drawn without replacement (seeded)."""
    if max_points is None or n <= max_points:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_points, replace=False))


def _normalise(f: np.ndarray) -> np.ndarray:
    f = np.asarray(f, dtype=np.float64)
    return f / np.maximum(np.linalg.norm(f, axis=1, keepdims=True), 1e-12)


def tsne_embedding(features: np.ndarray, *, perplexity: float = 30.0, seed: int = 0) -> np.ndarray:
    """[N, 2] t-SNE of the L2-normalised features (PCA init, `seed`); perplexity capped at (N - 1) / 3."""
    from sklearn.manifold import TSNE

    n = len(features)
    perp = float(min(perplexity, max(1.0, (n - 1) / 3)))
    return TSNE(n_components=2, perplexity=perp, init="pca", random_state=seed).fit_transform(_normalise(features))


def rank_similarities(features: np.ndarray, labels: np.ndarray, coarse: np.ndarray | None) -> dict[str, np.ndarray]:
    """Cosine similarities of every unordered pair i < j, split by rank: same class, same superclass
    (different class; empty without coarse labels), other."""
    f = _normalise(features)
    sim = f @ f.T
    iu = np.triu_indices(len(f), k=1)
    s = sim[iu]
    same = labels[iu[0]] == labels[iu[1]]
    sup = (coarse[iu[0]] == coarse[iu[1]]) & ~same if coarse is not None else np.zeros_like(same)
    return {"same class": s[same], "same superclass": s[sup], "other": s[~same & ~sup]}


def histograms(sims: dict[str, np.ndarray], bins: int = 50) -> pd.DataFrame:
    """Per rank: counts and density (integrates to 1 over [-1, 1]) in `bins` equal bins."""
    edges = np.linspace(-1.0, 1.0, bins + 1)
    lines = []
    for rank in RANKS:
        counts, _ = np.histogram(np.clip(sims[rank], -1.0, 1.0), bins=edges)
        total = counts.sum()
        dens = counts / (total * (edges[1] - edges[0])) if total else np.zeros(bins)
        lines += [{"rank": rank, "bin_lo": edges[k], "bin_hi": edges[k + 1], "count": int(counts[k]),
                   "density": float(dens[k])} for k in range(bins)]
    return pd.DataFrame(lines)


RANK_COLOURS = ("tab:blue", "tab:orange", "tab:green")  # one colour per rank in every panel


def x_range(hist: pd.DataFrame) -> tuple[float, float]:
    """The x limits of the histogram panels: from the lowest to the highest occupied bin over every panel and
    rank, one bin width wider on each side, within [-1, 1] (the range of a cosine)."""
    full = hist[hist["count"] > 0]
    if full.empty:
        return -1.0, 1.0
    width = float((hist["bin_hi"] - hist["bin_lo"]).max())
    return max(-1.0, float(full["bin_lo"].min()) - width), min(1.0, float(full["bin_hi"].max()) + width)


KEY_MAX = 20  # tab20 has 20 distinct colours: more groups repeat colours, and the key lists none


def group_names(d: dict) -> tuple[list[str], str]:
    """The names the t-SNE colours stand for (superclasses where the set has them, else classes), and the
    key's title; a file without names gets the ids."""
    if d.get("coarse") is not None:
        return [str(n).replace("_", " ") for n in d.get("coarse_names") or []], "superclass"
    return [str(n).replace("_", " ") for n in d.get("class_names") or []], "class"


def group_colours(codes: np.ndarray) -> np.ndarray:
    """[N, 4] RGBA: group k gets the k-th tab20 colour (so the key can name each colour)."""
    import matplotlib

    return matplotlib.colormaps["tab20"](np.asarray(codes, dtype=np.int64) % KEY_MAX)


def colour_key(data: pd.DataFrame) -> list[tuple[int, str]]:
    """(group id, name) of each group the panels show, in id order; empty past KEY_MAX groups."""
    groups = data[["coarse", "group"]].drop_duplicates().sort_values("coarse")
    if len(groups) > KEY_MAX:
        return []
    return [(int(k), str(n)) for k, n in groups.itertuples(index=False)]


def _draw_key(fig, key: list[tuple[int, str]], title: str) -> None:
    """One key for every panel (the colours mean the same groups in each), right of the panels."""
    from matplotlib.lines import Line2D

    if not key:
        fig.text(0.99, 0.5, f"colour: {title} (more than {KEY_MAX}; colours repeat)", rotation=90,
                 ha="right", va="center", fontsize=7)
        return
    colours = group_colours(np.array([k for k, _ in key]))
    handles = [Line2D([], [], marker="o", ls="none", color=c, ms=5, label=name)
               for c, (_, name) in zip(colours, key, strict=True)]
    fig.legend(handles=handles, title=title, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=7,
               title_fontsize=8, frameon=False)


def _panels(n: int, share: bool = False):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, max(1, n))
    rows = (max(1, n) + cols - 1) // cols
    # shared axes: the same scale in every panel, so rows (methods) can be compared by eye
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.8 * rows), dpi=120, squeeze=False,
                             sharex=share, sharey=share)
    return plt, fig, axes.ravel()


def write_feature_figure(table: Table, profile: str, store: Store, out_dir: Path) -> tuple[pd.DataFrame, Path]:
    """Draw `table.figure` (kind tsne or similarity_hist) into `<out_dir>/<stem>.{png,csv}`."""
    kind, args = table.figure["kind"], dict(table.figure.get("args") or {})
    runs = feature_runs(table, profile, store)
    if not runs:
        raise ValueError(f"{table.path}: no run of {table.id} (profile {profile}) saved {FEATURES_FILE}; "
                         f"run it first: semcl run {table.id} --profile {profile}")
    max_points = args.get("max_points", 2000 if kind == "tsne" else 1000)
    frames = []
    plt, fig, axes = _panels(len(runs), share=kind == "similarity_hist")
    for ax, (label, run_id, path) in zip(axes, runs, strict=False):
        d = load_features(path)
        keep = subsample(len(d["labels"]), max_points, args.get("seed", 0))
        f = d["features"].float().numpy()[keep]
        y = d["labels"].numpy()[keep]
        c = d["coarse"].numpy()[keep] if d.get("coarse") is not None else None
        if kind == "tsne":
            xy = tsne_embedding(f, perplexity=args.get("perplexity", 30.0), seed=args.get("seed", 0))
            colour = c if c is not None else y
            names, key_title = group_names(d)
            ax.scatter(xy[:, 0], xy[:, 1], color=group_colours(colour), s=3, linewidths=0)
            frames.append(pd.DataFrame({"row": label, "run_id": run_id, "x": xy[:, 0], "y": xy[:, 1],
                                        "label": y, "coarse": colour,
                                        "group": [names[k] if k < len(names) else str(k) for k in colour]}))
            ax.set_xticks([])
            ax.set_yticks([])
        else:
            sims = rank_similarities(f, y, c)
            h = histograms(sims, bins=args.get("bins", 50))
            for rank, colour in zip(RANKS, RANK_COLOURS, strict=True):
                part = h[h["rank"] == rank]
                if part["count"].sum():
                    mean = float(np.mean(sims[rank]))
                    ax.stairs(part["density"], np.r_[part["bin_lo"].to_numpy(), part["bin_hi"].iloc[-1]],
                              color=colour, label=f"{rank} (mean {mean:.2f})")
                    ax.axvline(mean, color=colour, ls="--", lw=1)  # the mean, where the text reads the order
            ax.set_xlabel("cosine similarity h(q, k)")
            ax.set_ylabel("density (per rank)")
            ax.legend(fontsize=7, loc="upper left")
            frames.append(h.assign(row=label, run_id=run_id))
        ax.set_title(label, fontsize=9)
    if kind == "similarity_hist":  # one x range for all panels, fitted to the pairs: panels compare at a glance
        lo, hi = x_range(pd.concat(frames, ignore_index=True))
        for ax in axes[:len(runs)]:
            ax.set_xlim(lo, hi)
    for ax in axes[len(runs):]:
        ax.axis("off")
    fig.suptitle(f"{table.id} ({table.source}) — profile {profile}", fontsize=9)
    data = pd.concat(frames, ignore_index=True)
    if kind == "tsne":
        _draw_key(fig, colour_key(data), key_title)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = figure_stem(table, profile)
    write_frame_csv(out_dir / f"{stem}.csv", data)
    save_figure_atomic(fig, out_dir / f"{stem}.png", bbox_inches="tight")  # the key sits right of the panels
    plt.close(fig)
    return summarise(data, kind), out_dir / f"{stem}.png"


def summarise(data: pd.DataFrame, kind: str) -> pd.DataFrame:
    """What `semcl figure` prints: points per panel (tsne), or pairs and mean similarity per rank."""
    if kind == "tsne":
        return data.groupby(["row", "run_id"], sort=False).size().rename("points").reset_index()
    mid = (data["bin_lo"] + data["bin_hi"]) / 2
    g = data.assign(wsum=mid * data["count"]).groupby(["row", "run_id", "rank"], sort=False)
    out = g[["count", "wsum"]].sum().reset_index()
    return out.assign(mean_similarity=out["wsum"] / out["count"].where(out["count"] > 0)).drop(columns="wsum").rename(
        columns={"count": "pairs"})
