"""paco_loss against a brute-force float64 reference written straight from the formula."""

import math

import pytest
import torch

from semcl.losses import paco_loss, supcon_loss
from semcl.methods.registry import METHODS

F64 = torch.float64


def reference_paco(anchors, contrast, contrast_labels, anchor_labels, center_logits, alpha, tau, self_mask,
                   class_prior=None, smoothing=0.0):
    """Loop over anchors; one softmax over [centres, non-self samples]; −Σ w log p / Σ w; mean."""
    n_rows, n_classes = center_logits.shape
    losses = []
    for b in range(n_rows):
        y = int(anchor_labels[b])
        logits, weights = [], []
        for c in range(n_classes):
            prior = 0.0 if class_prior is None else math.log(float(class_prior[c]))
            logits.append(center_logits[b, c] + prior)
            weights.append(1.0 - smoothing if c == y else smoothing / (n_classes - 1))  # official GPaCo form
        for j in range(contrast.shape[0]):
            if self_mask[b, j]:
                continue  # the anchor's own column takes no part
            logits.append(sum(anchors[b, i] * contrast[j, i] for i in range(anchors.shape[1])) / tau)
            weights.append(alpha if int(contrast_labels[j]) == y else 0.0)
        log_denominator = torch.log(sum(torch.exp(v) for v in logits))
        weighted = sum(w * (v - log_denominator) for w, v in zip(weights, logits, strict=True))
        losses.append(-weighted / sum(weights))
    return sum(losses) / n_rows


def make_case(seed: int, n_rows: int = 5, n_cols: int = 9, dim: int = 4, n_classes: int = 3):
    gen = torch.Generator().manual_seed(seed)
    anchors = torch.nn.functional.normalize(torch.randn(n_rows, dim, generator=gen, dtype=F64), dim=1)
    contrast = torch.nn.functional.normalize(torch.randn(n_cols, dim, generator=gen, dtype=F64), dim=1)
    anchor_labels = torch.randint(0, n_classes, (n_rows,), generator=gen)
    contrast_labels = torch.randint(0, n_classes, (n_cols,), generator=gen)
    self_mask = torch.zeros(n_rows, n_cols, dtype=torch.bool)
    self_mask[torch.arange(n_rows - 1), torch.arange(n_rows - 1)] = True  # own sample; last row has none
    self_mask[0, 5] = True  # and one anchor with two own columns
    contrast_labels[: n_rows - 1] = anchor_labels[: n_rows - 1]  # own samples share the anchor's label
    center_logits = torch.randn(n_rows, n_classes, generator=gen, dtype=F64)
    return anchors, contrast, contrast_labels, anchor_labels, center_logits, self_mask


PRIOR = torch.tensor([0.6, 0.3, 0.1], dtype=F64)


