"""Claims as data (experiments/<paper>/claims.yaml) and their verdicts from generated run records."""

from __future__ import annotations

import csv
import io
import math
import textwrap

import pytest
from scipy import stats

from semcl.cli.main import main
from semcl.errors import ConfigError
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table, load_registry
from semcl.report.claim_stats import INCONCLUSIVE_FEW, bootstrap_interval, judge, rule_text
from semcl.report.claim_verdicts import MISSING, NOT_MEASURED, judge_claims, render_csv, render_md
from semcl.report.claims import load_claims, load_claims_file
from semcl.report.reproduction import build_report
from semcl.store import Store

# per-seed linear top-1 of rince/tab2 rows (seeds 123, 546, 937), chosen so each verdict is hand-checkable
TOP1 = {
    "RINCE-in": [70.0, 71.0, 72.0],  # mean 71, sd 1
    "SCL-in": [60.0, 61.0, 62.0],  # mean 61, sd 1
    "Cross-entropy s.a.": [50.0, 51.0, 52.0],  # mean 51
    "Cross-entropy": [60.0, 61.0, 62.0],  # mean 61
    "RINCE-out": [60.0, 65.0, 70.0],  # mean 65, sd 5
    "SCL-out": [62.0, 63.0, 64.0],  # mean 63, sd 1
    "Triplet": [55.0],  # one seed only (the others are left out below)
}
SEEDS = (123, 546, 937)

CLAIMS = """\
paper: rince
unregistered_tables:
  rince/tab5: {columns: [ucf_r1], rows: [InfoNCE, RINCE]}
claims:
  - {id: sup, table: rince/tab2, column: top1, a: RINCE-in, b: SCL-in, direction: greater,
     provenance: paper-abstract, source: abstract, quote: "RINCE beats InfoNCE."}
  - {id: contra, table: rince/tab2, column: top1, a: Cross-entropy s.a., b: Cross-entropy, direction: greater,
     provenance: paper-prose, source: seed, quote: "Two heads beat CE.", stated: 1.5}
  - {id: incon, table: rince/tab2, column: top1, a: RINCE-out, b: SCL-out, direction: greater,
     provenance: paper-prose, source: seed, quote: "RINCE-out beats SCL-out."}
  - {id: margin-ok, table: rince/tab2, column: top1, a: RINCE-in, b: SCL-in, direction: greater, margin: 5,
     provenance: paper-prose, source: seed, quote: "by 5 points"}
  - {id: margin-too-big, table: rince/tab2, column: top1, a: RINCE-in, b: SCL-in, direction: greater, margin: 15,
     provenance: paper-prose, source: seed, quote: "by 15 points"}
  - {id: less, table: rince/tab2, column: top1, a: Cross-entropy s.a., b: Cross-entropy, direction: less,
     provenance: paper-prose, source: seed, quote: "Two heads below CE."}
  - {id: few, table: rince/tab2, column: top1, a: Triplet, b: SCL-in, direction: less,
     provenance: paper-prose, source: seed, quote: "one seed"}
  - {id: missing, table: rince/tab2, column: top1, a: FastAP, b: SCL-in, direction: greater,
     provenance: paper-prose, source: seed, quote: "no runs"}
  - {id: unregistered, table: rince/tab5, column: ucf_r1, a: RINCE, b: InfoNCE, direction: greater,
     provenance: paper-prose, source: seed, quote: "video"}
not_decidable:
  - {quote: "robust to the threshold", provenance: paper-prose, source: seed, reason: an equivalence}
"""


def _fill(store: Store) -> None:
    """metrics.json of every rince/tab2 paper run in TOP1 (Triplet: seed 123 only)."""
    for run in plan_runs(get_table("rince/tab2"), "paper"):
        values = TOP1.get(run.row_label)
        if values is None or SEEDS.index(run.seed) >= len(values):
            continue
        v = values[SEEDS.index(run.seed)]
        write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": {"linear_top1_last": v}})


