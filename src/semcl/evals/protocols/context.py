"""What an evaluation's `run` receives: the trained method, its run config, the data, and the shared
feature passes (computed once per run, however many evaluations read them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import torch

from semcl.config import RunConfig
from semcl.data import ImageSet, stats
from semcl.data.views.build import build_augment
from semcl.evals.features import extract_features


def outputs(fn, images, transform, batch_size: int = 256) -> torch.Tensor:
    """fn over every image in order; also for file-backed sets, whose images decode per batch.

    256 rather than extract_features' 1024: a [1024, 16, 28, 28] block falls out of the CPU cache, and the
    mini encoder is ~1.5x slower per image there (resnet_tiny, channels_last, one thread)."""
    if isinstance(images, torch.Tensor):
        return extract_features(fn, images, transform, batch_size=batch_size)
    gen = torch.Generator().manual_seed(0)
    return torch.cat([fn(transform(images[i:i + batch_size], gen)).float()
                      for i in range(0, images.shape[0], batch_size)])


class EvalCheckpoint:
    """One evaluation's state file: written atomically, read with weights_only (semcl.runtime.checkpoint)."""

    def __init__(self, path: Path):
        self.path = path

    def load(self) -> dict | None:
        from semcl.runtime.checkpoint import safe_load

        return safe_load(self.path) if self.path.exists() else None

    def save(self, state: dict) -> None:
        from semcl.runtime.checkpoint import save_atomic

        save_atomic(state, self.path)


@dataclass
class EvalContext:
    """One run's evaluation inputs. The method is in eval mode; `run` functions are called under
    torch.no_grad (the linear probe enables gradients for its own classifier)."""

    method: Any  # semcl.methods.Method: features(x), has_classifier + classify(x), stage_features(x)
    cfg: RunConfig
    train: ImageSet
    test: ImageSet
    data_root: Path | None
    seed: int
    logits_path: Path | None = None  # where the classifier's test logits go (ensembles sum them)
    save: Any = None  # save(tensors, path): the engine's atomic writer for files such as the logits
    shared: dict[str, Any] = field(default_factory=dict)  # results one evaluation leaves for a later one
    checkpoint_dir: Path | None = None  # where long evaluations keep their state between epochs (a requeue resumes)

    def checkpoint(self, name: str) -> EvalCheckpoint | None:
        """The resumable state of one evaluation (None: this evaluation keeps none, e.g. the preflight)."""
        return EvalCheckpoint(self.checkpoint_dir / f"eval-{name}.pt") if self.checkpoint_dir is not None else None

    @property
    def size(self) -> int:
        return self.train.images.shape[-1]

    def transform(self, recipe: str = "test"):
        """A view recipe with this dataset's statistics (the deterministic "test" one by default)."""
        mean, std = stats(self.cfg.data.name)
        return build_augment(recipe, size=self.size, mean=mean, std=std)

    @cached_property
    def test_transform(self):
        return self.transform("test")

    @cached_property
    def device(self) -> torch.device:
        return next(self.method.parameters()).device

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """The method's evaluation features (backbone, before any head), float32 on the CPU."""
        return self.method.features(x.to(self.device)).float().cpu()

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.method.classify(x.to(self.device)).float().cpu()

    def features_of(self, images) -> torch.Tensor:
        return outputs(self.encode, images, self.test_transform)

    @cached_property
    def train_features(self) -> torch.Tensor:
        """Features of the training images under the test transform (retrieval database, kNN memory)."""
        return self.features_of(self.train.images)

    @cached_property
    def test_features(self) -> torch.Tensor:
        return self.features_of(self.test.images)
