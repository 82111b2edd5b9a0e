"""Projection heads and classifiers."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from semcl.models import LinearClassifier, NormalizedLinear, ProjectionHead


def test_two_layer_head_structure_and_unit_norm() -> None:
    torch.manual_seed(0)
    head = ProjectionHead(2048, 2048, 128)
    types = [type(m) for m in head.net]
    assert types == [nn.Linear, nn.ReLU, nn.Linear]
    assert (head.net[0].in_features, head.net[0].out_features) == (2048, 2048)
    assert (head.net[2].in_features, head.net[2].out_features) == (2048, 128)
    z = head(torch.randn(5, 2048))
    assert z.shape == (5, 128)
    torch.testing.assert_close(z.norm(dim=1), torch.ones(5))


def test_three_layer_head_structure() -> None:
    torch.manual_seed(0)
    head = ProjectionHead(64, 32, 16, num_layers=3)
    types = [type(m) for m in head.net]
    assert types == [
        nn.Linear,
        nn.BatchNorm1d,
        nn.ReLU,
        nn.Linear,
        nn.BatchNorm1d,
        nn.ReLU,
        nn.Linear,
    ]
    dims = [(m.in_features, m.out_features) for m in head.net if isinstance(m, nn.Linear)]
    assert dims == [(64, 32), (32, 32), (32, 16)]
    # Linear layers feeding BN carry no bias; the output layer does.
    assert head.net[0].bias is None and head.net[3].bias is None
    assert head.net[6].bias is not None
    z = head(torch.randn(8, 64))
    torch.testing.assert_close(z.norm(dim=1), torch.ones(8))


def test_unnormalised_head_matches_mlp() -> None:
    torch.manual_seed(0)
    head = ProjectionHead(10, 6, 4, normalize=False)
    x = torch.randn(3, 10)
    expected = head.net[2](torch.relu(head.net[0](x)))
    torch.testing.assert_close(head(x), expected)
    assert not torch.allclose(head(x).norm(dim=1), torch.ones(3))


def test_bad_num_layers() -> None:
    with pytest.raises(ValueError, match="known: 2, 3"):
        ProjectionHead(4, 4, 4, num_layers=4)


def test_linear_classifier() -> None:
    clf = LinearClassifier(512, 100)
    x = torch.randn(2, 512)
    assert clf(x).shape == (2, 100)
    torch.testing.assert_close(clf(x), x @ clf.fc.weight.T + clf.fc.bias)


def test_normalized_linear_is_cosine() -> None:
    torch.manual_seed(0)
    clf = NormalizedLinear(16, 7)
    x = torch.randn(4, 16)
    logits = clf(x)
    assert logits.shape == (4, 7)
    expected = torch.stack([torch.stack([F.cosine_similarity(xi, wc, dim=0) for wc in clf.weight]) for xi in x])
    torch.testing.assert_close(logits, expected)
    # Invariant to the scale of inputs and of each class weight.
    torch.testing.assert_close(clf(3.0 * x), logits)
    with torch.no_grad():
        clf.weight[2] *= 5.0
    torch.testing.assert_close(clf(x), logits)
    assert logits.abs().max() <= 1.0 + 1e-6