def _verdicts(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text(CLAIMS)
    cf = load_claims_file(path)
    store = Store(tmp_path / "results")
    _fill(store)
    return cf, store, {v.claim.id: v for v in judge_claims(cf, "paper", store)}


def _welch_by_hand(a: list[float], b: list[float], shift: float = 0.0) -> float:
    """Two-sided Welch p: t = (mean a − shift − mean b) / se, Welch–Satterthwaite df."""
    na, nb = len(a), len(b)
    va, vb = stats.tvar(a), stats.tvar(b)  # ddof=1
    se2 = va / na + vb / nb
    t = (sum(a) / na - shift - sum(b) / nb) / math.sqrt(se2)
    df = se2 ** 2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
    return 2 * stats.t.sf(abs(t), df)


def test_supported_contradicted_inconclusive_and_missing(tmp_path):
    _, _, v = _verdicts(tmp_path)
    a, b = TOP1["RINCE-in"], TOP1["SCL-in"]
    sup = v["sup"].judgement
    assert v["sup"].verdict == "supported"
    assert (sup.mean_a, sup.std_a, sup.n_a, sup.mean_b, sup.n_b, sup.diff) == (71.0, 1.0, 3, 61.0, 3, 10.0)
    # t = 10 / sqrt(2/3) = 12.247 with df 4
    assert sup.p == pytest.approx(stats.ttest_ind(a, b, equal_var=False).pvalue, rel=1e-12)
    assert sup.p == pytest.approx(2 * stats.t.sf(10 / math.sqrt(2 / 3), 4), rel=1e-9)
    assert 8.0 <= sup.ci_low < sup.ci_high <= 12.0  # every resampled mean difference lies in [8, 12]

    contra = v["contra"].judgement  # Two heads 51 vs CE 61, claimed greater
    assert v["contra"].verdict == "contradicted" and contra.diff == -10.0
    assert contra.p == pytest.approx(stats.ttest_ind(TOP1["Cross-entropy s.a."], TOP1["Cross-entropy"], equal_var=False).pvalue)
    assert v["less"].verdict == "supported"  # the same numbers, claimed in the right direction

    incon = v["incon"].judgement  # 65 ± 5 vs 63 ± 1: Δ = 2, t = 2 / sqrt(25/3 + 1/3)
    assert v["incon"].verdict == "inconclusive" and incon.diff == pytest.approx(2.0)
    assert incon.p == pytest.approx(_welch_by_hand(TOP1["RINCE-out"], TOP1["SCL-out"]), rel=1e-9)
    assert incon.p == pytest.approx(stats.ttest_ind(TOP1["RINCE-out"], TOP1["SCL-out"], equal_var=False).pvalue)
    assert incon.p > 0.05

    # margins: H0 Δ = m, Welch on (A − m) against B
    assert v["margin-ok"].verdict == "supported"
    assert v["margin-ok"].judgement.p == pytest.approx(_welch_by_hand(a, b, 5.0), rel=1e-9)
    assert v["margin-too-big"].verdict == "contradicted"  # Δ = 10 significantly below the claimed 15
    assert v["margin-too-big"].judgement.p == pytest.approx(_welch_by_hand(a, b, 15.0), rel=1e-9)

    assert v["few"].verdict == INCONCLUSIVE_FEW and v["few"].judgement.n_a == 1
    assert math.isnan(v["few"].judgement.p)
    assert (v["missing"].verdict, v["missing"].detail) == (MISSING, "finished runs: A n=0, B n=3")
    assert (v["unregistered"].verdict, v["unregistered"].detail) == (MISSING, "table rince/tab5 is not registered yet")


def test_bootstrap_is_seeded_and_exact_on_constant_sides():
    assert bootstrap_interval([5.0, 5.0, 5.0], [2.0, 2.0], resamples=100) == (3.0, 3.0)
    a, b = [1.0, 4.0, 2.0], [0.0, 3.0, 1.0]
    assert bootstrap_interval(a, b, seed=7) == bootstrap_interval(a, b, seed=7)
    lo, hi = bootstrap_interval(a, b)
    assert -2.0 <= lo < 1.0 < hi <= 4.0  # Δ = 1; resampled means of A in [1, 4], of B in [0, 3]
    # identical constant sides: no evidence either way
    assert judge([1.0, 1.0], [1.0, 1.0], "greater").verdict == "inconclusive"


def test_profile_without_the_column_and_unimplemented_rows(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text(textwrap.dedent("""\
        paper: gpaco
        claims:
          - {id: tin, table: rince/tab2, column: auroc_tinyimagenet, a: RINCE-in, b: SCL-in, direction: greater,
             provenance: paper-prose, source: s, quote: q}
          - {id: mae, table: gpaco/seg, column: miou_ss, a: GPaCo ADE20K Swin-T (UperNet),
             b: Baseline ADE20K Swin-T (UperNet), direction: greater, provenance: paper-prose, source: s, quote: q}
          - {id: reported, table: scns/kd-cifar100, column: crd_ref, a: Teacher wrn_40_2, b: Teacher resnet56,
             direction: greater, provenance: paper-prose, source: s, quote: q}
          - {id: gain, table: gpaco/tab5, column: gain_vs_supcon, a: PaCo ResNet-50 (SimAugment),
             direction: greater, provenance: paper-prose, source: s, quote: q}
        """))
    cf = load_claims_file(path)
    v = {x.claim.id: x for x in judge_claims(cf, "mini", Store(tmp_path))}
    assert (v["tin"].verdict, v["tin"].detail) == (NOT_MEASURED, "column auroc_tinyimagenet: profile 'mini' does not measure it")
    assert (v["mae"].verdict, v["mae"].detail) == (MISSING, "table gpaco/seg has no profile 'mini'")
    v = {x.claim.id: x for x in judge_claims(cf, "paper", Store(tmp_path))}
    assert (v["mae"].verdict, v["mae"].detail) == (MISSING, "row 'GPaCo ADE20K Swin-T (UperNet)' is not implemented")
    assert (v["reported"].verdict, v["reported"].detail) == (NOT_MEASURED, "column crd_ref: the suite does not measure it")
    # a gain column is computed from measured columns: judged like any other once its runs exist
    assert (v["gain"].verdict, v["gain"].detail) == (MISSING, "finished runs: A n=0, B n=0")


def test_markdown_and_csv(tmp_path):
    cf, store, _ = _verdicts(tmp_path)
    verdicts = judge_claims(cf, "paper", store)
    md = render_md(cf, "paper", verdicts, store)
    assert rule_text() in md
    assert "- Profile paper of rince/tab2: the paper's data, model and schedule (GPU cluster)." in md
    assert "3 supported, 2 contradicted, 1 inconclusive, 1 inconclusive (n < 2), 2 missing runs" in md
    p = stats.ttest_ind(TOP1["RINCE-in"], TOP1["SCL-in"], equal_var=False).pvalue
    sup_v = next(x for x in verdicts if x.claim.id == "sup")
    sup = sup_v.judgement
    # Holm over the distinct tested comparisons of the file, by hand
    tested = [v for v in verdicts if v.same_as is None and v.judgement is not None and not math.isnan(v.judgement.p)]
    ps = sorted(v.judgement.p for v in tested)
    k = ps.index(sup.p)
    want_holm = min(1.0, max((len(ps) - i) * ps[i] for i in range(k + 1)))
    assert sup_v.p_holm == pytest.approx(want_holm)

    def fmt(x):
        return "< 0.001" if x < 0.001 else f"{x:.3f}"

    assert (f"| `sup` | RINCE-in > SCL-in on top1 (rince/tab2) | 71.00 ± 1.00 (n=3) | 61.00 ± 1.00 (n=3) | +10.00 | "
            f"{fmt(p)} | {fmt(want_holm)} | [{sup.ci_low:.2f}, {sup.ci_high:.2f}] | supported |") in md
    assert "| +-10.00" not in md and "| -10.00 (+1.5) |" in md  # the paper's stated Δ next to ours
    assert ("| `missing` | FastAP > SCL-in on top1 (rince/tab2) | — | — | — | — | — | — | "
            "missing runs: finished runs: A n=0, B n=3 |") in md
    assert "| `margin-ok` | RINCE-in > SCL-in by ≥ 5 on top1 (rince/tab2) |" in md
    assert '- "RINCE beats InfoNCE." (paper-abstract; abstract) → `sup`' in md
    assert '- "robust to the threshold" (paper-prose; seed): an equivalence' in md
    lines = render_csv(verdicts).splitlines()
    assert lines[0].startswith("id,table,column,a,b,direction,margin,stated,mean_a,std_a,n_a,")
    assert lines[1].startswith(f"sup,rince/tab2,top1,RINCE-in,SCL-in,greater,0.0,,71.0,1.0,3,61.0,1.0,3,10.0,{float(p)!r},"
                               f"{sup_v.p_holm!r},")
    assert lines[8].startswith("missing,rince/tab2,top1,FastAP,SCL-in,greater,0.0,,,,,,,,,,,,,missing runs,,")


def test_cli_and_report_use_the_shipped_claims(tmp_path, capsys):
    store = Store(tmp_path / "results")
    _fill(store)
    assert main(["--results", str(store.root), "claims", "rince", "--profile", "paper"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("| `abs-in-top1` |"))
    assert line.endswith("| supported |") and "RINCE-in > SCL-in on top1 (rince/tab2)" in line
    assert (store.root / "claims" / "rince.paper.md").read_text() == out
    assert main(["--results", str(store.root), "claims", "rince", "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("id,table,column,")
    text, _ = build_report("rince", "paper", store, tmp_path / "reproduce")
    assert "## Claims" in text and "| `abs-in-top1` |" in text and "Rule: " in text


def test_the_claims_csv_writes_formula_like_row_labels_as_text(tmp_path, capsys):
    assert main(["--results", str(tmp_path), "claims", "hsa", "--profile", "smoke", "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    knn = next(r for r in rows if r[0] == "components-knn")
    assert knn[1:5] == ["hsa/abl-components", "top1", "'+ kNN positives", "MoCo v2"]
    assert not [c for r in rows for c in r if c.startswith(("=", "+", "@", "\t", "\r"))]


def test_every_shipped_claims_file_loads_and_the_registry_skips_them():
    for paper in ("rince", "gpaco", "paco", "hsa", "scns"):
        cf = load_claims(paper)
        assert cf.paper == paper and cf.claims
    assert all(t.path.name != "claims.yaml" for t in load_registry().values())


def test_scns_over_crd_is_judged_on_both_readings_each_named(tmp_path, capsys):
    """Each SCNS-over-CRD sentence is a claim on the CRD (InfoNCE) gain row and one on the CRD (NCE as published)
    gain row, each naming its reading in the comparison (docs/papers/README.md rule 4)."""
    cf = load_claims("scns")
    crd = {c.id: c for c in cf.claims if "-vs-crd" in c.id}
    pairs = [(f"kd-{d}{lm}-vs-crd", f"kd-{d}{lm}-vs-crd-nce") for d in ("c100", "tin") for lm in ("", "-lm")]
    assert sorted(crd) == sorted(i for p in pairs for i in p)
    for infonce, nce in pairs:
        a, b = crd[infonce], crd[nce]
        assert (a.table, a.quote, a.column, a.direction) == (b.table, b.quote, b.column, b.direction)
        assert a.a == b.a.replace("gain over CRD,", "gain over CRD (InfoNCE),") and "(InfoNCE)" not in b.a
        assert a.reading.startswith("CRD (InfoNCE)") and b.reading.startswith("CRD as published: CRD's NCE")
    assert main(["--results", str(tmp_path), "claims", "scns", "--profile", "smoke"]) == 0
    lines = {ln.split(" | ")[0]: ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| `kd-")}
    assert "[reading: CRD as published: CRD's NCE" in lines["| `kd-tin-lm-vs-crd-nce`"]
    assert "SCNS-class + LM gain over CRD, average" in lines["| `kd-tin-lm-vs-crd-nce`"]
    assert "[reading: CRD (InfoNCE)" in lines["| `kd-c100-vs-crd`"]
    assert main(["--results", str(tmp_path), "claims", "scns", "--profile", "smoke", "--format", "csv"]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("kd-c100-vs-crd-nce,")]
    assert len(rows) == 1 and rows[0].endswith(",CRD as published: CRD's NCE (sampler and objective differ)")


BASE = {"id": "x", "table": "rince/tab2", "column": "top1", "a": "RINCE-in", "b": "SCL-in", "direction": "greater",
        "provenance": "paper-prose", "source": "s", "quote": "q"}


@pytest.mark.parametrize(("change", "message"), [
    ({"colour": "red"}, r"claims\[0\] \(x\): unknown key 'colour'"),
    ({"margin": "big"}, r"claims\[0\] \(x\): key 'margin' must be number, not str"),
    ({"margin": True}, r"claims\[0\] \(x\): key 'margin' must be number, not bool"),
    ({"margin": -1}, r"claims\[0\] \(x\): key 'margin' must be >= 0"),
    ({"quote": None}, r"claims\[0\] \(x\): missing key 'quote'"),
    ({"table": "rince/tab99"}, r"key 'table': 'rince/tab99' is neither a registry table nor listed"),
    ({"column": "ap"}, r"key 'column': 'ap' is not a column of rince/tab2 \(top1, top1_best,"),
    ({"a": "RINCE"}, r"key 'a': 'RINCE' is not a row of rince/tab2"),
    ({"b": "RINCE-in"}, r"keys 'a' and 'b' name the same row 'RINCE-in'"),
    ({"direction": "better"}, r"key 'direction': 'better' is not one of \['greater', 'less'\]"),
    ({"provenance": "memory"}, r"key 'provenance': 'memory' is not one of"),
])
def test_schema_errors_name_the_file_and_key(tmp_path, change, message):
    import yaml

    claim = {k: v for k, v in {**BASE, **change}.items() if v is not None}
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({"paper": "rince", "claims": [claim]}))
    with pytest.raises(ConfigError, match=message) as err:
        load_claims_file(path)
    assert str(err.value).startswith(f"{path}: ") and "\n" not in str(err.value)


@pytest.mark.parametrize(("doc", "message"), [
    ("paper: rince\nclaims: []\nextra: 1\n", "unknown key 'extra'"),
    ("paper: rince\n", "missing key 'claims'"),
    ("paper: rince\nclaims: {}\n", "key 'claims' must be list, not dict"),
    ("paper: rince\nclaims: []\nunregistered_tables: {rince/tab5: {columns: [], rows: [A]}}\n",
     "unregistered_tables.rince/tab5: key 'columns' must be a non-empty list of strings"),
    ("paper: rince\nclaims: []\nnot_decidable: [{quote: q, provenance: paper-prose, source: s}]\n",
     r"not_decidable\[0\]: missing key 'reason'"),
    ("paper: rince\nclaims: [\n", "invalid YAML"),
])
def test_file_level_schema_errors(tmp_path, doc, message):
    path = tmp_path / "claims.yaml"
    path.write_text(doc)
    with pytest.raises(ConfigError, match=message):
        load_claims_file(path)


def test_duplicate_ids_and_folder_mismatch(tmp_path, registry_copy):
    import yaml

    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({"paper": "rince", "claims": [BASE, BASE]}))
    with pytest.raises(ConfigError, match=r"claims\[1\]: key 'id': 'x' is used twice"):
        load_claims_file(path)
    (registry_copy / "rince" / "claims.yaml").write_text(yaml.safe_dump({"paper": "gpaco", "claims": [BASE]}))
    with pytest.raises(ConfigError, match="key 'paper': 'gpaco', but the file sits in the folder of 'rince'"):
        load_claims("rince")
    with pytest.raises(ConfigError, match=r"no claims file for paper 'simclr' \(papers with one: gpaco, hsa, paco, rince, scns"):
        load_claims("simclr")


def test_holm_adjusts_by_rank_keeps_order_monotone_and_caps_at_one():
    from semcl.report.claim_stats import holm

    # by hand: sorted 0.01, 0.02, 0.03, 0.5 -> 4 x 0.01 = 0.04, 3 x 0.02 = 0.06, 2 x 0.03 = 0.06, 1 x 0.5 = 0.5
    assert holm([0.03, 0.01, 0.5, 0.02]) == pytest.approx([0.06, 0.04, 0.5, 0.06])
    assert holm([0.4, 0.3]) == pytest.approx([0.6, 0.6])  # 2 x 0.3 = 0.6; then max(0.6, 0.4) stays monotone
    assert holm([0.9, 0.8, 0.7]) == [1.0, 1.0, 1.0]
    assert holm([]) == []


def test_two_sentences_reading_one_comparison_are_counted_once(tmp_path):
    store = Store(tmp_path / "results")
    _fill(store)
    cf = load_claims("rince")
    verdicts = {v.claim.id: v for v in judge_claims(cf, "paper", store)}
    # the t-SNE sentence reads RINCE-in > SCL-in on coarse AP, the comparison the abstract's claim already makes
    twin, first = verdicts["tsne-rince-scl"], verdicts["abs-in-ap-coarse"]
    assert twin.same_as == "abs-in-ap-coarse" and first.same_as is None
    assert twin.p_holm == first.p_holm or (math.isnan(twin.p_holm) and math.isnan(first.p_holm))
    distinct = [v for v in verdicts.values() if v.same_as is None]
    from semcl.report.claim_verdicts import counts

    assert sum(counts(list(verdicts.values())).values()) == len(distinct) < len(verdicts)
