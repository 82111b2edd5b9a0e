"""`semcl report --runs-file`: the page's per-seed values beside it; the page a function of those runs and the code
(no results root, no build time), refused where it reads more than the runs file keeps."""

from __future__ import annotations

import json
import shutil
import textwrap

from semcl.cli.main import main
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.report.reproduction import collect_report, render_report_md
from semcl.report.run_values import store_of
from semcl.store import Store

TOP1 = {123: 60.0, 546: 62.0, 937: 67.0}
ENV = {"torch": "2.14.1", "cuda": None, "cudnn": None, "gpu": None, "lock_sha256": "ab" * 32}
FINISHED = {123: "2026-12-03T10:00:00+0000", 546: "2026-12-05T23:59:00+0000", 937: "2026-12-04T08:00:00+0000"}


def _records(root) -> list:
    """gpaco/fig1a's paper runs (12 rows x 3 seeds) finished as a run writes them, plus fields no page reads."""
    table = get_table("gpaco/fig1a")
    store, runs = Store(root), plan_runs(table, "paper")
    for run in runs:
        res = table.resources_for(run.row_label, "paper")
        write_json_atomic(store.metrics_path(run.run_id), {
            "run_id": run.run_id, "table": run.table_id, "row": run.row_label, "seed": run.seed, "profile": "paper",
            "metrics": {"acc_overall": TOP1[run.seed], "latency_ms": 10.0 + run.seed / 1000},
            "git": {"commit": "c0ffee" * 6 + "abcd", "dirty": False}, "environment": ENV,
            "world_size": res.gpus or res.tasks, "cpu_isa": "AVX2", "mkl_cbwr": "COMPATIBLE",
            "finished_at": FINISHED[run.seed], "wall_time_s": 12.5, "history": [{"epoch": 1, "loss": 3.0}]})
    return runs


def test_the_runs_file_holds_each_shown_run_and_the_page_names_neither_root_nor_build_time(tmp_path, capsys):
    runs = _records(tmp_path / "results")
    out = tmp_path / "pages"
    assert main(["--results", str(tmp_path / "results"), "report", "gpaco", "--profile", "paper", "--out", str(out),
                 "--runs-file"]) == 0
    assert capsys.readouterr().err.strip() == f"(written to {out / 'gpaco.paper.md'} and {out / 'gpaco.paper.runs.json'})"
    text = (out / "gpaco.paper.md").read_text()
    assert text.splitlines()[2].startswith("Rebuilt by `semcl report gpaco --profile paper` from a results root "
                                           "(the newest run shown finished on 2026-12-05). Cells:")
    assert str(tmp_path) not in text and "results`" not in text
    doc = json.loads((out / "gpaco.paper.runs.json").read_text())
    assert doc["page"] == "gpaco.paper.md" and len(doc["runs"]) == 36 == len(runs)
    first = runs[0]
    assert doc["runs"][0] == {
        "table": "gpaco/fig1a", "profile": "paper", "row": first.row_label, "seed": 123, "run_id": first.run_id,
        "commit": "c0ffee" * 6 + "abcd", "dirty": False, "cpu_isa": "AVX2", "mkl_cbwr": "COMPATIBLE",
        "environment": ENV, "world_size": 4, "finished_at": FINISHED[123],
        "metrics": {"acc_overall": 60.0, "latency_ms": 10.123}}
    # the same text from the runs file alone, in another root, with the figure named but not drawn
    again = collect_report("gpaco", "paper", store_of(doc["runs"], tmp_path / "elsewhere"), out, draw=False)
    assert render_report_md(again) == text and "![gpaco/fig1a](figures/gpaco_fig1a.paper.png)" in text


def test_a_moved_results_root_gives_the_same_page(tmp_path, capsys):
    _records(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    pages = []
    for root in ("a", "b"):
        assert main(["--results", str(tmp_path / root), "report", "gpaco", "--profile", "paper",
                     "--out", str(tmp_path / f"out-{root}")]) == 0
        pages.append((tmp_path / f"out-{root}" / "gpaco.paper.md").read_text())
    assert pages[0] == pages[1]


def test_a_page_with_cells_the_runs_file_cannot_keep_is_refused(tmp_path, capsys):
    """Imported cells (semcl results import) are no run of semcl: the runs file could not render them."""
    csv = tmp_path / "seg.csv"
    csv.write_text("table,row,column,seed,value,source\n" + textwrap.dedent("""\
        gpaco/seg,Baseline ADE20K Swin-T (UperNet),miou_ss,123,44.0,mmseg log
        """))
    assert main(["results", "import", str(csv), "--results", str(tmp_path / "results")]) == 0
    capsys.readouterr()
    out = tmp_path / "pages"
    assert main(["--results", str(tmp_path / "results"), "report", "gpaco", "--profile", "paper", "--out", str(out),
                 "--runs-file"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("semcl: error: gpaco.paper.md: the page reads more than its runs file keeps (semcl's "
                          "finished runs); from the runs alone this line differs: | `gpaco/seg` |"), err
    assert not out.exists()


def test_runs_file_is_refused_with_html(tmp_path, capsys):
    assert main(["--results", str(tmp_path), "report", "gpaco", "--profile", "paper", "--out", str(tmp_path / "o"),
                 "--html", "--runs-file"]) == 2
    assert capsys.readouterr().err == "semcl: error: --runs-file keeps the Markdown page's runs beside it: drop --html\n"
