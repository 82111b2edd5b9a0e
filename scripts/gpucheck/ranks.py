"""Section (d): 2 ranks on one device over gloo, through the job's own execute_run (DDP with device_ids, the memory
banks' key gather, shuffle-BN, any_rank, the RNG gather). Every tensor handed to a torch.distributed collective
is checked to be on the training device (what NCCL requires; gloo would accept a CPU tensor silently). Also the
2-rank leg of section (e): the same run stopped mid-epoch by a requeue signal on both ranks and resumed."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

GUARDED = ("all_reduce", "all_gather", "all_gather_into_tensor", "broadcast", "reduce", "reduce_scatter",
           "reduce_scatter_tensor", "all_to_all_single", "gather", "scatter")


class Preempted(BaseException):
    """The requeue the check simulates (a BaseException: execute_run keeps the checkpoint, writes no failure)."""


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)


def guard_collectives(device: torch.device, seen: dict) -> None:
    """Wrap torch.distributed's tensor collectives (as semcl calls them: dist.<name>) to assert the device."""
    for name in GUARDED:
        real = getattr(dist, name, None)
        if real is None:
            continue

        @functools.wraps(real)
        def checked(*args, _real=real, _name=name, **kwargs):
            for t in _tensors(list(args) + list(kwargs.values())):
                if t.device.type != device.type:
                    raise AssertionError(f"dist.{_name} got a tensor on {t.device}, training on {device}")
            seen[_name] = seen.get(_name, 0) + 1
            return _real(*args, **kwargs)

        setattr(dist, name, checked)


def stop_at_call(n: int) -> None:
    """The requeue signal arrives during the n-th step (interrupt.pending's n-th call), as the tests simulate it."""
    from semcl.runtime import interrupt

    real, calls = interrupt.pending, [0]

    def pending() -> bool:
        calls[0] += 1
        if calls[0] == n:
            def requeue():
                raise Preempted
            interrupt._pending = requeue
        return real()

    interrupt.pending = pending


def _worker(rank: int, run, store_dir: str, device_name: str, init: str, out: str, stop: int | None) -> None:
    import logging

    from semcl.engine.job import execute_run
    from semcl.store import Store

    logging.getLogger("semcl").setLevel(logging.WARNING)
    torch.set_num_threads(1)
    device = torch.device(device_name)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.use_deterministic_algorithms(True, warn_only=True)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    seen: dict = {}
    guard_collectives(device, seen)
    if stop is not None:
        stop_at_call(stop)
    result = {"rank": rank, "collectives": seen, "stopped": False, "error": None}
    try:
        record = execute_run(run, Store(Path(store_dir)), Path(store_dir), device)
        result["history"] = [h["loss"] for h in record.get("history", [])]
    except Preempted:
        result["stopped"] = True
    except Exception as err:  # reported by the parent, per rank
        result["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}"
    finally:
        result["collectives"] = dict(seen)
        Path(out, f"rank{rank}.json").write_text(json.dumps(result))
        dist.destroy_process_group()


def two_ranks(run, store: Path, device: torch.device, work: Path, stop: int | None = None) -> list[dict]:
    """Both ranks' reports of one execute_run of `run` in `store`."""
    work.mkdir(parents=True, exist_ok=True)
    init = f"file://{work / 'init'}"
    (work / "init").unlink(missing_ok=True)
    # CUDA cannot be forked; on the CPU a fork skips each rank's ~20 s first DDP construction (torch's lazy imports)
    mp.start_processes(_worker, args=(run, str(store), str(device), init, str(work), stop), nprocs=2, join=True,
                       start_method="spawn" if device.type == "cuda" else "fork")
    return [json.loads((work / f"rank{r}.json").read_text()) for r in range(2)]


def smoke_run(epochs: int):
    """PaCo's smoke row (a queue gathered from both ranks, shuffle-BN key encoder) for `epochs` epochs."""
    import copy

    from gpucheck.rows import with_config

    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table

    base = next(r for r in plan_runs(get_table("gpaco/tab5"), "smoke") if r.row_label.startswith("PaCo"))
    cfg = copy.deepcopy(base.config)
    cfg.schedule.epochs = epochs
    # 12 steps an epoch: room for section (e)'s stop inside one (two ranks agree on it by StopVote, which casts a
    # vote every 4 batches and reads it at the next: a signal during step 1 checkpoints after step 8)
    cfg.optim.batch_size = 8
    return with_config(base, cfg)


def final_state(store: Path, run) -> dict:
    from semcl.store import Store

    return torch.load(Store(store).folder(run.run_id).checkpoint, map_location="cpu", weights_only=False)["method"]


def section(device: torch.device, work: Path) -> dict:
    run = smoke_run(epochs=2)
    reports = two_ranks(run, work / "store", device, work / "ranks")
    errors = [r["error"] for r in reports if r["error"]]
    counts = {k: sum(r["collectives"].get(k, 0) for r in reports) for k in GUARDED}
    counts = {k: v for k, v in counts.items() if v}
    ok = not errors and bool(counts) and bool(reports[0].get("history"))
    return {"row": f"{run.table_id} / {run.row_label} (smoke, 2 epochs)", "device": str(device),
            "collectives_checked": counts, "errors": errors, "history": reports[0].get("history"), "ok": ok,
            "run": run, "store": work / "store"}
