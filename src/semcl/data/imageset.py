"""In-memory labelled image sets and the small transforms every consumer needs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

Index = torch.Tensor | Sequence[int] | slice


@dataclass
class ImageSet:
    """A whole split held in memory as one uint8 tensor.

    Attributes:
        name: dataset name (``"cifar100"``, ...).
        images: uint8 ``[N, C, H, W]`` with ``C`` 1 or 3.
        labels: int64 ``[N]`` fine labels in ``[0, len(class_names))``.
        class_names: fine class names, indexed by label.
        coarse_labels: int64 ``[N]`` superclass labels where the dataset has them.
        coarse_names: superclass names, indexed by coarse label.
        coarse_of: optional explicit int64 ``[num_classes]`` fine→coarse map. When omitted
            it is derived from ``labels``/``coarse_labels``; it is stored so that a subset
            missing some classes still knows the full hierarchy.
    """

    name: str
    images: torch.Tensor
    labels: torch.Tensor
    class_names: list[str]
    coarse_labels: torch.Tensor | None = None
    coarse_names: list[str] | None = None
    coarse_of: torch.Tensor | None = None

    def __post_init__(self) -> None:
        # These are programming errors (readers validate user files and raise DataError
        # before building an ImageSet), so plain ValueError is the right type here.
        if self.images.dtype != torch.uint8 or self.images.dim() != 4:
            raise ValueError(f"images must be uint8 [N, C, H, W], got {self.images.dtype} "
                             f"{tuple(self.images.shape)}")
        if self.images.shape[1] not in (1, 3):
            raise ValueError(f"images must have 1 or 3 channels, got {self.images.shape[1]}")
        n = self.images.shape[0]
        self.labels = self.labels.to(torch.int64)
        if self.labels.shape != (n,):
            raise ValueError(f"labels must have shape ({n},), got {tuple(self.labels.shape)}")
        if self.coarse_labels is not None:
            self.coarse_labels = self.coarse_labels.to(torch.int64)
            if self.coarse_labels.shape != (n,):
                raise ValueError("coarse_labels must have the same length as labels")
            if self.coarse_names is None:
                raise ValueError("coarse_labels given without coarse_names")
            if self.coarse_of is None:
                self.coarse_of = _derive_coarse_of(
                    self.labels, self.coarse_labels, len(self.class_names)
                )

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def num_classes(self) -> int:
        """Number of fine classes (all of them, even those absent from this subset)."""
        return len(self.class_names)

    @property
    def fine_to_coarse(self) -> torch.Tensor | None:
        """int64 ``[num_classes]`` superclass of each fine class, or None without coarse labels."""
        return self.coarse_of

    def subset(self, idx: Index) -> ImageSet:
        """Rows ``idx`` (index tensor, boolean mask, list or slice), sharing names and hierarchy."""
        if not isinstance(idx, slice | torch.Tensor):
            idx = torch.as_tensor(list(idx), dtype=torch.int64)
        return ImageSet(
            name=self.name,
            images=self.images[idx],
            labels=self.labels[idx],
            class_names=self.class_names,
            coarse_labels=None if self.coarse_labels is None else self.coarse_labels[idx],
            coarse_names=self.coarse_names,
            coarse_of=self.coarse_of,
        )


def _derive_coarse_of(labels: torch.Tensor, coarse: torch.Tensor, num_classes: int) -> torch.Tensor:
    """Fine→coarse map read off paired labels; -1 for classes with no samples."""
    coarse_of = torch.full((num_classes,), -1, dtype=torch.int64)
    coarse_of[labels] = coarse  # any sample's coarse label; consistency is checked below
    if not torch.equal(coarse_of[labels], coarse):
        raise ValueError("a fine class appears with more than one coarse label")
    return coarse_of


def select_per_class(labels: torch.Tensor, n_per_class: int, seed: int) -> torch.Tensor:
    """Sorted indices of a deterministic balanced subset: ``n_per_class`` random rows per class.

    Classes with fewer rows contribute all of them. The draw depends only on ``labels``,
    ``n_per_class`` and ``seed``, so small profiles see the same images on every run.
    """
    if n_per_class < 0:
        raise ValueError(f"n_per_class must be >= 0, got {n_per_class}")
    labels = labels.to(torch.int64).cpu()
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(labels.numel(), generator=gen)
    # A stable sort by label keeps the random order inside each class, so the rank of a
    # row within its class is its position minus the start of that class's run.
    shuffled = labels[perm]
    order = torch.sort(shuffled, stable=True).indices
    by_class = shuffled[order]
    counts = torch.bincount(by_class)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(by_class.numel()) - starts[by_class]
    keep = perm[order[rank < n_per_class]]
    return torch.sort(keep).values


def conform(s: ImageSet, *, channels: int, size: int, chunk: int = 4096) -> ImageSet:
    """Return ``s`` with ``channels`` channels and ``size``×``size`` pixels, still uint8.

    Used to feed an out-of-distribution set to a model trained on another shape (e.g.
    28×28 MNIST to a 32×32 CIFAR model). Gray→RGB repeats the channel; RGB→gray uses
    the ITU-R 601 luminance weights torchvision uses. Resizing is bilinear with
    antialiasing so that downscaling (64→32) does not alias. Work is chunked to keep the
    float copy small for large sets.
    """
    if channels not in (1, 3):
        raise ValueError(f"channels must be 1 or 3, got {channels}")
    _, c, h, w = s.images.shape
    if c == channels and h == size and w == size:
        return s
    out = torch.empty((len(s), channels, size, size), dtype=torch.uint8)
    weights = torch.tensor([0.2989, 0.587, 0.114]).view(1, 3, 1, 1)
    for lo in range(0, len(s), chunk):
        x = s.images[lo : lo + chunk].float()
        if c == 3 and channels == 1:
            x = (x * weights).sum(dim=1, keepdim=True)
        elif c == 1 and channels == 3:
            x = x.expand(-1, 3, -1, -1)
        if (h, w) != (size, size):
            x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False,
                              antialias=True)
        # Out-of-place: after expand() the channels alias one buffer.
        out[lo : lo + chunk] = x.round().clamp(0, 255).to(torch.uint8)
    return ImageSet(
        name=s.name,
        images=out,
        labels=s.labels,
        class_names=s.class_names,
        coarse_labels=s.coarse_labels,
        coarse_names=s.coarse_names,
        coarse_of=s.coarse_of,
    )
