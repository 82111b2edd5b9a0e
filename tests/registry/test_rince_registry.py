"""RINCE registry entries: tab1, tab3, tab6-tab11 resolve to the stated grids and settings, share runs with
rince/tab2 where the configs agree, and carry no reported number (none is known, rince.md §b.1)."""

from __future__ import annotations

from semcl.config import hashable_config
from semcl.registry.tables import get_table

IDS = ("tab1", "tab2", "tab3", "tab6", "tab7", "tab8", "tab9", "tab10", "tab11")


def _method(tid: str, label: str, profile: str = "paper"):
    t = get_table(f"rince/{tid}")
    return t.resolve(t.row(label), profile)


def test_every_entry_has_only_null_cells_and_implemented_rows():
    for tid in IDS:
        t = get_table(f"rince/{tid}")
        assert all(r.implemented for r in t.rows), tid
        assert all(v is None for r in t.rows for v in r.reported.values()), tid
        assert set(t.profiles) == {"paper", "mini", "smoke"}, tid


def test_tab3_paper_profile():
    ce, scl, rince = (_method("tab3", lab) for lab in ("Cross-entropy s.a.", "SCL-out", "RINCE-out-in"))
    assert (rince.data.name, rince.model.backbone, rince.optim.batch_size, rince.schedule.epochs) == (
        "imagenet100", "resnet18", 768, 500)
    assert (ce.optim.lr, scl.optim.lr, rince.optim.lr) == (0.3, 0.325, 0.3)
    m = rince.method
    assert (m.ranks, m.name_threshold, m.positives, m.bank_size, m.form) == ("names", 0.45, "rank", 8192, "out_in")
    # the default is the official ImageNet branch, with the official stsb-roberta-large matrix (packaged)
    assert (m.variant, m.rank_reduction, m.prob_floor, m.key_update) == ("official_code", "mean", 1e-7, "before_keys")
    assert (m.name_similarity_file, m.name_model) == ("official", None) and scl.method.bank_size == 8192
    assert (scl.method.prob_floor, scl.method.key_update) == (1e-7, "before_keys")
    readme = _method("tab3", "RINCE-out-in (README threshold 0.4)").method
    assert (readme.variant, readme.name_threshold, readme.positives) == ("official_code", 0.4, "rank")
    summed = _method("tab3", "RINCE-out-in (summed, paper text)").method
    assert (summed.rank_reduction, summed.prob_floor, summed.positives) == ("sum", None, "rank")
    mini = _method("tab3", "RINCE-out-in", "mini")
    assert (mini.data.name, mini.method.ranks, mini.method.bank_size, mini.eval.ood) == (
        "fashion_mnist", "names", 1024, ["mnist"])  # the mini profile's reduced bank
    assert (mini.method.name_similarity_file, mini.method.name_model) == (None, "all-MiniLM-L6-v2")
    # the 0.45 and 0.4 runs are rince/tab6's (one training each)
    for tab3_label, tab6_label in (("RINCE-out-in", "threshold 0.45"), ("RINCE-out-in (README threshold 0.4)",
                                   "threshold 0.4"), ("RINCE-out-in (summed, paper text)",
                                                      "threshold 0.45 (summed, paper text)")):
        assert hashable_config(_method("tab3", tab3_label)) == hashable_config(_method("tab6", tab6_label))
    smoke = _method("tab3", "RINCE-out-in", "smoke")
    assert smoke.data.synthetic and smoke.data.name == "fashion_mnist"


def test_ablation_grids():
    assert [_method("tab6", f"threshold {x}").method.name_threshold for x in (0.4, 0.45, 0.5, 0.6)] == [
        0.4, 0.45, 0.5, 0.6]
    assert [_method("tab7", f"Bank {n}").method.bank_size for n in (2048, 4096, 8192)] == [2048, 4096, 8192]
    taus = [0.125, 0.15, 0.175, 0.2, 0.225, 0.25]
    assert [_method("tab8", f"tau2 = {t}").method.taus for t in taus] == [[0.1, t] for t in taus]
    assert all(_method("tab8", f"tau2 = {t}").method.form == "in" for t in taus)
    assert [_method("tab9", f"alpha = {a}").method.alpha for a in (0.1, 0.2, 0.3)] == [0.1, 0.2, 0.3]
    assert [_method("tab10", f"lambda = {w}").method.weight for w in (0.1, 0.3, 0.5)] == [0.1, 0.3, 0.5]
    assert [_method("tab11", f"lambda = {w}").method.weight for w in (0.1, 0.3, 0.5)] == [0.1, 0.3, 0.5]


def test_shared_configs_with_tab2():
    for profile in ("paper", "mini"):
        for label in ("SCL-in", "SCL-out", "RINCE-in", "RINCE-out", "RINCE-out-in", "SCL-in (paper text)",
                      "RINCE-in (summed, paper text)", "RINCE-out-in (summed, paper text)"):
            assert hashable_config(_method("tab1", label, profile)) == hashable_config(_method("tab2", label, profile))
        # Table 2's Label smoothing / Two heads rows select the best-Top-1 row of Tables 9 / 10 (their runs)
        tab2 = get_table("rince/tab2")
        assert (tab2.row("Label smoothing (superclass)").select.table, tab2.row("Two heads").select.table) == (
            "rince/tab9", "rince/tab10")
        assert {tab2.row("Two heads").select.column, tab2.row("Two heads").select.best} == {"top1", "max"}
        assert hashable_config(_method("tab8", "tau2 = 0.225", profile)) == hashable_config(
            _method("tab2", "RINCE-in", profile))
        assert hashable_config(_method("tab7", "Bank 4096 (summed, paper text)", profile)) == hashable_config(
            _method("tab2", "RINCE-in (summed, paper text)", profile))
        # the claim's lambda = 0.1 row of Table 2 is Table 10's run
        assert hashable_config(_method("tab10", "lambda = 0.1", profile)) == hashable_config(
            _method("tab2", "Two heads (lambda = 0.1)", profile))


def test_one_gpu_image_tables_name_the_official_per_gpu_batchnorm():
    """Every image table whose rows run the official code's losses trains on 1 GPU and names the official split of
    the batch over the GPUs (docs/papers/rince.md §g.19) with its own batch: 512 on CIFAR, 768 on ImageNet-100."""
    batches = {**dict.fromkeys(("tab1", "tab2", "tab7", "tab8", "fig2", "fig7", "fig8"), 512),
               **dict.fromkeys(("tab3", "tab6"), 768)}
    for tid, batch in batches.items():
        t = get_table(f"rince/{tid}")
        rince = next(r for r in t.rows if r.method in ("rince", "scl"))
        assert t.resources_for(rince.label, "paper").gpus == 1, tid
        assert t.resolve(rince, "paper").optim.batch_size == batch, tid
        notes = [d for d in t.deviations if "docs/papers/rince.md §g.19" in d]
        assert len(notes) == 1 and f"whole batch of {batch}" in notes[0] and f"{batch} / G" in notes[0], tid
