"""history.jsonl: one line per finished epoch while a run trains, equal to metrics.json's history at the end,
also after a kill and a resume (duplicates and a torn line dropped); trackers and the progress line."""

from __future__ import annotations

import copy
import importlib.util
import io
import json
import sys

import pytest

import semcl.engine.checkpointer as checkpointer_mod
import semcl.engine.harness as harness_mod
from semcl.engine.job import execute_run
from semcl.errors import ConfigError, ResultsError
from semcl.registry.plan import Run, make_run_id, plan_runs
from semcl.registry.tables import get_table
from semcl.runtime.history import HISTORY_FILE, append_entry, read_history, rewrite
from semcl.runtime.progress import Progress
from semcl.runtime.tracking import chosen_backends, open_trackers
from semcl.store import Store


def _smoke_run(epochs: int) -> Run:
    t = get_table("rince/tab2")
    base = next(r for r in plan_runs(t, "smoke") if r.row_label == "Cross-entropy" and r.seed == 123)
    cfg = copy.deepcopy(base.config)
    cfg.schedule.epochs = epochs
    cfg.data.synthetic_train_per_class = 3
    return Run(base.table_id, base.row_label, 123, "smoke", cfg, make_run_id(cfg, 123))


def test_append_and_read_skip_a_torn_last_line(tmp_path):
    path = tmp_path / HISTORY_FILE
    append_entry(path, {"epoch": 1, "loss": 2.5})
    append_entry(path, {"epoch": 2, "loss": 1.25})
    assert path.read_text() == '{"epoch": 1, "loss": 2.5}\n{"epoch": 2, "loss": 1.25}\n'
    with open(path, "a") as f:
        f.write('{"epoch": 3, "lo')  # a crash mid-line
    assert read_history(path) == [{"epoch": 1, "loss": 2.5}, {"epoch": 2, "loss": 1.25}]
    path.write_text('{"epoch": 1}\nnot json\n{"epoch": 3}\n')
    with pytest.raises(ResultsError, match=r"history.jsonl:2: not a JSON line"):
        read_history(path)
    rewrite(path, [{"epoch": 1, "loss": 0.5}])
    assert read_history(path) == [{"epoch": 1, "loss": 0.5}]


class Preempted(Exception):
    pass


def test_killed_and_resumed_run_has_one_line_per_epoch_equal_to_the_record(tmp_path, monkeypatch):
    """A smoke run killed after epoch 1's checkpoint, with a stale epoch-2 line and a torn line left behind,
    resumes to exactly one line per epoch (keys epoch, loss, lr, seconds) = metrics.json's history; with
    tensorboard installed (the `tracking` extra) its events hold the same losses, once per epoch."""
    tb = importlib.util.find_spec("tensorboard") is not None
    monkeypatch.setenv("SEMCL_TRACKING", "tensorboard" if tb else "")
    monkeypatch.setattr(harness_mod, "evaluate", lambda *a, **k: {"probe": 1.0})  # this test is about training
    run = _smoke_run(epochs=2)
    store = Store(tmp_path / "results")
    real_save = checkpointer_mod.save_atomic

    def save_then_die(state, path):
        real_save(state, path)
        if state["epoch"] == 1:
            raise Preempted

    monkeypatch.setattr(checkpointer_mod, "save_atomic", save_then_die)
    with pytest.raises(Preempted):
        execute_run(run, store, tmp_path / "unused")
    folder = store.run_dir(run.run_id)
    path = folder / HISTORY_FILE
    first = read_history(path)
    assert [e["epoch"] for e in first] == [1] and set(first[0]) == {"epoch", "loss", "lr", "seconds"}
    # as if epoch 2 had been logged before a crash that took its checkpoint with it, then a torn line
    with open(path, "a") as f:
        f.write('{"epoch": 2, "loss": 9.0, "lr": 0.1, "seconds": 1.0}\n{"epoch": 3, "lo')
    monkeypatch.setattr(checkpointer_mod, "save_atomic", real_save)
    record = execute_run(run, store, tmp_path / "unused")
    lines = read_history(path)
    assert lines == json.loads(json.dumps(record["history"])) and path.read_text().endswith("}\n")
    assert [e["epoch"] for e in lines] == [1, 2] and lines[0] == first[0]
    assert all(set(e) == {"epoch", "loss", "lr", "seconds"} for e in lines)
    if tb:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        from semcl.runtime.tracking import run_label, tensorboard_dir

        acc = EventAccumulator(str(tensorboard_dir(store.root, run_label(folder))))
        acc.Reload()
        assert [(e.step, e.value) for e in acc.Scalars("train/loss")] == [
            (1, pytest.approx(lines[0]["loss"], rel=1e-6)), (2, pytest.approx(lines[1]["loss"], rel=1e-6))]


