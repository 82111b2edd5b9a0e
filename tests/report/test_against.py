"""`--against`: another lab's store or bundle beside yours (semcl.report.origins, semcl.report.against).

The smoke store is generated: rince/tab2's smoke run ids with metrics.json and history.jsonl holding chosen
values, so every mean, std and Welch p below is computed by hand. A bundle is the publish contract's shape: the
runs' record files under <DIR>/runs/<id>/ and a SHA256SUMS over every file (semcl.files.write_sha256sums)."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
from pathlib import Path

import pytest
from scipy import stats

from semcl.cli.main import main
from semcl.files import write_json_atomic, write_sha256sums
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.store import Store

SEEDS = (123, 546, 937)
# per-seed linear top-1 (last) of three rows; Triplet has one seed only
TOP1 = {"RINCE-in": [70.0, 71.0, 72.0], "SCL-in": [60.0, 62.0, 64.0], "Triplet": [55.0]}
LOSS = {"RINCE-in": [[3.0, 2.0], [3.2, 2.2], [3.4, 2.4]], "SCL-in": [[4.0, 3.0], [4.2, 3.2], [4.4, 3.4]],
        "Triplet": [[1.0, 0.5]]}


def make_store(root: Path) -> Store:
    """rince/tab2 smoke records: top1 and top1_best per TOP1 (best = last + 1), a two-epoch history per LOSS."""
    store = Store(root)
    for run in plan_runs(get_table("rince/tab2"), "smoke"):
        vals = TOP1.get(run.row_label)
        k = SEEDS.index(run.seed)
        if vals is None or k >= len(vals):
            continue
        write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": {
            "linear_top1_last": vals[k], "linear_top1_best": vals[k] + 1.0}, "git": {"commit": "abc1234567"}})
        store.folder(run.run_id).history.write_text("".join(
            json.dumps({"epoch": e + 1, "loss": v}) + "\n" for e, v in enumerate(LOSS[run.row_label][k])))
        store.folder(run.run_id).log.write_text("a log\n")
    return store


def make_bundle(store: Store, out: Path, shift: dict[tuple[str, str], float] | None = None) -> Path:
    """The store's run folders as a bundle at `out`; `shift` {(row, metric key): +x} edits those values first."""
    rows = {r.run_id: r.row_label for r in plan_runs(get_table("rince/tab2"), "smoke")}
    for run_dir in sorted((store.root / "runs").iterdir()):
        dest = out / "runs" / run_dir.name
        dest.mkdir(parents=True)
        for f in run_dir.iterdir():
            shutil.copy2(f, dest / f.name)
        rec = json.loads((dest / "metrics.json").read_text())
        for (row, key), x in (shift or {}).items():
            if rows[run_dir.name] == row:
                rec["metrics"][key] += x
        (dest / "metrics.json").write_text(json.dumps(rec))
    (out / "README.md").write_text("---\nmodel-index: []\n---\n# a bundle\n")
    write_sha256sums(out)
    return out


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.delenv("SEMCL_PRECISION", raising=False)
    monkeypatch.delenv("SEMCL_NUMBERS", raising=False)
    return make_store(tmp_path / "ours")


def cli(capsys, *args) -> tuple[int, str, str]:
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def csv_cells(text: str) -> dict[tuple[str, str, str], dict]:
    return {(r["origin"], r["row"], r["column"]): r for r in csv.DictReader(io.StringIO(text))}


