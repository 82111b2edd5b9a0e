"""The preflight's checks in parallel processes, each started only once the checks it builds on are done
(a base run, a teacher: their scratch folders must exist first).

Spawned workers (not forked: the parent may hold torch's thread pools), each with an equal share of
the CPUs for its arithmetic. A worker that dies (killed for memory) has its checks run again alone; a
check that dies alone too is reported as such. A worker ends with the `semcl check` that started it, however
that ends (a `kill` of the parent would otherwise leave idle workers holding gigabytes).
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


def _end_with_parent() -> None:
    """Linux: SIGTERM this process when its parent exits (prctl PR_SET_PDEATHSIG); elsewhere nothing."""
    import ctypes
    import signal
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no libc symbol: the worker still works, only without the watch
        return


def _init_worker(threads: int, parent: int | None = None) -> None:
    import torch

    _end_with_parent()
    if parent is not None and os.getppid() != parent:  # the parent died before the watch was set
        os._exit(1)
    torch.set_num_threads(threads)


def costliest(ready: list[str], cost: Callable[[str], float], free: int) -> list[str]:
    """The `free` costliest of `ready` (ties in `ready`'s order): only as many as there are free processes,
    so the next process to free up picks again among what is ready then."""
    return sorted(ready, key=lambda k: -cost(k))[:max(0, free)]


def run_ordered(order: list[str], prereq: dict[str, set[str]], fn: Callable, args: Callable[[str], tuple],
                jobs: int, on_done: Callable[[str, Any], None], died: Callable[[str, str], Any],
                cost: Callable[[str], float] | None = None) -> None:
    """fn(*args(key)) for each key of `order`, a key once every key of prereq[key] is done; on_done(key,
    result) in this process as results arrive. jobs <= 1: in this process, in order. A check whose process
    dies is run again alone (see below) before `died(key, why)` reports it. With `cost`, a free
    process takes the costliest ready key (longest first: the last checks to finish are short ones, so the
    wall time is near total / jobs rather than a long check alone at the end); ties keep `order`."""
    if jobs <= 1:
        for key in order:
            on_done(key, fn(*args(key)))
        return
    ctx = multiprocessing.get_context("spawn")

    def new_pool(workers: int) -> ProcessPoolExecutor:
        threads = max(1, default_jobs() // workers)
        return ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker, initargs=(threads, os.getpid()))

    # a check whose process died (the kernel's OOM killer, most often: two paper-size ViT-L checks side by side
    # hold ~2 x 9 GB) is run again alone, in a pool of one with every core, once the running ones are done;
    # only a check that dies alone too is reported as died. Its dependents wait for it.
    pending, running, done, alone = list(order), {}, set(), []
    workers = jobs
    pool = new_pool(workers)
    try:
        while pending or running or alone:
            if alone and not running:  # the pool is idle: the next retry runs by itself
                if workers != 1:
                    pool.shutdown(wait=True)
                    workers, pool = 1, new_pool(1)
                key = alone.pop(0)
                running[pool.submit(fn, *args(key))] = key
            elif not alone:
                if workers != jobs:
                    pool.shutdown(wait=True)
                    workers, pool = jobs, new_pool(jobs)
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
                    if workers == 1:  # it died alone: reported
                        result = died(key, "the check's process died even when run alone (killed for memory?)")
                    else:
                        alone.append(key)
                        continue
                done.add(key)
                on_done(key, result)
            if broken:  # every check the dead pool held is run again, alone
                alone += [key for key in running.values()]
                running.clear()
                pool.shutdown(wait=False, cancel_futures=True)
                pool = new_pool(workers)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
