"""Which checks a preflight runs for its rows, in which order, and how each row's report is put together.

Two keys per run (semcl.preflight.shapes): its *code key* (what decides the code its small real step, the
checkpoint read-back and the evaluations run: method and structural fields, data and views, evaluations, the
code keys of what it builds on; not the networks' names and sizes, not the loss scalars) and its *memory key*
(what decides the fake step's peak at the real batch: the networks, batch, input size, optimiser, precision,
mining sizes, GPUs). Each code key gets one whole check (real step + fake step) on its run of the cheapest network
(the real step, its checkpoint and evaluations cost what the network costs; ViT-B rather than ViT-L); each memory
key that no whole check covers gets one memory-only check (engine up to the first batch, then the fake step)
on its first run. A whole check whose real step runs below the row's input size (semcl.preflight.check.
real_step_size: ImageNet-size rows step at 64 px) fakes nothing and covers no memory key.
Every row is reported with its own memory key's figure, the code key's errors, and
which rows those came from (`same_shape_as`: the fake step; `step_as`: the real step).
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from semcl.preflight.report import RowCheck


def check_tables(tables: list, profile: str, work: Path, gpu_mem_gb: float | None, *, reduce=None,
                 batch: int = 4, rows_per_method: int | None = None, progress=None, jobs: int = 1,
                 cache: Path | None = None) -> list[RowCheck]:
    """Check every distinct run of `tables` under `profile`, in table order (a config seen earlier is
    reported as `same_as`). Checks run in `jobs` processes, a check after the checks of the runs it builds
    on; with `cache` (a folder), passed checks are read from and written to it by key. `rows_per_method` is
    the CI sample: per table, the first row of each method not sampled in an earlier table (at least the
    table's first row), and what they build on."""
    from semcl.preflight.check import (
        TableRef,
        check_task,
        distinct_runs,
        own_side,
        real_step_cost,
        real_step_size,
        reductions,
        sample_runs,
    )
    from semcl.preflight.pool import run_ordered
    from semcl.preflight.shapes import ShapeCache, alias_folder, code_key, from_cache, memory_key, release_scratch
    from semcl.store import ResultsRoot, Store

    store = Store(work)
    entries = []  # (table, run), in report order
    seen_methods: set[str] = set()
    for table in tables:
        runs = distinct_runs(table, profile)
        if rows_per_method is not None:
            runs = sample_runs(runs, rows_per_method, seen_methods)
        entries += [(table, run) for run in runs]
    first: dict[str, tuple] = {}  # run id -> (table, run) where it is first reported
    for table, run in entries:
        first.setdefault(run.run_id, (table, run))
    gpus = {rid: t.resources_for(r.row_label, profile).gpus for rid, (t, r) in first.items()}
    extra = {"reduce": dataclasses.asdict(reduce) if reduce else None, "batch": batch}
    ckeys: dict[str, str] = {}

    def code_of(rid: str) -> str:
        if rid not in ckeys:
            run = first[rid][1]
            ckeys[rid] = code_key(run, [code_of(d) for d in run.depends_on], extra)
        return ckeys[rid]

    for rid in first:
        code_of(rid)
    mkeys = {rid: memory_key(first[rid][1], gpus[rid], extra) for rid in first}
    # a run others build on is checked per network too: its dependents' real steps read its checkpoint (a KD
    # student's teacher must be the row's network), while their code keys keep only its code key
    depended = {d for _, r in first.values() for d in r.depends_on}
    ckeys = {rid: k + mkeys[rid] if rid in depended else k for rid, k in ckeys.items()}
    crep: dict[str, str] = {}  # code key -> the run whose real step covers it: its cheapest network (the first of ties)
    mrep: dict[str, str] = {}  # memory key -> the first run of it
    step_cost = {rid: real_step_cost(first[rid][1]) for rid in first}
    for rid in first:
        if ckeys[rid] not in crep or step_cost[rid] < step_cost[crep[ckeys[rid]]]:
            crep[ckeys[rid]] = rid
        mrep.setdefault(mkeys[rid], rid)
    shapes = ShapeCache(cache) if cache is not None else None
    hits = {k: doc for k in [*crep, *mrep] if shapes and (doc := shapes.get(k)) is not None}

    def deps_of(rid: str) -> set[str]:
        return {"c" + ckeys[d] for d in first[rid][1].depends_on}

    todo: set[str] = set()

    def add(task: str) -> None:  # a check to run, and the whole checks of what it builds on (scratch folders)
        stack = [task]
        while stack:
            t = stack.pop()
            if t not in todo:
                todo.add(t)
                stack.extend(deps_of(crep[t[1:]] if t[0] == "c" else mrep[t[1:]]))

    for k in crep:
        if k not in hits:
            add("c" + k)
    # a memory key is covered by the whole check of a run of it (one whose real step runs at the row's own size),
    # else it gets its own memory-only check
    own_size = {rid: real_step_size(first[rid][1], reduce) is None for rid in first}
    covering: dict[str, str] = {}
    for k in crep:
        if "c" + k in todo and own_size[crep[k]]:
            covering.setdefault(mkeys[crep[k]], "c" + k)
    for mk in mrep:
        if mk not in hits and mk not in covering:
            add("m" + mk)
            covering[mk] = "m" + mk
    rep_of = {t: crep[t[1:]] if t[0] == "c" else mrep[t[1:]] for t in todo}
    # in report order: a run's whole check first, memory-only checks after the whole checks they build on
    position = {rid: i for i, rid in enumerate(first)}
    order = sorted(todo, key=lambda t: (position[rep_of[t]], t[0]))
    prereq = {t: deps_of(rep_of[t]) for t in order}
    needed = {d for t in order for d in prereq[t]}
    checked: dict[str, RowCheck] = {}

    def args(task: str) -> tuple:
        table, run = first[rep_of[task]]
        return (run, TableRef(table.id, table.path), Path(work), table.resources_for(run.row_label, profile),
                gpu_mem_gb, reduce, batch, task in needed, task[0] == "m",
                tuple(first[d][1] for d in run.depends_on) if task[0] == "m" else ())

    waiting = {t: sum(t in prereq[o] for o in order) for t in order}  # checks still to read t's folder
    same_code: dict[str, list[str]] = {}
    for rid, k in ckeys.items():
        same_code.setdefault("c" + k, []).append(rid)

    def on_done(task: str, res: RowCheck) -> None:
        checked[task] = res
        if task[0] == "m":  # a memory check's own folder (semcl.preflight.check: `private`) is read by no one
            shutil.rmtree(ResultsRoot(Path(work)).memory / rep_of[task], ignore_errors=True)
        if task[0] == "c":
            for rid in same_code[task]:  # rows of this code path that others build on read its folder
                alias_folder(store, rep_of[task], rid)
        if shapes is not None:
            shapes.put(task[1:], res)
            if task[0] == "c" and own_size[rep_of[task]]:  # its fake step is its memory key's figure too
                shapes.put(mkeys[rep_of[task]], res)
        # a scratch checkpoint is freed once nothing left to check reads it: the paper profile's checkpoints
        # together (ViT-L with AdamW state: 3.6 GB each) are larger than a /tmp
        for t in prereq[task]:
            waiting[t] -= 1
            if waiting[t] == 0:
                release_scratch(store, same_code[t])
        if task[0] == "c" and waiting[task] == 0:
            release_scratch(store, same_code[task])
        if progress:
            progress(res)

    def died(task: str, why: str) -> RowCheck:
        table, run = first[rep_of[task]]
        return RowCheck(table.id, run.row_label, run.run_id, gpus=gpus[run.run_id], gpu_mem_gb=gpu_mem_gb,
                        error=f"{table.path}: {why}")

    def cost(task: str) -> float:  # a memory-only check: no real step, no evaluation
        return step_cost[rep_of[task]] * (1.0 if task[0] == "c" else 0.25)

    run_ordered(order, prereq, check_task, args, jobs, on_done, died, cost=cost)

    def result(key: str, task: str) -> tuple[RowCheck, str | None]:
        """The check for `key` (this call's, else the cache's) and its run id (None: cached)."""
        if task in checked:
            return checked[task], rep_of[task]
        return hits[key], None

    def label(rid: str) -> str:
        t, r = first[rid]
        return f"{t.id} / {r.row_label}"

    results, reported = [], {}
    for table, run in entries:
        rid = run.run_id
        if rid in reported:
            prev = reported[rid]
            results.append(dataclasses.replace(prev, table=table.id, row=run.row_label, seconds=0.0,
                                               same_as=prev.same_as or f"{prev.table} / {prev.row}"))
            continue
        mk, ck = mkeys[rid], ckeys[rid]
        mem, mem_rid = result(mk, covering.get(mk, ""))
        code, code_rid = result(ck, "c" + ck)
        if mem_rid is None:
            res = from_cache(mem, run, table.id, gpus[rid], gpu_mem_gb)
        else:
            res = dataclasses.replace(mem, table=table.id, row=run.row_label, run_id=rid,
                                      seconds=mem.seconds if mem_rid == rid else 0.0,
                                      same_shape_as=None if mem_rid == rid else label(mem_rid))
        code_error = code.error if isinstance(code, RowCheck) else None
        step_px = code.real_step_px if isinstance(code, RowCheck) else code.get("real_step_px")
        res = dataclasses.replace(res, error=res.error or code_error, real_step_px=step_px,
                                  reduced=reductions(run, reduce), input_px=own_side(run) if reduce is None else None,
                                  step_as=None if code_rid in (rid, None) else label(code_rid),
                                  cached=mem_rid is None and code_rid is None)
        reported[rid] = res
        results.append(res)
    return results
