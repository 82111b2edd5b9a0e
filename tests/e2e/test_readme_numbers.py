"""The README's result block cannot drift from the code.

`semcl readme` rewrote the block from a run set and kept that set's per-seed values in
reproduce/README.runs.json. Here (1) the block is exactly what those values render to, under the run ids the
code plans today, and (2) one seed of each row, retrained now on the real Fashion-MNIST the demo reads, ends with
those values bit for bit. CPU results differ by instruction set in the last digits (AVX2 vs AVX-512 kernels), so
the retraining runs in a process pinned to the set each value was recorded with (`cpu_isa` of its run), and
with MKL in its vendor-independent mode, as `make demo` computes (`mkl_cbwr`).
A change that moves a published number fails (2) until the block is rebuilt:
`make demo && .venv/bin/semcl readme` (the README says so)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from semcl.engine.provenance import ISA_LEVELS, cpu_isa, pin_isa_env
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.report.readme import BLOCK, compact_table
from semcl.store import Store

REPO = Path(__file__).resolve().parents[2]
README, RUNS_FILE = REPO / "README.md", REPO / "reproduce" / "README.runs.json"


def _committed() -> list[dict]:
    return json.loads(RUNS_FILE.read_text())["runs"]


def _data_root() -> Path | None:
    """Where `make data` (a prerequisite of `make test`) put Fashion-MNIST and MNIST."""
    root = Path(os.environ.get("SEMCL_DATA") or REPO / "data")
    need = (root / "FashionMNIST" / "raw", root / "MNIST" / "raw")
    return root if all(p.is_dir() and any(p.iterdir()) for p in need) else None


def test_the_readme_block_renders_from_the_committed_per_seed_values_under_todays_run_ids(tmp_path):
    runs = _committed()
    store = Store(tmp_path)
    for r in runs:
        store.folder(r["run_id"]).path.mkdir(parents=True)
        store.metrics_path(r["run_id"]).write_text(json.dumps({"run_id": r["run_id"], "metrics": r["metrics"]}))
    blocks = [m for m in BLOCK.finditer(README.read_text())
              if any(r["table"] == m["table"] and r["profile"] == m["profile"] for r in runs)]
    assert blocks, "the README has no block built from reproduce/README.runs.json"
    for m in blocks:
        table = get_table(m["table"])
        assert m["body"] == compact_table(table, m["profile"], store, m["rows"]), \
            f"README block {m['table']} {m['profile']}: rebuild it with `semcl readme`"
        planned = {(r.row_label, r.seed): r.run_id for r in plan_runs(table, m["profile"])}
        for r in runs:
            if r["table"] == m["table"]:
                assert planned[(r["row"], r["seed"])] == r["run_id"], f"{r['row']} seed {r['seed']}: its run id moved"


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


def test_one_seed_of_each_readme_row_retrains_to_the_published_values_bit_for_bit(tmp_path):
    root = _data_root()
    if root is None:
        pytest.skip("no Fashion-MNIST / MNIST under data/ (`make test` runs `make data` first)")
    first = {}
    for r in _committed():  # the first seed of each row
        first.setdefault((r["table"], r["profile"], r["row"]), r)
    by_isa: dict[str, list[dict]] = {}
    for r in first.values():
        assert r.get("cpu_isa") in ISA_LEVELS, f"{RUNS_FILE}: {r['row']} seed {r['seed']}: no cpu_isa recorded"
        # MKL left to pick its kernels by CPU makes values another vendor's CPU cannot retrain (`make demo` pins it)
        assert r.get("mkl_cbwr") == pin_isa_env(r["cpu_isa"])["MKL_CBWR"], \
            f"{RUNS_FILE}: {r['row']} seed {r['seed']}: mkl_cbwr {r.get('mkl_cbwr')!r}; rebuild with make demo"
        by_isa.setdefault(r["cpu_isa"], []).append(r)
    here = cpu_isa()
    for isa, want in by_isa.items():
        if ISA_LEVELS.index(isa) > ISA_LEVELS.index(here):
            pytest.skip(f"the README values were computed with {isa}; this CPU has {here}")
        env = {**os.environ, **pin_isa_env(isa), "OMP_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, "-c", _RETRAIN, json.dumps(want), str(tmp_path / "results"), str(root)],
                              env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        for w, got in zip(want, json.loads(done.stdout.splitlines()[-1]), strict=True):
            assert got == w["metrics"], (f"{w['table']} {w['row']} seed {w['seed']} ({isa}): metrics moved; "
                                         "rebuild the README block (make demo, semcl readme)")


def test_the_readmes_paper_bill_is_what_semcl_plan_prints_today(capsys):
    """The prose figures of the paper profile's bill (runs, GPU-hours, shared trainings) are `semcl plan`'s."""
    import re

    from semcl.cli import main as cli

    assert cli.main(["plan", "--all", "--profile", "paper"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    got = re.search(r"(\d+) runs, ([\d.e+]+) GPU-h;.*; (\d+) runs evaluate .*: (\d+) GPU-h saved", last)
    runs, gpu_h, shared, saved = int(got[1]), float(got[2]), int(got[3]), float(got[4])
    text = " ".join(README.read_text().split())
    assert f"**{runs:,} runs, ≈ {gpu_h / 1000:.1f}k GPU-h**" in text, last
    assert f"{shared} runs evaluate a training another run does, saving ≈ {saved / 1000:.1f}k GPU-h" in text, last
