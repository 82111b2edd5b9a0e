"""Top-k and shot-group accuracy on hand-made cases."""

import math

import numpy as np
import pytest
import torch

from semcl.evals.accuracy import shot_group_accuracy, topk_accuracy

# sample: logits over 4 classes, label -> rank of the label (ties: lower index first)
#   s0: [.1, .5, .2, 0], y=1 -> 0 larger                     -> rank 0
#   s1: [.3, .1, .9, .2], y=0 -> .9 larger                   -> rank 1
#   s2: [.4, .4, .1, 0], y=1 -> tie with class 0 (lower idx) -> rank 1
#   s3: [0, .3, .2, .1], y=0 -> three larger                 -> rank 3
LOGITS = torch.tensor([[0.1, 0.5, 0.2, 0.0], [0.3, 0.1, 0.9, 0.2], [0.4, 0.4, 0.1, 0.0], [0.0, 0.3, 0.2, 0.1]])
LABELS = torch.tensor([1, 0, 1, 0])


def test_topk_hand_case() -> None:
    # top-1: s0 -> 25%; top-2: s0, s1, s2 -> 75%; top-3: still 75%; top-4: all.
    assert topk_accuracy(LOGITS, LABELS, ks=(1, 2, 3, 4)) == {1: 25.0, 2: 75.0, 3: 75.0, 4: 100.0}
    assert topk_accuracy(LOGITS.numpy(), LABELS.numpy(), ks=(1,)) == {1: 25.0}


def test_topk_ties_follow_argmax() -> None:
    # s2 with label 0 instead: the tie goes to class 0, as torch.argmax decides.
    logits = LOGITS[2:3]
    assert int(logits.argmax()) == 0
    assert topk_accuracy(logits, torch.tensor([0]), ks=(1,)) == {1: 100.0}
    assert topk_accuracy(logits, torch.tensor([1]), ks=(1,)) == {1: 0.0}


def test_topk_bad_arguments() -> None:
    with pytest.raises(ValueError):
        topk_accuracy(LOGITS, LABELS, ks=(5,))  # more than 4 classes
    with pytest.raises(ValueError):
        topk_accuracy(LOGITS, torch.tensor([0, 1, 2, 4]))
    with pytest.raises(ValueError):
        topk_accuracy(LOGITS, LABELS[:3])


# Training counts per class: 150, 100, 50, 20, 19, 5.
#   paco (many n>100, medium 20<=n<=100, few n<20): many {0}, medium {1,2,3}, few {4,5}
#   oltr (many n>=100, medium 20<n<100, few n<=20):  many {0,1}, medium {2}, few {3,4,5}
COUNTS = np.array([150, 100, 50, 20, 19, 5])
# Test set: class 0: 3/4 right (75%), class 1: 1/2 (50%), class 2: 1/1 (100%),
# class 3: 0/2 (0%), class 4: 1/4 (25%), class 5: no test sample (skipped).
Y = np.array([0, 0, 0, 0, 1, 1, 2, 3, 3, 4, 4, 4, 4])
P = np.array([0, 0, 0, 1, 1, 0, 2, 0, 1, 4, 0, 0, 5])


def test_shot_groups_paco_convention() -> None:
    out = shot_group_accuracy(P, Y, COUNTS)
    # many = 75; medium = (50 + 100 + 0)/3 = 50; few = 25 (class 5 absent);
    # overall = 6 correct of 13 samples.
    assert out == pytest.approx({"many": 75.0, "medium": 50.0, "few": 25.0, "overall": 600 / 13})


def test_shot_groups_oltr_convention() -> None:
    out = shot_group_accuracy(torch.from_numpy(P), torch.from_numpy(Y), COUNTS, convention="oltr")
    # many = (75 + 50)/2; medium = 100; few = (0 + 25)/2.
    assert out == pytest.approx({"many": 62.5, "medium": 100.0, "few": 12.5, "overall": 600 / 13})


def test_empty_group_is_nan() -> None:
    out = shot_group_accuracy(P, Y, COUNTS + 200)  # every class is "many"
    assert out["many"] == pytest.approx((75 + 50 + 100 + 0 + 25) / 5)
    assert math.isnan(out["medium"]) and math.isnan(out["few"])


def test_shot_groups_bad_arguments() -> None:
    with pytest.raises(ValueError):
        shot_group_accuracy(P, Y, COUNTS[:4])  # labels index past the counts
    with pytest.raises(ValueError):
        shot_group_accuracy(P[:-1], Y, COUNTS)
    with pytest.raises(ValueError):
        shot_group_accuracy(P, Y, COUNTS, convention="lvis")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        shot_group_accuracy(P, Y, COUNTS, many=10, few=20)
