"""ranked_info_nce's prob_floor and "khosla_out" form against brute-force float64 references."""

import itertools
import math

import pytest
import torch

from semcl.losses import key_first_rank_only, ranked_info_nce
from semcl.losses.ranked_variants import variant_terms

F64 = torch.float64
POSITIVES = ["rank", "cumulative"]
ALL_FORMS = ["in", "out", "out_in", "khosla_out"]


def floored_reference(sim, ranks, taus, form, positives, floor):
    """Terms [R] and the number of kept units per term, by loops over ranks, anchors and positives.

    A unit (anchor for "in", anchor-positive pair for "out"/"khosla_out") is kept when its
    probability is > floor; khosla_out averages an anchor's kept pairs first.
    """
    n_rows, n_cols = sim.shape
    terms, kept_counts, dropped_counts = [], [], []
    for r, tau in enumerate(taus, start=1):
        kind = form
        if form == "out_in":
            kind = "out" if r == 1 else "in"
        losses, dropped = [], 0
        for b in range(n_rows):
            row = [int(v) for v in ranks[b]]
            if positives == "rank":
                pos = [j for j in range(n_cols) if row[j] == r]
            else:
                pos = [j for j in range(n_cols) if 1 <= row[j] <= r]
            neg = [j for j in range(n_cols) if row[j] == 0 or row[j] > r]
            if not pos:
                continue
            exps = {j: torch.exp(sim[b, j] / tau) for j in pos + neg}
            neg_sum = sum((exps[j] for j in neg), torch.zeros((), dtype=sim.dtype))
            pos_sum = sum(exps[p] for p in pos)
            if kind == "in":
                prob = pos_sum / (pos_sum + neg_sum)
                if prob > floor:
                    losses.append(-torch.log(prob))
                else:
                    dropped += 1
            elif kind == "out":
                for p in pos:
                    prob = exps[p] / (exps[p] + neg_sum)
                    if prob > floor:
                        losses.append(-torch.log(prob))
                    else:
                        dropped += 1
            else:  # khosla_out
                mine = []
                for p in pos:
                    prob = exps[p] / (pos_sum + neg_sum)
                    if prob > floor:
                        mine.append(-torch.log(prob))
                    else:
                        dropped += 1
                if mine:
                    losses.append(sum(mine) / len(mine))
        terms.append(sum(losses) / len(losses) if losses else torch.zeros((), dtype=sim.dtype))
        kept_counts.append(len(losses))
        dropped_counts.append(dropped)
    return torch.stack(terms), kept_counts, dropped_counts


def make_case(seed, n_rows=9, n_cols=11, n_ranks=2):
    gen = torch.Generator().manual_seed(seed)
    sim = torch.rand(n_rows, n_cols, generator=gen, dtype=F64) * 2 - 1
    ranks = torch.randint(0, n_ranks + 1, (n_rows, n_cols), generator=gen)
    ranks[torch.rand(n_rows, n_cols, generator=gen) < 0.15] = -1
    ranks[0] = torch.where(ranks[0] > 0, 0, ranks[0])  # anchor without positives
    ranks[1] = torch.where(ranks[1] != -1, 1, -1)  # positives but no negatives
    ranks[2] = -1  # everything ignored
    return sim, ranks


TAUS = [0.2, 0.4]


