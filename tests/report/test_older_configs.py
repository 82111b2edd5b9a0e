"""A finished run whose config has since moved does not go silent: `semcl status` names it with the keys that
changed; a record written by a newer store format is refused in one line."""

from __future__ import annotations

import json

import yaml

from semcl.cli import main as cli
from semcl.config import config_to_dict
from semcl.registry.tables import get_table
from semcl.report.older_configs import changed_keys, flatten
from semcl.run_folder import STORE_FORMAT
from semcl.runs import Store, plan_runs


def test_flatten_and_changed_keys_by_hand():
    then = {"optim": {"lr": 0.1, "milestones": [1, 2]}, "method": {"name": "ce"}}
    now = {"optim": {"lr": 0.2, "milestones": [1, 2]}, "method": {"name": "ce", "tau": 0.5}}
    assert flatten(then) == {"optim.lr": 0.1, "optim.milestones": [1, 2], "method.name": "ce"}
    assert changed_keys(then, now) == {"method.tau": (None, 0.5), "optim.lr": (0.1, 0.2)}


def _write_run(store: Store, run_id: str, run, config: dict, record: dict | None = None) -> None:
    folder = store.folder(run_id)
    folder.path.mkdir(parents=True)
    folder.config.write_text(yaml.safe_dump({"run_id": run_id, "seed": run.seed, "table": run.table_id,
                                             "row": run.row_label, "profile": run.profile, "config": config}))
    folder.metrics.write_text(json.dumps(record or {"run_id": run_id, "metrics": {"acc_overall": 50.0}}))


def test_status_names_runs_of_older_configs_and_their_changed_keys(tmp_path, capsys):
    run = plan_runs(get_table("rince/tab9"), "smoke")[0]
    then = config_to_dict(run.config)
    then["optim"] = {**then["optim"], "lr": run.config.optim.lr * 2}
    store = Store(tmp_path)
    _write_run(store, "0123456789ab", run, then)
    assert cli.main(["--results", str(tmp_path), "status", "rince/tab9", "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    assert "# 1 finished run(s) here belong to older configs of this table" in out
    assert (f"0123456789ab  {run.row_label:<24} seed={run.seed:<4} older   now {run.run_id}: "
            f"optim.lr: {run.config.optim.lr * 2!r} -> {run.config.optim.lr!r}") in out
    assert not store.folder(run.run_id).path.exists()  # shown, never reused or moved


def test_a_record_of_a_newer_store_format_is_one_line(tmp_path, capsys):
    run = plan_runs(get_table("rince/tab9"), "smoke")[0]
    store = Store(tmp_path)
    _write_run(store, run.run_id, run, config_to_dict(run.config),
               {"run_id": run.run_id, "store_format": STORE_FORMAT + 1, "metrics": {}})
    status, detail = store.status(run.run_id)
    assert status == "failed" and detail.endswith(
        f"key 'store_format' is {STORE_FORMAT + 1}: written by a newer semcl than this one (reads formats "
        f"1-{STORE_FORMAT}); read it with that version, or upgrade")
    assert json.loads(store.folder(run.run_id).metrics.read_text())["store_format"] == STORE_FORMAT + 1
