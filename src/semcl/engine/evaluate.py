"""Evaluate a trained method's backbone with the protocols its table's columns ask for.

All numbers are percentages (latency: milliseconds). Features: the backbone's pooled output (before any head), images
passed through the deterministic test transform with the in-distribution statistics.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from semcl.config import RunConfig
from semcl.data import ImageSet, build_augment, conform, load_dataset
from semcl.data.augment import STATS
from semcl.engine.checkpoint import save_atomic
from semcl.evals import (
    class_gaussian_auroc,
    extract_features,
    linear_probe,
    measure_latency,
    retrieval_scores,
    shot_group_accuracy,
    topk_accuracy,
)
from semcl.methods import Method

log = logging.getLogger("semcl.evaluate")


def _labels(s: ImageSet, which: str) -> torch.Tensor:
    if which == "fine":
        return s.labels
    if s.coarse_labels is None:
        raise ValueError(f"dataset {s.name} has no coarse labels for coarse retrieval")
    return s.coarse_labels


def _outputs(fn, images, transform, batch_size: int = 256) -> torch.Tensor:
    """fn over every image in order; also for file-backed sets, whose images decode per batch."""
    if isinstance(images, torch.Tensor):
        return extract_features(fn, images, transform)
    gen = torch.Generator().manual_seed(0)
    return torch.cat([fn(transform(images[i:i + batch_size], gen)).float()
                      for i in range(0, images.shape[0], batch_size)])


def logit_metrics(logits: torch.Tensor, labels: torch.Tensor, train_counts: torch.Tensor,
                  conventions: list[str]) -> dict[str, float]:
    """Top-1 of raw logits, and per shot-group convention the overall / many / medium / few accuracy."""
    metrics = {"head_top1": topk_accuracy(logits, labels, ks=(1,))[1]}
    for convention in conventions:
        groups = shot_group_accuracy(logits.argmax(dim=1), labels, train_counts, convention=convention)
        suffix = "" if convention == "paco" else f"_{convention}"
        metrics["acc_overall"] = groups["overall"]
        for g in ("many", "medium", "few"):  # NaN when a group has no class (e.g. few at IF 10)
            metrics[f"acc_{g}{suffix}"] = groups[g]
        log.info("accuracy (%s): %s", convention, {k: round(v, 2) for k, v in groups.items()})
    return metrics


def save_logits(path: Path, logits: torch.Tensor, labels: torch.Tensor, train_counts: torch.Tensor) -> None:
    save_atomic({"logits": logits.half(), "labels": labels.clone(), "train_counts": train_counts.clone()}, path)


def classify_latency(method: Method, images, transform, batch: int, device: torch.device) -> dict[str, float]:
    """Median / p90 ms of method.classify on the first `batch` test images (repeated when the test
    set is smaller), already transformed and on the method's device; the caller sets eval mode
    and no_grad. CUDA work is synchronised before every clock read."""
    if batch < 1:
        raise ValueError(f"eval.latency_batch must be >= 1, got {batch}")
    n = min(batch, images.shape[0])
    x = transform(images[:n], torch.Generator().manual_seed(0))
    x = x[torch.arange(batch) % n].to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    timing = measure_latency(method.classify, x, sync=sync)
    log.info("latency: median %.2f ms, p90 %.2f ms per batch of %d (%s)", timing["median_ms"], timing["p90_ms"],
             batch, device)
    return {"latency_ms": timing["median_ms"], "latency_p90_ms": timing["p90_ms"], "latency_batch": float(batch)}


@torch.no_grad()
def select_on_validation(method: Method, cfg: RunConfig, train: ImageSet, val: ImageSet) -> dict[str, float]:
    """Let a method pick its free parameter on the val split (Decouple tau-norm's tau), on the backbone's
    features of the val images under the test transform; returns what it chose."""
    mean, std = STATS[cfg.data.name]
    test_tf = build_augment("test", size=train.images.shape[-1], mean=mean, std=std)
    method.eval()
    device = next(method.parameters()).device
    feats = _outputs(lambda x: method.backbone(x.to(device)).float().cpu(), val.images, test_tf)
    chosen = method.select_on_validation(feats, val.labels)
    log.info("chosen on val (%d images): %s", len(val.labels), chosen)
    return chosen


@torch.no_grad()
def evaluate(method: Method, cfg: RunConfig, train: ImageSet, test: ImageSet, data_root: Path, seed: int,
             logits_path: Path | None = None) -> dict:
    mean, std = STATS[cfg.data.name]
    size = train.images.shape[-1]
    test_tf = build_augment("test", size=size, mean=mean, std=std)
    method.eval()
    backbone = method.backbone
    device = next(method.parameters()).device

    def encode(x: torch.Tensor) -> torch.Tensor:
        return backbone(x.to(device)).float().cpu()

    def classify(x: torch.Tensor) -> torch.Tensor:
        return method.classify(x.to(device)).float().cpu()

    metrics: dict[str, float] = {}
    if hasattr(method, "classify"):
        logits = _outputs(classify, test.images, test_tf)  # raw logits: no class prior at test time
        counts = torch.bincount(train.labels, minlength=train.num_classes)
        metrics.update(logit_metrics(logits, test.labels, counts, cfg.eval.accuracy or []))
        if logits_path is not None:  # what ensembles sum; float16 halves the file (ImageNet-LT: 100 MB)
            save_logits(logits_path, logits, test.labels, counts)
    if cfg.eval.latency:
        if hasattr(method, "classify"):
            metrics.update(classify_latency(method, test.images, test_tf, cfg.eval.latency_batch or 64, device))
        else:
            log.warning("latency: %s has no classifier to time; not measured", type(method).__name__)
    if cfg.eval.linear_probe:
        p = cfg.probe
        with torch.enable_grad():
            res = linear_probe(
                encode, train.images, train.labels, test.images, test.labels, num_classes=train.num_classes,
                train_transform=build_augment("crop_flip", size=size, mean=mean, std=std), test_transform=test_tf,
                epochs=p.epochs, lr=p.lr, batch_size=p.batch_size, momentum=p.momentum,
                weight_decay=p.weight_decay, milestones=tuple(p.milestones), gamma=p.gamma, augment=p.augment,
                seed=seed)
        metrics["linear_top1_last"], metrics["linear_top1_best"] = res.top1_last, res.top1_best
        log.info("linear probe: last %.2f best %.2f", res.top1_last, res.top1_best)
    if not (cfg.eval.retrieval or cfg.eval.ood):
        return metrics
    train_f = extract_features(encode, train.images, test_tf)
    test_f = extract_features(encode, test.images, test_tf)
    for which in cfg.eval.retrieval:
        scores = retrieval_scores(test_f, _labels(test, which), train_f, _labels(train, which),
                                  ks=tuple(cfg.eval.retrieval_ks))
        for k, v in scores.items():
            metrics[f"retrieval_{which}_{k}"] = 100.0 * v
        log.info("retrieval %s: %s", which, {k: round(100 * v, 2) for k, v in scores.items()})
    channels = train.images.shape[1]
    for name in cfg.eval.ood:
        out = conform(load_dataset(name, data_root, "test"), channels=channels, size=size)
        if cfg.eval.ood_limit:
            out = out.subset(torch.arange(min(cfg.eval.ood_limit, len(out.labels))))
        out_f = extract_features(encode, out.images, test_tf)
        metrics[f"ood_auroc_{name}"] = 100.0 * class_gaussian_auroc(train_f, train.labels, test_f, out_f)
        log.info("OOD %s: AUROC %.2f", name, metrics[f"ood_auroc_{name}"])
    return metrics
