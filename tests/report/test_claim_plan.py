"""`semcl claims --plan`: per undecided claim, the rows x seeds it still needs and their cost as `semcl plan`
estimates it (run costs read off `semcl plan ... --profile paper`, summed by hand below)."""

from __future__ import annotations

import pytest

from semcl.cli.main import main
from semcl.errors import ConfigError
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.seeds import with_seeds
from semcl.registry.tables import get_table, load_registry
from semcl.report.claim_plan import claims_plan, plan_claims, render_plan
from semcl.report.claim_seeds import seeds_lines
from semcl.report.claim_verdicts import judge_claims
from semcl.report.claims import load_claims, load_claims_file
from semcl.store import Store

# `semcl plan rince/tab2 --profile paper`: Triplet, FastAP and SCL-in runs cost 10.4 GPU-h each
CLAIMS = """\
paper: rince
unregistered_tables:
  rince/tab5: {columns: [ucf_r1], rows: [InfoNCE, RINCE]}
claims:
  - {id: few, table: rince/tab2, column: top1, a: Triplet, b: SCL-in, direction: less,
     provenance: paper-prose, source: seed, quote: "one seed"}
  - {id: missing, table: rince/tab2, column: top1, a: FastAP, b: SCL-in, direction: greater,
     provenance: paper-prose, source: seed, quote: "no runs"}
  - {id: done, table: rince/tab2, column: top1, a: SCL-in, b: Triplet, direction: greater,
     provenance: paper-prose, source: seed, quote: "decided"}
  - {id: unregistered, table: rince/tab5, column: ucf_r1, a: RINCE, b: InfoNCE, direction: greater,
     provenance: paper-prose, source: seed, quote: "video"}
"""


def _done(store: Store, table, rows: dict[str, list[int]], key: str = "linear_top1_last") -> None:
    for run in plan_runs(table, "paper"):
        if run.seed in rows.get(run.row_label, []):
            write_json_atomic(store.metrics_path(run.run_id),
                              {"run_id": run.run_id, "metrics": {key: 60.0 + run.seed % 7}})


