"""A finished run whose config has since moved does not go silent: `semcl status` names it under its row with the
keys that changed (against the row's run planned now for the same seed), counts a `--set` variant's runs apart
with the options that show them, and shows a variant's own runs with `--set`; nothing is reused, moved or
deleted. A record written by a newer store format is refused in one line."""

from __future__ import annotations

import json
from dataclasses import replace

import yaml

from semcl.cli import main as cli
from semcl.config import config_to_dict
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.registry.variant_rows import variant_tables
from semcl.report.older_configs import ABSENT, OlderRun, changed_keys, describe, flatten
from semcl.store import Store
from semcl.store.run_folder import STORE_FORMAT

TABLE = "rince/tab9"


def test_flatten_and_changed_keys_by_hand():
    then = {"optim": {"lr": 0.1, "milestones": [1, 2]}, "method": {"name": "ce", "q": None}}
    now = {"optim": {"lr": 0.2, "milestones": [1, 2]}, "method": {"name": "ce", "tau": 0.5}}
    assert flatten(then) == {"optim.lr": 0.1, "optim.milestones": [1, 2], "method.name": "ce", "method.q": None}
    # a key set to null and a key that is not there are told apart
    assert changed_keys(then, now) == {"method.q": (None, ABSENT), "method.tau": (ABSENT, 0.5),
                                       "optim.lr": (0.1, 0.2)}


def _write_run(store: Store, run_id: str, run, config: dict, record: dict | None = None) -> None:
    folder = store.folder(run_id)
    folder.path.mkdir(parents=True)
    folder.config.write_text(yaml.safe_dump({"run_id": run_id, "seed": run.seed, "table": run.table_id,
                                             "row": run.row_label, "profile": run.profile, "config": config}))
    folder.metrics.write_text(json.dumps(record or {"run_id": run_id, "metrics": {"acc_overall": 50.0}}))


def _altered(run, **sections) -> dict:
    """The run's config as a dict with some keys of some sections replaced (an older config)."""
    config = config_to_dict(run.config)
    for section, values in sections.items():
        config[section] = {**config[section], **values}
    return config


def _store_of_older_runs(tmp_path):
    """Two seeds of row 0 under an older lr and epochs, one run of row 1 with a method key since removed, a
    run of a row the table lost, a finished `--set` variant run, and an unfinished older run (no record)."""
    runs = plan_runs(get_table(TABLE), "smoke")
    store = Store(tmp_path)
    first, second = runs[0], runs[1]
    assert (first.row_label, second.row_label) == ("alpha = 0.1",) * 2 and runs[3].row_label == "alpha = 0.2"
    for run_id, run in (("0000000000a1", first), ("0000000000a2", second)):
        _write_run(store, run_id, run, _altered(run, optim={"lr": 0.5}, schedule={"epochs": 4}))
    _write_run(store, "0000000000b1", runs[3], _altered(runs[3], method={"tau": 0.3}))
    _write_run(store, "0000000000c1", replace(first, row_label="alpha = 0.9"), config_to_dict(first.config))
    variant = replace(first, row_label="alpha = 0.1 [optim.lr=0.1]")
    _write_run(store, "0000000000d1", variant, _altered(first, optim={"lr": 0.1}, schedule={"epochs": 4}))
    store.folder("0000000000e1").path.mkdir(parents=True)  # started, never finished: not listed
    return runs, store


def test_status_groups_older_runs_per_row_with_their_changed_keys(tmp_path, capsys):
    runs, store = _store_of_older_runs(tmp_path)
    before = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert cli.main(["--results", str(tmp_path), "status", TABLE, "--profile", "smoke"]) == 0
    out = capsys.readouterr().out.splitlines()
    lr, epochs = runs[0].config.optim.lr, runs[0].config.schedule.epochs
    assert out[out.index("# missing: 9") + 1:] == [
        "# 4 finished run(s) here belong to older configs of this table: shown, never reused or deleted "
        "(semcl diff <old id> <new id> lists every key)",
        f"# row 'alpha = 0.1' (2 run(s)): optim.lr: 0.5 -> {lr}; schedule.epochs: 4 -> {epochs}",
        f"0000000000a1  seed={runs[0].seed:<4} older  now {runs[0].run_id}",
        f"0000000000a2  seed={runs[1].seed:<4} older  now {runs[1].run_id}",
        "# row 'alpha = 0.2' (1 run(s)): method.tau: 0.3 -> (absent)",
        f"0000000000b1  seed={runs[3].seed:<4} older  now {runs[3].run_id}",
        "# row 'alpha = 0.9' (1 run(s)): the row is no longer in the table",
        f"0000000000c1  seed={runs[0].seed:<4} older",
        "# 1 finished run(s) of the variant 'alpha = 0.1 [optim.lr=0.1]': semcl status rince/tab9 --profile smoke "
        "--set optim.lr=0.1",
    ]
    # shown, never reused, moved or deleted; nothing written for the planned runs
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == before


