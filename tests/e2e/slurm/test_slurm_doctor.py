"""`semcl doctor --cluster local` against the two-node local cluster: the acceptance job runs every check on
CPU over gloo (2 nodes x 2 tasks), requeues itself mid-run and resumes exactly, and writes its page."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_slurm_cluster import HAVE_SLURM  # same folder (rootdir import)

NODES = sorted(subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True).stdout.split()) \
    if HAVE_SLURM else []
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(len(NODES) < 2, reason="needs the two-node local cluster")]

CHECKS = ["rendezvous and devices", "CPUs and loader workers", "all-reduce bandwidth",
          "DDP steps: cross-entropy (rince/tab2 / Cross-entropy)", "DDP steps: contrastive (rince/tab2 / RINCE-in)",
          "requeue signal and exact resume", "an error on rank 1", "results folder"]


def test_doctor_on_the_local_cluster_passes_every_check_and_writes_its_page(tmp_path):
    out = subprocess.run([sys.executable, "-m", "semcl.cli", "--results", str(tmp_path), "doctor", "--cluster", "local",
                          "--min-free-gb", "0.1", "--timeout-min", "6"], capture_output=True, text=True, timeout=420)
    assert out.returncode == 0, out.stdout + out.stderr
    [folder] = list((tmp_path / "doctor").iterdir())
    page = json.loads((folder / "doctor.json").read_text())
    assert [c["name"] for c in page["checks"]] == CHECKS and page["ok"]
    assert (page["nodes"], page["tasks_per_node"]) == (2, 2)
    ranks = [json.loads((folder / f"rank{r}.json").read_text()) for r in range(4)]
    seen = ranks[0]["rendezvous"]["all"]
    assert [r["rank"] for r in seen] == [0, 1, 2, 3] and sorted({r["host"] for r in seen}) == NODES
    assert ranks[0]["restart_count"] == 1  # requeued once, by the signal
    for r in ranks:  # the resumed run equals the straight one, on every rank
        assert r["resume"]["after_requeue"]["losses"] == r["resume"]["reference"]["losses"]
        assert r["resume"]["after_requeue"]["resumed_at"] == 5
    assert "rank 1: RuntimeError: doctor: a deliberate error on rank 1" in ranks[0]["rank_error"]["reported"]
    md = (folder / "doctor.md").read_text()
    assert md.count("| pass |") == len(CHECKS) and "FAIL" not in md