def welch_by_hand(a: list[float], b: list[float]) -> float:
    """Welch's two-sided p from its formulas (t, Welch–Satterthwaite df, Student's t tail)."""
    va = sum((x - sum(a) / len(a)) ** 2 for x in a) / (len(a) - 1) / len(a)
    vb = sum((x - sum(b) / len(b)) ** 2 for x in b) / (len(b) - 1) / len(b)
    t = (sum(a) / len(a) - sum(b) / len(b)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return 2 * stats.t.sf(abs(t), df)


def test_against_itself_every_cell_is_consistent(env, tmp_path, capsys):
    bundle = make_bundle(env, tmp_path / "b")
    rc, out, err = cli(capsys, "--results", env.root, "table", "rince/tab2", "--profile", "smoke", "--against", bundle,
                       "--format", "csv")
    assert rc == 0, err
    cells = csv_cells(out)
    for row, vals in (("RINCE-in", TOP1["RINCE-in"]), ("SCL-in", TOP1["SCL-in"])):
        for col, off in (("top1", 0.0), ("top1_best", 1.0)):
            mine, theirs = cells[("ours", row, col)], cells[("b", row, col)]
            assert theirs["verdict"] == "consistent" and float(theirs["p"]) == pytest.approx(1.0)
            # equal run ids from two origins stay two runs: n is the seeds of one origin, never doubled
            assert int(mine["n"]) == int(theirs["n"]) == 3
            assert float(mine["mean"]) == float(theirs["mean"]) == pytest.approx(sum(vals) / 3 + off)
    assert cells[("b", "Triplet", "top1")]["verdict"] == "n too small"
    assert cells[("b", "Triplet", "top1")]["p"] == ""
    assert cells[("b", "Cross-entropy", "top1")]["verdict"] == ""  # no run on either side: no verdict
    # the markdown: both columns and a verdict per cell with runs
    rc, md, _ = cli(capsys, "--results", env.root, "table", "rince/tab2", "--profile", "smoke", "--against", bundle)
    assert rc == 0
    assert "| Row | Column | ours | b | p (Welch, b) | b vs ours |" in md
    assert "| RINCE-in | Top-1 | 71.00 ± 1.00 (n=3) | 71.00 ± 1.00 (n=3) | 1.000 | consistent |" in md
    assert "| Triplet | Top-1 | 55.00 (n=1) | 55.00 (n=1) | — | n too small |" in md
    assert "b vs ours: 4 consistent, 0 differs, 2 n too small." in md
    assert "Cross-entropy" not in md.split("\n\n")[1]  # cells without a run anywhere are left out
    # nothing written into the bundle: it still matches its sums, and the table went to our store
    from semcl.files import sha256sums_problems

    assert sha256sums_problems(bundle) == []
    assert (env.root / "tables" / "against-b" / "rince_tab2.smoke.md").read_text() == md


def test_shifted_copy_differs_with_the_hand_computed_welch_p(env, tmp_path, capsys):
    bundle = make_bundle(env, tmp_path / "lab2", shift={("RINCE-in", "linear_top1_last"): 5.0})
    rc, out, err = cli(capsys, "--results", env.root, "table", "rince/tab2", "--profile", "smoke", "--against",
                       f"theirs={bundle}", "--format", "csv")
    assert rc == 0, err
    cells = csv_cells(out)
    shifted = cells[("theirs", "RINCE-in", "top1")]
    mine, theirs = TOP1["RINCE-in"], [v + 5.0 for v in TOP1["RINCE-in"]]
    # t = -5 / sqrt(1/3 + 1/3) = -6.124, df = 4: p = 0.003602
    assert float(shifted["p"]) == pytest.approx(welch_by_hand(mine, theirs), rel=1e-9)
    assert float(shifted["p"]) == pytest.approx(0.003602, abs=1e-6)
    assert shifted["verdict"] == "differs" and float(shifted["mean"]) == pytest.approx(76.0)
    # the unshifted cells of the same runs stay consistent
    assert cells[("theirs", "RINCE-in", "top1_best")]["verdict"] == "consistent"
    assert cells[("theirs", "SCL-in", "top1")]["verdict"] == "consistent"


def test_two_origins_with_equal_run_ids_stay_apart(env, tmp_path, capsys):
    lab_a = tmp_path / "a" / "results"
    shutil.copytree(env.root, lab_a)  # a plain results root: the very same run ids as ours
    bundle = make_bundle(env, tmp_path / "b", shift={("SCL-in", "linear_top1_last"): -1.0})
    from semcl import api

    long = api.long_frame("rince/tab2", "smoke", results=env.root, against=[f"labA={lab_a}", str(bundle)])
    counts = long[(long.row == "SCL-in") & (long.column == "top1")].groupby("origin")["value"].agg(["count", "mean"])
    assert counts.loc["ours", "count"] == counts.loc["labA", "count"] == counts.loc["b", "count"] == 3
    assert counts.loc["b", "mean"] == pytest.approx(61.0) and counts.loc["labA", "mean"] == pytest.approx(62.0)
    rc, out, err = cli(capsys, "--results", env.root, "table", "rince/tab2", "--profile", "smoke",
                       "--against", f"labA={lab_a}", "--against", bundle, "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert [o["name"] for o in doc["origins"]] == ["ours", "labA", "b"]
    assert [o["kind"] for o in doc["origins"]] == ["results root", "results root", "bundle"]
    by = {(c["origin"], c["row"], c["column"]): c for c in doc["cells"]}
    assert by[("labA", "SCL-in", "top1")]["verdict"] == "consistent" and by[("labA", "SCL-in", "top1")]["n"] == 3
    # two origins under one name are refused
    rc, _, err = cli(capsys, "--results", env.root, "table", "rince/tab2", "--profile", "smoke",
                     "--against", f"x={lab_a}", "--against", f"x={bundle}")
    assert rc == 2 and "a second origin named 'x'" in err and len(err.strip().splitlines()) == 1


def _tamper_byte(bundle: Path) -> Path:
    path = next((bundle / "runs").iterdir()) / "metrics.json"
    data = bytearray(path.read_bytes())
    data[-2] ^= 1
    path.write_bytes(bytes(data))
    return path


def _tamper_dotdot(bundle: Path) -> Path:
    sums = bundle / "SHA256SUMS"
    sums.write_text(sums.read_text() + "0" * 64 + "  ../ours/runs/x/metrics.json\n")
    return sums


def _tamper_symlink(bundle: Path) -> Path:
    link = bundle / "runs" / "outside"
    os.symlink(bundle.parent / "ours", link)
    return link


@pytest.mark.parametrize("tamper", [_tamper_byte, _tamper_dotdot, _tamper_symlink])
def test_a_tampered_bundle_is_refused_in_one_line_and_nothing_is_read(env, tmp_path, capsys, monkeypatch, tamper):
    bundle = make_bundle(env, tmp_path / "b")
    named = tamper(bundle)
    read = []
    real = Store.read_record
    monkeypatch.setattr(Store, "read_record", lambda self, rid: read.append(self.root) or real(self, rid))
    for command in (["table", "rince/tab2"], ["claims", "rince"], ["curves", "rince/tab2"], ["report", "rince"]):
        rc, out, err = cli(capsys, "--results", env.root, *command, "--profile", "smoke", "--against", bundle)
        assert rc == 2 and out == ""
        assert len(err.strip().splitlines()) == 1 and err.startswith("semcl: error: ")
        assert (named.name if tamper is not _tamper_dotdot else "SHA256SUMS") in err and "not read" in err
    assert read == []  # refused before any record was opened, ours or theirs


def test_bad_against_paths_are_one_line(env, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for target, says in ((tmp_path / "nowhere", "no such folder"), (tmp_path / "empty", "neither a results root"),
                         (env.root, "your own results root")):
        rc, out, err = cli(capsys, "--results", env.root, "table", "rince/tab2", "--profile", "smoke",
                           "--against", target)
        assert rc == 2 and says in err and len(err.strip().splitlines()) == 1


def test_claims_side_by_side_and_a_line_where_they_disagree(env, tmp_path, capsys):
    # theirs: SCL-in 15 points higher, so "RINCE-in > SCL-in on top1" (abs-in-top1) turns against the claim there
    bundle = make_bundle(env, tmp_path / "b", shift={("SCL-in", "linear_top1_last"): 15.0})
    rc, out, err = cli(capsys, "--results", env.root, "claims", "rince", "--profile", "smoke", "--against", bundle)
    assert rc == 0, err
    row = next(line for line in out.splitlines() if line.startswith("| `abs-in-top1` |"))
    # ours: 71 − 62 = +9.00; theirs: 71 − 77 = −6.00 (Welch p by hand for each side)
    p_ours, p_theirs = welch_by_hand([70, 71, 72], [60, 62, 64]), welch_by_hand([70, 71, 72], [75, 77, 79])
    assert f"+9.00 (n=3/3, p={p_ours:.3f}) | supported |" in row
    assert f"-6.00 (n=3/3, p={p_theirs:.3f}) | contradicted |" in row
    assert "- `abs-in-top1`: ours supported, b contradicted: the origins disagree." in out
    rc, out, _ = cli(capsys, "--results", env.root, "claims", "rince", "--profile", "smoke", "--against", bundle,
                     "--format", "csv")
    lines = {(r["id"], r["origin"]): r for r in csv.DictReader(io.StringIO(out))}
    assert lines[("abs-in-top1", "b")]["agrees"] == "False" and lines[("abs-in-top1", "ours")]["agrees"] == "True"
    assert float(lines[("abs-in-top1", "b")]["diff"]) == pytest.approx(-6.0)
    from semcl import api

    frame = api.claims("rince", "smoke", results=env.root, against=str(bundle)).set_index(["id", "origin"])
    assert frame.loc[("abs-in-top1", "b"), "verdict"] == "contradicted"


def test_curves_overlay_both_origins_in_their_own_style(env, tmp_path, capsys, monkeypatch):
    bundle = make_bundle(env, tmp_path / "b")
    lab = tmp_path / "lab" / "results"
    shutil.copytree(env.root, lab)
    for hist in (lab / "runs").glob("*/history.jsonl"):  # their loss: 0.5 lower at every epoch
        hist.write_text("".join(json.dumps({**e, "loss": e["loss"] - 0.5}) + "\n"
                                for e in map(json.loads, hist.read_text().splitlines())))
    drawn = {}
    import semcl.report.curves as curves

    real = curves.save_figure_atomic
    monkeypatch.setattr(curves, "save_figure_atomic", lambda fig, path, **kw: (
        drawn.update(lines=[(ln.get_label(), ln.get_linestyle(), ln.get_color()) for ln in fig.axes[0].lines]),
        real(fig, path, **kw)))
    rc, out, err = cli(capsys, "--results", env.root, "curves", "rince/tab2", "--profile", "smoke", "--rows", "^RINCE-in$",
                       "--against", bundle, "--against", f"lab={lab}")
    assert rc == 0, err
    data = __import__("pandas").read_csv(env.root / "curves" / "against-b+lab" / "rince_tab2.smoke.loss.csv")
    last = data[data.epoch == 2].set_index("origin")
    assert list(last.index) == ["ours", "b", "lab"]
    assert last.loc["ours", "mean"] == pytest.approx(2.2) and last.loc["b", "mean"] == pytest.approx(2.2)
    assert last.loc["lab", "mean"] == pytest.approx(1.7) and (last["n"] == 3).all()
    labels = {label: (style, color) for label, style, color in drawn["lines"]}
    assert set(labels) == {"RINCE-in [ours] (n=3)", "RINCE-in [b] (n=3)", "RINCE-in [lab] (n=3)"}
    assert [labels[f"RINCE-in [{o}] (n=3)"][0] for o in ("ours", "b", "lab")] == ["-", "--", ":"]
    assert len({c for _, c in labels.values()}) == 1  # one row, one colour: the style names the origin
    assert "lab" in out and "b " in out


def test_html_report_shows_the_against_columns(env, tmp_path, capsys):
    bundle = make_bundle(env, tmp_path / "b", shift={("RINCE-in", "linear_top1_last"): 5.0})
    rc, out, err = cli(capsys, "--results", env.root, "report", "rince", "--profile", "smoke", "--html",
                       "--out", tmp_path / "reports", "--against", bundle)
    assert rc == 0, err
    page = (tmp_path / "reports" / "against-b" / "rince.smoke.html").read_text()
    assert '<table class="against" data-table="rince/tab2">' in page
    assert "<th>ours</th><th>b</th><th>p (Welch, b)</th><th>b vs ours</th>" in page
    assert ('<tr><td>RINCE-in</td><td>Top-1</td><td>71.00 ± 1.00 (n=3)</td><td>76.00 ± 1.00 (n=3)</td>'
            '<td>0.004</td><td class="verdict-differs">differs</td></tr>') in page
    assert '<table class="claims-against">' in page
    md = (tmp_path / "reports" / "against-b" / "rince.smoke.md").read_text()
    assert "### Against b" in md and "| RINCE-in | Top-1 | 71.00 ± 1.00 (n=3) | 76.00 ± 1.00 (n=3) | 0.004 | differs |" in md
    assert not (tmp_path / "reports" / "rince.smoke.html").exists()  # the default page is not overwritten


def test_lines_figure_draws_each_origin(env, tmp_path, capsys):
    table = get_table("hsa/fig3")
    store = Store(tmp_path / "hsa")
    from semcl.evals.protocols import metric_key

    sub = table.profile("smoke").substitute
    for k, run in enumerate(plan_runs(table, "smoke")):
        write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": {
            metric_key(c, sub): 10.0 * k + i for i, c in enumerate(table.columns) if metric_key(c, sub)}})
    bundle = make_bundle_of(store, tmp_path / "b", delta=1.0)
    rc, out, err = cli(capsys, "--results", store.root, "figure", "hsa/fig3", "--profile", "smoke", "--against", bundle)
    assert rc == 0, err
    points = __import__("pandas").read_csv(store.root / "figures" / "against-b" / "hsa_fig3.smoke.csv")
    mine = points[points.origin == "ours"].set_index(["row", "column"])["mean"]
    theirs = points[points.origin == "b"].set_index(["row", "column"])["mean"]
    assert len(mine) == len(theirs) == 15 and mine.notna().sum() == theirs.notna().sum() >= 12
    assert ((theirs - mine).dropna() == 1.0).all()  # the profile leaves a column out: NaN on both sides
    assert (store.root / "figures" / "against-b" / "hsa_fig3.smoke.png").stat().st_size > 0
    # a figure read from per-run files is refused with --against, in one line
    rc, _, err = cli(capsys, "--results", store.root, "figure", "rince/fig6", "--profile", "smoke", "--against", bundle)
    assert rc == 2 and "--against draws the scatter and lines kinds" in err


