"""Linear probe: convergence, determinism, last/best bookkeeping, lr schedule, protocol."""

import pytest
import torch

from semcl.evals.features import extract_features
from semcl.evals.linear_probe import ProbeResult, linear_probe, lr_at_epoch


def _blobs(n_per_class: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """3 classes of 3-channel 1x1 "images": class c is bright in channel c only.

    Linearly separable by construction: channel c is in [200, 255] for class c and in
    [0, 55] otherwise.
    """
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(3).repeat_interleave(n_per_class)
    images = torch.randint(0, 56, (3 * n_per_class, 3, 1, 1), generator=g, dtype=torch.uint8)
    bright = torch.randint(200, 256, (3 * n_per_class,), generator=g, dtype=torch.uint8)
    images[torch.arange(3 * n_per_class), labels, 0, 0] = bright
    return images, labels


def encode(x: torch.Tensor) -> torch.Tensor:
    return x.flatten(1)


def test_transform(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return images.float() / 255.0


def noisy_transform(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return images.float() / 255.0 + 0.05 * torch.randn(images.shape, generator=generator)


test_transform.__test__ = False  # not a pytest test function, despite the name


def _probe(**kwargs) -> ProbeResult:
    train_x, train_y = _blobs(20, seed=0)
    test_x, test_y = _blobs(10, seed=1)
    args = {
        "num_classes": 3,
        "train_transform": noisy_transform,
        "test_transform": test_transform,
        "epochs": 8,
        "batch_size": 16,
        "milestones": (5,),
    }
    args.update(kwargs)
    return linear_probe(encode, train_x, train_y, test_x, test_y, **args)


@pytest.mark.parametrize("augment", [True, False])
def test_separable_data_reaches_100_percent(augment: bool) -> None:
    result = _probe(augment=augment)
    assert result.top1_last == 100.0
    assert result.top1_best == 100.0
    assert len(result.history) == 8


def test_same_seed_gives_identical_history_and_other_seed_differs() -> None:
    a, b = _probe(seed=3, epochs=3, lr=0.05), _probe(seed=3, epochs=3, lr=0.05)
    assert a.history == b.history
    # A slow probe (small lr) is still learning, so a different init/shuffle shows up.
    c = _probe(seed=4, epochs=3, lr=0.05)
    assert c.history != a.history


def test_last_and_best_are_tracked_separately() -> None:
    # Fake feature pipeline: 2 classes with feature -1 (class 0) and +1 (class 1).
    # The training transform is truthful for the first 3 epochs (one batch = one
    # epoch) and then flips the sign, so the probe first learns the right rule
    # (test top-1 100%) and then the inverted one (test top-1 0%).
    images = torch.tensor([0, 255, 0, 255], dtype=torch.uint8).view(4, 1, 1, 1)
    labels = torch.tensor([0, 1, 0, 1])
    calls = {"train": 0}

    def flipping(batch: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        calls["train"] += 1
        sign = 1.0 if calls["train"] <= 3 else -1.0
        return sign * (batch.float() / 127.5 - 1.0)

    def plain(batch: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return batch.float() / 127.5 - 1.0

    result = linear_probe(
        encode, images, labels, images, labels, num_classes=2, train_transform=flipping,
        test_transform=plain, epochs=8, lr=1.0, batch_size=4, milestones=(),
    )  # fmt: skip
    assert calls["train"] == 8
    assert result.history[:3] == [100.0, 100.0, 100.0]
    assert result.top1_last == result.history[-1] == 0.0
    assert result.top1_best == max(result.history) == 100.0


def test_lr_schedule_milestones_per_epoch() -> None:
    # lr 1, gamma 0.5, milestones 3, 6, 8 over 10 epochs: epochs 0-2 use 1, 3-5 use
    # 0.5, 6-7 use 0.25, 8-9 use 0.125 (milestone m = after m completed epochs).
    result = _probe(epochs=10, lr=1.0, gamma=0.5, milestones=(3, 6, 8), augment=False)
    assert result.lr_history == [1.0] * 3 + [0.5] * 3 + [0.25] * 2 + [0.125] * 2
    # The paper's schedule: lr 5 until epoch 60, x0.2 at 60, 75 and 90.
    paper = [lr_at_epoch(e, 5.0, (60, 75, 90), 0.2) for e in (0, 59, 60, 74, 75, 89, 90, 99)]
    assert paper == pytest.approx([5.0, 5.0, 1.0, 1.0, 0.2, 0.2, 0.04, 0.04])


def test_protocol_encodes_under_no_grad_every_epoch_only_when_augmenting() -> None:
    seen: list[tuple[int, bool]] = []

    def recording_encode(x: torch.Tensor) -> torch.Tensor:
        seen.append((x.shape[0], torch.is_grad_enabled()))
        return x.flatten(1)

    train_x, train_y = _blobs(20, seed=0)  # 60 images
    test_x, test_y = _blobs(10, seed=1)  # 30 images
    common = {"num_classes": 3, "train_transform": noisy_transform, "test_transform": test_transform}
    linear_probe(recording_encode, train_x, train_y, test_x, test_y, epochs=3, batch_size=25, **common)
    assert not any(grad for _, grad in seen)
    # Test set once (one eval batch of 30), then 3 epochs x batches of 25, 25, 10.
    assert [n for n, _ in seen] == [30] + [25, 25, 10] * 3
    seen.clear()
    linear_probe(
        recording_encode, train_x, train_y, test_x, test_y, epochs=3, batch_size=25, augment=False,
        eval_batch_size=40, **common,
    )  # fmt: skip
    # Augment off: test set once, training set once (eval batches 40 + 20), no more.
    assert [n for n, _ in seen] == [30, 40, 20]


def test_bad_arguments_raise_value_error() -> None:
    train_x, train_y = _blobs(2, seed=0)
    with pytest.raises(ValueError):
        _probe(epochs=0)
    with pytest.raises(ValueError):
        _probe(num_classes=2)  # labels reach 2
    with pytest.raises(ValueError):
        linear_probe(
            encode, train_x.float(), train_y, train_x, train_y, num_classes=3,
            train_transform=noisy_transform, test_transform=test_transform,
        )  # fmt: skip


def test_extract_features_keeps_order_and_returns_float32() -> None:
    images = torch.arange(7, dtype=torch.uint8).view(7, 1, 1, 1)
    sizes: list[int] = []

    def half_encode(x: torch.Tensor) -> torch.Tensor:
        sizes.append(x.shape[0])
        return x.flatten(1).double().repeat(1, 2)  # float64 out: must come back float32

    feats = extract_features(half_encode, images, lambda b, g: b.float(), batch_size=3)
    assert sizes == [3, 3, 1]
    assert feats.dtype == torch.float32 and feats.shape == (7, 2)
    assert feats[:, 0].tolist() == [0, 1, 2, 3, 4, 5, 6]
    with pytest.raises(ValueError):
        extract_features(half_encode, images, lambda b, g: b.float(), batch_size=0)


def test_init_is_drawn_from_the_probe_generator() -> None:
    # an lr of 1e-30 leaves the layer at its init: epoch 1's test top-1 is the init's, counted by hand on
    # 400 random 16-d features of 10 classes (where different layers disagree on many samples)
    g = torch.Generator().manual_seed(0)
    train_x, test_x = (torch.randint(0, 256, (n, 16, 1, 1), generator=g, dtype=torch.uint8) for n in (50, 400))
    train_y, test_y = torch.arange(50) % 10, torch.randint(0, 10, (400,), generator=g)
    got = {}
    for init in ("uniform", "normal"):
        result = linear_probe(encode, train_x, train_y, test_x, test_y, num_classes=10, train_transform=noisy_transform,
                              test_transform=test_transform, epochs=1, lr=1e-30, seed=4, init=init)
        g = torch.Generator().manual_seed(4)
        if init == "normal":  # MoCo's lincls: weight N(0, 0.01), bias 0
            w, b = torch.empty(10, 16).normal_(0.0, 0.01, generator=g), torch.zeros(10)
        else:  # nn.Linear's U(-1/sqrt(16), 1/sqrt(16)) for weight and bias
            w, b = torch.empty(10, 16).uniform_(-0.25, 0.25, generator=g), torch.empty(10).uniform_(-0.25, 0.25, generator=g)
        hits = int(((test_transform(test_x, g).flatten(1) @ w.T + b).argmax(1) == test_y).sum())
        assert result.history[0] == 100.0 * hits / 400
        got[init] = hits
    assert got["uniform"] != got["normal"]  # the two inits are told apart here
    with pytest.raises(ValueError, match="init must be 'uniform' or 'normal'"):
        linear_probe(encode, train_x, train_y, test_x, test_y, num_classes=10, train_transform=noisy_transform,
                     test_transform=test_transform, epochs=1, init="zeros")


def test_augmented_crops_come_from_train_views_from_row_for_row() -> None:
    # the views source holds each row's number: every epoch's crops must cover rows 0..59 exactly once
    train_x, train_y = _blobs(20, seed=0)
    test_x, test_y = _blobs(10, seed=1)
    source = torch.arange(60, dtype=torch.uint8).view(60, 1, 1, 1).expand(60, 3, 1, 1).contiguous()
    seen: list[torch.Tensor] = []

    def recording(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        seen.append(images[:, 0, 0, 0].clone())
        return images.float()

    linear_probe(encode, train_x, train_y, test_x, test_y, num_classes=3, train_transform=recording,
                 test_transform=test_transform, epochs=2, batch_size=25, train_views_from=source)
    rows = torch.cat(seen).long()
    assert sorted(rows[:60].tolist()) == list(range(60)) and sorted(rows[60:].tolist()) == list(range(60))
