"""Save the test features of a run (float16) for the feature figures (RINCE Fig. 2 / 7 / 8).

A column `{eval: features}` turns on `eval.save_features`: the run writes `test_features.pt` into
its folder: {"features": float16 [N, D] backbone features (before any head, as the probe reads
them), "labels": int64 [N], "coarse": int64 [N] or None, "class_names", "coarse_names"}. The
column's number is N, the count of saved rows. Tables without such a column keep their run ids
(`save_features` stays None)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from semcl.evals.protocols.spec import Column, Evaluation

log = logging.getLogger("semcl.evaluate")
FEATURES_FILE = "test_features.pt"


@dataclass
class Settings:
    save_features: bool | None = None  # write the test features into the run folder (None = off)


def validate(column: Column, where: str) -> None:
    return None


def metric_key(column: Column, substitute: dict[str, str | None]) -> str | None:
    return "test_features_saved"


def describe(column: Column) -> str:
    return f"test features saved for the figures ({FEATURES_FILE}, float16): the count of rows"


def eval_config(columns: list[Column], substitute: dict[str, str | None], ev: dict[str, Any]) -> None:
    if columns:
        ev["save_features"] = True


def run(ctx) -> dict[str, float]:
    import torch

    if ctx.logits_path is None:  # validation passes have no run folder
        return {}
    path = ctx.logits_path.parent / FEATURES_FILE
    coarse = getattr(ctx.test, "coarse_labels", None)
    payload = {"features": ctx.test_features.to(torch.float16), "labels": ctx.test.labels.clone(),
               "coarse": None if coarse is None else coarse.clone(), "class_names": list(ctx.test.class_names),
               "coarse_names": list(getattr(ctx.test, "coarse_names", None) or [])}
    (ctx.save or torch.save)(payload, path)
    log.info("saved %d test features to %s", len(payload["labels"]), path)
    return {"test_features_saved": float(len(payload["labels"]))}


EVALUATION = Evaluation("features", None, validate, metric_key, describe, eval_config,
                        enabled=lambda cfg, method: bool(cfg.eval.save_features), run=run,
                        settings=Settings)
