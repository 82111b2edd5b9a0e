"""The preflight runs the engine's own training step (semcl.engine.train with max_steps), so it fails what
the engine would fail: loader partners of file-backed sets, gradient accumulation and autocast go through
the same code. Rows of one shape share a check; passed shapes are cached per code version; checks run
in processes in dependency order."""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensor

from semcl.methods.base import Batch, Method
from semcl.methods.registry import METHODS
from semcl.methods.spec import MethodSpec
from semcl.models import LinearClassifier, build_backbone
from semcl.preflight.plan import check_tables
from semcl.preflight.pool import run_ordered
from semcl.preflight.shapes import ShapeCache, shape_key, shape_of
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table


@dataclass
class ToyMethod:
    name: str = "toy_pf"
    scale: float = 1.0
    partners: str = "none"  # none | self | broken


SEEN: list[dict] = []


def _self_partner(row: int, generator: torch.Generator) -> list[int]:
    return [row]


def _broken_partner(row: int, generator: torch.Generator) -> list[int]:
    raise ValueError("toy partner pick broke")


class ToyPF(Method):
    """Cross-entropy; records what the engine's step hands it."""

    has_classifier = True

    def __init__(self, cfg, info):
        super().__init__(cfg, info)
        self.backbone = build_backbone(cfg.model.backbone, in_channels=info.in_channels)
        self.classifier = LinearClassifier(self.backbone.out_dim, info.num_classes)

    def loader_partners(self):
        pick = {"self": _self_partner, "broken": _broken_partner}.get(self.cfg.method.partners)
        return None if pick is None else (pick, [lambda img, g: img])

    def loss(self, batch: Batch) -> dict[str, torch.Tensor]:
        w = self.classifier.fc.weight if hasattr(self.classifier, "fc") else next(self.classifier.parameters())
        if not isinstance(batch.views[0], FakeTensor):  # the memory probe's fake step is not counted
            SEEN.append({"step": batch.step, "partners": batch.partner_views is not None,
                         "grad": w.grad is not None, "autocast": torch.is_autocast_enabled("cpu")})
        logits = self.classifier(self.backbone(batch.views[0])) * self.cfg.method.scale
        return {"loss": F.cross_entropy(logits.float(), batch.labels)}

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.backbone(x))


ROWS = {
    "plain": "{}",
    "scaled": "{method.scale: 3.0, optim.lr: 0.01, schedule.epochs: 7}",  # the same shape as plain
    "partners": "{method.partners: self}",
    "broken partners": "{method.partners: broken}",
    "accumulated": "{optim.accum_steps: 4}",
    "bf16": "{optim.amp: bf16}",
}
TABLE = """\
id: toy/pf
paper: toy
source: "test"
title: preflight through the engine
seeds: [7]
columns:
  - {key: top1, label: "Top-1", eval: accuracy, group: overall}
rows:
""" + "".join(f"  - {{label: {label}, method: toy_pf, overrides: {ov}}}\n" for label, ov in ROWS.items()) + """\
profiles:
  smoke:
    overrides:
      data.name: imagenet100
      data.synthetic: true
      data.image_size: 32
      data.augment: crop_flip
      model.backbone: resnet_tiny
      optim.batch_size: 4
      optim.warmup_epochs: 0
      schedule.epochs: 2
      eval.linear_probe: false
"""


@pytest.fixture
def toy_table(tmp_path, monkeypatch):
    monkeypatch.setitem(METHODS, "toy_pf", MethodSpec("toy_pf", ToyMethod, ToyPF, train_cost=1.0,
                                                      choices={"partners": frozenset({"none", "self", "broken"})}))
    root = tmp_path / "experiments"
    (root / "toy").mkdir(parents=True)
    (root / "toy" / "pf.yaml").write_text(TABLE)
    monkeypatch.setenv("SEMCL_REGISTRY", str(root))
    monkeypatch.setenv("SEMCL_LOADER_WORKERS", "0")
    return get_table("toy/pf")


def _only(table, labels):
    """The table with only these rows (each a separate check)."""
    import dataclasses

    return dataclasses.replace(table, rows=[r for r in table.rows if r.label in labels])


