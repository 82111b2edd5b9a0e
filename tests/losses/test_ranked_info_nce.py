"""ranked_info_nce against brute-force float64 references written straight from the formulas, on both of its
paths: the fused one the CPU takes and the read-free one an accelerator takes (semcl.runtime.host_sync)."""

import importlib
import itertools
import math

import pytest
import torch

from semcl.losses import key_first_rank_only, ranked_info_nce, tau_from_similarity, taus_for_levels
from semcl.runtime.host_sync import like_an_accelerator

# The package re-exports the function under the module's own name, so fetch the module itself.
impl = importlib.import_module("semcl.losses.ranked")

FORMS = ["in", "out", "out_in"]
POSITIVES = ["rank", "cumulative"]
F64 = torch.float64


def reference_terms(sim: torch.Tensor, ranks: torch.Tensor, taus, form: str, positives: str) -> torch.Tensor:
    """Per-rank terms by explicit loops over ranks, anchors and positives (autograd-able in float64)."""
    n_rows, n_cols = sim.shape
    terms = []
    for r, tau in enumerate(taus, start=1):
        out_form = form == "out" or (form == "out_in" and r == 1)
        losses = []
        for b in range(n_rows):
            row = [int(v) for v in ranks[b]]
            if positives == "rank":
                pos = [j for j in range(n_cols) if row[j] == r]
            else:
                pos = [j for j in range(n_cols) if 1 <= row[j] <= r]
            neg = [j for j in range(n_cols) if row[j] == 0 or row[j] > r]
            exps = {j: torch.exp(sim[b, j] / tau) for j in pos + neg}
            neg_sum = sum((exps[j] for j in neg), torch.zeros((), dtype=sim.dtype))
            if out_form:
                for p in pos:  # one term per positive: only that positive plus the negatives
                    losses.append(-torch.log(exps[p] / (exps[p] + neg_sum)))
            elif pos:
                pos_sum = sum(exps[p] for p in pos)
                losses.append(-torch.log(pos_sum / (pos_sum + neg_sum)))
        terms.append(sum(losses) / len(losses) if losses else torch.zeros((), dtype=sim.dtype))
    return torch.stack(terms)


def make_case(seed: int, n_rows: int, n_cols: int, n_ranks: int, empty_rank: int | None = None):
    """Random sims in [-1, 1] and ranks with special rows: no positives, no negatives, all ignored."""
    gen = torch.Generator().manual_seed(seed)
    sim = torch.rand(n_rows, n_cols, generator=gen, dtype=F64) * 2 - 1
    ranks = torch.randint(0, n_ranks + 1, (n_rows, n_cols), generator=gen)
    ranks[torch.rand(n_rows, n_cols, generator=gen) < 0.15] = -1
    ranks[0] = torch.where(ranks[0] > 0, 0, ranks[0])  # anchor without positives
    ranks[1] = torch.where(ranks[1] != -1, 1, -1)  # positives (rank 1) but no negatives
    ranks[2] = -1  # everything ignored
    ranks[3] = torch.where(ranks[3] != -1, n_ranks, -1)  # only the last rank
    if empty_rank is not None:  # a rank with no positive anywhere in the batch
        ranks[ranks == empty_rank] = 0
    return sim, ranks


def taus_for(n_ranks: int) -> list[float]:
    return [0.1, 0.225, 0.4][:n_ranks]


CASES = [(1, None), (2, None), (3, None), (3, 2)]


@pytest.fixture(params=["cpu", "accelerator"])
def path(request):
    """Each test using it runs on both paths: CPU tensors, then CPU tensors taking the accelerator's path."""
    if request.param == "accelerator":
        with like_an_accelerator():
            yield request.param
    else:
        yield request.param


