"""A table marks a cell whose seeds ran in different environments (records' `environment`: torch, CUDA, cuDNN, GPU,
lock hash; not the host), and `semcl diff` prints the records' environment differences after the config keys."""

from __future__ import annotations

import argparse

import yaml

from semcl.cli.diff import cmd_diff
from semcl.config import config_to_dict
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import get_table
from semcl.report.tables import long_table, render, summary
from semcl.store import Store

ENV = {"torch": "2.14.1+cu130", "cuda": "13.0", "cudnn": "9.24.0", "nccl": "2.30.7", "gpu": "NVIDIA H100 80GB HBM3",
       "driver": "580.65.06", "lock": "locks/setup.txt", "lock_sha256": "a" * 64, "container": None}


def _fill(store: Store, table, envs: dict[int, dict | None]) -> dict[int, str]:
    """One record per planned run of `table` (paper profile); the runs of seed s get environment envs[s]."""
    ids = {}
    for run in plan_runs(table, "paper"):
        env = envs[run.seed]
        rec = {"run_id": run.run_id, "metrics": {"linear_top1_last": 60.0 + run.seed % 7},
               "versions": {"torch": "2.14.1"}, "device": "cuda:NVIDIA H100 80GB HBM3",
               **({"environment": env} if env is not None else {})}
        write_json_atomic(store.metrics_path(run.run_id), rec)
        if run.row_label == "Cross-entropy":
            ids[run.seed] = run.run_id
    return ids


def _md(store: Store, table) -> str:
    return render(table, "paper", summary(table, "paper", long_table(table, "paper", store)), "md")


def test_same_environment_or_only_host_and_driver_differ_adds_no_mark(tmp_path):
    t = get_table("rince/tab2")
    store = Store(tmp_path)
    _fill(store, t, {123: ENV, 546: {**ENV, "driver": "580.95.05", "nccl": "2.30.7"}, 937: None})
    md = _md(store, t)
    assert "¤" not in md and "different environments" not in md


def test_a_cell_whose_seeds_differ_in_cuda_and_gpu_is_marked_and_named(tmp_path):
    t = get_table("rince/tab2")
    store = Store(tmp_path)
    a100 = {**ENV, "cuda": "12.8", "gpu": "NVIDIA A100-SXM4-40GB", "lock_sha256": "b" * 64}
    _fill(store, t, {123: ENV, 546: ENV, 937: a100})
    md = _md(store, t)
    ce = next(ln for ln in md.splitlines() if ln.startswith("| Cross-entropy |"))
    assert ce.startswith("| Cross-entropy | 63.33 ± 3.06 (n=3) ¤ | — |")  # 64, 60, 66: 123, 546, 937 mod 7
    assert ("- ¤ the cell's seeds ran in different environments (any of torch, cuda, cudnn, gpu, lock_sha256 differ; "
            "`semcl diff RUN RUN` shows them):") in md
    assert ("- ¤ Cross-entropy / top1: torch 2.14.1+cu130, cuda 13.0, cudnn 9.24.0, gpu NVIDIA H100 80GB HBM3, "
            "lock_sha256 aaaaaaaaaaaa (2 runs); torch 2.14.1+cu130, cuda 12.8, cudnn 9.24.0, "
            "gpu NVIDIA A100-SXM4-40GB, lock_sha256 bbbbbbbbbbbb (1 run)") in md
    # the CSV keeps its columns (the mark lives in the rendered cell and the notes)
    csv = render(t, "paper", summary(t, "paper", long_table(t, "paper", store)), "csv")
    assert "¤" not in csv


def test_diff_prints_environment_differences_after_the_config(tmp_path, capsys):
    t = get_table("rince/tab2")
    store = Store(tmp_path)
    a100 = {**ENV, "cuda": "12.8", "gpu": "NVIDIA A100-SXM4-40GB"}
    ids = _fill(store, t, {123: ENV, 546: ENV, 937: a100})
    for seed in (123, 937):  # diff reads each stored run's config.yaml, as the engine writes it
        run = next(r for r in plan_runs(t, "paper") if r.run_id == ids[seed])
        store.folder(run.run_id).config.write_text(yaml.safe_dump(
            {"run_id": run.run_id, "seed": run.seed, "table": run.table_id, "row": run.row_label, "profile": "paper",
             "config": config_to_dict(run.config)}, sort_keys=False))
    args = argparse.Namespace(run_ids=[ids[123], ids[937]], results=str(tmp_path))
    cmd_diff(args)
    out = capsys.readouterr().out.splitlines()
    assert out == ["seed: 123 -> 937", "environment.cuda: 13.0 -> 12.8",
                   "environment.gpu: NVIDIA H100 80GB HBM3 -> NVIDIA A100-SXM4-40GB"]
