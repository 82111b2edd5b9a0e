"""semcl.api against a results store of fabricated records in tmp (rince/tab2, profile smoke): the plan, the long
frame and its summary, a run's status, record and history; and the plan equals `semcl plan --format json`."""

from __future__ import annotations

import json
import math

import pytest

from semcl import api
from semcl.cli.main import main
from semcl.errors import ConfigError, ResultsError
from semcl.estimate.cost import estimate_cost
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.store import Store

TABLE, PROFILE = "rince/tab2", "smoke"


@pytest.fixture
def store(tmp_path):
    """Two finished Cross-entropy seeds (top1 and R@1 coarse), one failed run, nothing else."""
    runs = plan_runs(get_table(TABLE), PROFILE)
    store = Store(tmp_path / "results")
    ce = [r for r in runs if r.row_label == "Cross-entropy"]
    for run, top1, r1 in zip(ce[:2], (70.0, 72.0), (50.5, 49.5), strict=True):
        store.write_record(run.run_id, {"run_id": run.run_id, "seed": run.seed,
                                        "metrics": {"linear_top1_last": top1, "retrieval_coarse_R@1": r1},
                                        "history": [{"epoch": 1, "loss": 2.5, "lr": 0.1, "seconds": 1.0}]})
    failed = store.run_dir(ce[2].run_id)
    failed.mkdir(parents=True)
    (failed / "failed.json").write_text(json.dumps({"error": "CUDA out of memory"}))
    return store, runs


def test_plan_lists_every_run_with_its_id_cost_and_status(store):
    st, runs = store
    frame = api.plan(TABLE, PROFILE, results=st.root)
    assert list(frame["id"]) == [r.run_id for r in runs]
    assert list(frame["row"]) == [r.row_label for r in runs]
    assert list(frame["seed"]) == [r.seed for r in runs]
    assert list(frame["cost"]) == [float(estimate_cost(r.config, PROFILE).split()[0]) for r in runs]
    assert list(frame["status"][:4]) == ["done", "done", "failed", "missing"]
    assert (frame["profile"] == PROFILE).all()


def test_plan_is_what_semcl_plan_json_prints(store, capsys):
    st, _ = store
    assert main(["--results", str(st.root), "plan", TABLE, "--profile", PROFILE, "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)["tables"][0]["runs"]
    assert api.plan(TABLE, PROFILE, results=st.root).to_dict("records") == printed


def test_plan_refuses_an_unknown_table_and_a_missing_profile(store):
    st, _ = store
    with pytest.raises(ConfigError, match="nope/tab1"):
        api.plan("nope/tab1", PROFILE, results=st.root)
    with pytest.raises(ConfigError, match="has no profile 'smoke'"):
        api.plan("rince/fig4", PROFILE, results=st.root)


def test_long_frame_and_summary_hold_the_finished_values(store):
    st, runs = store
    long = api.long_frame(TABLE, PROFILE, results=st.root)
    got = sorted(zip(long["row"], long["column"], long["seed"], long["value"], long["run_id"], strict=True))
    ce = [r for r in runs if r.row_label == "Cross-entropy"]
    assert got == sorted([("Cross-entropy", "top1", 123, 70.0, ce[0].run_id), ("Cross-entropy", "top1", 546, 72.0, ce[1].run_id),
                          ("Cross-entropy", "r1_coarse", 123, 50.5, ce[0].run_id),
                          ("Cross-entropy", "r1_coarse", 546, 49.5, ce[1].run_id)])
    assert set(long["table"]) == {TABLE}
    summ = api.summary(TABLE, PROFILE, results=st.root).set_index(["row", "column"])
    top1 = summ.loc[("Cross-entropy", "top1")]
    assert (top1["mean"], top1["n"]) == (71.0, 2)
    assert top1["std"] == pytest.approx(math.sqrt(2.0))  # sample std of 70, 72
    assert summ.loc[("Cross-entropy", "ap_fine"), "n"] == 0


def test_status_record_and_history_of_one_run(store):
    st, runs = store
    done, failed, missing = runs[0].run_id, runs[2].run_id, runs[3].run_id
    assert api.status(done, results=st.root) == ("done", "")
    assert api.status(failed, results=st.root)[0] == "failed"
    assert "CUDA out of memory" in api.status(failed, results=st.root)[1]
    assert api.record(done, results=st.root)["metrics"] == {"linear_top1_last": 70.0, "retrieval_coarse_R@1": 50.5}
    assert api.record(missing, results=st.root) is None
    hist = api.history(done, results=st.root)
    assert hist.to_dict("records") == [{"epoch": 1, "loss": 2.5, "lr": 0.1, "seconds": 1.0}]
    assert api.history(missing, results=st.root).empty


def test_history_reads_the_growing_jsonl_first(store):
    st, runs = store
    folder = st.run_dir(runs[3].run_id)  # a run still training: no record yet
    folder.mkdir(parents=True)
    (folder / "history.jsonl").write_text('{"epoch": 1, "loss": 3.0}\n{"epoch": 2, "loss": 2.0}\n{"epoch": 3, "lo')
    assert api.history(runs[3].run_id, results=st.root).to_dict("records") == [{"epoch": 1, "loss": 3.0},
                                                                             {"epoch": 2, "loss": 2.0}]
    (folder / "history.jsonl").write_text('{"epoch": 1, "loss": 3.0}\nnot json\n{"epoch": 3, "loss": 1.0}\n')
    with pytest.raises(ResultsError, match=r"history\.jsonl:2: not a JSON line"):
        api.history(runs[3].run_id, results=st.root)


def test_a_truncated_record_is_one_error_naming_the_file(store):
    st, runs = store
    path = st.metrics_path(runs[0].run_id)
    path.write_text('{"run_id": "')
    with pytest.raises(ResultsError, match=r"metrics\.json: truncated or invalid JSON"):
        api.record(runs[0].run_id, results=st.root)


def test_table_ids_and_runs(store):
    ids = api.table_ids("rince")
    assert TABLE in ids and ids == sorted(ids) and all(i.startswith("rince/") for i in ids)
    assert [r.run_id for r in api.runs(TABLE, PROFILE)] == [r.run_id for r in store[1]]
