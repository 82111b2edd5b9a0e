"""The doctor's verdict: each check judged from the ranks' files, and the one page (Markdown + JSON)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from semcl.files import write_json_atomic


@dataclass
class Check:
    name: str
    ok: bool
    detail: str  # the numbers, or why it failed


def _rendezvous(ranks: list[dict], world: int, gpus: bool) -> Check:
    seen = ranks[0]["rendezvous"]["all"]
    places = [(r["host"], r["device"]) for r in seen]
    problems = []
    if len(seen) != world or sorted(r["rank"] for r in seen) != list(range(world)):
        problems.append(f"{len(seen)} of {world} ranks joined")
    if any(r["rank"] != r["slurm_procid"] for r in seen):
        problems.append("a rank differs from its SLURM_PROCID")
    if gpus and len(set(places)) != len(places):
        problems.append("two ranks share one GPU")
    if gpus and any(not r["device"].startswith("cuda") for r in seen):
        problems.append("a rank is not on a GPU")
    hosts = sorted({h for h, _ in places})
    detail = (f"{len(seen)} ranks on {len(hosts)} node(s) ({', '.join(hosts)}); devices "
              + ", ".join(f"{r['rank']}:{r['host']}/{r['device']}" for r in seen)
              + f"; slowest join {max(r['rendezvous']['join_s'] for r in ranks):.1f} s")
    return Check("rendezvous and devices", not problems, "; ".join(problems) or detail)


def _cpus(ranks: list[dict]) -> Check:
    rows = [r["cpus"] for r in ranks]
    short = [i for i, c in enumerate(rows) if c["cpus_per_task"] and c["affinity"] < c["cpus_per_task"]]
    detail = ", ".join(f"rank {i}: {c['affinity']} CPUs (SLURM_CPUS_PER_TASK {c['cpus_per_task']}), "
                       f"{c['loader_workers_gpu']} loader workers on a GPU" for i, c in enumerate(rows))
    why = f"rank(s) {short} may use fewer CPUs than SLURM_CPUS_PER_TASK" if short else ""
    return Check("CPUs and loader workers", not short, why or detail)


def _bandwidth(ranks: list[dict]) -> Check:
    ar = ranks[0]["all_reduce"]
    ok = all(r["all_reduce"]["correct"] for r in ranks)
    detail = ", ".join(f"{s['mb']:g} MB: {s['seconds'] * 1e3:.1f} ms ({s['bus_gb_s']} GB/s bus)" for s in ar["sizes"])
    return Check("all-reduce bandwidth", ok, detail if ok else "a rank's all_reduce sum came out wrong; " + detail)


def _steps(ranks: list[dict]) -> list[Check]:
    out = []
    for i, row in enumerate(ranks[0]["ddp_steps"]):
        errors = [r["ddp_steps"][i]["error"] for r in ranks if "error" in r["ddp_steps"][i]]
        name = f"DDP steps: {row['family']} ({row['table']} / {row['row']})"
        if errors:
            out.append(Check(name, False, errors[0]))
        else:
            out.append(Check(name, row["finite"], f"{row['steps']} steps of global batch {row['global_batch']}: "
                             f"{row['seconds']:.1f} s, {row['images_s']:g} images/s, last loss {row['loss']:.4f}"))
    return out


def _resume(ranks: list[dict]) -> Check:
    problems = []
    for i, r in enumerate(ranks):
        res = r["resume"]
        after = res.get("after_requeue")
        if after is None:
            noted = res.get("straight", {}).get("signalled")
            problems.append(f"rank {i}: not requeued (the signal was {'noted' if noted else 'never noted'})")
        elif not after.get("resumed"):
            problems.append(f"rank {i}: {after.get('error')}")
        elif after["losses"] != res["reference"]["losses"] or after["digest"] != res["reference"]["digest"]:
            problems.append(f"rank {i}: resumed run differs from the uninterrupted one")
    first = ranks[0]["resume"].get("after_requeue") or {}
    detail = (f"requeued {ranks[0].get('restart_count', 0)} time(s), resumed at step {first.get('resumed_at')}; "
              f"losses and weights equal the uninterrupted run's on {len(ranks)} ranks")
    return Check("requeue signal and exact resume", not problems, "; ".join(problems) or detail)


def _rank_error(ranks: list[dict]) -> Check:
    v = ranks[0].get("rank_error")
    if v is None:
        return Check("an error on rank 1", False, "rank 0 recorded no verdict")
    ok = v["collective_failed"] and v.get("names_rank_1") and not v.get("requeued")
    return Check("an error on rank 1", bool(ok), f"reported as {v.get('reported', 'nothing')!r}; "
                 f"requeued: {v.get('requeued')}")


def _disk(ranks: list[dict], min_free_gb: float) -> Check:
    d = ranks[0]["disk"]
    ok = d["free_gb"] >= min_free_gb
    return Check("results folder", ok, f"{d['free_gb']:g} GB free (at least {min_free_gb:g} wanted), "
                                      f"writes {d['write_mb_s']:g} MB/s ({d['write_mb']} MB fsync'd)")


def judge(ranks: list[dict], world: int, gpus: bool, min_free_gb: float) -> list[Check]:
    """Every check, from the ranks' files (rank 0's first; a missing file is the caller's failure)."""
    checks = []
    for judge_one in (lambda: [_rendezvous(ranks, world, gpus)], lambda: [_cpus(ranks)], lambda: [_bandwidth(ranks)],
                      lambda: _steps(ranks), lambda: [_resume(ranks)], lambda: [_rank_error(ranks)],
                      lambda: [_disk(ranks, min_free_gb)]):
        try:
            checks.extend(judge_one())
        except (KeyError, IndexError, TypeError) as err:  # a rank that stopped before this check
            checks.append(Check(f"check {len(checks) + 1}", False, f"incomplete rank files ({type(err).__name__}: {err})"))
    return checks


def write_page(folder: Path, head: dict, checks: list[Check]) -> tuple[Path, Path]:
    """doctor.md and doctor.json in `folder`."""
    doc = {**head, "ok": all(c.ok for c in checks), "checks": [asdict(c) for c in checks]}
    write_json_atomic(folder / "doctor.json", doc)
    lines = [f"# semcl doctor: cluster {head['cluster']}", "",
             f"job {head['job_id']}, {head['nodes']} node(s) x {head['tasks_per_node']} task(s), "
             f"{head['backend']}, {head['seconds']:.0f} s; {sum(c.ok for c in checks)} of {len(checks)} checks pass",
             "", "| check | result | numbers |", "|---|---|---|"]
    lines += [f"| {c.name} | {'pass' if c.ok else 'FAIL'} | {c.detail.replace('|', '/')} |" for c in checks]
    (folder / "doctor.md").write_text("\n".join(lines) + "\n")
    return folder / "doctor.md", folder / "doctor.json"


def read_ranks(folder: Path, world: int) -> tuple[list[dict], list[int]]:
    """The ranks' files in rank order, and the ranks whose file is missing."""
    ranks, missing = [], []
    for r in range(world):
        path = folder / f"rank{r}.json"
        if path.exists():
            ranks.append(json.loads(path.read_text()))
        else:
            missing.append(r)
    return ranks, missing
