"""What the tests that hold a tracked page to the code share: where the real data is, and retraining recorded runs
bit for bit (tests/e2e/test_readme_numbers.py for the README block, test_reproduce_pages.py for reproduce/*.md).

CPU results differ by instruction set in the last digits (AVX2 vs AVX-512 kernels), so the retraining runs in a
process pinned to the set each value was recorded with (`cpu_isa` of its run), and with MKL in its
vendor-independent mode, as `make demo` computes (`mkl_cbwr`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from semcl.engine.provenance import ISA_LEVELS, cpu_isa, pin_isa_env

REPO = Path(__file__).resolve().parents[2]


def real_data_root() -> Path | None:
    """Where `make data` (a prerequisite of `make test`) put Fashion-MNIST and MNIST."""
    root = Path(os.environ.get("SEMCL_DATA") or REPO / "data")
    need = (root / "FashionMNIST" / "raw", root / "MNIST" / "raw")
    return root if all(p.is_dir() and any(p.iterdir()) for p in need) else None


# retrains runs in a new process, whose torch computes with the instruction set the values were made with
_RETRAIN = """
import json, sys
from pathlib import Path
import torch
from semcl.engine.job import execute_run
from semcl.registry.tables import get_table
from semcl.registry.plan import plan_runs
from semcl.store import Store
want, store, root = json.loads(sys.argv[1]), Store(Path(sys.argv[2])), Path(sys.argv[3])
torch.set_num_threads(1)  # as every CPU run trains (semcl.engine.job.arithmetic_threads)
out = []
for w in want:
    run = next(r for r in plan_runs(get_table(w["table"]), w["profile"]) if r.run_id == w["run_id"])
    out.append(execute_run(run, store, root, torch.device("cpu"))["metrics"])
print(json.dumps(out))
"""


def retrain_pinned(want: list[dict], results: Path, data_root: Path, source: str) -> list[tuple[dict, dict]]:
    """(entry, the metrics it ends with now) for each per-seed entry of `want` (semcl.report.run_values: table,
    profile, run_id, cpu_isa, mkl_cbwr), trained afresh into `results`; one process per instruction set. Skips
    when this CPU lacks a recorded set; fails naming `source` when an entry does not say how it computed."""
    by_isa: dict[str, list[dict]] = {}
    for w in want:
        assert w.get("cpu_isa") in ISA_LEVELS, f"{source}: {w['row']} seed {w['seed']}: no cpu_isa recorded"
        # MKL left to pick its kernels by CPU makes values another vendor's CPU cannot retrain (`make demo` pins it)
        assert w.get("mkl_cbwr") == pin_isa_env(w["cpu_isa"])["MKL_CBWR"], \
            f"{source}: {w['row']} seed {w['seed']}: mkl_cbwr {w.get('mkl_cbwr')!r}; rebuild it from pinned runs"
        by_isa.setdefault(w["cpu_isa"], []).append(w)
    here = cpu_isa()
    for isa in by_isa:
        if ISA_LEVELS.index(isa) > ISA_LEVELS.index(here):
            pytest.skip(f"{source}: values computed with {isa}; this CPU has {here}")
    out = []
    for isa, group in by_isa.items():
        env = {**os.environ, **pin_isa_env(isa), "OMP_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, "-c", _RETRAIN, json.dumps(group), str(results), str(data_root)],
                              env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        out += list(zip(group, json.loads(done.stdout.splitlines()[-1]), strict=True))
    return out


@pytest.fixture
def retrain(tmp_path):
    """retrain_pinned(want, source) into a scratch store on the real data; skips where `make data` has not run."""
    root = real_data_root()
    if root is None:
        pytest.skip("no Fashion-MNIST / MNIST under data/ (`make test` runs `make data` first)")
    return lambda want, source: retrain_pinned(want, tmp_path / "retrained", root, source)
