"""Training is keyed by what trains it: runs that differ only in evaluation settings share one training run.

The training key ignores `eval`, `probe` and the test split's settings and follows the seed, the ranks and the
runs a row starts from; run ids keep hashing everything (a store written before training keys reads back with
the same ids). Two tables whose one row differs only in its evaluation train once: the second run evaluates the
first's final checkpoint, its record says so, and a store from before the claims is mapped on first use."""

from __future__ import annotations

import json
import shutil

import pytest

from semcl.cli import main as cli
from semcl.config import hashable_config
from semcl.registry.plan import make_train_key, plan_runs
from semcl.registry.tables import get_table
from semcl.run_config import build_config
from semcl.store import Store

BASE = {"method": {"name": "ce"}, "data": {"name": "cifar100"}, "optim": {"lr": 0.1}}


def _key(tree: dict, seed: int = 5, starts_from: tuple[str, ...] = (), ranks: int = 1) -> str:
    return make_train_key(hashable_config(build_config(tree, where="test")), seed, starts_from, ranks)


def test_the_training_key_ignores_evaluation_settings_only():
    base = _key(BASE)
    assert _key({**BASE, "probe": {"epochs": 7, "lr": 0.5}}) == base
    assert _key({**BASE, "eval": {"knn": [20]}}) == base
    assert _key({**BASE, "data": {"name": "cifar100", "test_limit": 8}}) == base
    assert _key({**BASE, "optim": {"lr": 0.2}}) != base  # a training setting
    assert _key(BASE, seed=6) != base and _key(BASE, ranks=4) != base and _key(BASE, ranks=1) == base
    assert _key(BASE, starts_from=("abc123abc123",)) != base


TABLE = """\
id: test/{name}
paper: gpaco
source: "test"
title: one CE row, evaluated {how}
preset: paco_imagenet_lt_resnet50
seeds: [5]
columns:
{columns}
rows:
  - {{label: CE, method: ce}}
profiles:
  smoke:
    overrides:
      data.synthetic: true
      data.synthetic_train_per_class: 10
      data.synthetic_test_per_class: 2
      data.image_size: 16
      data.augment: crop_flip
      model.backbone: resnet_tiny
      optim.batch_size: 10
      optim.warmup_epochs: 0
      optim.cosine: false
      schedule.epochs: 2
"""
ACCURACY = "  - {key: top1, label: Top-1, eval: accuracy, group: overall}"
KNN = "  - {key: knn, label: k-NN, eval: knn, k: 3}"


@pytest.fixture
def two_tables(registry_copy):
    (registry_copy / "test").mkdir(exist_ok=True)
    (registry_copy / "test" / "acc.yaml").write_text(TABLE.format(name="acc", how="by its classifier", columns=ACCURACY))
    (registry_copy / "test" / "knn.yaml").write_text(TABLE.format(name="knn", how="by k-NN", columns=KNN))
    a, = plan_runs(get_table("test/acc"), "smoke")
    b, = plan_runs(get_table("test/knn"), "smoke")
    assert a.run_id != b.run_id and a.train_key == b.train_key
    return a, b


def _run(tmp_path, *tables) -> int:
    return cli.main(["--results", str(tmp_path / "results"), "run", *tables, "--profile", "smoke",
                     "--executor", "debug"])


def test_two_tables_differing_in_evaluation_train_once(tmp_path, two_tables, capsys, single_thread):
    a, b = two_tables
    out = cli.main(["--results", str(tmp_path / "results"), "plan", "test/acc", "test/knn", "--profile", "smoke"])
    text = capsys.readouterr().out
    assert out == 0 and f"evaluates {a.run_id}'s training" in text and "1 runs evaluate a training planned" in text
    assert _run(tmp_path, "test/acc", "test/knn") == 0
    store = Store(tmp_path / "results")
    assert store.trainer_of(a.train_key) == a.run_id
    ra, rb = store.read_record(a.run_id), store.read_record(b.run_id)
    assert rb["trained_by"] == a.run_id and "trained_by" not in ra
    assert not store.folder(b.run_id).checkpoint.exists() and store.folder(a.run_id).checkpoint.exists()
    assert rb["history"] == ra["history"] and len(ra["history"]) == 2  # b's numbers come from a's training
    assert "acc_overall" in ra["metrics"] and "knn_top1_k3" not in ra["metrics"] and "knn_top1_k3" in rb["metrics"]