@pytest.mark.parametrize("form,positives", list(itertools.product(ALL_FORMS, POSITIVES)))
@pytest.mark.parametrize("floor", [0.0, 0.05, 0.3])
def test_values_and_gradients_match_reference(form, positives, floor):
    sim, ranks = make_case(3 + int(100 * floor))
    ref_terms, kept, dropped = floored_reference(sim, ranks, TAUS, form, positives, floor)
    if floor == 0.3:  # the case really drops some units and keeps others
        assert sum(dropped) > 0 and sum(kept) > 0
    mine, theirs = sim.clone().requires_grad_(), sim.clone().requires_grad_()
    terms = ranked_info_nce(mine, ranks, TAUS, form=form, positives=positives, prob_floor=floor, return_terms=True)
    assert torch.allclose(terms, ref_terms, rtol=1e-10, atol=1e-12)
    for reduction in ("sum", "mean"):
        got = ranked_info_nce(sim, ranks, TAUS, form=form, positives=positives, rank_reduction=reduction,
                              prob_floor=floor)
        ref = ref_terms.sum() if reduction == "sum" else ref_terms.mean()
        assert torch.allclose(got, ref, rtol=1e-10, atol=1e-12)
    (terms * torch.tensor([1.0, -0.5], dtype=F64)).sum().backward()
    ref_grad_terms = floored_reference(theirs, ranks, TAUS, form, positives, floor)[0]
    (ref_grad_terms * torch.tensor([1.0, -0.5], dtype=F64)).sum().backward()
    assert torch.allclose(mine.grad, theirs.grad, rtol=1e-10, atol=1e-13)
    assert (mine.grad[2] == 0).all() and (mine.grad[ranks == -1] == 0).all()


def test_terms_exactly_at_the_floor_are_dropped():
    # Equal logits give exact dyadic probabilities: 1 positive vs 1 negative -> 0.5 ("in", "out",
    # "khosla_out"); 2 positives vs 2 negatives -> "in" mass 0.5, khosla pair 0.25.
    sim = torch.zeros(2, 4, dtype=F64)
    ranks = torch.tensor([[1, 0, -1, -1], [1, 1, 0, 0]])
    # Row 0: 0.5 everywhere. Row 1: in 0.5; out pairs 1/3 (not at the floor); khosla pairs 0.25.
    for form in ("in", "out", "khosla_out"):
        at = ranked_info_nce(sim[:1], ranks[:1], [0.1], form=form, prob_floor=0.5)
        below = ranked_info_nce(sim[:1], ranks[:1], [0.1], form=form, prob_floor=0.5 - 1e-12)
        assert at.item() == 0.0  # the only unit is at the floor: nothing remains
        assert math.isclose(below.item(), math.log(2), rel_tol=1e-15)
    # "in", floor 0.5: row 0 and row 1 both have mass exactly 0.5 -> both dropped.
    assert ranked_info_nce(sim, ranks, [0.1], form="in", prob_floor=0.5).item() == 0.0
    # khosla_out, floor 0.25: row 1's pairs (0.25 each) go, row 0 (0.5) stays -> log 2.
    got = ranked_info_nce(sim, ranks, [0.1], form="khosla_out", prob_floor=0.25)
    assert math.isclose(got.item(), math.log(2), rel_tol=1e-15)
    # "out", floor 1/3 rounded down a bit: row 1's pairs (1/3) stay along with row 0's (0.5):
    # mean over 3 pairs of [log 2, log 3, log 3].
    got = ranked_info_nce(sim, ranks, [0.1], form="out", prob_floor=0.3333)
    assert math.isclose(got.item(), (math.log(2) + 2 * math.log(3)) / 3, rel_tol=1e-14)


def test_nothing_remaining_gives_zero_and_zero_gradient():
    sim, ranks = make_case(5)
    leaf = sim.clone().requires_grad_()
    for form in ALL_FORMS:
        leaf.grad = None
        loss = ranked_info_nce(leaf, ranks, TAUS, form=form, prob_floor=0.999999)
        loss.backward()
        assert loss.item() == 0.0 and (leaf.grad == 0).all()


