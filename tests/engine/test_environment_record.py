"""A run's record keeps the environment it computed with (semcl.runtime.environment): torch's CUDA, cuDNN and NCCL
builds, the GPU and driver (null on a CPU), the lock the venv was installed from, and the container image."""

from __future__ import annotations

import copy
import hashlib
import sys
from importlib import metadata
from pathlib import Path

import torch

from semcl.engine.job import execute_run
from semcl.registry.plan import Run, make_run_id, plan_runs
from semcl.registry.tables import get_table
from semcl.runtime import environment
from semcl.store import Store

ROOT = Path(__file__).resolve().parents[2]


def test_a_smoke_runs_record_holds_the_environment(tmp_path, monkeypatch):
    venv = tmp_path / "venv"
    venv.mkdir()
    lock_sha = hashlib.sha256((ROOT / "locks" / "setup.txt").read_bytes()).hexdigest()
    (venv / "semcl-lock.txt").write_text(f"{lock_sha}  locks/setup.txt\n")  # as `make setup` writes it (sha256sum)
    monkeypatch.setattr(sys, "prefix", str(venv))
    image = tmp_path / "semcl.sif"
    image.write_bytes(b"not really an image, but hashed as one" * 1000)
    monkeypatch.setenv("APPTAINER_CONTAINER", str(image))
    monkeypatch.delenv("SEMCL_CONTAINER_DIGEST", raising=False)
    monkeypatch.setenv("SEMCL_DEVICE", "cpu")

    base = next(r for r in plan_runs(get_table("rince/tab2"), "smoke") if r.row_label == "Cross-entropy")
    cfg = copy.deepcopy(base.config)
    cfg.schedule.epochs, cfg.data.synthetic_train_per_class = 1, 3
    run = Run(base.table_id, base.row_label, base.seed, "smoke", cfg, make_run_id(cfg, base.seed))
    record = execute_run(run, Store(tmp_path / "results"), tmp_path)
    env = record["environment"]
    # the builds torch carries agree with the NVIDIA wheels the lock installs beside it
    assert env["torch"] == torch.__version__
    assert metadata.version("nvidia-cuda-runtime").startswith(env["cuda"] + ".")  # 13.0 / 13.0.96
    assert metadata.version("nvidia-cudnn-cu13").startswith(env["cudnn"] + ".")  # 9.24.0 / 9.24.0.43
    assert metadata.version("nvidia-nccl-cu13") == env["nccl"]  # 2.30.7
    assert env["gpu"] is None and env["driver"] is None  # a CPU run
    assert env["lock"] == "locks/setup.txt" and env["lock_sha256"] == lock_sha
    assert env["container"] == {"image": str(image), "sha256": hashlib.sha256(image.read_bytes()).hexdigest()}


def test_container_digest_given_by_the_profile_and_driver_from_the_kernel_module(tmp_path, monkeypatch):
    monkeypatch.delenv("APPTAINER_CONTAINER", raising=False)
    monkeypatch.delenv("SINGULARITY_CONTAINER", raising=False)
    monkeypatch.delenv("SEMCL_CONTAINER_DIGEST", raising=False)
    assert environment.container_digest() is None
    monkeypatch.setenv("SEMCL_CONTAINER_DIGEST", "sha256:" + "ab" * 32)  # e.g. a Docker image's RepoDigest
    assert environment.container_digest() == {"image": None, "sha256": "ab" * 32}
    proc = tmp_path / "version"
    proc.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 07:09:35 UTC 2025\n"
                    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)\n")
    monkeypatch.setattr(environment, "NVIDIA_PROC", proc)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # NVML absent: the /proc file answers
    assert environment.driver_version() == "580.65.06"
    monkeypatch.setattr(environment, "NVIDIA_PROC", tmp_path / "absent")
    assert environment.driver_version() is None
