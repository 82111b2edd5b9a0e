"""The one strict run-config schema.

A run's config is built in layers (schema defaults -> preset -> row overrides -> profile
overrides) as a nested dict, then validated into dataclasses (semcl.run_config.build_config, one layer
up, which adds the method section from the method registry): unknown keys, wrong types and
unknown methods raise ConfigError naming the file and the dotted key.

Run-id stability: `hashable_config` drops launch-only keys and every key whose value is
None, so a field added later with default None ("behave as before") leaves old run ids intact.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from semcl.errors import ConfigError
from semcl.schema import NON_NEGATIVE, POSITIVE, SEED, at_most

# upper bounds of the sized knobs: far above any paper's value, low enough that a typo of a few zeros is one
# line at load instead of an allocation (or a months-long job) that dies after submission
PER_CLASS = {**POSITIVE, **at_most(100_000)}  # images per class (ImageNet has ~1,300)
SYNTHETIC_PER_CLASS = {**POSITIVE, **at_most(1_000, "synthetic sets are for smoke runs")}
IMAGES = {**POSITIVE, **at_most(10_000_000)}  # images of a test set
SIDE = {**POSITIVE, **at_most(4_096)}  # pixels
WIDTH = {**POSITIVE, **at_most(65_536)}  # features of a layer
BATCH = {**POSITIVE, **at_most(65_536)}
EPOCHS = at_most(100_000)  # epochs, and epoch numbers (milestones, warm-up, patience)
TOP_K = {**POSITIVE, **at_most(100_000)}  # k of retrieval R@k and k-NN


@dataclass
class DataConfig:
    name: str = "cifar100"
    train_per_class: int | None = field(default=None, metadata=PER_CLASS)  # balanced subset for small profiles
    test_limit: int | None = field(default=None, metadata=IMAGES)  # first N test images (fixed, seed-independent)
    augment: str = "supcon"  # view recipe(s), see semcl.data.views.recipes (checked by semcl.run_config)
    synthetic: bool = False  # write synthetic data in the real format (smoke profile)
    synthetic_train_per_class: int = field(default=10, metadata=SYNTHETIC_PER_CLASS)
    synthetic_test_per_class: int = field(default=5, metadata=SYNTHETIC_PER_CLASS)
    # Long-tailed training subset by the CIFAR-LT rule n_i = int(n_max * IF**(-i / (C - 1)))
    # (semcl.data.longtail); None = the full training set.
    imbalance_factor: float | None = field(default=None, metadata=POSITIVE)
    lt_max_per_class: int | None = field(default=None, metadata=PER_CLASS)  # n_max; None = the training set's images per class
    lt_seed: int | None = field(default=None, metadata=SEED)  # seed of the per-class selection; None = 0 (official code)
    test_split: str | None = None  # split the test metrics read (None = "test"; "val" for Places-LT code)
    image_size: int | None = field(default=None, metadata=SIDE)  # file-backed sets: side of the decoded image (None = 224)


@dataclass
class ModelConfig:
    backbone: str = "resnet50_cifar"
    head_hidden: int = field(default=2048, metadata=WIDTH)
    head_dim: int = field(default=128, metadata=WIDTH)
    head_layers: int = field(default=2, metadata={**POSITIVE, **at_most(64)})
    pretrained: str | None = None  # torchvision-format state dict (.pth) to start the backbone from
    train_only: str | None = None  # train only the convolutions under this prefix (BN, heads always train)
    # "channels_last": 4-D weights (and so every conv activation) in NHWC; about 1.5x faster for the small CPU
    # ResNets here (bench/bench_methods.py) and the layout tensor cores prefer; None = PyTorch's default NCHW
    memory_format: str | None = None


@dataclass
class OptimConfig:
    lr: float = field(default=0.5, metadata=NON_NEGATIVE)
    momentum: float = field(default=0.9, metadata=NON_NEGATIVE)
    weight_decay: float = field(default=1e-4, metadata=NON_NEGATIVE)
    batch_size: int = field(default=512, metadata=BATCH)
    cosine: bool = True
    lr_decay_rate: float = field(default=0.1, metadata=NON_NEGATIVE)  # cosine floor = lr * rate**3 (SupCon-style schedule)
    warmup_epochs: int = field(default=10, metadata={**NON_NEGATIVE, **EPOCHS})  # linear warm-up from warmup_from; 0 disables it
    warmup_from: float = field(default=0.01, metadata=NON_NEGATIVE)
    # step schedule (used when cosine is false): lr x step_gamma at each epoch in step_milestones
    step_milestones: list[int] | None = field(default=None, metadata={**NON_NEGATIVE, **EPOCHS})
    step_gamma: float | None = field(default=None, metadata=POSITIVE)
    # None: SupCon/RINCE scripts (per-iteration warm-up from warmup_from, cosine floor lr * rate**3);
    # "paco": the official PaCo/GPaCo per-epoch rule (semcl.engine.schedule; warmup_from, rate unused)
    # "mae": MAE fine-tuning, per iteration: linear warm-up from 0, then half-cycle cosine to min_lr
    # "plateau": lr x plateau_factor whenever the monitored epoch loss has not improved for more than
    # plateau_patience epochs (torch's ReduceLROnPlateau rule, recomputed from the run's loss history)
    shape: str | None = None
    min_lr: float | None = field(default=None, metadata=NON_NEGATIVE)  # floor of shapes "mae" and "plateau" (None = 0)
    plateau_factor: float | None = field(default=None, metadata=POSITIVE)  # None = 0.1
    plateau_patience: int | None = field(default=None, metadata={**NON_NEGATIVE, **EPOCHS})  # None = 10
    # gradient accumulation: the optimiser steps every accum_steps batches of batch_size (MAE
    # --accum_iter; effective batch = accum_steps x batch_size); None = 1, every batch
    accum_steps: int | None = field(default=None, metadata={**POSITIVE, **at_most(4_096)})
    # mixed precision of the forward pass (official Places-LT / ResNet-200 scripts: fp16 with loss
    # scaling); None = float32 throughout
    amp: str | None = None
    # the run's arithmetic as a named setting (semcl.runtime.precision): None = official (what the paper's code
    # did), "fast" = bf16 autocast + channels_last + cudnn.benchmark; set by `semcl --precision`, not by rows
    precision: str | None = None


@dataclass
class ScheduleConfig:
    # 0 is allowed: rows that train nothing (Decouple tau-norm on a base run, ensembles) run no epoch
    epochs: int = field(default=1000, metadata={**NON_NEGATIVE, **EPOCHS})


@dataclass
class ProbeConfig:
    """Linear probe on the frozen backbone (RINCE protocol)."""

    epochs: int = field(default=100, metadata={**POSITIVE, **EPOCHS})
    lr: float = field(default=5.0, metadata=NON_NEGATIVE)
    batch_size: int = field(default=512, metadata=BATCH)
    momentum: float = field(default=0.9, metadata=NON_NEGATIVE)
    weight_decay: float = field(default=0.0, metadata=NON_NEGATIVE)
    milestones: list[int] = field(default_factory=lambda: [60, 75, 90], metadata={**NON_NEGATIVE, **EPOCHS})
    gamma: float = field(default=0.2, metadata=POSITIVE)
    augment: bool = True  # False: cached features of un-augmented images (fast variant)
    # the training crops when augmenting: a single-view data.augment recipe (None = crop_flip,
    # RandomResizedCrop 0.2-1 + flip: RINCE / SupCon; MoCo's lincls is crop_flip-c8, scale 0.08-1)
    recipe: str | None = None
    init: str | None = None  # linear layer init: None = uniform (nn.Linear's) | normal (N(0, 0.01), bias 0: MoCo)


# allowed values of string fields; a method's own (`method.*`) come from its MethodSpec.choices, the
# evaluations' (`eval.*`) from each Evaluation.choices
CHOICES: dict[str, set[str]] = {
    "data.test_split": {"test", "val"},
    "optim.shape": {"paco", "mae", "plateau"},
    "optim.amp": {"fp16", "bf16"},
    "optim.precision": {"fast"},  # official is no value
    "model.memory_format": {"channels_last"},
}


@dataclass
class RunConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    method: Any = None  # the dataclass of METHODS[method.name].schema
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    probe: ProbeConfig = field(default_factory=ProbeConfig)
    # the dataclass the evaluations' settings assemble into (semcl.evals.protocols.eval_config_type), built by
    # semcl.run_config.build_config: this layer knows no evaluation
    eval: Any = None


SECTIONS: dict[str, type] = {
    "data": DataConfig,
    "model": ModelConfig,
    "optim": OptimConfig,
    "schedule": ScheduleConfig,
    "probe": ProbeConfig,
}
# sections whose dataclass a layer above assembles: the method's from the method registry, `eval` from the evaluations
ASSEMBLED = ("method", "eval")


def set_dotted(tree: dict, key: str, value: Any, *, where: str) -> None:
    """Set `a.b` = value in a nested dict; the first part must be a config section."""
    parts = key.split(".")
    if len(parts) != 2 or parts[0] not in (*SECTIONS, *ASSEMBLED):
        raise ConfigError(f"{where}: key '{key}' is not <section>.<field> with a section in {sorted((*SECTIONS, *ASSEMBLED))}")
    tree.setdefault(parts[0], {})[parts[1]] = copy.deepcopy(value)


def merge(tree: dict, layer: dict, *, where: str) -> None:
    """Merge a layer given either as nested sections or as dotted keys."""
    for key, value in layer.items():
        if "." in key:
            set_dotted(tree, key, value, where=where)
        elif isinstance(value, dict) and (key in SECTIONS or key in ASSEMBLED):
            for sub, v in value.items():
                set_dotted(tree, f"{key}.{sub}", v, where=where)
        elif key == "method" and isinstance(value, str):
            set_dotted(tree, "method.name", value, where=where)
        else:
            raise ConfigError(f"{where}: key '{key}' is not a config section or <section>.<field>")


def config_to_dict(cfg: RunConfig) -> dict:
    return dataclasses.asdict(cfg)


def hashable_config(cfg: RunConfig) -> dict:
    """The part of the config that defines the result (see module docstring)."""

    def prune(d: dict) -> dict:
        return {k: prune(v) if isinstance(v, dict) else v for k, v in d.items() if v is not None}

    return prune(config_to_dict(cfg))