def test_status_of_some_rows_lists_only_their_older_runs(tmp_path, capsys):
    runs, _ = _store_of_older_runs(tmp_path)
    assert cli.main(["--results", str(tmp_path), "status", TABLE, "--profile", "smoke", "--row", "alpha = 0.2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[out.index("# missing: 3") + 1:] == [
        "# 1 finished run(s) here belong to older configs of this table: shown, never reused or deleted "
        "(semcl diff <old id> <new id> lists every key)",
        "# row 'alpha = 0.2' (1 run(s)): method.tau: 0.3 -> (absent)",
        f"0000000000b1  seed={runs[3].seed:<4} older  now {runs[3].run_id}",
    ]


def test_status_set_shows_the_variants_runs_and_its_older_ones(tmp_path, capsys):
    runs, store = _store_of_older_runs(tmp_path)
    (varied,) = variant_tables([get_table(TABLE)], ["optim.lr=0.1,0.2"], None, "smoke")
    planned = {(r.row_label, r.seed): r for r in plan_runs(varied, "smoke")}
    done = planned[("alpha = 0.1 [optim.lr=0.2]", runs[0].seed)]
    _write_run(store, done.run_id, done, config_to_dict(done.config))
    assert cli.main(["--results", str(tmp_path), "status", TABLE, "--profile", "smoke",
                     "--set", "optim.lr=0.1", "--set", "optim.lr=0.2", "-v"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(planned) == 18 and f"{done.run_id}  alpha = 0.1 [optim.lr=0.2] seed={done.seed:<4} done     " in out
    # the stored variant run was made under older epochs: an older config of the variant; the registered rows'
    # older runs are not this view's
    assert out[out.index("# done: 1, missing: 17") + 1:] == [
        "# 1 finished run(s) here belong to older configs of this table: shown, never reused or deleted "
        "(semcl diff <old id> <new id> lists every key)",
        f"# row 'alpha = 0.1 [optim.lr=0.1]' (1 run(s)): schedule.epochs: 4 -> {runs[0].config.schedule.epochs}",
        f"0000000000d1  seed={runs[0].seed:<4} older  now {planned[('alpha = 0.1 [optim.lr=0.1]', runs[0].seed)].run_id}",
    ]


def test_an_older_run_of_a_seed_no_longer_planned_is_compared_with_the_rows_first(tmp_path, capsys):
    runs = plan_runs(get_table(TABLE), "smoke")
    store = Store(tmp_path)
    _write_run(store, "0000000000f1", replace(runs[0], seed=7), config_to_dict(runs[0].config))
    assert cli.main(["--results", str(tmp_path), "status", TABLE, "--profile", "smoke"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == ["# row 'alpha = 0.1' (1 run(s)): no config key differs",
                        f"0000000000f1  seed=7    older  now {runs[0].run_id} (this seed is not planned now)"]


def test_a_record_of_a_newer_store_format_is_one_line(tmp_path, capsys):
    run = plan_runs(get_table(TABLE), "smoke")[0]
    store = Store(tmp_path)
    _write_run(store, run.run_id, run, config_to_dict(run.config),
               {"run_id": run.run_id, "store_format": STORE_FORMAT + 1, "metrics": {}})
    status, detail = store.status(run.run_id)
    assert status == "failed" and detail.endswith(
        f"key 'store_format' is {STORE_FORMAT + 1}: written by a newer semcl than this one (reads formats "
        f"1-{STORE_FORMAT}); read it with that version, or upgrade")
    assert json.loads(store.folder(run.run_id).metrics.read_text())["store_format"] == STORE_FORMAT + 1


def test_a_long_group_shows_its_first_runs_and_the_rest_with_verbose():
    older = [OlderRun(f"00000000000{i}", "CE", 1, "00000000cafe", {"optim.lr": (0.1, 0.2)}) for i in range(7)]
    lines = describe(older, shown=5)
    assert lines[1:] == ["# row 'CE' (7 run(s)): optim.lr: 0.1 -> 0.2",
                         *(f"00000000000{i}  seed=1    older  now 00000000cafe" for i in range(5)),
                         "# ... and 2 more run(s) of this older config (status -v lists them)"]
    assert len(describe(older, shown=None)) == 9
    many = {f"k{i}": (i, i + 1) for i in range(10)}
    assert describe([OlderRun("a", "CE", 1, "b", many)], limit=2)[1] == "# row 'CE' (1 run(s)): k0: 0 -> 1; k1: 1 -> 2; +8 more"
