"""model-index.yml: the Papers-with-Code model-index of a bundle, in mmpretrain's layout (configs/*/metafile.yml).

    Collections: one per paper: Name, Paper {Title, URL (arXiv)}, README (the bundle's model card), Code
    Models:      one per table row with finished runs: Name, In Collection, Config (the first seed's resolved
                 config.yaml in the bundle), Weights (that run's model.safetensors), Metadata (epochs, batch size,
                 parameters counted on the built network, training resources and device-hours from the records,
                 run ids, seeds, code commit, the registry file and row), Results: one per task, with the Dataset
                 and Metrics keyed by the table's own column labels: {Mean, Std, N, Paper} (null where unknown).

FLOPs are not measured by the suite, so no Model carries them (mmpretrain's checker requires them; ours does not).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from semcl.registry.papers import Paper
from semcl.registry.tables import Table

# a column's evaluation protocol -> the model-index Task its numbers belong to (every protocol named: the
# test checks this covers semcl.evals.protocols.EVALUATIONS)
TASKS = {
    "accuracy": "Image Classification",
    "linear_probe": "Image Classification",
    "knn": "Image Classification",
    "stage_probe": "Image Classification",
    "robustness": "Image Classification (distribution shift)",
    "retrieval": "Image Retrieval",
    "ood": "Out-of-Distribution Detection",
    "segmentation": "Semantic Segmentation",
    "detection": "Object Detection",
    "video_accuracy": "Action Recognition",
    "video_retrieval": "Video Retrieval",
    "latency": "Inference Latency",
    "features": "Feature Extraction",
    "alignment": "Representation Learning (alignment and uniformity)",
    "gain": "Gain over a Baseline Row",
    "reported": "Reported by the Paper (not measured)",
}
README = "README.md"


def _number(x) -> float | None:
    """A float for YAML, None for NaN (pandas' missing value)."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def collection(paper: Paper) -> dict:
    out = {"Name": paper.paper, "Paper": {"Title": paper.title, "URL": paper.url}, "README": README}
    if paper.code:
        out["Code"] = paper.code
    return out


def dataset_name(config: Mapping) -> str:
    data = config.get("data") or {}
    name = str(data.get("name"))
    return f"{name} (synthetic stand-in)" if data.get("synthetic") else name


def results(table: Table, row_label: str, summ, dataset: str) -> list[dict]:
    """One Result per task, in the table's column order; Metrics keyed by column label: our mean, std (ddof=1),
    n over seeds and the paper's value."""
    cells = summ[summ["row"] == row_label].set_index("column")
    out: dict[str, dict] = {}
    for col in table.columns:
        s = cells.loc[col.key]
        n = int(s["n"])
        metric = {"Mean": _number(s["mean"]) if n else None, "Std": _number(s["std"]) if n > 1 else None, "N": n,
                  "Paper": _number(s["paper"])}
        task = TASKS[col.eval]
        out.setdefault(task, {"Task": task, "Dataset": dataset, "Metrics": {}})["Metrics"][col.label] = metric
    return list(out.values())


def model(table: Table, row_label: str, profile: str, records: list[dict], summ, *, registry_file: str,
          parameters: int | None, network: str | None, weights: str | None, config_file: str) -> dict:
    """The Model of one table row from its finished runs' records (seed order) and the table's summary."""
    first = records[0]["config"]
    devices = sorted({f"{r.get('world_size', 1)}x {r.get('device', 'unknown device')}" for r in records})
    hours = sum(float(r.get("wall_time_s") or 0.0) * int(r.get("world_size") or 1) for r in records) / 3600
    commits = sorted({str((r.get("git") or {}).get("commit")) for r in records})
    meta = {"Epochs": (first.get("schedule") or {}).get("epochs"),
            "Batch Size": (first.get("optim") or {}).get("batch_size")}
    if parameters is not None:
        meta["Parameters"] = parameters
    meta.update({
        "Architecture": network,
        "Training Resources": devices[0] if len(devices) == 1 else devices,
        "Device Hours": round(hours, 6),  # each run's wall time (training + evaluation) x its processes, summed
        "Run IDs": [r["run_id"] for r in records],
        "Seeds": [r.get("seed") for r in records],
        "Code Commit": commits[0] if len(commits) == 1 else commits,
        "Code Dirty": any(bool((r.get("git") or {}).get("dirty")) for r in records),
        "Registry Entry": registry_file,
        "Registry Row": row_label,
        "Profile": profile,
    })
    out = {"Name": f"{table.id} {row_label} ({profile})", "In Collection": table.paper, "Config": config_file,
           "Metadata": meta, "Results": results(table, row_label, summ, dataset_name(first))}
    if weights:
        out["Weights"] = weights
    return out
