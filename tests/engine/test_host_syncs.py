"""Host reads of tensor values in a training step: at most one per step for every method that trains.

A read of a value on the host (`.item()`, `float(t)`, `bool(t)`, `if t.any():`, `.tolist()`, a boolean-mask
index, whose output size is data) waits on a GPU until the device has run everything queued (semcl.runtime.host_sync).
This machine has no GPU, so the step runs on the CPU, on the paths a GPU run takes (`like_an_accelerator`), and
these ATen calls stand in for the reads: `_local_scalar_dense` (every scalar read), data-sized outputs (`nonzero`,
`masked_select`, `unique`, `bincount`, `repeat_interleave` without an output size, `index` / `index_put` with a
bool mask) and `Tensor.tolist`. Not seen on the CPU: copies between host and device (`.cpu()`, `.to(device)`
without non_blocking); those are reviewed by reading.

Each method is stepped as `semcl check` steps it (semcl.preflight.check: one row per method, at the CI size of
tests/preflight/test_preflight.py, its dependencies first), inside the engine's Stepper (forward, backward, loss
scaling); torch's optimisers are left out (Adam keeps its step counts on the host by design) and evaluation is
skipped. Reads of tensors that stay on the host in a GPU run (draws from the step's CPU generator, negatives
sampled from CPU labels) are not counted (HOST_SIDE).
"""

from __future__ import annotations

import copy
import traceback
from collections import defaultdict
from pathlib import Path

import pytest
import torch
import torch.optim.optimizer as optimizer_hooks
from torch.utils._python_dispatch import TorchDispatchMode

import semcl
import semcl.engine.harness
import semcl.engine.job
import semcl.engine.train as train_mod
from semcl.engine.job import execute_run
from semcl.methods.registry import METHODS
from semcl.preflight.check import Reduce
from semcl.preflight.plan import check_tables
from semcl.registry.plan import Run, make_run_id, plan_runs
from semcl.registry.tables import get_table, load_registry
from semcl.runtime.host_sync import like_an_accelerator
from semcl.store import Store

SRC = Path(semcl.__file__).parent
SCALAR_READS = {"aten._local_scalar_dense.default"}
DATA_SIZED = {"aten.nonzero.default", "aten.masked_select.default", "aten._unique2.default", "aten.unique_dim.default",
              "aten.unique_consecutive.default", "aten.bincount.default"}
MASK_INDEXED = {"aten.index.Tensor", "aten.index_put.default", "aten.index_put_.default",
                "aten._index_put_impl_.default"}

# (file under src/semcl, function; "*" any) -> why the value read there is a host tensor in a GPU run
HOST_SIDE = {
    ("data/views/cutmix.py", "sample_beta"): "a seed drawn from the step's CPU generator",
    ("methods/vit/mixup.py", "draw"): "a seed drawn from the step's CPU generator",
    ("data/semantics/negatives.py", "*"): "negatives drawn on the host from the CPU training labels and batch indices",
    ("methods/segmentation/method.py", "prepare"): "the batch's images and label maps flipped on the host",
    ("data/fileset.py", "*"): "rows of a file-backed set read on the host (segmentation decodes its batch in the step)",
}
# the one read a step may make: torch's GradScaler reads its found-inf flag once per optimiser step (fp16 rows)
ALLOWED = {("engine/train.py", "__call__")}
# methods that build a network but never step (nothing trains): method -> why
NO_STEP = {
    "decouple_tau_norm": "tau-normalisation rescales trained weights: no parameter trains",
    "video_features": "a pre-trained video backbone read as is: train_cost 0, no optimiser",
}
# methods still reading values back on the host each step: method -> the sites. Each is a defect to fix, not a pass;
# the test fails once a method is down to <= 1 read (then delete its line).
KNOWN: dict[str, str] = {}


def _site() -> tuple[str, str]:
    """(file under src/semcl, function) of the innermost semcl frame calling now."""
    for frame in reversed(traceback.extract_stack()):
        path = Path(frame.filename)
        if path.is_relative_to(SRC):
            return path.relative_to(SRC).as_posix(), frame.name
    return "?", "?"


def _host_side(site: tuple[str, str]) -> bool:
    return site in HOST_SIDE or (site[0], "*") in HOST_SIDE


class HostReads(TorchDispatchMode):
    """Records the site of every host read (module docstring) while `active`."""

    def __init__(self) -> None:
        super().__init__()
        self.active = False
        self.sites: list[tuple[str, str]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.active and _is_read(str(func), args, kwargs):
            self.sites.append(_site())
        return func(*args, **kwargs)

    def tolist(self, t: torch.Tensor):
        if self.active:
            self.sites.append(_site())
        return REAL_TOLIST(t)


REAL_TOLIST = torch.Tensor.tolist


def _is_read(name: str, args, kwargs) -> bool:
    if name in SCALAR_READS or name in DATA_SIZED:
        return True
    if name == "aten.repeat_interleave.Tensor":
        return kwargs.get("output_size") is None
    if name in MASK_INDEXED:
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or []))
    return False