def test_a_store_from_before_training_keys_is_mapped_once_and_not_retrained(tmp_path, two_tables, single_thread,
                                                                              capsys):
    a, b = two_tables
    assert _run(tmp_path, "test/acc") == 0
    store = Store(tmp_path / "results")
    # what the code before training keys left: no claims, no trained.json beside a finished run
    shutil.rmtree(store.root / "trained")
    store.folder(a.run_id).trained.unlink()
    checkpoint = store.folder(a.run_id).checkpoint.read_bytes()
    before = json.loads(store.folder(a.run_id).metrics.read_text())
    capsys.readouterr()
    assert _run(tmp_path, "test/knn") == 0
    assert store.trainer_of(a.train_key) == a.run_id  # the legacy folder was claimed
    rb = store.read_record(b.run_id)
    assert rb["trained_by"] == a.run_id and not store.folder(b.run_id).checkpoint.exists()
    assert store.folder(a.run_id).checkpoint.read_bytes() == checkpoint  # nothing of a was rewritten
    assert json.loads(store.folder(a.run_id).metrics.read_text()) == before
    assert (store.root / "trained" / ".legacy-claimed").exists()


def _read_only(monkeypatch, root) -> None:
    """Every write under `root` fails as on a read-only mount (EROFS): file opens for writing, os.open with a
    write flag (mkstemp), mkdir, rename. Root ignores file modes, so the store is made read-only this way."""
    import builtins
    import errno
    import io
    import os

    top = str(root.resolve())

    def under(p) -> bool:
        return isinstance(p, (str, bytes, os.PathLike)) and os.path.abspath(os.fsdecode(p)).startswith(top)

    def refuse(p):
        raise OSError(errno.EROFS, "Read-only file system", os.fsdecode(p))

    real_open, real_os_open, real_mkdir, real_replace = builtins.open, os.open, os.mkdir, os.replace

    def open_(file, mode="r", *a, **k):
        if under(file) and any(c in mode for c in "wax+"):
            refuse(file)
        return real_open(file, mode, *a, **k)

    def os_open(path, flags, *a, **k):
        if under(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            refuse(path)
        return real_os_open(path, flags, *a, **k)

    def mkdir(path, *a, **k):
        if under(path):
            refuse(path)
        return real_mkdir(path, *a, **k)

    def replace(src, dst, *a, **k):
        if under(dst):
            refuse(dst)
        return real_replace(src, dst, *a, **k)

    for target, name, fake in [(builtins, "open", open_), (io, "open", open_), (os, "open", os_open),
                               (os, "mkdir", mkdir), (os, "replace", replace), (os, "rename", replace)]:
        monkeypatch.setattr(target, name, fake)


def test_running_a_finished_table_on_a_read_only_store_writes_nothing(tmp_path, two_tables, single_thread,
                                                                        capsys, monkeypatch):
    """A store finished before the legacy mapping's marker existed, now on a read-only mount: `semcl run` of its
    finished table reports it done (exit 0) and writes nothing; the mapping waits for a run that submits."""
    assert _run(tmp_path, "test/acc") == 0
    root = tmp_path / "results"
    assert not (root / "trained" / ".legacy-claimed").exists()  # runs/ was empty when it first looked
    before = sorted((str(p), p.stat().st_mtime_ns) for p in root.rglob("*"))
    capsys.readouterr()
    _read_only(monkeypatch, root)
    assert _run(tmp_path, "test/acc") == 0, capsys.readouterr().err
    assert capsys.readouterr().out.startswith("0 runs to submit (1 already done")
    monkeypatch.undo()
    assert sorted((str(p), p.stat().st_mtime_ns) for p in root.rglob("*")) == before
