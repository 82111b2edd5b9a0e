"""What the local executors refuse before a run starts: runs that would silently become something else here.

A local job is one process on one device. A row that asks for several GPUs would train there as one process
with the whole global batch (another optimisation problem under the same run id), so it goes to a scheduler
that gives it its GPUs (`--executor slurm`); a row whose program starts its own processes (detectron2's
transfer) runs here when the machine has its GPUs. A row that asks for a GPU on a machine without CUDA would train
the paper's schedule on the CPU for days; it runs only when the user says so (`--allow-cpu`); the small
reproduction is the `mini` profile. Runs already done are not checked: they will not run.
"""

from __future__ import annotations

from semcl.errors import ConfigError


def _rows(runs) -> str:
    rows = list(dict.fromkeys(f"{r.table_id} row {r.row_label!r}" for r, _ in runs))
    return ", ".join(rows[:3]) + (f" and {len(rows) - 3} more row(s)" if len(rows) > 3 else "")


def cuda_devices() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def refuse_unfit(runs, executor: str, allow_cpu: bool, devices=cuda_devices) -> None:
    """ConfigError (one line) when a pending run cannot run here as its registry row asks; `runs` are
    (Run, Resources) pairs of the runs about to be submitted."""
    from semcl.methods.registry import method_spec

    # a run that trains nothing itself hands its GPUs to a program that starts its own processes (detectron2):
    # it may run here when the machine has them
    def own_processes(r) -> bool:
        return method_spec(r.config.method.name).builder is None

    here = devices() if any(res.gpus >= 1 for _, res in runs) else 0  # asked once: CUDA's first call is slow
    multi = [(r, res) for r, res in runs if res.gpus > 1 and not (own_processes(r) and here >= res.gpus)]
    if multi:
        gpus = sorted({res.gpus for _, res in multi})
        raise ConfigError(f"{len(multi)} run(s) ask for {'/'.join(map(str, gpus))} GPUs ({_rows(multi)}): the "
                          f"{executor} executor runs each run as one process on one device, which would train the "
                          "whole global batch on one GPU; submit them with --executor slurm")
    gpu = [(r, res) for r, res in runs if res.gpus >= 1]
    if gpu and not allow_cpu and here == 0:
        profiles = sorted({r.profile for r, _ in gpu})
        raise ConfigError(f"{len(gpu)} run(s) of profile {'/'.join(profiles)} ask for a GPU ({_rows(gpu)}) and this "
                          "machine has no CUDA device: use --profile mini for the small reproduction on the CPU, "
                          "or --allow-cpu to train them here anyway")
