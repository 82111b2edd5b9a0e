"""`--format json` on list / show / plan, checked against the registry and the store, and `show --rows`."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from semcl.cli.main import main
from semcl.estimate.cost import estimate_cost
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table, load_registry
from semcl.store import Store

REPO = Path(__file__).resolve().parents[2]

# a table with reported numbers (the rince tables have none known)
REPORTED = """\
id: rince/json-test
paper: rince
source: "test"
title: reported numbers for the JSON test
preset: cifar100_resnet50
columns:
  - {key: top1, label: "Top-1", eval: linear_probe}
  - {key: r1_fine, label: "R@1 fine", eval: retrieval, labels: fine, measure: "R@1"}
rows:
  - label: Cross-entropy
    method: ce
    overrides: {optim.lr: 0.8}
    reported: {top1: {value: 74.5, std: 0.3, provenance: paper-table, source: "Table 2"}}
  - {label: SCL-in, method: scl, overrides: {method.tau: 0.1}}
  - {label: Planned, method: mmseg_seg}
"""


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("registry") / "experiments"
    shutil.copytree(REPO / "experiments" / "presets", root / "presets")
    shutil.copytree(REPO / "experiments" / "rince", root / "rince")
    (root / "rince" / "json-test.yaml").write_text(REPORTED)
    return root


@pytest.fixture
def env(registry, tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SEMCL_REGISTRY", str(registry))
    monkeypatch.setenv("SEMCL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SEMCL_PRECISION", raising=False)
    return tmp_path / "results"


def cli_json(capsys, *args) -> dict:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def finish(store: Store, run_id: str) -> None:
    store.write_record(run_id, {"run_id": run_id, "metrics": {}})


def test_list_json_counts_match_the_registry_and_store(env, capsys):
    table = get_table("rince/tab2")
    finish(Store(env), plan_runs(table, "smoke")[0].run_id)
    out = cli_json(capsys, "--results", str(env), "list", "rince", "--profile", "smoke", "--format", "json")
    tables = [t for t in load_registry().values() if t.paper == "rince"]
    assert out["profile"] == "smoke"
    assert [t["id"] for t in out["tables"]] == sorted(t.id for t in tables if "smoke" in t.profiles)
    assert out["skipped"] == sorted(t.id for t in tables if "smoke" not in t.profiles)
    by_id = {t["id"]: t for t in out["tables"]}
    assert set(by_id["rince/tab2"]) == {"id", "paper", "source", "title", "profiles", "rows", "implemented",
                                        "runs_planned", "runs_done"}
    assert by_id["rince/tab2"]["runs_planned"] == len(plan_runs(table, "smoke"))
    assert by_id["rince/tab2"]["runs_done"] == 1
    paper_rows = [r for r in table.rows if r.released is None]  # the authors' checkpoints are not the paper's rows
    assert (by_id["rince/tab2"]["rows"], by_id["rince/tab2"]["implemented"]) == (
        len(paper_rows), sum(r.implemented for r in paper_rows))
    assert "rince/json-test" in out["skipped"]  # it has no smoke profile
    paper = cli_json(capsys, "--results", str(env), "list", "rince", "--format", "json")
    (mine,) = [t for t in paper["tables"] if t["id"] == "rince/json-test"]
    assert mine == {"id": "rince/json-test", "paper": "rince", "source": "test", "profiles": ["paper"],
                    "title": "reported numbers for the JSON test", "rows": 3, "implemented": 2,
                    "runs_planned": 2 * 3, "runs_done": 0}


def test_show_json_rows_filter_and_reported_numbers(env, capsys):
    out = cli_json(capsys, "show", "rince/json-test", "--format", "json", "--rows", "^(cross|planned)")
    assert [r["label"] for r in out["rows"]] == ["Cross-entropy", "Planned"]
    ce, planned = out["rows"]
    assert ce["reported"] == {"top1": {"value": 74.5, "std": 0.3, "provenance": "paper-table", "source": "Table 2",
                                       "also": [], "overrides": None, "same_as": None}, "r1_fine": None}
    assert (ce["method"], ce["state"], ce["overrides"]) == ("ce", "implemented", {"optim.lr": 0.8})
    assert (planned["state"], planned["implemented"]) == ("not implemented", False)
    assert [c["key"] for c in out["columns"]] == ["top1", "r1_fine"]
    assert out["columns"][1]["labels"] == "fine" and out["columns"][1]["protocol"].startswith("retrieval R@1")
    assert out["seeds"] == [123, 546, 937] and list(out["profiles"]) == ["paper"]
    # every row object has the same keys
    full = cli_json(capsys, "show", "rince/tab2", "--format", "json")
    assert [r["label"] for r in full["rows"]] == [r.label for r in get_table("rince/tab2").rows]
    assert len({tuple(r) for r in full["rows"]}) == 1


def test_show_rows_text_filter_and_no_match(env, capsys):
    assert main(["show", "rince/tab2", "--rows", "rince-in"]) == 0
    shown = re.findall(r"^    (\S.*?)\s+method=", capsys.readouterr().out, re.M)
    assert shown == [r.label for r in get_table("rince/tab2").rows if "rince-in" in r.label.lower()]
    assert main(["show", "rince/tab2", "--rows", "nothing like it"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"semcl: error: --rows 'nothing like it': no row label of rince/tab2 matches "
        f"({len(get_table('rince/tab2').rows)} rows; `semcl show rince/tab2` lists them)"]
    assert main(["show", "rince/tab2", "--rows", "("]) == 2
    assert capsys.readouterr().err.startswith("semcl: error: --rows '(': not a regular expression")


def test_plan_json_matches_plan_runs_and_totals(env, capsys):
    tab2, tab9 = get_table("rince/tab2"), get_table("rince/tab9")
    runs2 = plan_runs(tab2, "smoke")
    finish(Store(env), runs2[0].run_id)
    out = cli_json(capsys, "--results", str(env), "plan", "rince/tab2", "rince/tab9", "--profile", "smoke",
                   "--format", "json")
    assert (out["profile"], out["unit"]) == ("smoke", "CPU-min")
    got2, got9 = out["tables"]
    assert got2["id"] == "rince/tab2"
    assert [(r["id"], r["row"], r["seed"], r["after"]) for r in got2["runs"]] == [
        (r.run_id, r.row_label, r.seed, list(r.depends_on)) for r in runs2]
    costs = [float(estimate_cost(r.config, "smoke").split()[0]) for r in runs2]
    assert [r["cost"] for r in got2["runs"]] == costs
    assert [r["status"] for r in got2["runs"]] == ["done"] + ["missing"] * (len(runs2) - 1)
    assert {r["profile"] for r in got2["runs"]} == {"smoke"}
    assert got2["total"] == {"runs": len(runs2), "cost": pytest.approx(sum(costs)), "not_done_runs": len(runs2) - 1,
                             "not_done_cost": pytest.approx(sum(costs[1:]))}
    assert got2["not_implemented"] == [r.label for r in tab2.rows if not r.implemented]
    runs9 = plan_runs(tab9, "smoke")
    assert [r["id"] for r in got9["runs"]] == [r.run_id for r in runs9]
    unique = {r.run_id: float(estimate_cost(r.config, "smoke").split()[0]) for r in runs2 + runs9}
    assert out["total"] == {"tables": 2, "runs": len(unique), "cost": pytest.approx(sum(unique.values())),
                            "not_done_runs": len(unique) - 1,
                            "not_done_cost": pytest.approx(sum(unique.values()) - costs[0])}


def test_list_and_plan_json_start_without_torch(env, tmp_path):
    import subprocess
    import sys

    code = ("import sys; from semcl.cli.main import main; main(['--results', sys.argv[1], 'list', '--format', 'json']); "
            "main(['--results', sys.argv[1], 'plan', 'rince/tab2', '--format', 'json']); "
            "assert 'torch' not in sys.modules and 'pandas' not in sys.modules")
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 0, res.stderr
    first_end = res.stdout.index("\n}\n") + 3  # two JSON documents, one after the other
    assert json.loads(res.stdout[:first_end])["profile"] == "paper"
    assert json.loads(res.stdout[first_end:])["tables"][0]["id"] == "rince/tab2"