def test_progress_line_is_throttled_to_two_a_second():
    out, now = io.StringIO(), [0.0]
    p = Progress(6, stream=out, clock=lambda: now[0], enabled=True)
    for step in range(1, 11):  # 10 steps, 0.1 s apart: lines at t = 0.1, 0.6 and the epoch's last step
        now[0] = step * 0.1
        p.update(2, step, 10, 4.21)
    lines = out.getvalue().splitlines()
    # the first step's rate is its own time since the meter was made (0.1 s): 3 x 10 + 9 steps left = 3.9 s;
    # then the epoch's rate from step 1 on: 5 steps in 0.5 s, 34 steps left = 3.4 s; at the end 30 = 3.0 s
    assert lines[0] == "epoch 3/6 step 1/10 loss 4.2100 10.0 it/s ETA 0:04"
    assert lines[1] == "epoch 3/6 step 6/10 loss 4.2100 10.0 it/s ETA 0:03"
    assert lines[2] == "epoch 3/6 step 10/10 loss 4.2100 10.0 it/s ETA 0:03" and len(lines) == 3
    off = io.StringIO()
    Progress(6, stream=off, enabled=False).update(0, 1, 10, 1.0)
    assert off.getvalue() == ""


def test_a_loss_given_as_a_function_is_read_only_for_the_lines_written():
    """The training loop's loss sum stays on the device: the line asks for it only when it is written."""
    out, now, asked = io.StringIO(), [0.0], []

    def mean_so_far(step: int):
        def read() -> float:
            asked.append(step)
            return 4.0 + step / 100
        return read

    p = Progress(6, stream=out, clock=lambda: now[0], enabled=True)
    for step in range(1, 11):  # as above: lines at steps 1, 6 and 10
        now[0] = step * 0.1
        p.update(2, step, 10, mean_so_far(step))
    assert asked == [1, 6, 10]
    assert [line.split(" loss ")[1][:6] for line in out.getvalue().splitlines()] == ["4.0100", "4.0600", "4.1000"]
    Progress(6, stream=io.StringIO(), enabled=False).update(0, 1, 10, mean_so_far(99))
    assert asked == [1, 6, 10]


def test_tracking_backends_are_checked_and_a_missing_package_names_the_extra(tmp_path, monkeypatch):
    assert chosen_backends(" tensorboard, MLflow ") == ["tensorboard", "mlflow"]
    with pytest.raises(ConfigError, match=r"unknown backend 'neptune'"):
        chosen_backends("neptune")
    monkeypatch.setenv("SEMCL_TRACKING", "wandb")
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    with pytest.raises(ConfigError, match=r"'wandb' needs the wandb package: pip install wandb$"):
        open_trackers(tmp_path, "run1", 0)
    monkeypatch.setenv("SEMCL_TRACKING", "tensorboard")
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(ConfigError, match=r"'tensorboard' needs the tensorboard package: pip install 'semcl\[tracking\]'"):
        open_trackers(tmp_path, "run1", 0)
