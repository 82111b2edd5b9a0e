"""log.txt opens, at every attempt, with which run it is (table, row, seed, run id), where it runs (device, world
size, rank) and with what code (versions, commit)."""

from __future__ import annotations

import logging

import torch

import semcl.engine.provenance as provenance
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table


def test_header_names_the_run_device_versions_and_commit(tmp_path, monkeypatch):
    run = next(r for r in plan_runs(get_table("rince/tab2"), "smoke") if r.row_label == "RINCE-in")
    monkeypatch.setattr(provenance, "versions", lambda: {"python": "3.11.7", "torch": "2.14.1", "torchvision": "0.29.1",
                                                         "numpy": "2.0", "submitit": "1.5.4", "semcl": "0.1.0"})
    monkeypatch.setattr(provenance, "git_state", lambda: {"commit": "abc123", "dirty": False, "snapshot": "/snap/x"})
    monkeypatch.setattr(provenance, "device_name", lambda device: "cuda:NVIDIA H200")
    log = tmp_path / "log.txt"
    handler = provenance.open_run_log(log, run, "train", torch.device("cuda"))
    logging.getLogger("semcl.train").info("epoch 1/1 loss 3.0000 (1.0s)")
    logging.getLogger("semcl").removeHandler(handler)
    handler.close()
    open_run = provenance.open_run_log(log, run, "evaluate", torch.device("cpu"))  # a second attempt appends
    logging.getLogger("semcl").removeHandler(open_run)
    open_run.close()
    lines = [line.split(" ", 2)[2] for line in log.read_text().splitlines()]  # without the time stamp
    header = [f"semcl.job run {run.run_id}: table rince/tab2 | row RINCE-in | seed {run.seed} | profile smoke | "
              "stage {stage}",
              "semcl.job device cuda:NVIDIA H200 | world size 1 | rank 0",
              "semcl.job versions: python 3.11.7, torch 2.14.1, torchvision 0.29.1, semcl 0.1.0",
              "semcl.job code: commit abc123, snapshot /snap/x"]
    assert lines == [*(h.format(stage="train") for h in header), "semcl.train epoch 1/1 loss 3.0000 (1.0s)",
                     *(h.format(stage="evaluate") for h in header)]
    monkeypatch.setattr(provenance, "git_state", lambda: {"commit": None, "dirty": None})
    assert provenance.header_lines(run, "all", torch.device("cpu"))[3] == "code: commit unknown (no git, no snapshot)"
