"""The software and hardware a run computed with, beyond the package versions (engine.provenance): torch's CUDA,
cuDNN and NCCL builds, the GPU and its driver, the dependency lock the venv was installed from, and the container
image when the job runs in one. A record keeps it as `environment`; `semcl diff` shows where two runs differ and
`semcl table` marks a cell whose seeds differ in the fields of SAME_RESULTS.

No subprocess: the driver comes from NVML (pynvml, where installed) or the kernel module's /proc file, and only
when a GPU is visible; on a CPU the GPU and driver fields are null.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from semcl.runtime.lockfile import installed_lock

if TYPE_CHECKING:
    import torch

# the fields that change numbers: two seeds of one cell that differ in any is a cell of two environments (the
# host name, the driver's patch level or the container's path do not; torch's version sits in `versions`)
SAME_RESULTS = ("torch", "cuda", "cudnn", "gpu", "lock_sha256")
CONTAINER_DIGEST_ENV = "SEMCL_CONTAINER_DIGEST"  # a profile's setup can export the image digest (Docker, enroot)
CONTAINER_PATH_ENVS = ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER")  # set inside apptainer/singularity exec
NVIDIA_PROC = Path("/proc/driver/nvidia/version")


def _cudnn() -> str | None:
    import torch  # here, not at the top: `semcl table` reads SAME_RESULTS and describe_key without torch (~1 s)

    try:
        v = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except RuntimeError:
        return None
    return None if v is None else f"{v // 10000}.{v // 100 % 100}.{v % 100}"  # 92400 -> 9.24.0


def _nccl() -> str | None:
    import torch

    try:
        v = torch.cuda.nccl.version() if torch.version.cuda else None
    except (AttributeError, RuntimeError):
        return None
    return ".".join(map(str, v)) if isinstance(v, tuple) else None if v is None else str(v)


def driver_version() -> str | None:
    """The NVIDIA driver's version: NVML where pynvml is installed, else the kernel module's own line."""
    try:
        import pynvml  # nvidia-ml-py; optional

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # not installed, or no NVML library on this node: the /proc file, if any
        pass
    try:
        words = NVIDIA_PROC.read_text().split()
    except OSError:
        return None
    # "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 ..."
    return next((w for w in words if w.count(".") >= 1 and w.replace(".", "").isdigit()), None)


def container_digest() -> dict | None:
    """{"image": path or None, "sha256": digest} of the container this process runs in (None: not in one)."""
    given = os.environ.get(CONTAINER_DIGEST_ENV)
    image = next((os.environ[e] for e in CONTAINER_PATH_ENVS if os.environ.get(e)), None)
    if given:
        return {"image": image, "sha256": given.removeprefix("sha256:")}
    if image and Path(image).is_file():  # a .sif: hashing it reads the image once per record (seconds)
        h = hashlib.sha256()
        with open(image, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
        return {"image": image, "sha256": h.hexdigest()}
    return {"image": image, "sha256": None} if image else None


def environment(device: torch.device) -> dict:
    """What the record's `environment` holds for a run on `device`."""
    import torch

    gpu = device.type == "cuda"
    lock = installed_lock()
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": _cudnn(), "nccl": _nccl(),
            "gpu": torch.cuda.get_device_name(device) if gpu else None, "driver": driver_version() if gpu else None,
            "lock": lock["lock"] if lock else None, "lock_sha256": lock["sha256"] if lock else None,
            "container": container_digest()}


def results_key(env: dict | None) -> tuple | None:
    """The fields of SAME_RESULTS (None for a record from before `environment` was kept)."""
    return None if not isinstance(env, dict) else tuple(env.get(k) for k in SAME_RESULTS)


def describe_key(key: tuple) -> str:
    shown = {k: "-" if v is None else v[:12] if k == "lock_sha256" else v for k, v in zip(SAME_RESULTS, key, strict=True)}
    return ", ".join(f"{k} {v}" for k, v in shown.items())
