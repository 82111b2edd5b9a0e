"""Shared fixtures: a scratch registry and results store."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest
import torch

from semcl.registry.tables import load_registry

REPO = Path(__file__).resolve().parents[1]

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs one pytest worker per core: a worker (and the runs it starts as subprocesses) keeps to one
    # intra-op thread, as two OpenMP pools per core contend (a small CPU batch gets many times slower)
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)


SLURM_TESTS = "tests/e2e/slurm/"  # every test marked `slurm` lives here (checked at collection)

if importlib.util.find_spec("xdist") is not None:  # pytest refuses an unknown hook: only with pytest-xdist
    def pytest_xdist_make_scheduler(config, log):
        """`--dist loadgroup`: the cluster tests share the one local SLURM cluster (its two nodes, its queue), so one
        worker runs them all, in file order; every other test is its own unit. Scheduled by path, as xdist's own
        `xdist_group` mark no longer reaches the node id under pytest 9.2."""
        if config.getvalue("dist") != "loadgroup":
            return None
        from xdist.scheduler import LoadGroupScheduling

        class OneClusterScheduling(LoadGroupScheduling):
            def _split_scope(self, nodeid: str) -> str:
                return "slurm" if nodeid.startswith(SLURM_TESTS) else nodeid

        return OneClusterScheduling(config, log)


def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("slurm") and not item.nodeid.startswith(SLURM_TESTS):
            raise pytest.UsageError(f"{item.nodeid}: a `slurm` test belongs under {SLURM_TESTS} (one worker runs them)")


@pytest.fixture(autouse=True)
def _fresh_registry_cache():
    load_registry.cache_clear()
    yield
    load_registry.cache_clear()


@pytest.fixture
def registry_copy(tmp_path, monkeypatch) -> Path:
    """A writable copy of the real registry, selected through SEMCL_REGISTRY."""
    root = tmp_path / "experiments"
    shutil.copytree(REPO / "experiments", root)
    monkeypatch.setenv("SEMCL_REGISTRY", str(root))
    return root


ENSEMBLE_TABLE = """\
id: test/ensemble
paper: gpaco
source: "test"
title: two CE models and their logit-sum ensemble
preset: paco_imagenet_lt_resnet50
seeds: [123, 546, 937]
columns:
  - {key: top1, label: "Top-1", eval: accuracy, group: overall}
  - {key: few, label: "Few", eval: accuracy, group: few}
rows:
  - {label: CE a, method: ce}
  - {label: CE b, method: ce, overrides: {optim.lr: 0.05}}
  - {label: Two seeds of a, method: ensemble, ensemble: [CE a, CE a]}
  - {label: a plus b, method: ensemble, ensemble: [CE a, CE b]}
profiles:
  smoke:
    seeds: [123, 546]
    overrides:
      data.synthetic: true
      data.synthetic_train_per_class: 12
      data.synthetic_test_per_class: 3
      data.image_size: 16
      data.augment: crop_flip
      model.backbone: resnet_tiny
      optim.batch_size: 32
      optim.warmup_epochs: 0
      optim.cosine: false
      schedule.epochs: 1
"""



@pytest.fixture
def ensemble_registry(registry_copy) -> Path:
    """The registry copy plus test/ensemble: two CE rows and two logit-sum ensembles of them."""
    (registry_copy / "test").mkdir()
    (registry_copy / "test" / "ensemble.yaml").write_text(ENSEMBLE_TABLE)
    return registry_copy


@pytest.fixture
def single_thread():
    """Pin torch to one intra-op thread: small CPU batches gain nothing from more, on a shared busy CPU
    two OpenMP threads contend (a batch-2 ResNet-50 forward gets ~10x slower), and one thread keeps
    reductions in one order for the bit-exact comparisons."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
