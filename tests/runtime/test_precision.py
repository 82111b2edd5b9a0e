"""`--precision`: official (no value in the config: every run id as before) or fast (bf16 autocast,
channels_last, cudnn.benchmark: run ids of their own, labelled in tables); and a closed pipe ends
`semcl list | head` quietly."""

from __future__ import annotations

import subprocess
import sys

import pytest

import semcl.engine.harness as harness_mod
import semcl.engine.job as job_mod
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.report.tables import notes
from semcl.runtime.precision import ENV, effective_config, stored
from semcl.store import Store

SEMCL = [sys.executable, "-m", "semcl.cli"]


def test_fast_runs_have_ids_of_their_own_and_official_keeps_them(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    table = get_table("rince/tab2")
    plain = [r.run_id for r in plan_runs(table, "smoke")]
    assert [r.run_id for r in plan_runs(table, "smoke", precision="official")] == plain
    fast = plan_runs(table, "smoke", precision="fast")
    assert not set(plain) & {r.run_id for r in fast} and len(fast) == len(plain)
    assert all(r.config.optim.precision == "fast" for r in fast)
    monkeypatch.setenv(ENV, "fast")  # what `semcl --precision fast` sets
    assert [r.run_id for r in plan_runs(table, "smoke")] == [r.run_id for r in fast]
    with pytest.raises(ValueError, match="precision must be one of official, fast, got 'half'"):
        stored("half")


def test_fast_trains_in_bf16_and_channels_last(tmp_path, monkeypatch):
    run = next(r for r in plan_runs(get_table("rince/tab2"), "smoke", precision="fast") if r.row_label == "Cross-entropy")
    cfg = effective_config(run.config)
    assert (cfg.optim.amp, cfg.model.memory_format) == ("bf16", "channels_last")
    assert run.config.optim.amp is None  # the run's own config (and id) keeps the official recipe's fields
    official = next(r for r in plan_runs(get_table("rince/tab2"), "smoke") if r.row_label == "Cross-entropy")
    assert effective_config(official.config) is official.config
    seen = {}

    def fake_train(method, train_set, cfg, *a, **kw):
        seen.update(amp=cfg.optim.amp, layout=cfg.model.memory_format, precision=cfg.optim.precision)
        raise RuntimeError("stop after the set-up")

    monkeypatch.setattr(harness_mod, "train", fake_train)
    with pytest.raises(RuntimeError, match="stop after the set-up"):
        job_mod.execute_run(run, Store(tmp_path / "s"), tmp_path)
    assert seen == {"amp": "bf16", "layout": "channels_last", "precision": "fast"}


def test_cli_plans_fast_runs_and_the_table_says_so(monkeypatch):
    plain = subprocess.run([*SEMCL, "plan", "rince/tab2", "--profile", "smoke"], capture_output=True, text=True)
    fast = subprocess.run([*SEMCL, "--precision", "fast", "plan", "rince/tab2", "--profile", "smoke"],
                          capture_output=True, text=True)
    assert plain.returncode == fast.returncode == 0
    ids = [{ln.split()[0] for ln in out.stdout.splitlines()[1:] if ln and not ln.startswith("#")} for out in (plain, fast)]
    assert len(ids[0]) == len(ids[1]) == 51 and not ids[0] & ids[1]
    monkeypatch.setenv(ENV, "fast")
    assert notes(get_table("rince/tab2"), "smoke")[0].startswith("Precision of every row: fast: bf16 autocast")
    monkeypatch.delenv(ENV)
    assert not notes(get_table("rince/tab2"), "smoke")[0].startswith("Precision")


def test_a_closed_pipe_is_a_quiet_exit():
    out = subprocess.run(f"{sys.executable} -m semcl.cli plan --all --profile smoke | head -1; exit ${{PIPESTATUS[0]}}", shell=True,
                         executable="/bin/bash", capture_output=True, text=True)
    assert out.returncode == 0 and "Traceback" not in out.stderr and "Broken" not in out.stderr
    assert out.stdout.startswith("# ") and len(out.stdout.splitlines()) == 1
