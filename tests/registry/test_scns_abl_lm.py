"""scns/abl-lm holds Latent Mixup whole and each half alone as rows; the paper gives no number for any (null)."""

from __future__ import annotations

from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table


def test_each_half_of_latent_mixup_is_a_row_with_no_paper_number():
    t = get_table("scns/abl-lm")
    modes = {}
    for label in ("SCNS-class + LM", "SCNS-class + LM (extra negatives)", "SCNS-class + LM (distance only)"):
        cfg = t.resolve(t.row(label), "paper")
        assert cfg.method.latent_mixup is True
        modes[label] = cfg.method.lm_mode
        assert all(r is None for r in t.row(label).reported.values())
    assert modes == {"SCNS-class + LM": "both", "SCNS-class + LM (extra negatives)": "extra",
                     "SCNS-class + LM (distance only)": "distance"}
    ids = {r.row_label: r.run_id for r in plan_runs(t, "smoke")}
    assert len({ids[label] for label in modes}) == 3  # three trainings, not one
