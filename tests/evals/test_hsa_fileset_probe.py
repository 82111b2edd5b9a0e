"""The linear probe on file-backed images (synthetic ImageNet folders, decoded per batch)."""

import pytest
import torch

from semcl.data import load
from semcl.data.synthetic import ensure_synthetic
from semcl.evals.features import check_images, extract_features
from semcl.evals.linear_probe import linear_probe

pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py


def _to_float(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return images.float() / 255.0


def _mean_colour(x: torch.Tensor) -> torch.Tensor:
    return x.mean(dim=(2, 3))  # [B, 3]: a fixed, deterministic "encoder"


def test_probe_reads_file_backed_sets_like_their_decoded_tensors(tmp_path):
    root = ensure_synthetic(tmp_path, ["imagenet"], train_per_class=2, test_per_class=1)
    train = load("imagenet", root, "train", image_size=16)
    test = load("imagenet", root, "test", image_size=16)
    assert not isinstance(train.images, torch.Tensor)
    assert check_images(train.images, "train_images") is train.images
    # Features decoded batch by batch equal those of the fully decoded tensor.
    dense_train = train.images[torch.arange(train.images.shape[0])]
    dense_test = test.images[torch.arange(test.images.shape[0])]
    lazy = extract_features(_mean_colour, train.images, _to_float, batch_size=7)
    torch.testing.assert_close(lazy, extract_features(_mean_colour, dense_train, _to_float))
    args = dict(num_classes=train.num_classes, train_transform=_to_float, test_transform=_to_float,
                epochs=3, lr=0.5, batch_size=8, milestones=(2,), augment=True, seed=3, eval_batch_size=5)
    on_files = linear_probe(_mean_colour, train.images, train.labels, test.images, test.labels, **args)
    on_tensors = linear_probe(_mean_colour, dense_train, train.labels, dense_test, test.labels, **args)
    # Same generator draws, same batches: the probe is bit-identical on the two sources.
    assert on_files.history == on_tensors.history
    assert len(on_files.history) == 3
