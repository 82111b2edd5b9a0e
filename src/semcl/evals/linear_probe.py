"""Linear evaluation of a frozen encoder (RINCE protocol).

The projection head is removed and the whole encoder, BatchNorm included, is frozen:
the caller puts it in eval mode and every ``encode`` call here runs under
``torch.no_grad()``. One linear layer ``W f + b`` is trained with cross-entropy on the
encoder features ``f``: SGD with lr 5, momentum 0.9, no weight decay, batch 512, 100
epochs, lr multiplied by 0.2 at epochs 60, 75 and 90. After every epoch the probe is
evaluated on the test set; the paper reports the last epoch's top-1, and the best
epoch is kept separately for reference.

Two ways to feed the training set:

* ``augment=True`` (the paper): every epoch each training image is freshly augmented
  with ``train_transform`` and encoded.
* ``augment=False`` (fast variant): training images are encoded once with
  ``test_transform`` and the probe trains on those cached features.

Test features are always encoded once with ``test_transform``. Features are used as
the encoder returns them (no extra normalisation): normalise inside ``encode`` if a
method needs it.

Determinism: one ``torch.Generator`` seeded with ``seed`` drives, in this order, the
linear-layer initialisation, the feature caching, and per epoch the shuffle and the
augmentations; the global RNG is never touched. On CPU the result is reproducible bit
for bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from semcl.evals.features import Encoder, Transform, check_images, encode_batch, extract_features


@dataclass
class ProbeResult:
    """Outcome of :func:`linear_probe`.

    Attributes:
        top1_last: test top-1 (percent) after the final epoch, the number reported.
        top1_best: best test top-1 (percent) over all epochs.
        history: test top-1 (percent, 0-100) after each epoch.
        lr_history: learning rate used during each epoch.
    """

    top1_last: float
    top1_best: float
    history: list[float]
    lr_history: list[float] = field(default_factory=list)


def lr_at_epoch(epoch: int, lr: float, milestones: Sequence[int], gamma: float) -> float:
    """Learning rate of 0-based ``epoch``: ``lr * gamma ** #{m in milestones : m <= epoch}``.

    A milestone ``m`` counts completed epochs, as ``MultiStepLR`` stepped once per
    epoch: with milestone 60 epochs ``0..59`` use ``lr`` and epoch ``60`` onwards (the
    61st epoch) uses ``lr * gamma``.
    """
    return lr * gamma ** sum(1 for m in milestones if m <= epoch)


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _check_labels(labels: object, n: int, num_classes: int, name: str) -> torch.Tensor:
    if not isinstance(labels, torch.Tensor) or labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(f"{name} must be a 1-D tensor with {n} entries")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer class indices, got {labels.dtype}")
    if int(labels.min()) < 0 or int(labels.max()) >= num_classes:
        raise ValueError(f"{name} must lie in [0, {num_classes})")
    return labels.long()


def _top1(
    feats: torch.Tensor,
    labels: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    batch_size: int,
) -> float:
    correct = 0
    with torch.no_grad():
        for start in range(0, feats.shape[0], batch_size):
            logits = F.linear(feats[start : start + batch_size], weight, bias)
            # argmax takes the first maximum, so tied logits resolve deterministically.
            correct += int((logits.argmax(dim=1) == labels[start : start + batch_size]).sum())
    return 100.0 * correct / feats.shape[0]


def linear_probe(
    encode: Encoder,
    train_images: torch.Tensor,
    train_labels: torch.Tensor,
    test_images: torch.Tensor,
    test_labels: torch.Tensor,
    *,
    num_classes: int,
    train_transform: Transform,
    test_transform: Transform,
    epochs: int = 100,
    lr: float = 5.0,
    batch_size: int = 512,
    momentum: float = 0.9,
    weight_decay: float = 0.0,
    milestones: Sequence[int] = (60, 75, 90),
    gamma: float = 0.2,
    augment: bool = True,
    seed: int = 0,
    eval_batch_size: int = 1024,
    test_feats: torch.Tensor | None = None,
    train_feats: torch.Tensor | None = None,
    train_views_from: Any = None,
    init: str = "uniform",
    checkpoint: Any = None,
) -> ProbeResult:
    """Train a linear classifier on frozen features and track test top-1 per epoch.

    Args:
        encode: frozen encoder ``[B, C, H, W] float -> [B, D]`` (already in eval mode).
        train_images, test_images: ``uint8`` tensors ``[N, C, H, W]`` or file-backed sets
            ``images`` (``LazyImages``), decoded one batch at a time.
        train_labels, test_labels: integer tensors ``[N]`` in ``[0, num_classes)``.
        num_classes: output size of the linear layer.
        train_transform: random augmentation ``(uint8_batch, generator) -> float batch``.
        test_transform: deterministic ``(uint8_batch, generator) -> float batch``.
        epochs, lr, batch_size, momentum, weight_decay: SGD settings; the last training
            batch of an epoch may be smaller than ``batch_size`` (nothing is dropped).
        milestones, gamma: step schedule, see :func:`lr_at_epoch`.
        augment: re-augment and re-encode training images every epoch (paper) or
            train on features cached once with ``test_transform`` (fast variant).
        seed: seeds the single generator behind all randomness.
        eval_batch_size: images per ``encode`` call when caching, and rows per
            evaluation step.
        test_feats, train_feats: the same features already computed by the caller (the
            evaluation context shares one pass per split between the evaluations); they must
            be ``encode`` of the images under ``test_transform``, which draws nothing from the
            generator, so the result is bit-identical to caching them here.
        train_views_from: what ``train_transform`` cuts its crops from when augmenting, row for
            row with ``train_images`` (file-backed sets: their whole images, as torchvision's
            RandomResizedCrop sees the PIL image); None = ``train_images``.
        init: ``uniform`` (``nn.Linear``'s U(-1/sqrt(D), 1/sqrt(D)), weight and bias) or
            ``normal`` (weight N(0, 0.01), bias 0: MoCo's lincls).

    Returns:
        :class:`ProbeResult` with accuracies in percent.
    """
    check_images(train_images, "train_images")
    check_images(test_images, "test_images")
    num_classes = _positive_int(num_classes, "num_classes")
    y_train = _check_labels(train_labels, train_images.shape[0], num_classes, "train_labels")
    y_test = _check_labels(test_labels, test_images.shape[0], num_classes, "test_labels")
    epochs = _positive_int(epochs, "epochs")
    batch_size = _positive_int(batch_size, "batch_size")
    eval_batch_size = _positive_int(eval_batch_size, "eval_batch_size")
    if not (lr > 0 and math.isfinite(lr)):
        raise ValueError(f"lr must be a positive number, got {lr!r}")
    if not (0.0 <= momentum < 1.0) or not weight_decay >= 0.0 or not gamma > 0.0:
        raise ValueError("need 0 <= momentum < 1, weight_decay >= 0 and gamma > 0")
    if any(isinstance(m, bool) or not isinstance(m, int) or m < 1 for m in milestones):
        raise ValueError(f"milestones must be positive epoch counts, got {tuple(milestones)!r}")

    gen = torch.Generator().manual_seed(seed)

    # Test features first: their size fixes the layer shape and their device is where
    # the probe lives.
    if test_feats is None:
        test_feats = extract_features(encode, test_images, test_transform, batch_size=eval_batch_size, generator=gen)
    device, dim = test_feats.device, test_feats.shape[1]
    y_test = y_test.to(device)
    y_train = y_train.to(device)

    # Same distribution as torch.nn.Linear's default init, U(-1/sqrt(D), 1/sqrt(D)),
    # but drawn from our generator so the global RNG state plays no part.
    if init == "normal":
        weight = torch.empty(num_classes, dim).normal_(0.0, 0.01, generator=gen)
        bias = torch.zeros(num_classes)
    elif init == "uniform":
        bound = 1.0 / math.sqrt(dim)
        weight = torch.empty(num_classes, dim).uniform_(-bound, bound, generator=gen)
        bias = torch.empty(num_classes).uniform_(-bound, bound, generator=gen)
    else:
        raise ValueError(f"init must be 'uniform' or 'normal', got {init!r}")
    weight = weight.to(device).requires_grad_()
    bias = bias.to(device).requires_grad_()
    optimizer = torch.optim.SGD([weight, bias], lr=lr, momentum=momentum, weight_decay=weight_decay)

    if augment:
        train_feats = None
    elif train_feats is None:
        train_feats = extract_features(encode, train_images, test_transform, batch_size=eval_batch_size, generator=gen)

    n_train = train_images.shape[0]
    history: list[float] = []
    lr_history: list[float] = []
    first = 0
    if checkpoint is not None and (state := checkpoint.load()) is not None:
        # a requeued evaluation: the classifier, optimiser and generator after its last finished epoch
        if tuple(state["weight"].shape) != tuple(weight.shape) or int(state["epochs"]) != epochs:
            raise ValueError(f"{checkpoint.path}: a probe checkpoint of another shape or schedule; delete it")
        with torch.no_grad():
            weight.copy_(state["weight"].to(device))
            bias.copy_(state["bias"].to(device))
        optimizer.load_state_dict(state["optimizer"])
        gen.set_state(state["generator"])
        first, history, lr_history = int(state["epoch"]), list(state["history"]), list(state["lr_history"])
    for epoch in range(first, epochs):
        epoch_lr = lr_at_epoch(epoch, lr, milestones, gamma)
        for group in optimizer.param_groups:
            group["lr"] = epoch_lr
        order = torch.randperm(n_train, generator=gen)
        for start in range(0, n_train, batch_size):
            idx = order[start : start + batch_size]
            if train_feats is None:
                batch = train_transform((train_images if train_views_from is None else train_views_from)[idx], gen)
                feats = encode_batch(encode, batch).to(device)
            else:
                feats = train_feats[idx.to(device)]
            loss = F.cross_entropy(F.linear(feats, weight, bias), y_train[idx.to(device)])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        history.append(_top1(test_feats, y_test, weight, bias, eval_batch_size))
        lr_history.append(epoch_lr)
        if checkpoint is not None and epoch + 1 < epochs:
            checkpoint.save({"epoch": epoch + 1, "epochs": epochs, "weight": weight.detach().cpu(),
                             "bias": bias.detach().cpu(), "optimizer": optimizer.state_dict(),
                             "generator": gen.get_state(), "history": history, "lr_history": lr_history})

    return ProbeResult(top1_last=history[-1], top1_best=max(history), history=history, lr_history=lr_history)