@pytest.mark.parametrize("prior", [None, PRIOR], ids=["no-prior", "prior"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("alpha", [0.0, 0.5, 2.0])
def test_matches_reference(prior, smoothing, alpha):
    anchors, contrast, contrast_labels, anchor_labels, center_logits, self_mask = make_case(int(alpha * 10) + 1)
    mine = [t.clone().requires_grad_() for t in (anchors, contrast, center_logits)]
    theirs = [t.clone().requires_grad_() for t in (anchors, contrast, center_logits)]
    kwargs = dict(alpha=alpha, tau=0.2, self_mask=self_mask, class_prior=prior, smoothing=smoothing)
    got = paco_loss(mine[0], mine[1], contrast_labels, anchor_labels, mine[2], **kwargs)
    ref = reference_paco(theirs[0], theirs[1], contrast_labels, anchor_labels, theirs[2], alpha, 0.2, self_mask,
                         prior, smoothing)
    assert got.dtype == F64 and got.shape == ()
    assert torch.allclose(got, ref, rtol=1e-10)
    got.backward()
    ref.backward()
    for a, b in zip(mine, theirs, strict=True):
        assert torch.allclose(a.grad, b.grad, rtol=1e-10, atol=1e-13)
    got32 = paco_loss(anchors.float(), contrast.float(), contrast_labels, anchor_labels, center_logits.float(),
                      alpha=alpha, tau=0.2, self_mask=self_mask,
                      class_prior=None if prior is None else prior.float(), smoothing=smoothing)
    assert got32.dtype == torch.float32
    assert torch.allclose(got32.double(), ref, rtol=1e-5)


def test_hand_computed_case():
    # One anchor a = [1] (label 0); samples k = [1], [0.5], [-1] with labels 0, 0, 1, the first
    # being the anchor's own (self) column; centre logits [2, 0]; τ = 0.5, α = 1.
    # Logits: centres [2, 0]; samples (self dropped) 0.5/0.5 = 1 (label 0) and -1/0.5 = -2.
    # lse = log(e^2 + e^0 + e^1 + e^-2) = log 11.242673 = 2.419717
    # weights: own centre 1, same-label sample α = 1:  ℓ = lse − (2 + 1) / 2 = 0.919717
    # With smoothing 0.2 (C = 2): centre weights [1 − 0.2, 0.2 / (2 − 1)] = [0.8, 0.2],
    #   ℓ = lse − (0.8·2 + 0.2·0 + 1) / 2 = lse − 1.3 = 1.119717
    # With prior [0.75, 0.25]: centre logits [2 + log 0.75, log 0.25] = [1.712318, -1.386294],
    #   lse = log(5.541792 + 0.25 + 2.718282 + 0.135335) = 2.157028, ℓ = lse − (1.712318 + 1) / 2 = 0.800869
    args = (torch.tensor([[1.0]], dtype=F64), torch.tensor([[1.0], [0.5], [-1.0]], dtype=F64),
            torch.tensor([0, 0, 1]), torch.tensor([0]), torch.tensor([[2.0, 0.0]], dtype=F64))
    self_mask = torch.tensor([[True, False, False]])
    plain = paco_loss(*args, alpha=1.0, tau=0.5, self_mask=self_mask)
    assert math.isclose(plain.item(), 0.9197166463153392, rel_tol=1e-12)
    smoothed = paco_loss(*args, alpha=1.0, tau=0.5, self_mask=self_mask, smoothing=0.2)
    assert math.isclose(smoothed.item(), 1.1197166463153392, rel_tol=1e-12)
    prior = torch.tensor([0.75, 0.25], dtype=F64)
    balanced = paco_loss(*args, alpha=1.0, tau=0.5, self_mask=self_mask, class_prior=prior)
    assert math.isclose(balanced.item(), 0.8008694863281933, rel_tol=1e-12)


def test_self_columns_take_no_part():
    anchors, contrast, contrast_labels, anchor_labels, center_logits, _ = make_case(3)
    self_mask = torch.zeros(5, 9, dtype=torch.bool)
    self_mask[:, 7] = True  # column 7 is "self" for every anchor: it must not matter at all
    contrast_labels[7] = anchor_labels[0]
    leaf = contrast.clone().requires_grad_()
    loss = paco_loss(anchors, leaf, contrast_labels, anchor_labels, center_logits, alpha=1.0, tau=0.1,
                     self_mask=self_mask)
    loss.backward()
    assert (leaf.grad[7] == 0).all() and (leaf.grad[:7] != 0).any()
    moved = contrast.clone()
    moved[7] = -moved[7]
    again = paco_loss(anchors, moved, contrast_labels, anchor_labels, center_logits, alpha=1.0, tau=0.1,
                      self_mask=self_mask)
    assert again.item() == loss.item()
    # Same as deleting the column outright.
    keep = [j for j in range(9) if j != 7]
    dropped = paco_loss(anchors, contrast[keep], contrast_labels[keep], anchor_labels, center_logits, alpha=1.0,
                        tau=0.1, self_mask=torch.zeros(5, 8, dtype=torch.bool))
    assert torch.allclose(loss, dropped, rtol=1e-12)


def test_alpha_zero_is_cross_entropy_over_the_joint_softmax():
    anchors, contrast, contrast_labels, anchor_labels, center_logits, self_mask = make_case(4)
    sample = (anchors @ contrast.T / 0.3).masked_fill(self_mask, float("-inf"))
    logits = torch.cat([center_logits, sample], 1)
    expected = torch.nn.functional.cross_entropy(logits, anchor_labels)
    got = paco_loss(anchors, contrast, contrast_labels, anchor_labels, center_logits, alpha=0.0, tau=0.3,
                    self_mask=self_mask)
    assert torch.allclose(got, expected, rtol=1e-12)


def test_large_logits_and_second_backward():
    anchors, contrast, contrast_labels, anchor_labels, center_logits, self_mask = make_case(6)
    center_logits = center_logits * 300.0
    mine = contrast.clone().requires_grad_()
    theirs = contrast.clone().requires_grad_()
    got = paco_loss(anchors, mine, contrast_labels, anchor_labels, center_logits, alpha=0.7, tau=0.002,
                    self_mask=self_mask)
    ref = reference_paco(anchors, theirs, contrast_labels, anchor_labels, center_logits, 0.7, 0.002, self_mask)
    assert torch.isfinite(got) and torch.allclose(got, ref, rtol=1e-10)
    (2.0 * got).backward(retain_graph=True)
    first = mine.grad.clone()
    got.backward()
    ref.backward()
    assert torch.allclose(mine.grad, 1.5 * first, rtol=1e-12)
    assert torch.allclose(first, 2.0 * theirs.grad, rtol=1e-9, atol=1e-12)


def test_registry():
    assert "semcl.losses.paco:paco_loss" in METHODS["paco"].losses


def test_bad_arguments():
    anchors, contrast, contrast_labels, anchor_labels, center_logits, self_mask = make_case(2)
    good = dict(alpha=1.0, tau=0.1, self_mask=self_mask)
    with pytest.raises(ValueError, match="share d"):
        paco_loss(anchors, contrast[:, :3], contrast_labels, anchor_labels, center_logits, **good)
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        paco_loss(anchors, contrast, contrast_labels, anchor_labels + 3, center_logits, **good)
    with pytest.raises(ValueError, match="self_mask"):
        paco_loss(anchors, contrast, contrast_labels, anchor_labels, center_logits, alpha=1.0, tau=0.1,
                  self_mask=self_mask.long())
    with pytest.raises(ValueError, match="class_prior"):
        paco_loss(anchors, contrast, contrast_labels, anchor_labels, center_logits, **good,
                  class_prior=torch.tensor([0.5, 0.5, 0.0], dtype=F64))
    with pytest.raises(ValueError, match="tau > 0"):
        paco_loss(anchors, contrast, contrast_labels, anchor_labels, center_logits, alpha=1.0, tau=0.0,
                  self_mask=self_mask)
    with pytest.raises(ValueError, match="smoothing"):
        paco_loss(anchors, contrast, contrast_labels, anchor_labels, center_logits, **good, smoothing=1.5)
    with pytest.raises(ValueError, match="integer"):
        paco_loss(anchors, contrast, contrast_labels.double(), anchor_labels, center_logits, **good)
    with pytest.raises(ValueError, match="center_logits"):
        paco_loss(anchors, contrast, contrast_labels, anchor_labels, center_logits[:2], **good)


def test_smoothing_spreads_epsilon_over_the_other_classes():
    # C = 4, ε = 0.3: own centre 0.7, each other centre 0.1 (official GPaCo). The only sample is the
    # anchor's own column, so ℓ = lse − (0.7·z_y + 0.1·Σ_{c≠y} z_c) over the centre logits z alone.
    z = torch.tensor([[1.0, -2.0, 0.5, 3.0]], dtype=F64)
    anchors, contrast, own = torch.ones(1, 2, dtype=F64), torch.ones(1, 2, dtype=F64), torch.tensor([[True]])
    got = paco_loss(anchors, contrast, torch.tensor([3]), torch.tensor([3]), z, alpha=0.5, tau=0.1, self_mask=own,
                    smoothing=0.3)
    expected = math.log(sum(math.exp(v) for v in (1.0, -2.0, 0.5, 3.0))) - (0.7 * 3.0 + 0.1 * (1.0 - 2.0 + 0.5))
    assert math.isclose(got.item(), expected, rel_tol=1e-12)
    with pytest.raises(ValueError, match="at least 2 classes"):
        paco_loss(anchors, contrast, torch.tensor([0]), torch.tensor([0]), z[:, :1], alpha=0.0, tau=0.1,
                  self_mask=own, smoothing=0.1)


def reference_supcon(anchors, contrast, contrast_labels, anchor_labels, tau, self_mask):
    """GPaCo Eq. 3 by loops: A(i) = non-self columns, P(i) = same label in A(i); mean over anchors with P(i)."""
    losses = []
    for i in range(anchors.shape[0]):
        a_set = [j for j in range(contrast.shape[0]) if not self_mask[i, j]]
        p_set = [j for j in a_set if int(contrast_labels[j]) == int(anchor_labels[i])]
        if not p_set:
            continue  # no L_i: left out of the mean
        logit = {j: sum(anchors[i, d] * contrast[j, d] for d in range(anchors.shape[1])) / tau for j in a_set}
        log_denominator = torch.log(sum(torch.exp(logit[j]) for j in a_set))
        losses.append(-sum(logit[p] - log_denominator for p in p_set) / len(p_set))
    return sum(losses) / len(losses)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_supcon_matches_reference(seed):
    anchors, contrast, contrast_labels, anchor_labels, _, self_mask = make_case(seed, n_rows=6, n_cols=11)
    anchor_labels[5] = 7  # a label nowhere in the contrast: this anchor has no positive
    mine = [t.clone().requires_grad_() for t in (anchors, contrast)]
    theirs = [t.clone().requires_grad_() for t in (anchors, contrast)]
    got = supcon_loss(mine[0], mine[1], contrast_labels, anchor_labels, tau=0.3, self_mask=self_mask)
    ref = reference_supcon(theirs[0], theirs[1], contrast_labels, anchor_labels, 0.3, self_mask)
    assert got.dtype == F64 and got.shape == ()
    assert torch.allclose(got, ref, rtol=1e-12)
    got.backward()
    ref.backward()
    for a, b in zip(mine, theirs, strict=True):
        assert torch.allclose(a.grad, b.grad, rtol=1e-10, atol=1e-13)
    assert (mine[0].grad[5] == 0).all()  # the anchor without positives takes no part
    got32 = supcon_loss(anchors.float(), contrast.float(), contrast_labels, anchor_labels, tau=0.3,
                        self_mask=self_mask)
    assert got32.dtype == torch.float32 and torch.allclose(got32.double(), ref, rtol=1e-5)


def test_supcon_anchor_weights_scale_each_anchor_term():
    anchors, contrast, contrast_labels, anchor_labels, _, self_mask = make_case(3, n_rows=6, n_cols=11)
    anchor_labels[5] = 7  # no positive: left out, and so is its weight
    w = torch.tensor([0.5, 2.0, 1.0, 3.0, 0.25, 100.0], dtype=F64)
    got = supcon_loss(anchors, contrast, contrast_labels, anchor_labels, tau=0.3, self_mask=self_mask, anchor_weights=w)
    per = [reference_supcon(anchors[i:i + 1], contrast, contrast_labels, anchor_labels[i:i + 1], 0.3, self_mask[i:i + 1])
           for i in range(5)]
    assert torch.allclose(got, sum(w[i] * per[i] for i in range(5)) / 5, rtol=1e-12)


def test_supcon_hand_computed_case():
    # Anchor a = [1] (label 0); columns k = [1] (self), [0.5], [0] (label 0), [-1] (label 1); τ = 0.5.
    # A(i) logits: 1, 0, -2;  lse = log(e + 1 + e^-2) = 1.349012;  P(i) logits 1 and 0:
    # L = lse − (1 + 0) / 2 = 0.849012. Other positives stay in the denominator (not the "out" form).
    # A second anchor [0] with label 2 has no positive and leaves the mean unchanged.
    anchors = torch.tensor([[1.0], [0.0]], dtype=F64)
    contrast = torch.tensor([[1.0], [0.5], [0.0], [-1.0]], dtype=F64)
    self_mask = torch.tensor([[True, False, False, False], [False, False, False, False]])
    got = supcon_loss(anchors, contrast, torch.tensor([0, 0, 0, 1]), torch.tensor([0, 2]), tau=0.5,
                      self_mask=self_mask)
    assert math.isclose(got.item(), 0.8490122167681864, rel_tol=1e-12)
    none = supcon_loss(anchors[1:].requires_grad_(), contrast, torch.tensor([0, 0, 0, 1]), torch.tensor([2]),
                       tau=0.5, self_mask=self_mask[1:])
    assert none.item() == 0.0 and none.requires_grad


def test_supcon_is_paco_without_centres_at_alpha_one():
    # Per anchor, PaCo's ℓ(α)·(1 + α|P|) = −log p_centre − α Σ_P log p is affine in α. With the centre
    # logits pushed to −60 they drop out of every softmax (e^-60 ≈ 1e-26 of the sum), so
    # (1 + |P|)·ℓ(1) − ℓ(0) = −Σ_P log p = |P|·L_i, the Eq. 3 term: PaCo minus centres, α = 1, is SupCon.
    anchors, contrast, contrast_labels, anchor_labels, _, self_mask = make_case(5, n_rows=5, n_cols=10)
    centres = torch.full((1, 3), -60.0, dtype=F64)
    terms = []
    for i in range(5):
        args = (anchors[i:i + 1], contrast, contrast_labels, anchor_labels[i:i + 1], centres)
        n_pos = int(((contrast_labels == anchor_labels[i]) & ~self_mask[i]).sum())
        assert n_pos > 0
        with_samples = paco_loss(*args, alpha=1.0, tau=0.2, self_mask=self_mask[i:i + 1])
        centre_only = paco_loss(*args, alpha=0.0, tau=0.2, self_mask=self_mask[i:i + 1])
        terms.append(((1 + n_pos) * with_samples - centre_only) / n_pos)
    expected = supcon_loss(anchors, contrast, contrast_labels, anchor_labels, tau=0.2, self_mask=self_mask)
    assert torch.allclose(torch.stack(terms).mean(), expected, rtol=1e-10)


def test_supcon_registry_and_bad_arguments():
    assert "semcl.losses.paco:supcon_loss" in METHODS["supcon"].losses
    anchors, contrast, contrast_labels, anchor_labels, _, self_mask = make_case(2)
    with pytest.raises(ValueError, match="share d"):
        supcon_loss(anchors, contrast[:, :3], contrast_labels, anchor_labels, tau=0.1, self_mask=self_mask)
    with pytest.raises(ValueError, match="self_mask"):
        supcon_loss(anchors, contrast, contrast_labels, anchor_labels, tau=0.1, self_mask=self_mask.long())
    with pytest.raises(ValueError, match="tau > 0"):
        supcon_loss(anchors, contrast, contrast_labels, anchor_labels, tau=0.0, self_mask=self_mask)
    with pytest.raises(ValueError, match="integer"):
        supcon_loss(anchors, contrast, contrast_labels.double(), anchor_labels, tau=0.1, self_mask=self_mask)


def test_the_accelerator_path_checks_labels_and_prior_and_masks_rows_without_a_read():
    """Under like_an_accelerator (no host read): bad labels and priors still raise, and SupCon's anchors without a
    positive are masked out of the mean, giving what the rows with positives alone give."""
    from semcl.runtime.host_sync import like_an_accelerator

    g = torch.Generator().manual_seed(5)
    a, c = torch.randn(4, 3, generator=g, dtype=F64), torch.randn(6, 3, generator=g, dtype=F64)
    c_labels, a_labels = torch.tensor([0, 1, 1, 2, 2, 0]), torch.tensor([0, 1, 2, 3])  # label 3: no positive
    self_mask = torch.zeros(4, 6, dtype=torch.bool)
    with like_an_accelerator():
        with pytest.raises(ValueError, match=r"\[0, 3\)"):
            paco_loss(a, c, c_labels, a_labels, torch.zeros(4, 3, dtype=F64), alpha=1.0, tau=0.2, self_mask=self_mask)
        with pytest.raises(ValueError, match="class_prior"):
            paco_loss(a, c, c_labels, a_labels.clamp(max=2), torch.zeros(4, 3, dtype=F64), alpha=1.0, tau=0.2,
                      self_mask=self_mask, class_prior=torch.tensor([0.5, 0.5, 0.0], dtype=F64))
        leaf = a.clone().requires_grad_()
        got = supcon_loss(leaf, c, c_labels, a_labels, tau=0.2, self_mask=self_mask)
        got.backward()
    kept = a[:3].clone().requires_grad_()
    want = supcon_loss(kept, c, c_labels, a_labels[:3], tau=0.2, self_mask=self_mask[:3])
    want.backward()
    assert torch.allclose(got, want, rtol=1e-14) and torch.equal(leaf.grad[3], torch.zeros(3, dtype=F64))
    assert torch.allclose(leaf.grad[:3], kept.grad, rtol=1e-13)
