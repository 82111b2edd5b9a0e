"""`semcl results import`: results of runs made by another tool (mmseg for gpaco/seg), kept under <results>/imports/,
judged by claims, marked in every table rendering; a bad CSV imports nothing."""

from __future__ import annotations

import hashlib
import json
import math
import textwrap

import pytest
from scipy import stats

from semcl.cli.main import main
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.report import imported
from semcl.report.claim_verdicts import judge_claims
from semcl.report.claims import load_claims_file
from semcl.report.imported import load_imported
from semcl.store import Store

BASE, GPACO = "Baseline ADE20K Swin-T (UperNet)", "GPaCo ADE20K Swin-T (UperNet)"
HEAD = "table,row,column,seed,value,source\n"
SOURCE = "mmseg 1.2.2, work_dirs/upernet_swin_t/20261201.log"
# mIoU per seed 123, 546, 937 as an mmseg log would print them
MIOU = {BASE: [44.0, 44.5, 45.0], GPACO: [45.5, 46.0, 46.5]}


def _csv(tmp_path, body: str, name: str = "seg.csv"):
    path = tmp_path / name
    path.write_text(HEAD + textwrap.dedent(body))
    return path


def _good(tmp_path):
    lines = "".join(f"gpaco/seg,{row},miou_ss,{seed},{v},\"{SOURCE}\"\n"
                    for row, vals in MIOU.items() for seed, v in zip((123, 546, 937), vals, strict=True))
    return _csv(tmp_path, lines)


def _import(tmp_path, path, *extra) -> int:
    return main(["results", "import", str(path), "--results", str(tmp_path / "results"), *extra])


def test_import_writes_one_record_per_cell_with_provenance(tmp_path, capsys):
    path = _good(tmp_path)
    assert _import(tmp_path, path) == 0
    recs = load_imported(tmp_path / "results")
    assert len(recs) == 6
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert {(r.row, r.seed, r.value) for r in recs} == {
        (row, seed, v) for row, vals in MIOU.items() for seed, v in zip((123, 546, 937), vals, strict=True)}
    assert all(r.sha256 == digest and r.source == SOURCE and r.profile == "paper" and r.file == str(path)
               and r.imported_at.endswith("+00:00") for r in recs)
    # apart from semcl's runs and from the paper-numbers overlay
    assert not (tmp_path / "results" / "runs").exists() and not (tmp_path / "results" / "numbers.yaml").exists()
    assert len(list((tmp_path / "results" / "imports" / "gpaco_seg" / "paper").glob("*.json"))) == 6
    assert "imported: gpaco/seg row 'Baseline ADE20K Swin-T (UperNet)'" in capsys.readouterr().out


def test_imported_rows_get_verdicts(tmp_path):
    _import(tmp_path, _good(tmp_path))
    claims = tmp_path / "claims.yaml"
    claims.write_text(textwrap.dedent(f"""\
        paper: gpaco
        claims:
          - {{id: seg, table: gpaco/seg, column: miou_ss, a: {GPACO}, b: {BASE}, direction: greater,
             provenance: paper-prose, source: s, quote: q}}
          - {{id: ms, table: gpaco/seg, column: miou_ms, a: {GPACO}, b: {BASE}, direction: greater,
             provenance: paper-prose, source: s, quote: q}}
        """))
    v = {x.claim.id: x for x in judge_claims(load_claims_file(claims), "paper", Store(tmp_path / "results"))}
    j = v["seg"].judgement
    assert v["seg"].verdict == "supported"
    assert (j.mean_a, j.mean_b, j.n_a, j.n_b, j.diff) == (46.0, 44.5, 3, 3, 1.5)
    # two sides of sd 0.5: t = 1.5 / sqrt(0.25/3 * 2) with df 4
    assert j.p == pytest.approx(stats.ttest_ind(MIOU[GPACO], MIOU[BASE], equal_var=False).pvalue, rel=1e-12)
    assert j.p == pytest.approx(2 * stats.t.sf(1.5 / math.sqrt(0.5 / 3), 4), rel=1e-9)
    # nothing imported for the multi-scale column: the rows stay without results there
    assert (v["ms"].verdict, v["ms"].detail) == ("missing runs", f"row {GPACO!r} is not implemented")