def test_default_floor_is_the_fused_path_bit_for_bit():
    sim, ranks = make_case(9)
    for form, positives in itertools.product(["in", "out", "out_in"], POSITIVES):
        a = sim.clone().requires_grad_()
        b = sim.clone().requires_grad_()
        plain = ranked_info_nce(a, ranks, TAUS, form=form, positives=positives)
        floored = ranked_info_nce(b, ranks, TAUS, form=form, positives=positives, prob_floor=0.0)
        plain.backward()
        floored.backward()
        assert torch.equal(plain, floored) and torch.equal(a.grad, b.grad)
        # The variant path at floor 0 computes the same terms as the fused one.
        fused = ranked_info_nce(sim, ranks, TAUS, form=form, positives=positives, return_terms=True)
        plain_autograd = variant_terms(sim, ranks, tuple(TAUS), form, positives, (True, True), 0.0)
        assert torch.allclose(fused, plain_autograd, rtol=1e-12, atol=1e-14)


def test_khosla_out_hand_computed():
    # One anchor, s = [0.5, 0.2, -0.1], all rank 1 except the last (negative), τ = 0.5:
    # logits [1.0, 0.4, -0.2]; denominator D = e^1 + e^0.4 + e^-0.2 = 4.4284...
    # ℓ = ((log D − 1.0) + (log D − 0.4)) / 2 = log D − 0.7
    sim = torch.tensor([[0.5, 0.2, -0.1]], dtype=F64)
    ranks = torch.tensor([[1, 1, 0]])
    d = math.exp(1.0) + math.exp(0.4) + math.exp(-0.2)
    got = ranked_info_nce(sim, ranks, [0.5], form="khosla_out")
    assert math.isclose(got.item(), math.log(d) - 0.7, rel_tol=1e-14)
    # Official "out" for comparison: the other positive is not in the denominator.
    out = ranked_info_nce(sim, ranks, [0.5], form="out")
    expected_out = (math.log(1 + math.exp(-1.2)) + math.log(1 + math.exp(-0.6))) / 2
    assert math.isclose(out.item(), expected_out, rel_tol=1e-14)


def test_key_first_rank_only_with_floor():
    sim, ranks = make_case(31, n_ranks=2)
    ranks[:, 2] = 1  # the own key: rank 1 in every row
    floor = 0.05
    mine, theirs = sim.clone().requires_grad_(), sim.clone().requires_grad_()
    got = key_first_rank_only(mine, ranks, TAUS, key_col=2, form="out_in", positives="cumulative",
                              rank_reduction="mean", prob_floor=floor)
    first = floored_reference(theirs, ranks, TAUS, "out_in", "cumulative", floor)[0][0]
    keep = [j for j in range(sim.shape[1]) if j != 2]
    second = floored_reference(theirs[:, keep], ranks[:, keep], TAUS, "out_in", "cumulative", floor)[0][1]
    ref = (first + second) / 2
    assert torch.allclose(got, ref, rtol=1e-10)
    got.backward()
    ref.backward()
    assert torch.allclose(mine.grad, theirs.grad, rtol=1e-10, atol=1e-13)


def test_nan_in_ignored_entries_and_float32():
    sim, ranks = make_case(21)
    ranks[4, :2] = -1
    dirty = sim.clone()
    dirty[4, 0], dirty[4, 1] = float("inf"), float("nan")
    for form in ALL_FORMS:
        ref = floored_reference(sim, ranks, TAUS, form, "rank", 0.05)[0].sum()
        assert torch.allclose(ranked_info_nce(dirty, ranks, TAUS, form=form, prob_floor=0.05), ref, rtol=1e-10)
        got32 = ranked_info_nce(sim.float(), ranks, TAUS, form=form, prob_floor=0.05)
        assert got32.dtype == torch.float32 and torch.allclose(got32.double(), ref, rtol=1e-5)


def test_bad_floor_and_ranks():
    sim, ranks = torch.zeros(2, 3), torch.tensor([[1, 0, 2], [0, 1, 0]])
    for bad in (-0.1, 1.0, float("nan")):
        with pytest.raises(ValueError, match="prob_floor"):
            ranked_info_nce(sim, ranks, [0.1, 0.2], form="in", prob_floor=bad)
    with pytest.raises(ValueError, match="rank 2 found but only 1"):
        ranked_info_nce(sim, ranks, [0.1], form="khosla_out")