def make_bundle_of(store: Store, out: Path, delta: float) -> Path:
    """Every record of `store` as a bundle, each metric + delta."""
    for run_dir in sorted((store.root / "runs").iterdir()):
        (out / "runs" / run_dir.name).mkdir(parents=True)
        rec = json.loads((run_dir / "metrics.json").read_text())
        rec["metrics"] = {k: v + delta for k, v in rec["metrics"].items()}
        (out / "runs" / run_dir.name / "metrics.json").write_text(json.dumps(rec))
    write_sha256sums(out)
    return out


def test_scatter_figure_gives_each_origin_its_own_panel(tmp_path, capsys, monkeypatch):
    table = get_table("gpaco/fig1a")
    store = Store(tmp_path / "gpaco")
    from semcl.evals.protocols import metric_key

    sub = table.profile("smoke").substitute
    for k, run in enumerate(plan_runs(table, "smoke")):
        write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": {
            metric_key(c, sub): 10.0 + k for c in table.columns if metric_key(c, sub)}})
    bundle = make_bundle_of(store, tmp_path / "lab", delta=2.0)
    import semcl.report.scatter_figure as scatter

    panels = {}
    real = scatter.save_figure_atomic
    monkeypatch.setattr(scatter, "save_figure_atomic", lambda fig, path, **kw: (
        panels.update(titles=[ax.get_title() for ax in fig.axes]), real(fig, path, **kw)))
    rc, out, err = cli(capsys, "--results", store.root, "figure", "gpaco/fig1a", "--profile", "smoke",
                       "--against", bundle)
    assert rc == 0, err
    assert panels["titles"] == [f"Paper ({table.source})", "Ours (profile smoke; n = seeds, in the key)",
                                "lab (profile smoke; read only)"]
    points = __import__("pandas").read_csv(store.root / "figures" / "against-lab" / "gpaco_fig1a.smoke.csv")
    ours, lab = (points[points.origin == o].set_index("row") for o in ("ours", "lab"))
    measured = ours["n"] > 0
    assert measured.any() and (lab.loc[measured, "y_mean"] - ours.loc[measured, "y_mean"] == 2.0).all()


def test_table_json_without_against_is_the_summary(env, capsys):
    rc, out, err = cli(capsys, "--results", env.root, "table", "rince/tab2", "--profile", "smoke", "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    cell = next(c for c in doc["cells"] if c["row"] == "RINCE-in" and c["column"] == "top1")
    assert (cell["mean"], cell["std"], cell["n"], cell["paper"]) == (71.0, 1.0, 3, None)
    assert doc["table"] == "rince/tab2" and doc["notes"][0].startswith("Cell:")