def test_missing_runs_and_costs_of_undecided_claims(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text(CLAIMS)
    cf, store, registry = load_claims_file(path), Store(tmp_path / "results"), load_registry()
    _done(store, registry["rince/tab2"], {"SCL-in": [123, 546, 937], "Triplet": [123, 546]})
    verdicts = judge_claims(cf, "paper", store, registry)
    assert [v.verdict for v in verdicts] == ["inconclusive", "missing runs", "inconclusive", "missing runs"]
    needs, total, beyond = plan_claims(cf, verdicts, "paper", store, registry)
    by_id = {n.claim.id: n for n in needs}
    assert sorted(by_id) == ["missing", "unregistered"]  # "few" and "done" are decided (Triplet n = 2, SCL-in 3)
    fast = by_id["missing"]
    assert fast.rows == (("rince/tab2", ("FastAP", "SCL-in")),) and fast.seeds == (123, 546, 937)
    assert [r.row_label for r in fast.todo] == ["FastAP"] * 3 and fast.planned == 6
    assert fast.cost == pytest.approx(3 * 10.4)  # three FastAP runs; SCL-in's three are done
    assert by_id["unregistered"].reason == "table rince/tab5 is not registered yet"
    assert len(total.runs) == 3 and total.cost == pytest.approx(31.2) and not beyond.runs
    text = render_plan(cf, "paper", needs, total, beyond, registry)
    assert text.splitlines()[0] == "# claims of rince, profile paper (seeds as registered): 2 of 4 undecided"
    assert "  missing: 3 of 6 runs (bases included), 31.2 GPU-h" in text
    assert "  runs cannot decide it: table rince/tab5 is not registered yet" in text
    assert "#   semcl run rince/tab2 --row FastAP --row SCL-in --profile paper" in text


def test_one_seed_table_is_planned_on_three_seeds_and_says_so(tmp_path, capsys):
    """hsa/fig3 registers seed 123 only: both claims need MoCo v2 and Supervised (CE) on 123 / 546 / 937.
    `semcl plan hsa/fig3 --profile paper --seeds 3`: MoCo v2 187 GPU-h, Supervised (CE) 91.2 GPU-h a run."""
    store = Store(tmp_path)
    _done(store, get_table("hsa/fig3"), {"MoCo v2": [123]}, key="layer2")
    assert main(["--results", str(tmp_path), "claims", "hsa/fig3", "--plan", "--profile", "paper"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "# claims of hsa, profile paper (seeds as registered): 2 of 2 undecided"
    assert out[2] == ("  needs hsa/fig3 MoCo v2, Supervised (CE) x seeds 123, 546, 937 (the table registers seed 123 "
                      "only: decidable with --seeds 3)")
    # 2 x 187 + 3 x 91.2 = 647.6 (MoCo v2 seed 123 is done); 4 of them on seeds 546 / 937
    assert out[3] == "  missing: 5 of 6 runs (bases included), 647.6 GPU-h (on seeds beyond the registered: 4 runs)"
    assert out[-2] == ("# buying all 2 claims runs can decide: 5 runs, 647.6 GPU-h (each run and each training once; "
                       "estimates: semcl.estimate); of which on seeds the tables do not register: 4 runs, +556.4 GPU-h")
    assert out[-1] == "#   semcl run hsa/fig3 --row 'MoCo v2' --row 'Supervised (CE)' --profile paper --seeds 123,546,937"
    assert not (tmp_path / "claims").exists()  # a plan writes nothing


def test_video_claims_need_the_registered_three_seeds(tmp_path):
    text = claims_plan("rince/tab4", "paper", Store(tmp_path))
    lines = text.splitlines()
    i = lines.index("`video-ucf-hp-infonce` (missing runs): HP > InfoNCE on r1 (rince/tab4)")
    # `semcl plan rince/tab4 --profile paper`: a pre-training run costs 3.61 GPU-h; 2 rows x 3 seeds
    assert lines[i + 1:i + 3] == ["  needs rince/tab4 HP, InfoNCE x seeds 123, 546, 937",
                                  "  missing: 6 of 6 runs (bases included), 21.66 GPU-h"]
    assert "--seeds" not in text and "registers seed" not in text


def test_plan_refusals(tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"no claim reads table rince/tab1 \(tables with claims: rince/tab2"):
        claims_plan("rince/tab1", "paper", Store(tmp_path))
    with pytest.raises(ConfigError, match=r"rince/tab99"):
        claims_plan("rince/tab99", "paper", Store(tmp_path))
    assert main(["--results", str(tmp_path), "claims", "rince", "--plan", "--format", "csv"]) != 0
    assert capsys.readouterr().err.strip() == ("semcl: error: --plan lists the runs the registered rows need: without "
                                               "--set, --row, --against or --format")


def test_claims_page_states_the_seeds_each_claim_needs():
    registry = load_registry()
    lines = seeds_lines(load_claims("hsa"), "paper", registry)
    fig3 = next(ln for ln in lines if ln.startswith("hsa/fig3:"))
    assert fig3 == ("hsa/fig3: seeds 123, 546, 937; the table registers 123 only, so these claims are decidable with "
                    "`--seeds 3` (runs and cost: `semcl claims hsa --plan --profile paper --seeds 3`) → `fig3-stage2`, "
                    "`fig3-stage3`")
    tab4 = next(ln for ln in seeds_lines(load_claims("rince"), "paper", registry) if ln.startswith("rince/tab4:"))
    assert tab4.startswith("rince/tab4: seeds 123, 546, 937 (as registered) → `abs-video-ucf-top1`")
    seeded = {tid: with_seeds(t, "paper", 3) for tid, t in registry.items()}
    assert all("as registered" in ln for ln in seeds_lines(load_claims("hsa"), "paper", seeded))