@pytest.mark.parametrize("fmt", ["md", "tex", "csv"])
def test_every_rendering_marks_imported_cells(tmp_path, capsys, fmt):
    _import(tmp_path, _good(tmp_path))
    capsys.readouterr()
    assert main(["table", "gpaco/seg", "--profile", "paper", "--format", fmt,
                 "--results", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    if fmt == "csv":
        line = next(ln for ln in out.splitlines() if ln.startswith(f"{BASE},miou_ss,"))
        assert line.split(",")[5] == "44.5" and line.endswith(f",\"{SOURCE}\"")
        assert out.splitlines()[0].endswith(",source,imported")
        return
    pm = r"$\pm$" if fmt == "tex" else "±"
    assert f"44.50 {pm} 0.50 (n=3) ‡" in out and f"46.00 {pm} 0.50 (n=3) ‡" in out
    assert f"‡ {BASE} / mIoU s.s.: imported from {SOURCE} (semcl results import; n=3" in out


def test_html_page_marks_imported_cells(tmp_path):
    from semcl.report.html import build_html_report

    _import(tmp_path, _good(tmp_path))
    page = build_html_report("gpaco", "paper", Store(tmp_path / "results"), tmp_path / "out")[0].read_text()
    assert "44.50 ± 0.50 (n=3) ‡" in page and f"imported from {SOURCE}" in page


def test_a_table_without_imports_renders_as_before(tmp_path, capsys):
    assert main(["table", "gpaco/seg", "--profile", "paper", "--format", "csv", "--results", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "row,column,implemented,paper,provenance,mean,std,n,delta,source"


BAD = {
    "table": ("gpaco/nope,{BASE},miou_ss,123,44.0,s\n", "line 3: no table 'gpaco/nope' in the registry"),
    "row": ("gpaco/seg,Nope,miou_ss,123,44.0,s\n", "line 3: table gpaco/seg has no row 'Nope'"),
    "column": ("gpaco/seg,{BASE},miou_xx,123,44.0,s\n", "line 3: table gpaco/seg has no column 'miou_xx'"),
    "seed": ("gpaco/seg,{BASE},miou_ss,7,44.0,s\n", "line 3: seed 7 is not a seed of gpaco/seg in profile paper"),
    "range": ("gpaco/seg,{BASE},miou_ss,546,101.5,s\n", "line 3: key 'value' = 101.5 is outside [0, 100]"),
    "nan": ("gpaco/seg,{BASE},miou_ss,546,nan,s\n", "line 3: key 'value' = nan is outside [0, 100]"),
    "number": ("gpaco/seg,{BASE},miou_ss,546,44%,s\n", "line 3: key 'value' = '44%' is not a number"),
    "duplicate": ("gpaco/seg,{BASE},miou_ss,123,44.1,s\n",
                  "line 3: a second value for gpaco/seg row 'Baseline ADE20K Swin-T (UperNet)' column 'miou_ss' "
                  "seed 123 (first on line 2)"),
    "fields": ("gpaco/seg,{BASE},miou_ss,546,44.0\n", "line 3: 5 fields, the header has 6"),
    "quote": ('gpaco/seg,{BASE},miou_ss,546,44.0,"s"x\n', "line 3: not CSV"),
    "empty": ("gpaco/seg,{BASE},miou_ss,546,44.0,\n", "line 3: key 'source' is empty"),
    "reference": ("hsa/transfer-voc,Supervised IN-1M (MoCo README reference),ap50,123,81.0,s\n",
                  "line 3: row 'Supervised IN-1M (MoCo README reference)' of hsa/transfer-voc is a reference row"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_line_imports_nothing(tmp_path, capsys, case):
    body, said = BAD[case]
    path = _csv(tmp_path, f"gpaco/seg,{BASE},miou_ss,123,44.0,s\n" + body.format(BASE=BASE))
    assert _import(tmp_path, path) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"semcl: error: {path}: {said}") and "\n" not in err
    assert not (tmp_path / "results" / "imports").exists()  # the good first line was not written either


def test_bad_header_size_and_encoding(tmp_path, capsys, monkeypatch):
    cases = [
        ("table,row,column,seed,value,source,value\n", "line 1: columns must be table,row,column,seed,value,source "
                                                       "(column 'value' twice)"),
        ("table,row,column,seed,value\n", "line 1: columns must be table,row,column,seed,value,source (missing source)"),
        ("table,row,column,seed,value,source,std\n", "line 1: columns must be table,row,column,seed,value,source "
                                                     "(unknown 'std')"),
        (HEAD, "no results (header only)"),
    ]
    for text, said in cases:
        path = tmp_path / "bad.csv"
        path.write_text(text)
        assert _import(tmp_path, path) == 2
        assert capsys.readouterr().err.strip() == f"semcl: error: {path}: {said}"
    path = tmp_path / "latin.csv"
    path.write_bytes(HEAD.encode() + f"gpaco/seg,{BASE},miou_ss,123,44.0,caf\xe9\n".encode("latin-1"))
    assert _import(tmp_path, path) == 2 and "not UTF-8 text" in capsys.readouterr().err
    path = _good(tmp_path)
    monkeypatch.setattr(imported, "MAX_BYTES", 100)
    assert _import(tmp_path, path) == 2
    assert f"{path}: {path.stat().st_size:,} bytes, more than a results CSV can be (100)" in capsys.readouterr().err
    monkeypatch.setattr(imported, "MAX_BYTES", 2**20)
    path = _csv(tmp_path, f"gpaco/seg,{BASE},miou_ss,123,44.0,{'x' * 5000}\n")
    assert _import(tmp_path, path) == 2
    assert "line 2: key 'source' is longer than 4096 characters" in capsys.readouterr().err
    assert not (tmp_path / "results" / "imports").exists()


def test_seeds_beyond_the_registered_ones_with_the_seeds_option(tmp_path, capsys):
    # hsa/transfer-voc registers one seed; detectron2's five trials of another seed need --seeds, as claims do
    row = "CsMl, 200 ep (pre-training)"
    path = _csv(tmp_path, f"hsa/transfer-voc,\"{row}\",ap50,546,82.0,detectron2 metrics.json\n")
    assert _import(tmp_path, path) == 2
    assert "line 2: seed 546 is not a seed of hsa/transfer-voc in profile paper (123;" in capsys.readouterr().err
    assert _import(tmp_path, path, "--seeds", "3") == 0
    assert [(r.table, r.row, r.column, r.seed, r.value) for r in load_imported(tmp_path / "results")] == [
        ("hsa/transfer-voc", row, "ap50", 546, 82.0)]


def test_reimport_needs_replace_and_sets_the_old_record_aside(tmp_path, capsys):
    _import(tmp_path, _good(tmp_path))
    again = _csv(tmp_path, f"gpaco/seg,{BASE},miou_ss,123,43.0,rerun log\n", "again.csv")
    assert _import(tmp_path, again) == 2
    assert "line 2: gpaco/seg row 'Baseline ADE20K Swin-T (UperNet)' column 'miou_ss' seed 123 (paper) was imported " \
           "before; pass --replace" in capsys.readouterr().err
    assert _import(tmp_path, again, "--replace") == 0
    assert capsys.readouterr().out.startswith("replaced: gpaco/seg row")
    folder = tmp_path / "results" / "imports" / "gpaco_seg" / "paper"
    old = [json.loads(p.read_text()) for p in folder.glob("*.replaced-*.json")]
    assert [(o["value"], o["source"]) for o in old] == [(44.0, SOURCE)]
    rec = next(r for r in load_imported(tmp_path / "results") if (r.row, r.seed) == (BASE, 123))
    assert (rec.value, rec.source) == (43.0, "rerun log")

    assert main(["results", "remove", "gpaco/seg", "--row", BASE, "--column", "mIoU s.s.", "--seed", "123",
                 "--results", str(tmp_path / "results")]) == 0
    assert len(list(folder.glob("*.replaced-*.json"))) == 2 and len(load_imported(tmp_path / "results")) == 5
    assert main(["results", "list", "gpaco/seg", "--results", str(tmp_path / "results")]) == 0
    assert capsys.readouterr().out.count("gpaco/seg  paper") == 5


def test_a_cell_semcl_measured_itself_is_refused(tmp_path, capsys):
    row = "Baseline COCO-Stuff-10k ResNet-50 (torchvision DeepLabV3 stand-in)"
    store = Store(tmp_path / "results")
    run = next(r for r in plan_runs(get_table("gpaco/seg"), "smoke") if r.row_label == row)
    write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": {"miou_ss": 30.0}})
    path = _csv(tmp_path, f"gpaco/seg,{row},miou_ss,123,31.0,mmseg\n")
    assert _import(tmp_path, path, "--profile", "smoke") == 2
    assert f"line 2: gpaco/seg row {row!r} column 'miou_ss' seed 123 (smoke) is measured by semcl's own run " \
           f"{run.run_id}" in capsys.readouterr().err
    assert not (tmp_path / "results" / "imports").exists()
