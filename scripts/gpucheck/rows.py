"""The rows the GPU check trains and how big it makes them.

One paper-profile row per method family, built the way the engine builds a run (semcl.engine.build) on the
synthetic stand-in written in the real on-disk layout. On a GPU the row keeps its real model, image size, precision
and per-GPU batch; a dry run (CPU) shrinks model and images as `semcl check --reduced` does, so every section runs
the same code in seconds.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch

# family -> (table, row); rows that build on no other run (no teacher or base run to train first)
FAMILIES = {
    "ce": ("rince/tab2", "Cross-entropy"),
    "supcon": ("gpaco/tab5", "SupCon ResNet-50"),
    "rince": ("rince/tab2", "RINCE-in"),
    "paco": ("gpaco/tab5", "PaCo ResNet-50 (RandAugment)"),
    "hsa": ("hsa/linear", "CsMl, 800 ep, multi-crop (v2 best configuration)"),
    "scns": ("scns/sup-cifar10", "uniform negatives resnet18_cifar"),
    "vit": ("gpaco/tab13-vit", "GPaCo ViT-B"),
}
IMAGENET_N = 1_281_167  # the HSA mining's real N, for the N^2 extrapolation


@dataclass(frozen=True)
class Sizes:
    """What one mode of the check runs: the real thing on a GPU, tiny on the CPU (--dry-run)."""

    dry: bool
    warmup: int  # steps before the pace clock starts (cuDNN autotuning, the loader's ramp)
    steps: int  # timed steps
    ceiling_steps: int  # device-resident steps
    batch: int | None  # per-GPU batch; None: the row's
    precision_batch: int  # the fp32/fp16/bf16 comparison's batch
    mine_n: int
    mine_dim: int
    mine_k: int
    resume_per_class: int  # stand-in images per class of the resume rows

    def reduce(self):
        from semcl.preflight.check import Reduce

        if not self.dry:
            return None
        return Reduce(backbone="resnet_tiny", image_size=32, head_hidden=64, head_dim=32, drop_pretrained=True,
                      method={"arch": "vit_tiny_test", "checkpoint": None})


GPU = Sizes(dry=False, warmup=5, steps=40, ceiling_steps=20, batch=None, precision_batch=32, mine_n=200_000,
            mine_dim=2048, mine_k=10, resume_per_class=8)
DRY = Sizes(dry=True, warmup=1, steps=3, ceiling_steps=2, batch=4, precision_batch=4, mine_n=2_000, mine_dim=64,
            mine_k=10, resume_per_class=2)


def paper_run(family: str):
    """(run, resources) of the family's paper row (its first seed)."""
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table

    table_id, row = FAMILIES[family]
    table = get_table(table_id)
    run = next(r for r in plan_runs(table, "paper") if r.row_label == row)
    return run, table.resources_for(row, "paper")


def per_gpu_batch(run, resources) -> int:
    """The batch one GPU sees in the paper run (semcl check's batch_per_gpu)."""
    return max(1, run.config.optim.batch_size // max(1, resources.gpus))


def row_config(run, sizes: Sizes, batch: int, batches: int, overrides: dict | None = None):
    """The run's config on a stand-in of at least `batches` batches of `batch` (preflight's check_config: synthetic
    data, the batch; reduced in a dry run), then precision as the engine trains it (`fast`: bf16)."""
    from semcl.data.registry import DATASETS
    from semcl.preflight.check import check_config, stand_in_images_per_class
    from semcl.runtime.precision import effective_config

    classes = DATASETS[run.config.data.name].synthetic_classes
    per_class = max(stand_in_images_per_class(run), -(-batches * batch // classes) + 1)
    cfg = copy.deepcopy(effective_config(check_config(run, sizes.reduce(), batch, per_class)))
    for key, value in (overrides or {}).items():
        section, name = key.split(".", 1)
        setattr(getattr(cfg, section), name, value)
    return cfg, per_class


def _train_split(cfg, root: Path):
    """The stand-in's training split alone (the harness's Env.splits: the GPU check evaluates nothing)."""
    from semcl.data import load

    return load(cfg.data.name, root, "train", cfg.data.image_size), None


def build(run, cfg, per_class: int, work: Path, device: torch.device, checkpoint: Path, budget: int | None = None):
    """The run harness (semcl.engine.harness) with the method built as the job builds it, on the row's stand-in;
    the model has the real dataset's class count (Env.stand_in). `checkpoint`: where its training goes; `budget`:
    the steps of a dry run (None: the configured epochs)."""
    from semcl.data.synthetic import ensure_synthetic
    from semcl.engine.harness import Env, RunHarness
    from semcl.methods.registry import method_spec
    from semcl.runtime.checkpoint import rng_state, set_rng_state
    from semcl.store import Store

    d = cfg.data
    root = ensure_synthetic(work / "data" / f"{d.name}-{per_class}", [d.name], train_per_class=per_class,
                            test_per_class=1)
    harness = RunHarness(run, Env(root, checkpoint, device, splits=_train_split, stand_in=True, budget=budget), cfg)
    train_set, _ = harness.data()
    cls, deps = harness.method_class(Store(work / "store"))
    method = harness.build(cls, deps, train_set)
    # a stand-in weights file is drawn from the global RNG the first time only: every build must leave the same state
    state = rng_state()
    method_spec(cfg.method.name).stand_in.write_files(method, root)
    set_rng_state(state)
    return harness


def with_config(run, cfg):
    """The Run with `cfg` (and its id)."""
    from semcl.registry.plan import make_run_id

    return dataclasses.replace(run, config=cfg, run_id=make_run_id(cfg, run.seed))


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