@pytest.mark.usefixtures("single_thread")
def test_the_check_is_the_engine_step_with_partners_accumulation_and_autocast(toy_table, tmp_path):
    results = {}
    for label in ("partners", "broken partners", "accumulated", "bf16"):
        SEEN.clear()
        (res,) = check_tables([_only(toy_table, [label])], "smoke", tmp_path / label, 80.0)
        results[label] = (res, list(SEEN))
    # file-backed set: the loader makes the partners' views, as in a run
    res, seen = results["partners"]
    assert res.error is None and [s["partners"] for s in seen] == [True]
    # a partner pick that raises fails the check (a hand-made step without the loader would pass it)
    res, seen = results["broken partners"]
    assert "toy partner pick broke" in res.error and seen == []
    # accumulation (4 capped to a 2-batch cycle): the second batch adds to the first one's gradients
    res, seen = results["accumulated"]
    assert res.error is None and [(s["step"], s["grad"]) for s in seen] == [(0, False), (1, True)]
    # the forward runs under the row's autocast
    res, seen = results["bf16"]
    assert res.error is None and [s["autocast"] for s in seen] == [True]
    assert results["partners"][0].act_bytes_per_sample > 0 and results["partners"][0].params > 0


@pytest.mark.usefixtures("single_thread")
def test_rows_of_one_shape_share_a_check_and_passed_shapes_are_cached(toy_table, tmp_path):
    table = _only(toy_table, ["plain", "scaled"])
    SEEN.clear()
    first = check_tables([table], "smoke", tmp_path / "w1", 80.0, cache=tmp_path / "cache")
    assert len(SEEN) == 1  # one training step for the two rows
    assert [r.same_shape_as for r in first] == [None, "toy/pf / plain"]
    assert first[1].est_gpu_gb == first[0].est_gpu_gb and first[1].run_id != first[0].run_id
    SEEN.clear()
    again = check_tables([table], "smoke", tmp_path / "w2", 40.0, cache=tmp_path / "cache")
    assert SEEN == [] and [r.cached for r in again] == [True, True]
    assert [(r.params, r.act_bytes_per_sample, r.est_gpu_gb) for r in again] == \
           [(r.params, r.act_bytes_per_sample, r.est_gpu_gb) for r in first]
    assert again[0].gpu_mem_gb == 40.0  # the cluster's memory is this call's, not the cache's
    # a new code version is a new cache folder, and the old one goes
    stale = ShapeCache(tmp_path / "cache", version="other")
    stale.put("k", first[0])
    assert not any(p.name != "other" for p in (tmp_path / "cache").iterdir())


def test_the_shape_drops_scalars_but_keeps_zero_sizes_and_strings():
    hashed = {"method": {"name": "kd", "alpha": 0.9, "beta": 0.0, "tau": [0.1, 0.2], "k": 40, "mode": "in"},
              "optim": {"lr": 0.5, "batch_size": 256, "warmup_epochs": 10, "step_milestones": [30, 60]},
              "schedule": {"epochs": 0}, "model": {"backbone": "resnet50", "head_dim": 128}}
    assert shape_of(hashed) == {
        "method": {"name": "kd", "alpha": "x", "beta": "0", "tau": ["x", "x"], "k": 40, "mode": "in"},
        "optim": {"lr": "x", "batch_size": 256, "warmup_epochs": "x", "step_milestones": ["x", "x"]},
        "schedule": {"epochs": "0"}, "model": {"backbone": "resnet50", "head_dim": 128}}
    # rince/tab9's rows differ only in the loss's alpha: one shape
    runs = [r for r in plan_runs(get_table("rince/tab9"), "paper") if r.seed == 123]
    assert len({r.run_id for r in runs}) == 3 and len({shape_key(r, 4, [], {}) for r in runs}) == 1
    assert shape_key(runs[0], 4, [], {}) != shape_key(runs[0], 8, [], {})  # the GPUs held change the estimate


def test_checks_run_in_processes_after_what_they_build_on():
    done: list[str] = []
    # "b" builds on "a", which is slow: "b" starts only after "a" is done; results as they arrive
    run_ordered(["a", "b", "c"], {"b": {"a"}}, time.sleep, lambda k: ({"a": 0.5, "b": 0.0, "c": 0.0}[k],), 2,
                lambda k, _res: done.append(k), lambda k, why: why)
    assert done.index("a") < done.index("b") and sorted(done) == ["a", "b", "c"]
    got: dict = {}
    run_ordered(["x"], {}, math.pow, lambda k: (2.0, 10.0), 1, got.__setitem__, lambda k, why: why)
    assert got == {"x": 1024.0}


