"""The doctor's SLURM job: every task runs the checks in order and writes what it measured to
<folder>/rank<R>.json. The requeue check splits it in two attempts: the first measures (rendezvous, CPUs,
bandwidth, disk), trains the reference, then is signalled and requeued mid-run; the requeued one
(`resuming`) resumes and finishes, then trains the registry rows and raises on rank 1."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import submitit

from semcl.files import write_json_atomic


@dataclass
class DoctorSettings:
    """What the job measures, and how much of it (the CPU cluster's CI keeps it small)."""

    bandwidth_mb: tuple[float, ...] = (1.0, 4.0, 16.0)
    families: dict[str, tuple[str, str]] = field(default_factory=dict)
    steps: int = 20
    per_rank_batch: int = 2
    write_mb: int = 64
    collective_timeout_s: int = 60


class DoctorJob(submitit.helpers.Checkpointable):
    def __init__(self, folder: Path, settings: DoctorSettings):
        self.folder, self.settings = folder, settings
        self.resuming = False

    def checkpoint(self, *args, **kwargs):
        # called on rank 0 by submitit's requeue handler: the requeued job is this object, told to resume
        self.resuming = True
        return super().checkpoint(*args, **kwargs)

    def __call__(self) -> str:
        import torch

        from semcl.engine.job import arithmetic_threads
        from semcl.runtime import distributed, interrupt

        interrupt.defer_signal()
        os.environ[distributed.TIMEOUT_ENV] = str(self.settings.collective_timeout_s)
        torch.set_num_threads(arithmetic_threads(distributed.slurm_count("SLURM_CPUS_PER_TASK")))
        start = time.perf_counter()
        device = distributed.init_from_slurm() or torch.device("cuda" if torch.cuda.is_available() else "cpu")
        join_s = time.perf_counter() - start
        path = self.folder / f"rank{distributed.rank()}.json"
        try:
            if not self.resuming:
                out = self.first_attempt(device, join_s, path)
            else:
                out = json.loads(path.read_text())
            self.second_attempt(device, out, path)
        finally:
            distributed.shutdown()
        return str(path)

    def first_attempt(self, device, join_s: float, path: Path) -> dict:
        from semcl.launch.slurm.doctor import probes, resume

        s = self.settings
        out: dict = {"attempt": 0, "rendezvous": probes.rendezvous(device, join_s), "cpus": probes.cpus(device),
                     "all_reduce": probes.all_reduce_bandwidth(device, s.bandwidth_mb)}
        from semcl.runtime import distributed

        if distributed.rank() == 0:
            out["disk"] = probes.results_disk(self.folder, s.write_mb)
        # before the engine's rows: they set process-wide arithmetic (semcl.runtime.precision) that the requeued
        # attempt would not share with this one
        out["resume"] = {"reference": resume.reference(device)}
        write_json_atomic(path, out)  # before the signal: the requeued attempt reads it back
        out["resume"]["straight"] = resume.interrupted(device, self.folder / "resume.pt")
        return out  # reached only when no requeue happened

    def second_attempt(self, device, out: dict, path: Path) -> None:
        from semcl.launch.slurm.doctor import rank_fault, resume, steps

        if self.resuming:
            out["resume"]["after_requeue"] = resume.resumed(device, self.folder / "resume.pt")
        out["ddp_steps"] = []
        s = self.settings
        for family, (table, row) in s.families.items():
            try:
                out["ddp_steps"].append(steps.ddp_steps(family, table, row, self.folder / "steps", device,
                                                        s.steps, s.per_rank_batch))
            except Exception as err:  # noqa: BLE001 - a row that cannot train is this check's finding
                out["ddp_steps"].append({"family": family, "table": table, "row": row,
                                         "error": f"{type(err).__name__}: {err}"[:300]})
        out["restart_count"] = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
        verdict = rank_fault.rank_one_error(self.folder / "rank_fault")
        if verdict is not None:
            out["rank_error"] = verdict
        write_json_atomic(path, out)
