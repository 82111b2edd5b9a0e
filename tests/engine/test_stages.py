"""Training and evaluation as two stages: a run trained by one process (`train`) and evaluated by
another (`evaluate`) ends with the record of the one-process run (`all`); an evaluation needs the
training stage's trained.json; an augmented linear probe stopped after an epoch resumes to the same
accuracies; step-boundary checkpoints every N minutes resume bit-exact."""

from __future__ import annotations

import copy
import json

import pytest
import torch

import semcl.engine.checkpointer as checkpointer_mod
import semcl.engine.train as train_mod
from semcl.engine.job import execute_run
from semcl.errors import ResultsError
from semcl.evals.linear_probe import linear_probe
from semcl.evals.protocols.context import EvalCheckpoint
from semcl.registry.plan import Run, make_run_id, plan_runs
from semcl.registry.tables import get_table
from semcl.store import Store
from semcl.store.run_folder import TRAINED as TRAINED_FILE


def _run(table: str, row: str, epochs: int = 2, **changes) -> Run:
    base = next(r for r in plan_runs(get_table(table), "smoke") if r.row_label == row)
    cfg = copy.deepcopy(base.config)
    cfg.schedule.epochs = epochs
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        setattr(getattr(cfg, section), key, value)
    return Run(base.table_id, base.row_label, base.seed, "smoke", cfg, make_run_id(cfg, base.seed))


@pytest.mark.parametrize(("table", "row"), [("rince/tab2", "RINCE-in"), ("rince/tab2", "Cross-entropy"),
                                            ("gpaco/cifar100-lt", "PaCo, IF 100")])
def test_train_then_evaluate_equals_one_process(tmp_path, table, row):
    run = _run(table, row)
    want = execute_run(run, Store(tmp_path / "a"), tmp_path)
    store = Store(tmp_path / "b")
    assert execute_run(run, store, tmp_path, stage="train") == {}
    trained = json.loads((store.run_dir(run.run_id) / TRAINED_FILE).read_text())
    assert trained["world_size"] == 1 and store.status(run.run_id)[0] != "done"
    got = execute_run(run, store, tmp_path, stage="evaluate")
    assert got["metrics"] == want["metrics"]
    assert [h["loss"] for h in got["history"]] == [h["loss"] for h in want["history"]]
    assert got["world_size"] == 1 and got["train_time_s"] == trained["train_time_s"]
    assert store.status(run.run_id)[0] == "done"


def test_evaluating_an_untrained_run_names_the_missing_file(tmp_path):
    run = _run("rince/tab2", "Cross-entropy", epochs=1)
    store = Store(tmp_path / "s")
    with pytest.raises(ResultsError, match=rf"{TRAINED_FILE}: the run's training stage has not finished"):
        execute_run(run, store, tmp_path, stage="evaluate")


def test_an_evaluation_never_trains(tmp_path):
    """trained.json without the final checkpoint, or beside a checkpoint short of the last epoch: one line, and
    nothing trains (the folder keeps no checkpoint / the partial one unchanged); a tampered trained.json names
    its key instead of reaching the record."""
    run = _run("rince/tab2", "Cross-entropy", epochs=2)
    store = Store(tmp_path / "s")
    assert execute_run(run, store, tmp_path, stage="train") == {}
    folder = store.folder(run.run_id)
    final = folder.checkpoint.read_bytes()
    folder.checkpoint.unlink()
    with pytest.raises(ResultsError, match=r"last.pt: missing beside trained.json; an evaluation does not train"):
        execute_run(run, store, tmp_path, stage="evaluate")
    assert not folder.checkpoint.exists() and not folder.metrics.exists()
    # a checkpoint of the first epoch (a training stopped early) under a trained.json
    one = _run("rince/tab2", "Cross-entropy", epochs=1)
    other = Store(tmp_path / "o")
    execute_run(one, other, tmp_path, stage="train")
    partial = other.folder(one.run_id).checkpoint.read_bytes()
    folder.checkpoint.write_bytes(partial)
    with pytest.raises(ResultsError, match=r"the final checkpoint is at epoch 1 step 0 of 2 epochs; an evaluation "
                                           r"does not train"):
        execute_run(run, store, tmp_path, stage="evaluate")
    assert folder.checkpoint.read_bytes() == partial and not folder.metrics.exists()
    folder.checkpoint.write_bytes(final)
    doc = json.loads(folder.trained.read_text())
    folder.trained.write_text(json.dumps({**doc, "world_size": "8"}))
    with pytest.raises(ResultsError, match=r"trained.json: key 'world_size' is '8', not what this run's training wrote"):
        execute_run(run, store, tmp_path, stage="evaluate")
    folder.trained.write_text(json.dumps({**doc, "run_id": "0123456789ab"}))
    with pytest.raises(ResultsError, match=r"trained.json: key 'run_id' is '0123456789ab'"):
        execute_run(run, store, tmp_path, stage="evaluate")
    folder.trained.write_text(json.dumps(doc))
    assert execute_run(run, store, tmp_path, stage="evaluate")["world_size"] == 1


