"""SIGTERM / SIGINT: a local worker checkpoints at the next step boundary and stops without marking
the run failed; the CLI passes the signal on, reports one line per interrupted run, exits non-zero
without a traceback, and the rerun resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import semcl.engine.train as train_mod
from semcl.launch.local import RunBatch
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.store import Store

REPO = Path(__file__).resolve().parents[2]

TINY = """\
id: test/tiny
paper: gpaco
source: "test"
title: one tiny CE run
preset: paco_imagenet_lt_resnet50
seeds: [123]
columns:
  - {key: top1, label: "Top-1", eval: accuracy, group: overall}
rows:
  - {label: CE, method: ce}
profiles:
  smoke:
    seeds: [123]
    overrides:
      data.synthetic: true
      data.synthetic_train_per_class: 10
      data.synthetic_test_per_class: 1
      data.image_size: 16
      data.augment: crop_flip
      model.backbone: resnet_tiny
      optim.batch_size: 10
      optim.warmup_epochs: 0
      optim.cosine: false
      schedule.epochs: EPOCHS
"""


@pytest.fixture
def tiny(registry_copy):
    def make(epochs: int):
        (registry_copy / "test").mkdir(exist_ok=True)
        (registry_copy / "test" / "tiny.yaml").write_text(TINY.replace("EPOCHS", str(epochs)))
        return plan_runs(get_table("test/tiny"), "smoke")[0]
    return make


@pytest.mark.slow
def test_worker_checkpoints_at_the_next_step_and_the_rerun_resumes(tmp_path, tiny, monkeypatch, single_thread):
    run = tiny(1)
    store = Store(tmp_path)
    from semcl.launch.backends import prepare_synthetic_data

    prepare_synthetic_data([run], store)
    calls = []

    def beat_then_signal(force: bool = False) -> None:
        calls.append(1)
        if len(calls) == 3:  # (6 steps an epoch) acted on after step 3, with a checkpoint of that position
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(train_mod, "heartbeat", beat_then_signal)
    before = signal.getsignal(signal.SIGTERM)
    outcome = RunBatch([run], tmp_path, tmp_path / "unused", 1)()
    assert outcome == {run.run_id: "interrupted by SIGTERM, checkpoint at epoch 0 step 3"}
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored
    folder = store.run_dir(run.run_id)
    assert not (folder / "failed.json").exists() and not (folder / "lock.json").exists()
    assert store.status(run.run_id) == ("partial", "checkpoint present")
    monkeypatch.setattr(train_mod, "heartbeat", lambda force=False: None)
    assert RunBatch([run], tmp_path, tmp_path / "unused", 1)() == {run.run_id: "done"}
    assert "at epoch 0 step 3" in (folder / "log.txt").read_text()  # "resumed from ... at epoch 0 step 3"


def _wait_for(predicate, timeout: float) -> None:
    t0 = time.time()
    while not predicate():
        if time.time() - t0 > timeout:
            raise AssertionError("timed out")
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_sigterm_to_the_cli_stops_its_local_workers(tmp_path, tiny):
    run = tiny(500)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "semcl.cli", "--results", str(tmp_path), "run", "test/tiny", "--profile", "smoke",
           "--executor", "local", "--workers", "1"]
    folder = Store(tmp_path).run_dir(run.run_id)
    for attempt in range(2):
        cli = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if attempt == 0:  # once the first epoch's checkpoint exists
            _wait_for(lambda: (folder / "checkpoints" / "last.pt").exists(), 240)
        else:  # once the second invocation has resumed
            _wait_for(lambda: (folder / "log.txt").read_text().count("resumed from") >= 1, 240)
        worker = json.loads((folder / "lock.json").read_text())["pid"]
        sig = (signal.SIGTERM, signal.SIGINT)[attempt]  # a scheduler's stop, then a Ctrl-C: each said as what it was
        cli.send_signal(sig)
        out, err = cli.communicate(timeout=120)
        assert cli.returncode == 128 + sig
        assert "Traceback" not in err
        lines = [ln for ln in err.splitlines() if ln.startswith(run.run_id)]
        assert len(lines) == 1 and lines[0].startswith(f"{run.run_id} CE seed=123: interrupted by {sig.name}, "
                                                       "checkpoint at epoch ")
        assert err.splitlines()[-1].startswith(f"semcl: error: stopped by {sig.name}")
        assert not _alive(worker)  # no orphan keeps training
        assert not (folder / "lock.json").exists() and not (folder / "failed.json").exists()
