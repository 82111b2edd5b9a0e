"""The GPU check (scripts/gpu_check.sh; about 10 minutes on one GPU; never in CI): what only a GPU can show.

Sections, each PASS or FAIL in <out>/gpu_check.json and <out>/gpu_check.md:
  a_versions   torch, CUDA, cuDNN, NCCL, the GPU, its memory, bf16; a 1-rank NCCL group (device_id) with a DDP step
  b_pace       one paper row per family through train() at the row's per-GPU batch, production settings: images/s
               over the timed steps, and the same step fed from a device-resident batch (the GPU-bound ceiling)
  c_memory     peak allocated/reserved memory of those steps against semcl check's estimate for the row
  d_two_ranks  2 ranks on one GPU over gloo through execute_run, every collective's tensor asserted on the GPU
  e_resume     exact mid-epoch resume: a file-backed row with loader workers, a ViT row (drop-path, fp16), 2 ranks
  f_precision  one step per family in fp32 / fp16 / bf16: loss and gradient differences
  g_mining     HSA's kNN mining at 200k images: time, memory, the ImageNet extrapolation
  h_colour     the colour views' batched finish on the GPU: its pixels against the per-image CPU path, its time

--dry-run runs every section on the CPU at tiny sizes (reduced models, gloo) and must pass; CI runs it.

    scripts/gpu_check.sh                 # on a GPU machine
    scripts/gpu_check.sh --dry-run       # anywhere
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS for the resume comparisons

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the gpucheck package beside this file

from gpucheck import colour, env, mining, pace, precision, ranks, report, resume  # noqa: E402
from gpucheck.rows import DRY, FAMILIES, GPU  # noqa: E402

SECTIONS = ("a_versions", "b_pace", "c_memory", "d_two_ranks", "e_resume", "f_precision", "g_mining", "h_colour")


def _error(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=-4)}"


def run_sections(sizes, device: torch.device, work: Path, families: list[str], wanted: set[str]) -> dict:
    out: dict[str, dict] = {}

    def timed(name: str, fn) -> dict | None:
        if name not in wanted:
            return None
        t0 = time.time()
        try:
            result = fn()
        except Exception as err:  # one section's failure is a line of the report, not the end of the check
            traceback.print_exc()
            result = {"ok": False, "error": _error(err)}
        result["status"] = "PASS" if result.get("ok") else "FAIL"
        result["seconds"] = round(time.time() - t0, 2)
        out[name] = result
        print(f"gpu_check: {name} {result['status']} ({result['seconds']} s)", file=sys.stderr, flush=True)
        return result

    timed("a_versions", lambda: env.section(device, work / "a"))
    paces: list[dict] = []

    def run_pace() -> dict:
        for fam in families:
            try:
                paces.append(pace.pace(fam, sizes, work / "b", device))
            except Exception as err:
                traceback.print_exc()
                paces.append({"pace": {"family": fam, "ok": False, "error": _error(err)},
                              "memory": {"family": fam, "ok": False, "error": _error(err)}})
        rows = [p["pace"] for p in paces]
        return {"warmup": sizes.warmup, "steps": sizes.steps, "rows": rows, "ok": all(r["ok"] for r in rows)}

    timed("b_pace", run_pace)
    if "c_memory" in wanted and "b_pace" not in wanted:
        timed("b_pace", run_pace)  # the memory is read from the pace runs
    timed("c_memory", lambda: {"rows": [p["memory"] for p in paces],
                               "ok": bool(paces) and all(p["memory"]["ok"] for p in paces)})
    two = timed("d_two_ranks", lambda: ranks.section(device, work / "d"))
    timed("e_resume", lambda: resume.section(sizes, device, work / "e", two))
    if two is not None:  # the Run and the store folder were for section (e) only
        two.pop("run", None)
        two.pop("store", None)
    timed("f_precision", lambda: precision.section(sizes, device, work / "f", families))
    timed("g_mining", lambda: mining.section(sizes, device))
    timed("h_colour", lambda: colour.section(sizes, device))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="every section on the CPU at tiny sizes (gloo)")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "gpu_check", help="folder of the JSON and Markdown")
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated, of: " + ", ".join(FAMILIES))
    ap.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated, of: " + ", ".join(SECTIONS))
    args = ap.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    unknown = [f for f in families if f not in FAMILIES] + [s for s in args.sections.split(",") if s not in SECTIONS]
    if unknown:
        print(f"gpu_check: unknown family or section: {', '.join(unknown)}", file=sys.stderr)
        return 2
    if not args.dry_run and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here (run it on a GPU machine, or --dry-run)", file=sys.stderr)
        return 2
    device = torch.device("cpu" if args.dry_run else "cuda", None if args.dry_run else 0)
    if not args.dry_run:
        from semcl.launch.slurm.profile import ClusterProfile

        # production's loader: a job holds cpus_per_gpu CPUs per GPU, one of which trains
        os.environ.setdefault("SEMCL_LOADER_WORKERS", str(ClusterProfile.__dataclass_fields__["cpus_per_gpu"].default - 1))
        torch.cuda.set_device(device)
    sizes = DRY if args.dry_run else GPU
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="semcl-gpu-check-") as tmp:
        sections = run_sections(sizes, device, Path(tmp), families, set(args.sections.split(",")))
    doc = {"mode": "dry-run" if args.dry_run else "gpu", "device": str(device), "sizes": sizes.__dict__,
           "loader_workers": os.environ.get("SEMCL_LOADER_WORKERS"), "seconds": round(time.time() - t0, 1),
           "finished_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "sections": sections,
           "passed": all(s["status"] == "PASS" for s in sections.values())}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_check.json").write_text(json.dumps(doc, indent=2, default=str))
    (args.out / "gpu_check.md").write_text(report.render(doc))
    print(f"gpu_check: {'PASS' if doc['passed'] else 'FAIL'} in {doc['seconds']} s; {args.out}/gpu_check.{{json,md}}",
          flush=True)
    return 0 if doc["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
