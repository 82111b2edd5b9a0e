"""A smoke run with TensorBoard, W&B (offline) and MLflow (file store) chosen, as the real packages of the `test`
extra, killed after its epoch 2 reached the trackers but before epoch 2's checkpoint, then resumed (it retrains
epoch 2): each tracker holds every epoch exactly once, with the record's values. W&B's offline runs cannot resume
(wandb/wandb#2423): each attempt's folder is complete alone, and the newest holds the whole run."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

import semcl.runtime.history as history_mod
from semcl.engine.job import execute_run
from semcl.runtime.tracking import mlflow_key
from semcl.store import Store

pytest.importorskip("wandb")
pytest.importorskip("mlflow")
pytest.importorskip("tensorboard")

from test_pipeline import Preempted, _smoke_run  # noqa: E402  (tests/e2e: one folder, pytest's rootdir import)


def wandb_records(path: Path) -> list:
    """The protobuf records of an offline run's .wandb file: a 7-byte header (":W&B", magic, version), then LevelDB's
    log format (32 KiB blocks; each chunk: CRC32C, length, type FULL=1 / FIRST=2 / MIDDLE=3 / LAST=4)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    out, pos, chunks, block = [], 7, b"", 32768
    while pos + 7 <= len(data):
        room = block - pos % block
        if room < 7:  # a block's tail too short for a header is padding
            pos += room
            continue
        length, kind = struct.unpack("<HB", data[pos + 4:pos + 7])
        if length == 0 and kind == 0:
            break
        chunks += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            rec = wandb_internal_pb2.Record()
            rec.ParseFromString(chunks)
            out.append(rec)
            chunks = b""
    return out


def wandb_history(folder: Path) -> tuple[list[tuple[int, float]], dict]:
    """[(step, loss)] of the history records and the last summary's values, of one offline-run folder."""
    recs = wandb_records(next(folder.glob("run-*.wandb")))
    steps, summary = [], {}
    for rec in recs:
        if rec.WhichOneof("record_type") == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item}
            steps.append((int(items["_step"]), items["loss"]))
        elif rec.WhichOneof("record_type") == "summary":
            summary.update({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.summary.update})
    return steps, summary


@pytest.mark.slow
def test_kill_and_resume_leaves_every_epoch_once_in_each_tracker(tmp_path, monkeypatch):
    monkeypatch.setenv("SEMCL_TRACKING", "tensorboard,wandb,mlflow")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run = _smoke_run("Cross-entropy", epochs=3)
    store = Store(tmp_path / "results")
    real_end = history_mod.EpochLog.epoch_end

    def end_then_die(self, entry):
        real_end(self, entry)  # epoch 2 reaches history.jsonl and the trackers ...
        if entry["epoch"] == 2:
            raise Preempted  # ... and the process dies before its checkpoint

    monkeypatch.setattr(history_mod.EpochLog, "epoch_end", end_then_die)
    with pytest.raises(Preempted):
        execute_run(run, store, tmp_path)
    monkeypatch.setattr(history_mod.EpochLog, "epoch_end", real_end)
    record = execute_run(run, store, tmp_path)
    assert "resumed from" in (store.run_dir(run.run_id) / "log.txt").read_text()
    losses = [(h["epoch"], h["loss"]) for h in record["history"]]
    assert [e for e, _ in losses] == [1, 2, 3]

    # TensorBoard, as its own reader shows it (the resumed writer purged the killed attempt's epoch 2)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tb = tmp_path / "results" / "tensorboard" / "smoke" / run.table_id / run.row_label / "123"
    acc = EventAccumulator(str(tb))
    acc.Reload()
    assert [(e.step, pytest.approx(e.value)) for e in acc.Scalars("train/loss")] == losses

    # MLflow's file store: one run for the run id, each epoch once (the retrained epoch 2 not appended again)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=(tmp_path / "results" / "mlruns").resolve().as_uri())
    exp = client.get_experiment_by_name("semcl")
    found = client.search_runs([exp.experiment_id], filter_string=f"tags.`semcl.run_id` = '{run.run_id}'")
    assert len(found) == 1
    hist = sorted((m.step, m.value) for m in client.get_metric_history(found[0].info.run_id, "loss"))
    assert hist == [(e, pytest.approx(v)) for e, v in losses]
    assert found[0].data.metrics.keys() >= {mlflow_key(f"eval/{k}") for k in record["metrics"]
                                            if isinstance(record["metrics"][k], float)}

    # W&B offline: three folders for the one id (killed attempt, resumed attempt, results), each with every step
    # at most once and from epoch 1 on; the newest holds the whole run and the evaluation
    folders = sorted((store.run_dir(run.run_id) / "wandb").glob(f"offline-run-*-{run.run_id}"))
    assert len(folders) == 3
    killed, resumed, newest = (wandb_history(f) for f in folders)
    assert killed[0] == [(e, pytest.approx(v)) for e, v in losses[:2]]  # epoch 2 of the killed attempt, logged
    assert resumed[0] == [(e, pytest.approx(v)) for e, v in losses]  # epoch 1 replayed, 2 and 3 trained
    assert newest[0] == [(e, pytest.approx(v)) for e, v in losses]
    assert {f"eval/{k}" for k, v in record["metrics"].items() if isinstance(v, float)} <= set(newest[1])