def test_finishing_a_trained_run_in_one_process_records_the_trainings_hardware(tmp_path):
    """Stage `all` (a local `semcl run`) of a run whose training job finished elsewhere: the record's training
    fields are trained.json's (4 ranks on a GPU), this machine only as `evaluated_on`; the metrics are the
    one-process run's."""
    run = _run("rince/tab2", "Cross-entropy", epochs=2)
    want = execute_run(run, Store(tmp_path / "a"), tmp_path)
    store = Store(tmp_path / "s")
    assert execute_run(run, store, tmp_path, stage="train") == {}
    folder = store.folder(run.run_id)
    cluster = {"device": "NVIDIA H100 80GB HBM3", "threads": 8, "world_size": 4, "train_time_s": 3600.0}
    folder.trained.write_text(json.dumps({"run_id": run.run_id, **cluster}))
    got = execute_run(run, store, tmp_path, stage="all")
    assert {k: got[k] for k in cluster} == cluster
    assert got["evaluated_on"] == want["device"] and got["wall_time_s"] >= 3600.0
    assert got["metrics"] == want["metrics"]
    assert json.loads(folder.metrics.read_text())["world_size"] == 4


class _Stop(Exception):
    pass


def test_augmented_probe_resumes_after_an_epoch(tmp_path):
    g = torch.Generator().manual_seed(0)
    train_x = torch.randint(0, 256, (40, 1, 6, 6), generator=g, dtype=torch.uint8)
    test_x = torch.randint(0, 256, (20, 1, 6, 6), generator=g, dtype=torch.uint8)
    train_y, test_y = torch.arange(40) % 4, torch.arange(20) % 4
    proj = torch.randn(36, 8, generator=g)

    def encode(x):
        return x.flatten(1) @ proj

    def jitter(x, gen):  # an augmentation that draws from the probe's generator
        return x.float() / 255 + 0.1 * torch.randn(x.shape, generator=gen)

    kw = dict(num_classes=4, train_transform=jitter, test_transform=lambda x, gen=None: x.float() / 255, epochs=6, lr=0.5,
              batch_size=16, milestones=(3,), augment=True, seed=5)
    want = linear_probe(encode, train_x, train_y, test_x, test_y, **kw)
    ckpt = EvalCheckpoint(tmp_path / "eval-probe.pt")
    real_save = ckpt.save

    def save_then_stop(state):
        real_save(state)
        if state["epoch"] == 4:
            raise _Stop

    ckpt.save = save_then_stop
    with pytest.raises(_Stop):
        linear_probe(encode, train_x, train_y, test_x, test_y, checkpoint=ckpt, **kw)
    ckpt.save = real_save
    got = linear_probe(encode, train_x, train_y, test_x, test_y, checkpoint=ckpt, **kw)
    assert got.history == want.history and got.lr_history == want.lr_history
    assert (got.top1_last, got.top1_best) == (want.top1_last, want.top1_best)


def test_timed_checkpoints_inside_an_epoch_resume_bit_exact(tmp_path, monkeypatch):
    """SEMCL_CHECKPOINT_EVERY_MIN tiny: a checkpoint at every step boundary; a hard stop after the
    13th save (epoch 2, inside it) and a rerun end with the uninterrupted run's metrics."""
    run = _run("rince/tab2", "RINCE-in", epochs=2)
    want = execute_run(run, Store(tmp_path / "a"), tmp_path)
    monkeypatch.setenv(train_mod.CHECKPOINT_EVERY_ENV, "1e-9")
    real, positions = checkpointer_mod.save_atomic, []

    def save_then_die(state, path):
        real(state, path)
        positions.append((state["epoch"], state["step"]))
        if len(positions) == 13:
            raise _Stop

    monkeypatch.setattr(checkpointer_mod, "save_atomic", save_then_die)
    store = Store(tmp_path / "b")
    with pytest.raises(_Stop):
        execute_run(run, store, tmp_path)
    steps = positions.index((1, 0)) + 1  # epoch 1: a timed save after every step but the last, then its own
    assert positions[:steps] == [(0, s) for s in range(1, steps)] + [(1, 0)]
    assert positions[-1][0] == 1 and 0 < positions[-1][1] < steps
    monkeypatch.setattr(checkpointer_mod, "save_atomic", real)
    got = execute_run(run, store, tmp_path)
    assert got["metrics"] == want["metrics"]
    assert [h["loss"] for h in got["history"]] == [h["loss"] for h in want["history"]]
