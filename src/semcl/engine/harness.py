"""The run harness: the one way a planned run is assembled and driven, for the job (semcl.engine.job), the
preflight (semcl.preflight.check), the doctor (semcl.launch.slurm.doctor.steps) and the GPU check
(scripts/gpucheck). Four callers building runs four ways could each prove another code path than the job runs.

    harness = RunHarness(run, env, cfg)
    cls, deps = harness.method_class(store)      # the row's Method class and the finished runs it builds on
    train_set, test_set = harness.data()         # Env.splits: the dataset rules, or a caller's stand-in reader
    method = harness.build(cls, deps, train_set) # on Env.device; Env.stand_in: the real dataset's class count
    history = harness.train(budget, hooks)       # semcl.engine.train under a Loop made from the Env
    metrics = harness.evaluate(train_set, test_set)

The shape is mmengine's (a short loop, the rest as hooks), not its Runner: the loop stays semcl.engine.train, and a
step hook is any object whose `step(batch)` is a context manager around the forward (the preflight's activation
meter and first-batch probe, the GPU check's clock). `Env` says what differs between the callers: real or stand-in
data, real or fake tensors (shapes only), the step budget, the evaluation subset, the checkpoint's folder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import torch

from semcl.engine.build import build_method, data_info, data_splits, method_class
from semcl.engine.evaluate import evaluate
from semcl.engine.train import Loop, train
from semcl.methods.base import DataInfo, Method
from semcl.runtime.checkpoint import seed_everything


class StepHook(Protocol):
    """What the loop calls around each step's forward (semcl.engine.train.Loop.hooks)."""

    def step(self, batch): ...


def real_splits(cfg, root: Path):
    """(train, test) by the dataset rules (semcl.engine.build.data_splits): the job's data."""
    return data_splits(cfg, root)


def stand_in_info(train_set, real_classes: int) -> DataInfo:
    """The DataInfo of the real dataset's class count over a stand-in training set (the stand-ins of the large
    sets have 20 classes; the model must have the real head)."""
    c_syn = train_set.num_classes
    pad = real_classes - c_syn
    counts = torch.bincount(train_set.labels, minlength=c_syn)
    f2c = train_set.fine_to_coarse
    if pad > 0:
        counts = torch.cat([counts, torch.ones(pad, dtype=counts.dtype)])
        if f2c is not None:
            f2c = torch.cat([f2c, torch.arange(pad, dtype=f2c.dtype) % (int(f2c.max()) + 1)])
    names = tuple(train_set.class_names) + tuple(f"class_{i}" for i in range(c_syn, real_classes))
    return DataInfo(max(real_classes, c_syn), train_set.images.shape[1], f2c, counts, names)


@dataclass(frozen=True)
class Env:
    """Where and how a run is driven.

    data_root   the data (the real root, or a stand-in root the caller wrote)
    checkpoint  the checkpoint file: the run folder's, or a scratch one (a dry run, a memory check)
    splits      (cfg, root) -> (train, test): real_splits, or a caller's stand-in reader
    stand_in    the model gets the real dataset's class count over a stand-in training set (stand_in_info)
    fake        the memory check's shapes-only start (TrainContext.shapes_only: fake tensors follow)
    budget      steps of the first epoch (a dry run); None: the configured schedule
    eval_subset (train, test) -> (train, test) the evaluations see (the preflight's few images); None: all
    log_history False where the checkpoint is another run's (a shared training): its history stays its own
    restore_only an evaluation of a finished training: the checkpoint is restored, never trained further
    """

    data_root: Path | None
    checkpoint: Path
    device: torch.device | None = None
    splits: Callable = real_splits
    stand_in: bool = False
    fake: bool = False
    budget: int | None = None
    eval_subset: Callable | None = None
    log_history: bool = True
    restore_only: bool = False


class RunHarness:
    """build -> train (with hooks) -> checkpoint -> evaluate of one planned run under an Env (module docstring)."""

    def __init__(self, run, env: Env, cfg=None) -> None:
        self.run, self.env = run, env
        self.cfg = run.config if cfg is None else cfg  # the config as driven (precision applied, a check's overrides)
        self.method: Method | None = None
        self.train_set = None

    def set(self, **changes) -> None:
        """The Env with `changes` (the job learns the data root and the training's checkpoint as it goes)."""
        self.env = replace(self.env, **changes)

    @property
    def device(self) -> torch.device:
        return self.env.device or torch.device("cpu")

    @property
    def checkpoint(self) -> Path:
        return self.env.checkpoint

    def method_class(self, store) -> tuple[type, list]:
        return method_class(self.run, store, self.cfg)

    def data(self):
        """(train, test) under Env.splits, after seeding every generator with the run's seed."""
        seed_everything(self.run.seed)
        return self.env.splits(self.cfg, self.env.data_root)

    def build(self, cls: type, deps: list, train_set, info: DataInfo | None = None) -> Method:
        """The method on the Env's device with its dependencies loaded (semcl.engine.build.build_method)."""
        if info is None:
            from semcl.data.registry import DATASETS

            info = stand_in_info(train_set, DATASETS[self.cfg.data.name].num_classes) if self.env.stand_in \
                else data_info(train_set)
        self.method = build_method(cls, self.cfg, info, deps, self.device, self.run.seed)
        self.train_set = train_set
        return self.method

    def loop(self, budget: int | None = None, hooks: tuple = ()) -> Loop:
        env = self.env
        return Loop(device=env.device, data_root=env.data_root, budget=env.budget if budget is None else budget,
                    hooks=tuple(hooks), log_history=env.log_history, restore_only=env.restore_only,
                    shapes_only=env.fake)

    def train(self, budget: int | None = None, hooks: tuple = ()) -> list[dict]:
        """The engine's loop (semcl.engine.train) on the built method; `budget` overrides the Env's."""
        return train(self.method, self.train_set, self.cfg, self.run.seed, self.checkpoint, self.loop(budget, hooks))

    def evaluate(self, train_set, test_set, logits_path: Path | None = None,
                 checkpoint_dir: Path | None = None) -> dict[str, float]:
        """Every enabled evaluation (semcl.engine.evaluate) on the Env's evaluation subset of the splits."""
        if self.env.eval_subset is not None:
            train_set, test_set = self.env.eval_subset(train_set, test_set)
        return evaluate(self.method, self.cfg, train_set, test_set, self.env.data_root, self.run.seed,
                        logits_path=logits_path, checkpoint_dir=checkpoint_dir)
