"""The preflight's checks in parallel processes, each started only once the checks it builds on are done
(a base run, a teacher: their scratch folders must exist first).

Spawned workers (not forked: the parent may hold torch's thread pools), each with an equal share of
the CPUs for its arithmetic. A worker that dies (killed for memory) fails the checks it held, named as
such, and a fresh pool goes on with the rest.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any


def default_jobs() -> int:
    """The CPUs this process may use."""
    return len(os.sched_getaffinity(0))


def _init_worker(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def costliest(ready: list[str], cost: Callable[[str], float], free: int) -> list[str]:
    """The `free` costliest of `ready` (ties in `ready`'s order): only as many as there are free processes,
    so the next process to free up picks again among what is ready then."""
    return sorted(ready, key=lambda k: -cost(k))[:max(0, free)]


def run_ordered(order: list[str], prereq: dict[str, set[str]], fn: Callable, args: Callable[[str], tuple],
                jobs: int, on_done: Callable[[str, Any], None], died: Callable[[str, str], Any],
                cost: Callable[[str], float] | None = None) -> None:
    """fn(*args(key)) for each key of `order`, a key once every key of prereq[key] is done; on_done(key,
    result) in this process as results arrive. jobs <= 1: in this process, in order. With `cost`, a free
    process takes the costliest ready key (longest first: the last checks to finish are short ones, so the
    wall time is near total / jobs rather than a long check alone at the end); ties keep `order`."""
    if jobs <= 1:
        for key in order:
            on_done(key, fn(*args(key)))
        return
    threads = max(1, default_jobs() // jobs)
    ctx = multiprocessing.get_context("spawn")

    def new_pool() -> ProcessPoolExecutor:
        return ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_init_worker, initargs=(threads,))

    pending, running, done = list(order), {}, set()
    pool = new_pool()
    try:
        while pending or running:
            ready = [k for k in pending if prereq.get(k, set()) <= done]
            if cost is not None:
                ready = costliest(ready, cost, jobs - len(running))
            for key in ready:
                running[pool.submit(fn, *args(key))] = key
                pending.remove(key)
            if not running:
                raise RuntimeError(f"preflight: checks wait on each other: {pending[:3]}")
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            broken = False
            for fut in finished:
                key = running.pop(fut)
                try:
                    result = fut.result()
                except BrokenProcessPool:
                    broken = True
                    result = died(key, "the check's process died (killed for memory?); rerun with --jobs 1")
                done.add(key)
                on_done(key, result)
            if broken:  # every check the dead pool held fails the same way; the rest go on
                for fut, key in list(running.items()):
                    running.pop(fut)
                    done.add(key)
                    on_done(key, died(key, "the check's process died (killed for memory?); rerun with --jobs 1"))
                pool.shutdown(wait=False, cancel_futures=True)
                pool = new_pool()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
