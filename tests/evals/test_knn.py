"""Weighted k-NN classification (semcl.evals.knn) against a hand-computed case and a float64 brute force."""

from __future__ import annotations

import math

import pytest
import torch

from semcl.evals.knn import knn_accuracy, knn_predict


def test_hand_computed_votes():
    # unit training vectors at 0, 15, 70, 110 and 180 degrees, classes 0, 0, 1, 1, 2; one query at
    # 50 degrees, scaled by 3 (the normalisation removes the scale). Cosines to the query:
    #   70°: cos 20° = 0.93969 (class 1)   15°: cos 35° = 0.81915 (class 0)   0°: cos 50° = 0.64279 (class 0)
    #   110°: cos 60° = 0.5 (class 1)      180°: cos 130° = -0.64279 (class 2)
    deg = torch.tensor([0.0, 15.0, 70.0, 110.0, 180.0])
    train = torch.stack([torch.cos(torch.deg2rad(deg)), torch.sin(torch.deg2rad(deg))], dim=1)
    labels = torch.tensor([0, 0, 1, 1, 2])
    q = 3 * torch.tensor([[math.cos(math.radians(50)), math.sin(math.radians(50))]])

    def pred(k, t):
        return int(knn_predict(train, labels, q, ks=(k,), temperature=t)[k][0])

    # T = 0.07, k = 3: class 1 = e^(0.93969/0.07) = 6.73e5; class 0 = e^(11.702) + e^(9.183) = 1.21e5 + 9.7e3
    assert [pred(k, 0.07) for k in (1, 2, 3, 4, 5)] == [1, 1, 1, 1, 1]
    # T = 10 flattens the weights: k = 3: class 0 = e^0.081915 + e^0.064279 = 1.08536 + 1.06639 = 2.15175
    # beats class 1 = e^0.093969 = 1.09853; k = 4 adds e^0.05 = 1.05127 to class 1: 2.14980 < 2.15175
    assert [pred(k, 10.0) for k in (1, 2, 3, 4, 5)] == [1, 1, 0, 0, 0]
    # a k beyond the training set uses all of it (the class-2 vote, e^-0.0643, changes nothing)
    assert pred(200, 10.0) == 0
    both = knn_predict(train, labels, q, temperature=10.0)  # the protocol's default ks
    assert sorted(both) == [20, 200] and int(both[20][0]) == 0


def _brute_force(train, labels, test, k, t, classes):
    """float64, one test feature at a time, straight from the formula."""
    train = train.double() / train.double().norm(dim=1, keepdim=True)
    preds = []
    for q in test.double():
        s = train @ (q / q.norm())
        order = sorted(range(len(s)), key=lambda i: -float(s[i]))[:k]
        scores = [0.0] * classes
        for i in order:
            scores[int(labels[i])] += math.exp(float(s[i]) / t)
        preds.append(max(range(classes), key=lambda c: (scores[c], -c)))
    return torch.tensor(preds)


@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_matches_brute_force_in_float64(chunk):
    g = torch.Generator().manual_seed(0)
    centers = torch.randn(5, 8, generator=g, dtype=torch.float64)
    labels = torch.arange(60) % 5
    train = centers[labels] + 0.9 * torch.randn(60, 8, generator=g, dtype=torch.float64)
    test_y = torch.arange(23) % 5
    test = centers[test_y] + 0.9 * torch.randn(23, 8, generator=g, dtype=torch.float64)
    for k, t in ((1, 0.07), (5, 0.07), (20, 0.5), (60, 0.07)):
        expected = _brute_force(train, labels, test, k, t, 5)
        got = knn_predict(train, labels, test, ks=(k,), temperature=t, chunk_size=chunk)[k]
        assert torch.equal(got, expected), (k, t)
    acc = knn_accuracy(train, labels, test, test_y, ks=(5, 20), chunk_size=chunk)
    for k in (5, 20):
        assert acc[k] == pytest.approx(float((_brute_force(train, labels, test, k, 0.07, 5) == test_y).double().mean()))


def test_float32_features_agree_with_float64():
    g = torch.Generator().manual_seed(1)
    train, test = torch.randn(50, 6, generator=g), torch.randn(9, 6, generator=g)
    labels = torch.arange(50) % 3
    assert torch.equal(knn_predict(train, labels, test, ks=(10,))[10],
                       _brute_force(train, labels, test, 10, 0.07, 3))


@pytest.mark.parametrize("kwargs, message", [
    ({"ks": (0,)}, "positive ints"),
    ({"temperature": 0.0}, "temperature must be > 0"),
    ({"num_classes": 2}, "train_labels hold class 2 but num_classes is 2"),
])
def test_bad_arguments(kwargs, message):
    train, test = torch.eye(3), torch.eye(3)
    with pytest.raises(ValueError, match=message):
        knn_predict(train, torch.tensor([0, 1, 2]), test, **kwargs)
    with pytest.raises(ValueError, match="4 dims but train features have 3"):
        knn_predict(train, torch.tensor([0, 1, 2]), torch.ones(1, 4))
