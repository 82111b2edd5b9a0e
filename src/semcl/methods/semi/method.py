"""Semi-supervised fine-tuning (see semcl.methods.semi): the base run's backbone and a fresh linear
classifier, both trained with cross-entropy on the images of a SimCLR label-subset list only."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from semcl.errors import DataError
from semcl.methods.base import Batch, DataInfo, Dependency, Method, TrainContext
from semcl.models import LinearClassifier, build_backbone


def subset_list_path(train_paths: list[Path], subset: str) -> Path:
    """`<root>/imagenet/semi/<subset>.txt` for training images at `<root>/imagenet/train/<wnid>/<file>`."""
    return Path(train_paths[0]).parents[2] / "semi" / f"{subset}.txt"


def read_subset(list_path: Path, train_paths: list[Path]) -> torch.Tensor:
    """Sorted int64 positions of the listed file names among the training images; one-line DataError
    for a missing list, an empty one, or a name that is not a training image."""
    if not list_path.is_file():
        raise DataError(f"{list_path}: label-subset list not found (SimCLR's 1percent.txt / 10percent.txt, "
                        f"one training file name per line)")
    where = {Path(p).name: i for i, p in enumerate(train_paths)}
    rows = []
    for n, line in enumerate(list_path.read_text().splitlines(), 1):
        name = line.strip()
        if not name:
            continue
        if name not in where:
            raise DataError(f"{list_path}: line {n}: {name!r} is not an image of the training set")
        rows.append(where[name])
    if not rows:
        raise DataError(f"{list_path}: lists no image")
    return torch.tensor(sorted(set(rows)), dtype=torch.long)


def load_backbone(backbone: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """The base run's `backbone.*` weights (the query encoder of MoCo / HSA), strictly."""
    sub = {k[len("backbone."):]: v for k, v in state.items() if k.startswith("backbone.")}
    missing, unexpected = backbone.load_state_dict(sub, strict=False)
    if missing or unexpected:
        raise ValueError(f"base state does not fit 'backbone.*': missing {sorted(missing)[:3]}, "
                         f"unexpected {sorted(unexpected)[:3]}")


class SemiFinetune(Method):
    """Whole backbone + new classifier, cross-entropy on the labelled subset:
    L = -(1/B) sum_i log softmax(W f(x_i) + b)[y_i], every parameter trained."""

    num_views = 1
    has_classifier = True

    def __init__(self, cfg, info: DataInfo):
        super().__init__(cfg, info)
        self.backbone = build_backbone(cfg.model.backbone, in_channels=info.in_channels)
        self.classifier = LinearClassifier(self.backbone.out_dim, info.num_classes)
        self.subset_name = cfg.method.subset
        self.classifier_lr_scale = cfg.method.classifier_lr_scale
        # positions of the labelled images in the training set, re-read from the list on every start
        # (also after a resume), so not part of the checkpoint
        self.subset = torch.empty(0, dtype=torch.long)

    def load_dependencies(self, deps: list[Dependency]) -> None:
        (base,) = deps
        load_backbone(self.backbone, base.load_state())

    def on_train_start(self, ctx: TrainContext) -> None:
        paths = getattr(ctx.train_set, "paths", None)
        if not paths:
            raise DataError("semi_finetune: the training set is not file-backed ImageNet folders "
                            "(the label subsets are lists of file names)")
        self.subset = read_subset(subset_list_path(paths, self.subset_name), paths)

    def epoch_size(self, n: int) -> int:
        """An epoch visits the labelled subset once."""
        return int(self.subset.numel()) if self.subset.numel() else n

    def epoch_order(self, labels: torch.Tensor, num_classes: int, generator: torch.Generator,
                    batch_size: int) -> torch.Tensor:
        return self.subset[torch.randperm(self.subset.numel(), generator=generator)]

    def param_groups(self) -> list[dict]:
        return [{"params": list(self.backbone.parameters())},
                {"params": list(self.classifier.parameters()), "lr_scale": self.classifier_lr_scale}]

    def configure_optimizer(self, optim) -> torch.optim.Optimizer:
        """SGD with Nesterov momentum (the SimCLR fine-tuning recipe); weight decay from the config (0 there)."""
        return torch.optim.SGD(self.param_groups(), lr=optim.lr, momentum=optim.momentum,
                               weight_decay=optim.weight_decay, nesterov=optim.momentum > 0)

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        return {"loss": F.cross_entropy(self.classify(batch.views[0]), batch.labels)}

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.backbone(x))