def test_a_dead_check_process_fails_its_check_with_a_reason():
    import os

    got: dict = {}
    run_ordered(["dies"], {}, os._exit, lambda k: (3,), 2, got.__setitem__, lambda k, why: f"died: {why}")
    assert got["dies"].startswith("died: the check's process died")


def test_a_free_process_takes_the_costliest_ready_check():
    from semcl.preflight.pool import costliest

    cost = {"a": 1.0, "b": 5.0, "c": 5.0, "d": 0.0}.__getitem__
    assert costliest(["a", "b", "c", "d"], cost, 2) == ["b", "c"]  # ties keep the given order
    assert costliest(["a", "d"], cost, 3) == ["a", "d"] and costliest(["a"], cost, 0) == []
    done: list[str] = []  # "long" sleeps long enough to outlast a slow process start on a loaded machine
    run_ordered(["short", "long"], {}, time.sleep, lambda k: ({"short": 0.0, "long": 3.0}[k],), 2,
                lambda k, _res: done.append(k), lambda k, why: why, cost={"short": 0.0, "long": 1.0}.__getitem__)
    assert done == ["short", "long"]


def test_scratch_checkpoints_are_freed_once_no_check_reads_them(tmp_path):
    """A KD teacher's checkpoint stays until its student is checked (the student passes, reading it); at the
    end no checkpoint is left in the scratch store, and every record is."""
    from semcl.registry.tables import get_table
    from semcl.store import Store

    table = get_table("scns/kd-cifar100")
    keep = {"Teacher resnet56", "KD resnet56 to resnet20"}
    table = dataclasses.replace(table, rows=[r for r in table.rows if r.label in keep])
    results = check_tables([table], "smoke", tmp_path, 80.0)
    assert sorted(r.row for r in results) == sorted(keep) and all(r.error is None for r in results), results
    store = Store(tmp_path)
    for r in results:
        assert store.read_record(r.run_id) is not None
    assert not list((tmp_path / "runs").rglob("*.pt"))


def _dies_the_first_time(marker: str) -> str:
    """A check killed on its first try (as the OOM killer does beside another big check), fine after."""
    import os
    from pathlib import Path

    if not Path(marker).exists():
        Path(marker).touch()
        os._exit(9)
    return "ok"


def test_a_check_whose_process_died_is_run_again_alone_before_it_is_reported(tmp_path):
    got: dict = {}
    (tmp_path / "fine").touch()
    # "big" dies on its first try; "after" builds on it and waits for its retry; "small" runs beside it
    markers = {"big": tmp_path / "died-once", "small": tmp_path / "fine", "after": tmp_path / "fine"}
    run_ordered(["big", "small", "after"], {"after": {"big"}}, _dies_the_first_time, lambda k: (str(markers[k]),),
                2, got.__setitem__, lambda k, why: f"died: {why}")
    assert got == {"big": "ok", "small": "ok", "after": "ok"} and list(got)[-1] == "after"


def test_a_worker_ends_when_the_check_that_started_it_is_killed(tmp_path):
    """A parent killed with SIGKILL (no clean-up runs) takes its pool workers with it (PR_SET_PDEATHSIG)."""
    import os
    import signal
    import subprocess
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux's")
    pids = tmp_path / "pids"
    code = ("import os, time, sys\n"
            "from concurrent.futures import ProcessPoolExecutor\n"
            "import multiprocessing as mp\n"
            "from semcl.preflight.pool import _init_worker\n"
            "pool = ProcessPoolExecutor(1, mp_context=mp.get_context('spawn'), initializer=_init_worker,"
            " initargs=(1, os.getpid()))\n"
            f"open({str(pids)!r}, 'w').write(str(pool.submit(os.getpid).result()))\n"
            "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.time() + 120
    while not (pids.exists() and pids.read_text()) and time.time() < deadline:
        time.sleep(0.2)
    worker = int(pids.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    for _ in range(100):  # SIGTERM arrives at once; allow the interpreter to exit
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(worker, signal.SIGKILL)
        pytest.fail("the worker outlived its parent")