@pytest.mark.usefixtures("path")
@pytest.mark.parametrize("form,positives,reduction", list(itertools.product(FORMS, POSITIVES, ["sum", "mean"])))
@pytest.mark.parametrize("n_ranks,empty_rank", CASES)
def test_values_match_reference(form, positives, reduction, n_ranks, empty_rank):
    sim, ranks = make_case(7 * n_ranks + (empty_rank or 0), 9, 11, n_ranks, empty_rank)
    taus = taus_for(n_ranks)
    ref_terms = reference_terms(sim, ranks, taus, form, positives)
    ref = ref_terms.sum() if reduction == "sum" else ref_terms.mean()
    kwargs = dict(form=form, positives=positives, rank_reduction=reduction)
    got = ranked_info_nce(sim, ranks, taus, **kwargs)
    assert got.dtype == F64 and got.shape == ()
    assert torch.allclose(got, ref, rtol=1e-10, atol=1e-12)
    terms = ranked_info_nce(sim, ranks, taus, return_terms=True, **kwargs)
    assert torch.allclose(terms, ref_terms, rtol=1e-10, atol=1e-12)
    if empty_rank is not None and positives == "rank":
        assert terms[empty_rank - 1] == 0
    got32 = ranked_info_nce(sim.float(), ranks, taus, **kwargs)
    assert got32.dtype == torch.float32
    assert torch.allclose(got32.double(), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.usefixtures("path")
@pytest.mark.parametrize("form,positives", list(itertools.product(FORMS, POSITIVES)))
@pytest.mark.parametrize("n_ranks,empty_rank", CASES)
def test_gradients_match_reference(form, positives, n_ranks, empty_rank):
    sim, ranks = make_case(100 + n_ranks, 8, 10, n_ranks, empty_rank)
    taus = taus_for(n_ranks)
    weights = torch.tensor([1.0, -0.5, 2.0], dtype=F64)[:n_ranks]
    for reduce in ("sum", "mean", "weighted"):  # weighted: unequal per-term weights, recompute path
        mine, theirs = sim.clone().requires_grad_(), sim.clone().requires_grad_()
        terms = ranked_info_nce(mine, ranks, taus, form=form, positives=positives, return_terms=True)
        ref = reference_terms(theirs, ranks, taus, form, positives)
        if reduce == "weighted":
            (terms * weights).sum().backward()
            (ref * weights).sum().backward()
        else:
            getattr(terms, reduce)().backward()
            getattr(ref, reduce)().backward()
        assert torch.allclose(mine.grad, theirs.grad, rtol=1e-10, atol=1e-13)
        assert torch.isfinite(mine.grad).all()
        assert (mine.grad[2] == 0).all() and (mine.grad[ranks == -1] == 0).all()  # ignored: no part
    mine32 = sim.float().requires_grad_()
    ranked_info_nce(mine32, ranks, taus, form=form, positives=positives).backward()
    ref_sim = sim.clone().requires_grad_()
    reference_terms(ref_sim, ranks, taus, form, positives).sum().backward()
    assert torch.allclose(mine32.grad.double(), ref_sim.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("form,positives", [("in", "rank"), ("out", "cumulative"), ("out_in", "rank")])
def test_gradcheck(form, positives):
    sim, ranks = make_case(5, 5, 6, 2)
    sim.requires_grad_()
    assert torch.autograd.gradcheck(
        lambda s: ranked_info_nce(s, ranks, [0.3, 0.6], form=form, positives=positives), (sim,)
    )


@pytest.mark.parametrize("form,positives", list(itertools.product(FORMS, POSITIVES)))
def test_row_blocks_agree_with_reference(monkeypatch, form, positives):
    # Force the multi-block path: 7 blocks of 2 rows (the last one 1 row).
    monkeypatch.setattr(impl, "_N_BLOCKS", 7)
    monkeypatch.setattr(impl, "_MIN_SPLIT", 1)
    sim, ranks = make_case(3, 13, 12, 3)
    taus = taus_for(3)
    mine, theirs = sim.clone().requires_grad_(), sim.clone().requires_grad_()
    got = ranked_info_nce(mine, ranks, taus, form=form, positives=positives, rank_reduction="mean")
    ref = reference_terms(theirs, ranks, taus, form, positives).mean()
    got.backward()
    ref.backward()
    assert torch.allclose(got, ref, rtol=1e-10)
    assert torch.allclose(mine.grad, theirs.grad, rtol=1e-10, atol=1e-13)


@pytest.mark.usefixtures("path")
def test_hand_computed_case():
    # One anchor, candidates s = [0.5, 0.2, -0.1] with ranks [1, 2, 0], taus [0.5, 1.0].
    # "in", rank positives:
    #   term 1 (τ = 0.5): logits [1.0, 0.4, -0.2]; P = {0}, N = {1 (rank 2 > 1), 2}
    #     ℓ1 = log(1 + e^-0.6 + e^-1.2) = log(1 + 0.548812 + 0.301194) = log 1.850006 = 0.615189
    #   term 2 (τ = 1.0): column 0 (rank 1 < 2) takes no part; P = {1}, N = {2}
    #     ℓ2 = log(1 + e^(-0.1 - 0.2)) = log 1.740818 = 0.554355;  sum = 1.169544, mean = 0.584772
    # "in", cumulative: term 2 has P = {0, 1}, N = {2}
    #     ℓ2 = log(1 + e^-0.1 / (e^0.5 + e^0.2)) = log(1 + 0.904837 / 2.870124) = 0.274035
    # "out", cumulative: term 2 has one term per positive, each against N = {2} only
    #     (log(1 + e^-0.6) + log(1 + e^-0.3)) / 2 = (0.437488 + 0.554355) / 2 = 0.495922
    sim = torch.tensor([[0.5, 0.2, -0.1]], dtype=F64)
    ranks = torch.tensor([[1, 2, 0]])
    taus = [0.5, 1.0]
    terms = ranked_info_nce(sim, ranks, taus, form="in", return_terms=True)
    assert torch.allclose(terms, torch.tensor([0.6151888001696851, 0.554355244468527], dtype=F64), rtol=1e-12)
    assert math.isclose(ranked_info_nce(sim, ranks, taus, form="in").item(), 1.1695440446382122, rel_tol=1e-12)
    mean = ranked_info_nce(sim, ranks, taus, form="in", rank_reduction="mean").item()
    assert math.isclose(mean, 0.5847720223191061, rel_tol=1e-12)
    cumulative = ranked_info_nce(sim, ranks, taus, form="in", positives="cumulative", return_terms=True)
    assert math.isclose(cumulative[1].item(), 0.27403492543759733, rel_tol=1e-12)
    out = ranked_info_nce(sim, ranks, taus, form="out", positives="cumulative", return_terms=True)
    assert math.isclose(out[1].item(), 0.4959215974772063, rel_tol=1e-12)
    # A single positive per term: "out" and "in" agree for term 1.
    assert math.isclose(out[0].item(), 0.6151888001696851, rel_tol=1e-12)


@pytest.mark.usefixtures("path")
@pytest.mark.parametrize("form", FORMS)
def test_infonce_is_cross_entropy(form):
    # R = 1 with one positive per row (column 0) and all else negative is plain InfoNCE.
    gen = torch.Generator().manual_seed(11)
    sim = torch.rand(6, 9, generator=gen, dtype=F64) * 2 - 1
    ranks = torch.zeros(6, 9, dtype=torch.long)
    ranks[:, 0] = 1
    expected = torch.nn.functional.cross_entropy(sim / 0.07, torch.zeros(6, dtype=torch.long))
    assert torch.allclose(ranked_info_nce(sim, ranks, [0.07], form=form), expected, rtol=1e-12)


@pytest.mark.usefixtures("path")
def test_edge_cases_are_finite():
    sim = torch.tensor([[0.3, -0.2, 0.9], [0.1, 0.4, -0.5]], dtype=F64, requires_grad=True)
    # No positives anywhere: every term is 0 and so is the gradient.
    loss = ranked_info_nce(sim, torch.tensor([[0, 0, -1], [0, 0, 0]]), [0.1, 0.2], form="in")
    loss.backward()
    assert loss.item() == 0.0 and (sim.grad == 0).all()
    # Positives but no negatives (and ignored entries): log 1 = 0, for both forms.
    for form in FORMS:
        sim.grad = None
        loss = ranked_info_nce(sim, torch.tensor([[1, 1, -1], [-1, 1, -1]]), [0.1], form=form)
        loss.backward()
        assert loss.item() == 0.0 and (sim.grad == 0).all()
    # Everything ignored.
    assert ranked_info_nce(sim, torch.full((2, 3), -1), [0.1], form="out").item() == 0.0


@pytest.mark.usefixtures("path")
def test_inf_and_nan_in_ignored_entries_take_no_part():
    sim, ranks = make_case(21, 6, 8, 2)
    ranks[4, :2] = -1
    dirty = sim.clone()
    dirty[4, 0], dirty[4, 1], dirty[2, 3] = float("inf"), float("nan"), -1e30
    for form in FORMS:
        ref = reference_terms(sim, ranks, [0.1, 0.2], form, "rank").sum()
        got = ranked_info_nce(dirty, ranks, [0.1, 0.2], form=form)
        assert torch.allclose(got, ref, rtol=1e-10)


@pytest.mark.usefixtures("path")
def test_large_logits_stay_stable():
    # s / τ up to 500: exp would overflow without the row shift.
    sim = torch.tensor([[1.0, 0.2, -1.0, 0.9]], dtype=torch.float32)
    ranks = torch.tensor([[2, 1, 0, 0]])
    for form in FORMS:
        got = ranked_info_nce(sim, ranks, [0.002, 0.004], form=form, positives="cumulative")
        ref = reference_terms(sim.double(), ranks, [0.002, 0.004], form, "cumulative").sum()
        assert torch.isfinite(got) and torch.allclose(got.double(), ref, rtol=1e-5)


@pytest.mark.usefixtures("path")
def test_no_grad_and_second_backward():
    sim, ranks = make_case(8, 6, 7, 2)
    ref = reference_terms(sim, ranks, [0.1, 0.3], "out_in", "rank").sum()
    with torch.no_grad():
        assert torch.allclose(ranked_info_nce(sim, ranks, [0.1, 0.3], form="out_in"), ref, rtol=1e-10)
    leaf = sim.clone().requires_grad_()
    loss = 3.0 * ranked_info_nce(leaf, ranks, [0.1, 0.3], form="out_in")
    loss.backward(retain_graph=True)
    first = leaf.grad.clone()
    loss.backward()  # the cached gradient was used up; this one is recomputed
    assert torch.allclose(leaf.grad, 2 * first, rtol=1e-12)


def reference_key_first(sim, ranks, taus, key_col, form, positives):
    """Term 1 on the full matrix; terms 2..R with the key column deleted outright."""
    first = reference_terms(sim, ranks, taus, form, positives)[0]
    keep = [j for j in range(sim.shape[1]) if j != key_col]
    rest = reference_terms(sim[:, keep], ranks[:, keep], taus, form, positives)[1:]
    return torch.cat([first.view(1), rest])


@pytest.mark.usefixtures("path")
@pytest.mark.parametrize("form", FORMS)
def test_key_first_rank_only(form):
    sim, ranks = make_case(31, 7, 9, 3)
    ranks[:, 2] = 1  # the own momentum key: rank 1 in every row
    taus = taus_for(3)
    for reduction in ("sum", "mean"):
        mine, theirs = sim.clone().requires_grad_(), sim.clone().requires_grad_()
        got = key_first_rank_only(
            mine, ranks, taus, key_col=2, form=form, positives="cumulative", rank_reduction=reduction
        )
        terms = reference_key_first(theirs, ranks, taus, 2, form, "cumulative")
        ref = terms.sum() if reduction == "sum" else terms.mean()
        assert torch.allclose(got, ref, rtol=1e-10)
        got.backward()
        ref.backward()
        assert torch.allclose(mine.grad, theirs.grad, rtol=1e-10, atol=1e-13)
        # With cumulative positives the key would be a positive of every term; here it is not.
        plain = ranked_info_nce(sim, ranks, taus, form=form, positives="cumulative", rank_reduction=reduction)
        assert not torch.allclose(got, plain, rtol=1e-3)
    # Term 1 is unchanged and still contains the key column: it matches the plain term 1.
    plain_terms = ranked_info_nce(sim, ranks, taus, form=form, positives="cumulative", return_terms=True)
    key_terms = reference_key_first(sim, ranks, taus, 2, form, "cumulative")
    assert torch.allclose(plain_terms[0], key_terms[0], rtol=1e-12)
    assert not torch.allclose(plain_terms[1], key_terms[1], rtol=1e-3)


def test_temperatures():
    assert tau_from_similarity(0.75, 0.1, 0.6) == 0.225
    assert tau_from_similarity(1.0, 0.1, 0.6) == 0.1
    assert tau_from_similarity(0.0, 0.1, 0.6) == 0.6
    assert taus_for_levels([1.0, 0.75, 0.0], 0.1, 0.6) == [0.1, 0.225, 0.6]
    with pytest.raises(ValueError, match="tau_min"):
        tau_from_similarity(0.5, 0.6, 0.1)
    with pytest.raises(ValueError, match="sim_level"):
        tau_from_similarity(1.5, 0.1, 0.6)
    with pytest.raises(ValueError, match="at least one"):
        taus_for_levels([], 0.1, 0.6)


def test_bad_arguments():
    sim = torch.zeros(2, 3)
    ranks = torch.tensor([[1, 0, 2], [0, 1, 0]])
    with pytest.raises(ValueError, match="rank 2 found but only 1 temperatures"):
        ranked_info_nce(sim, ranks, [0.1], form="in")
    with pytest.raises(ValueError, match="unknown form 'sideways'"):
        ranked_info_nce(sim, ranks, [0.1, 0.2], form="sideways")
    with pytest.raises(ValueError, match="unknown positives"):
        ranked_info_nce(sim, ranks, [0.1, 0.2], form="in", positives="all")
    with pytest.raises(ValueError, match="unknown rank_reduction"):
        ranked_info_nce(sim, ranks, [0.1, 0.2], form="in", rank_reduction="max")
    with pytest.raises(ValueError, match=">= -1"):
        ranked_info_nce(sim, ranks - 2, [0.1, 0.2], form="in")
    with pytest.raises(ValueError, match="taus"):
        ranked_info_nce(sim, ranks, [0.1, 0.0], form="in")
    with pytest.raises(ValueError, match="taus"):
        ranked_info_nce(sim, ranks, [], form="in")
    with pytest.raises(ValueError, match=r"\[B, N\]"):
        ranked_info_nce(sim, ranks[:, :2], [0.1, 0.2], form="in")
    with pytest.raises(ValueError, match="integer"):
        ranked_info_nce(sim, ranks.float(), [0.1, 0.2], form="in")
    with pytest.raises(ValueError, match="rank 1 in every row"):
        key_first_rank_only(sim, ranks, [0.1, 0.2], key_col=0, form="in", positives="rank", rank_reduction="sum")
    with pytest.raises(ValueError, match="out of range"):
        key_first_rank_only(sim, ranks, [0.1, 0.2], key_col=3, form="in", positives="rank", rank_reduction="sum")


def test_the_accelerator_path_checks_ranks_and_key_column_without_a_read():
    sim = torch.zeros(2, 3)
    ranks = torch.tensor([[1, 0, 2], [0, 1, 0]])
    with like_an_accelerator():
        with pytest.raises(ValueError, match=r"ranks must lie in \[-1, 1\]"):
            ranked_info_nce(sim, ranks, [0.1], form="in")
        with pytest.raises(ValueError, match=r"ranks must lie in \[-1, 2\]"):
            ranked_info_nce(sim, ranks - 2, [0.1, 0.2], form="out")
        with pytest.raises(ValueError, match="rank 1 in every row"):
            key_first_rank_only(sim, ranks, [0.1, 0.2], key_col=0, form="in", positives="rank", rank_reduction="sum")


@pytest.mark.parametrize("form,positives", list(itertools.product(FORMS, POSITIVES)))
def test_both_paths_agree_to_rounding_in_float64(form, positives):
    """The accelerator's path (plain autograd, per-set logsumexp) against the fused CPU path of before."""
    sim, ranks = make_case(41, 12, 15, 3)
    taus = taus_for(3)
    results = []
    for accelerator in (False, True):
        leaf = sim.clone().requires_grad_()
        if accelerator:
            with like_an_accelerator():
                loss = ranked_info_nce(leaf, ranks, taus, form=form, positives=positives, rank_reduction="mean")
        else:
            loss = ranked_info_nce(leaf, ranks, taus, form=form, positives=positives, rank_reduction="mean")
        loss.backward()
        results.append((loss.detach(), leaf.grad))
    (fused, fused_grad), (plain, plain_grad) = results
    assert torch.allclose(plain, fused, rtol=1e-13, atol=0) and torch.allclose(plain_grad, fused_grad, rtol=1e-12,
                                                                                atol=1e-15)
