"""What a run executes on and with: the device, the package versions and the code commit, as its record keeps them
and as its log.txt opens (one header per attempt, so a resumed run's log says what each attempt ran)."""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import torch

from semcl.locations import built_from
from semcl.registry.plan import Run
from semcl.runtime import distributed

PACKAGES = ("torch", "torchvision", "numpy", "submitit", "semcl")


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return f"cpu ({platform.processor() or platform.machine()})"


def git_state() -> dict:
    """Commit and dirty flag of the code this run executes: the submission's snapshot if any."""
    snap = os.environ.get("SEMCL_SNAPSHOT")
    if snap:
        info = json.loads((Path(snap) / "snapshot.json").read_text())
        return {"commit": info["commit"], "dirty": info["dirty"], "snapshot": snap}
    built = built_from()  # an installed wheel: the commit it was built from (no clone to ask)
    if built is not None:
        return built
    repo = Path(__file__).resolve().parents[3]
    try:
        commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--", "src", "experiments"],
                               capture_output=True, text=True, check=True).stdout.strip() != ""
        return {"commit": commit, "dirty": dirty}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}


# ATen's kernel levels, lowest first, and the oneDNN ISA cap that matches each (its convolutions and matmuls)
ISA_LEVELS = ("DEFAULT", "AVX2", "AVX512")
_ONEDNN_CAP = {"DEFAULT": "SSE41", "AVX2": "AVX2", "AVX512": "AVX512_CORE"}


def cpu_isa() -> str:
    """The vector instruction set CPU arithmetic runs with (ATen's kernels, capped by ONEDNN_MAX_CPU_ISA where
    set). A CPU run's results depend on it, bit for bit: the same run on an AVX-512 and an AVX2 machine differs in
    the last digits, so a record keeps it and `pin_isa_env` reproduces it on a machine that has more."""
    isa = torch.backends.cpu.get_cpu_capability()
    isa = isa if isa in ISA_LEVELS else "DEFAULT"
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    if cap:
        level = 2 if cap.startswith(("AVX512", "AVX10", "ALL")) else 1 if cap.startswith("AVX2") else 0
        isa = ISA_LEVELS[min(level, ISA_LEVELS.index(isa))]
    return isa


# MKL (torch's BLAS: every Linear and matmul) picks its kernels by CPU vendor and model, not only by vector
# width: the README's values, made on an AMD EPYC with ATen and oneDNN capped at AVX2, did not retrain bit for bit
# on an AVX-512 Intel Xeon under the same caps. Its conditional-reproducibility mode COMPATIBLE computes the same
# on every x86-64 CPU (Intel's MKL developer reference, "Obtaining Numerically Reproducible Results"), and on the
# demo's runs cost no time measurably (43.0 s vs 42.3 s for one rince/tab2 mini run against MKL_CBWR=AVX2).
MKL_PORTABLE = "COMPATIBLE"


def pin_isa_env(isa: str) -> dict:
    """Environment variables that make a new process compute with `isa` (one of ISA_LEVELS) on any x86-64 CPU
    that has at least that: ATen's and oneDNN's dispatch caps and MKL's vendor-independent mode, read when torch
    (and MKL) load."""
    return {"ATEN_CPU_CAPABILITY": isa.lower(), "ONEDNN_MAX_CPU_ISA": _ONEDNN_CAP[isa], "MKL_CBWR": MKL_PORTABLE}


def mkl_mode() -> str | None:
    """MKL's reproducibility mode this process computes with ($MKL_CBWR), None where MKL picks by CPU (its default)."""
    return os.environ.get("MKL_CBWR") or None


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def header_lines(run: Run, stage: str, device: torch.device) -> list[str]:
    """The lines log.txt opens with: which run, where, with what code."""
    v, git = versions(), git_state()
    commit = git.get("commit") or "unknown (no git, no snapshot)"
    dirty = " (uncommitted changes in src/ or experiments/)" if git.get("dirty") else ""
    snapshot = f", snapshot {git['snapshot']}" if git.get("snapshot") else ""
    return [f"run {run.run_id}: table {run.table_id} | row {run.row_label} | seed {run.seed} | profile {run.profile}"
            f" | stage {stage}",
            f"device {device_name(device)} | world size {distributed.world_size()} | rank {distributed.rank()}",
            f"versions: python {v['python']}, torch {v['torch']}, torchvision {v['torchvision']}, semcl {v['semcl']}",
            f"code: commit {commit}{dirty}{snapshot}"]


def open_run_log(path: Path, run: Run, stage: str, device: torch.device) -> logging.Handler:
    """Send the `semcl` loggers to the run's log.txt (appending) and write the header; the caller removes the
    handler when the attempt ends."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    root = logging.getLogger("semcl")
    root.setLevel(logging.INFO)
    root.addHandler(handler)
    log = logging.getLogger("semcl.job")
    for line in header_lines(run, stage, device):
        log.info(line)
    return handler
