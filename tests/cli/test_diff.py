"""`semcl diff A B`: the config keys two runs differ in, one `key: a -> b` per line (the runs' table, row, profile
and seed first); a run not stored yet is read off the plan of the other's table; an unknown id or a broken
config.yaml is one line naming it, exit 2, nothing written."""

from __future__ import annotations

import json

import yaml

from semcl.cli.main import main
from semcl.config import config_to_dict
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.store import Store

TABLE = "rince/tab9"


def _write(store: Store, run_id: str, run, config: dict) -> None:
    folder = store.folder(run_id)
    folder.path.mkdir(parents=True)
    folder.config.write_text(yaml.safe_dump({"run_id": run_id, "seed": run.seed, "table": run.table_id,
                                             "row": run.row_label, "profile": run.profile, "config": config}))
    folder.metrics.write_text(json.dumps({"run_id": run_id, "metrics": {}}))


def _older(run) -> dict:
    config = config_to_dict(run.config)
    config["optim"] = {**config["optim"], "lr": 0.5}
    config["probe"] = {**config["probe"], "milestones": [3, 4]}
    config["method"] = {**config["method"], "tau": None}
    return config


def test_two_stored_runs_and_a_planned_one(tmp_path, capsys):
    runs = plan_runs(get_table(TABLE), "smoke")
    store = Store(tmp_path)
    _write(store, "0000000000a1", runs[0], _older(runs[0]))
    _write(store, runs[4].run_id, runs[4], config_to_dict(runs[4].config))
    assert main(["--results", str(tmp_path), "diff", "0000000000a1", runs[4].run_id]) == 0
    then, now = runs[0].config, runs[4].config
    assert capsys.readouterr().out.splitlines() == [
        f"row: {runs[0].row_label} -> {runs[4].row_label}",
        f"seed: {runs[0].seed} -> {runs[4].seed}",
        f"method.alpha: {then.method.alpha} -> {now.method.alpha}",
        "method.tau: null -> (absent)",
        f"optim.lr: 0.5 -> {now.optim.lr}",
        f"probe.milestones: [3, 4] -> {json.dumps(now.probe.milestones)}",
    ]
    # the run planned now for the same row and seed, not stored yet: read off the table's plan
    assert main(["--results", str(tmp_path), "diff", "0000000000a1", runs[0].run_id]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "method.tau: null -> (absent)", f"optim.lr: 0.5 -> {then.optim.lr}",
        f"probe.milestones: [3, 4] -> {json.dumps(then.probe.milestones)}"]
    assert not store.folder(runs[0].run_id).path.exists()
    # the same config: nothing on stdout
    assert main(["--results", str(tmp_path), "diff", runs[4].run_id, runs[4].run_id]) == 0
    out = capsys.readouterr()
    assert out.out == "" and out.err == f"semcl: runs {runs[4].run_id} and {runs[4].run_id} have the same config\n"


def test_bad_ids_and_files_are_one_line(tmp_path, capsys):
    runs = plan_runs(get_table(TABLE), "smoke")
    store = Store(tmp_path)
    _write(store, "0000000000a1", runs[0], _older(runs[0]))
    before = sorted(str(p) for p in tmp_path.rglob("*"))

    def refused(*ids) -> str:
        assert main(["--results", str(tmp_path), "diff", *ids]) == 2
        err = capsys.readouterr()
        assert err.out == "" and len(err.err.splitlines()) == 1
        return err.err.strip()

    runs_dir = tmp_path / "runs"
    assert refused("0000000000a1", "feedfacecafe") == (
        f"semcl: error: unknown run id 'feedfacecafe': no folder {runs_dir / 'feedfacecafe'} nor planned by "
        f"{TABLE} (profile smoke)")
    assert refused("feedfacecafe", "0000000000a1").startswith("semcl: error: unknown run id 'feedfacecafe'")
    assert refused("nope", "nada") == f"semcl: error: unknown run id 'nope': no folder {runs_dir / 'nope'}"
    store.folder("0000000000b1").path.mkdir()
    assert refused("0000000000a1", "0000000000b1") == (
        f"semcl: error: {store.folder('0000000000b1').config}: no config.yaml (run 0000000000b1 never started)")
    store.folder("0000000000b1").config.write_text("run_id: x\nconfig: [1, 2]\n")
    assert refused("0000000000a1", "0000000000b1") == (
        f"semcl: error: {store.folder('0000000000b1').config}: key 'config' is missing or not a mapping")
    store.folder("0000000000b1").config.write_text("config: {a: 1\n")
    assert refused("0000000000b1", "0000000000a1").startswith(
        f"semcl: error: {store.folder('0000000000b1').config}: not YAML (")
    after = sorted(str(p) for p in tmp_path.rglob("*"))
    assert set(after) - set(before) == {str(store.folder("0000000000b1").path), str(store.folder("0000000000b1").config)}
