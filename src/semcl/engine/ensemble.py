"""Logit-sum ensembles (GPaCo's ImageNet-LT / iNat "ensemble" rows): no training, the members'
saved test logits are summed (official evaluation, paco.md f) and scored like one model."""

from __future__ import annotations

from pathlib import Path

import torch

from semcl.engine.checkpoint import safe_load
from semcl.engine.evaluate import logit_metrics
from semcl.errors import ResultsError
from semcl.runs import Run, Store

LOGITS_FILE = "test_logits.pt"


def load_member(store: Store, run_id: str) -> dict:
    path = store.run_dir(run_id) / LOGITS_FILE
    if store.status(run_id)[0] != "done" or not path.exists():
        raise ResultsError(f"{path}: ensemble member {run_id} has no finished run with saved test logits")
    # weights_only: a member's folder may come from someone else's results store
    member = safe_load(path, remedy=f"delete it and rerun member {run_id}")
    if not isinstance(member, dict) or not {"logits", "labels", "train_counts"} <= set(member):
        raise ResultsError(f"{path}: not a test-logits file (keys logits, labels, train_counts); "
                           f"delete it and rerun member {run_id}")
    return member


def ensemble_metrics(run: Run, store: Store) -> dict[str, float]:
    """Top-1 / shot groups of the summed logits; latency = the members' latencies added (they run
    one after another), when every member measured it."""
    members = [load_member(store, rid) for rid in run.depends_on]
    first = members[0]
    for rid, m in zip(run.depends_on[1:], members[1:], strict=True):
        if m["logits"].shape != first["logits"].shape or not torch.equal(m["labels"], first["labels"]):
            raise ResultsError(f"{store.run_dir(rid) / LOGITS_FILE}: test set differs from the first member's "
                               f"({run.depends_on[0]}); ensemble members must share the test split")
    total = torch.stack([m["logits"].float() for m in members]).sum(dim=0)  # fp16 on disk, summed in fp32
    metrics = logit_metrics(total, first["labels"], first["train_counts"], run.config.eval.accuracy or [])
    latencies = [store.read_record(rid)["metrics"].get("latency_ms") for rid in run.depends_on]
    if getattr(run.config.eval, "latency", None) and all(v is not None for v in latencies):
        metrics["latency_ms"] = float(sum(latencies))
    metrics["members"] = len(members)
    return metrics


def base_state(store: Store, run_id: str) -> dict:
    """The `method` state of a finished base run's last checkpoint (second-stage rows)."""
    path: Path = store.run_dir(run_id) / "checkpoints" / "last.pt"
    if store.status(run_id)[0] != "done" or not path.exists():
        raise ResultsError(f"{path}: base run {run_id} is not finished (status: {store.status(run_id)[0]})")
    state = safe_load(path, remedy=f"delete it and rerun base run {run_id}")
    if not isinstance(state, dict) or "method" not in state:
        raise ResultsError(f"{path}: not a training checkpoint (no 'method' key); delete it and rerun base run {run_id}")
    return state["method"]
