"""Checkpoints, base-run weights and ensemble logits load with weights_only: a crafted pickle never
runs, a garbage file is one line naming it and what to do; RNG states round-trip as tensors;
temp files are unique per writer and a run's files share one mode."""

from __future__ import annotations

import json
import os
import random
import stat
from pathlib import Path

import numpy as np
import pytest
import torch

from semcl.engine.dependencies import dependencies
from semcl.errors import ResultsError
from semcl.files import file_mode, write_json_atomic
from semcl.registry.plan import Run
from semcl.runtime import checkpoint
from semcl.store import Store
from semcl.store.run_folder import LOGITS as LOGITS_FILE


class SideEffect:
    """Unpickling this calls open(marker, "w"): the file appears iff the pickle was executed."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _evil(path: Path, marker: Path, wrap: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    obj = SideEffect(marker)
    torch.save({wrap: obj} if wrap else obj, path)


def _one_line_naming(err: pytest.ExceptionInfo, path: Path) -> str:
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg
    return msg


def _done(store: Store, run_id: str) -> None:
    write_json_atomic(store.metrics_path(run_id), {"run_id": run_id, "metrics": {}})


def _dependency(store: Store, run_id: str, kind: str):
    """What the engine hands a method for a finished run `run_id` of that kind."""
    run = Run("t", "row", 0, "smoke", None, "r0", depends_on=(run_id,))
    (dep,) = dependencies(run, store, kind)
    return dep


def test_crafted_last_pt_is_refused_and_never_runs(tmp_path):
    path, marker = tmp_path / "checkpoints" / "last.pt", tmp_path / "marker"
    _evil(path, marker, wrap="method")
    with pytest.raises(ResultsError) as err:
        checkpoint.load(path)
    msg = _one_line_naming(err, path)
    assert "refused" in msg and "delete it to restart the run" in msg
    assert not marker.exists()


def test_crafted_base_run_weights_are_refused(tmp_path):
    store, marker = Store(tmp_path / "results"), tmp_path / "marker"
    _done(store, "base0")
    path = store.run_dir("base0") / "checkpoints" / "last.pt"
    _evil(path, marker, wrap="method")
    with pytest.raises(ResultsError) as err:
        _dependency(store, "base0", "init_from").load_state()
    assert "rerun base run base0" in _one_line_naming(err, path)
    assert not marker.exists()


def test_crafted_ensemble_member_logits_are_refused(tmp_path):
    store, marker = Store(tmp_path / "results"), tmp_path / "marker"
    _done(store, "m0")
    path = store.run_dir("m0") / LOGITS_FILE
    _evil(path, marker, wrap="logits")
    with pytest.raises(ResultsError) as err:
        _dependency(store, "m0", "ensemble").load_logits()
    assert "rerun ensemble member m0" in _one_line_naming(err, path)
    assert not marker.exists()


def test_garbage_last_pt_names_the_file_and_the_remedy(tmp_path):
    path = tmp_path / "last.pt"
    path.write_bytes(bytes(random.Random(0).randrange(256) for _ in range(300)))
    with pytest.raises(ResultsError) as err:
        checkpoint.load(path)
    msg = _one_line_naming(err, path)
    assert msg.endswith("delete it to restart the run from scratch")


def test_rng_states_round_trip_through_a_weights_only_load(tmp_path):
    random.seed(5)
    np.random.seed(6)
    torch.manual_seed(7)
    random.random(), np.random.standard_normal(), torch.rand(3)  # noqa: B018  (move every stream)
    np.random.standard_normal()  # leaves a cached gaussian in numpy's state
    checkpoint.save_atomic({"method": {}, "rng": checkpoint.rng_state()}, tmp_path / "last.pt")
    expected = (random.random(), random.gauss(0, 1), np.random.standard_normal(3).tolist(), torch.rand(4))
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    state = torch.load(tmp_path / "last.pt", weights_only=True)  # the strict loader accepts it
    checkpoint.set_rng_state(state["rng"])
    got = (random.random(), random.gauss(0, 1), np.random.standard_normal(3).tolist(), torch.rand(4))
    assert got[:3] == expected[:3] and torch.equal(got[3], expected[3])


def test_save_leaves_another_writers_temp_file_alone(tmp_path):
    """Today's fixed `.last.pt.tmp` was shared by concurrent writers (torn files)."""
    other = tmp_path / ".last.pt.tmp"
    other.write_bytes(b"another writer, mid-save")
    checkpoint.save_atomic({"method": {"w": torch.ones(2)}}, tmp_path / "last.pt")
    assert other.read_bytes() == b"another writer, mid-save"
    assert torch.equal(checkpoint.load(tmp_path / "last.pt")["method"]["w"], torch.ones(2))
    assert sorted(p.name for p in tmp_path.iterdir()) == [".last.pt.tmp", "last.pt"]


def test_a_runs_files_share_one_mode(tmp_path):
    old = os.umask(0o022)
    try:
        write_json_atomic(tmp_path / "metrics.json", {"a": 1})
        checkpoint.save_atomic({"method": {}}, tmp_path / "last.pt")
        (tmp_path / "config.yaml").write_text("x: 1\n")
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    finally:
        os.umask(old)
    assert modes == {"metrics.json": 0o644, "last.pt": 0o644, "config.yaml": 0o644}
    assert file_mode() == 0o666 & ~old


def test_finished_metrics_json_is_never_rewritten(tmp_path):
    store = Store(tmp_path)
    store.write_record("r1", {"run_id": "r1", "metrics": {"top1": 1.0}})
    with pytest.raises(ResultsError, match="already finished; its record is never rewritten"):
        store.write_record("r1", {"run_id": "r1", "metrics": {"top1": 2.0}})
    assert json.loads(store.metrics_path("r1").read_text())["metrics"] == {"top1": 1.0}
    assert [p.name for p in store.run_dir("r1").iterdir()] == ["metrics.json"]  # no temp file left