@pytest.fixture
def reads(monkeypatch):
    counter = HostReads()
    monkeypatch.setattr(torch.Tensor, "tolist", lambda t: counter.tolist(t))
    # torch's optimisers are not the step's business here (Adam's step counts are host tensors by design)
    paused = []
    pre = optimizer_hooks.register_optimizer_step_pre_hook(lambda *a: paused.append(counter.active) or
                                                           setattr(counter, "active", False))
    post = optimizer_hooks.register_optimizer_step_post_hook(lambda *a: setattr(counter, "active", paused.pop()))
    with counter, like_an_accelerator():
        yield counter
    pre.remove()
    post.remove()


def test_the_read_proxies_see_the_reads_they_stand_for(reads):
    x = torch.tensor([1.0, -2.0, 3.0])
    reads.active = True
    float(x.sum()), bool((x > 0).any()), x.tolist(), x[x > 0], torch.nonzero(x)  # five reads
    torch.where(x > 0, x, 0.0).sum() / (x > 0).sum().clamp_min(1)  # masked arithmetic: none
    reads.active = False
    float(x.sum())  # not counted while inactive
    assert len(reads.sites) == 5 and {s[0] for s in reads.sites} == {"?"}  # no semcl frame: this file


@pytest.mark.slow
@pytest.mark.usefixtures("single_thread")
def test_a_training_step_of_every_method_reads_at_most_one_value_back(tmp_path, monkeypatch, reads):
    monkeypatch.setenv("SEMCL_LOADER_WORKERS", "0")
    monkeypatch.setattr(semcl.engine.harness, "evaluate", lambda *a, **k: {})  # the step alone is measured
    steps: dict[str, list[list[tuple[str, str]]]] = defaultdict(list)
    real_step = train_mod.Stepper.__call__

    def counted(self, *args, **kwargs):
        reads.sites, reads.active = [], True
        try:
            return real_step(self, *args, **kwargs)
        finally:
            reads.active = False
            steps[self.cfg.method.name].append([s for s in reads.sites if not _host_side(s)])

    monkeypatch.setattr(train_mod.Stepper, "__call__", counted)
    tables = [t for t in load_registry().values()
              if "paper" in t.profiles and any(r.implemented and not r.reference for r in t.rows)]
    reduce = Reduce(backbone="resnet_tiny4", image_size=32, head_hidden=64, head_dim=32, drop_pretrained=True,
                    method={"arch": "vit_tiny_test", "checkpoint": None, "backbone": "r3d_small",
                            "segmenter": "deeplabv3_tiny"})
    check_tables(tables, "paper", tmp_path, 80.0, reduce=reduce, rows_per_method=1)

    trainable = {name for name, spec in METHODS.items() if spec.builder is not None}
    assert set(steps) == trainable - set(NO_STEP)  # every method that trains took a step here
    worst = {name: max(per_step, key=len) for name, per_step in steps.items()}
    fixed = [name for name in KNOWN if len(worst[name]) <= 1]
    assert fixed == [], f"{fixed} now read at most one value per step: delete their KNOWN lines"
    over = {name: sites for name, sites in worst.items() if name not in KNOWN and len(sites) > 1}
    assert over == {}
    stray = {name: sites for name, sites in worst.items() if name not in KNOWN and set(sites) - ALLOWED}
    assert stray == {}


def _smoke(table: str, row: str, epochs: int) -> Run:
    base = next(r for r in plan_runs(get_table(table), "smoke") if r.row_label == row)
    cfg = copy.deepcopy(base.config)
    cfg.schedule.epochs = epochs
    return Run(base.table_id, base.row_label, base.seed, "smoke", cfg, make_run_id(cfg, base.seed))


@pytest.mark.usefixtures("single_thread")
def test_the_loop_reads_the_loss_once_per_epoch_and_sums_it_as_before(tmp_path, monkeypatch, reads):
    """The loop's own reads (everything train() runs itself, outside the step, the data and the checkpoint)
    are the epoch's history line, once per epoch; the history's loss is the float64 sum of the step losses
    over the steps, as the Python float sum it replaced."""
    losses: list[float] = []
    real_step = train_mod.Stepper.__call__

    def recorded(self, *args, **kwargs):
        loss = real_step(self, *args, **kwargs)
        active, reads.active = reads.active, False
        losses.append(float(loss.detach()))
        reads.active = active
        return loss

    real_train = semcl.engine.harness.train

    def counted_train(*args, **kwargs):
        reads.active = True
        try:
            return real_train(*args, **kwargs)
        finally:
            reads.active = False

    monkeypatch.setattr(train_mod.Stepper, "__call__", recorded)
    monkeypatch.setattr(semcl.engine.harness, "train", counted_train)
    out = execute_run(_smoke("rince/tab2", "RINCE-in", epochs=2), Store(tmp_path / "s"), tmp_path)
    epoch_reads = [s for s in reads.sites if s[0] == "engine/train.py" and s[1] in ("train", "_run_epoch")]
    assert epoch_reads == [("engine/train.py", "_run_epoch")] * 2  # the epoch's history line, in train()'s epoch
    steps = len(losses) // 2
    for epoch, entry in enumerate(out["history"]):
        total = 0.0
        for value in losses[epoch * steps:(epoch + 1) * steps]:
            total += value
        assert entry["loss"] == total / steps
