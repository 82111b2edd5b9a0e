"""The GPU check (scripts/gpu_check.sh; never in CI): what only a GPU can show.

1. Pace: one paper-profile row per method family trains through the engine's own loop (train(): the
   loader, autocast, the optimiser) on stand-in data written in the real format at the real image size,
   at the row's per-GPU batch, for two short epochs on one GPU; images/s is read from the second epoch
   (the first pays cuDNN's autotuning and the workers' start).
2. Exact resume on CUDA: a smoke run stopped after its first epoch-end checkpoint and resumed ends with
   the metrics and loss history of the uninterrupted run, bit for bit (deterministic kernels on).
The numbers go into bench/results.md (its GPU section, which `make bench` keeps) and to stdout.

    .venv/bin/python scripts/gpu_check.py                       # on a GPU machine
    .venv/bin/python scripts/gpu_check.py --device cpu --batch 4 --families ce --per-class 2   # a dry run
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS for the resume check

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

# family -> (table, row): one paper-profile row each, without runs it builds on
FAMILIES = {
    "ce": ("rince/tab2", "Cross-entropy"),
    "scl": ("rince/tab2", "SCL-in"),
    "rince": ("rince/tab2", "RINCE-in"),
    "supcon": ("gpaco/tab5", "SupCon ResNet-50"),
    "paco": ("gpaco/tab5", "PaCo ResNet-50 (RandAugment)"),
    "gpaco": ("gpaco/tab5", "GPaCo ResNet-50"),
    "gpaco_vit": ("gpaco/tab13-vit", "GPaCo ViT-B"),
    "hsa": ("hsa/linear", "CsMl, 800 ep, multi-crop (v2 best configuration)"),
    "video_rince": ("rince/tab4", "RINCE"),
    "scns": ("scns/sup-cifar10", None),  # the table's first row
}


def _paper_run(table_id: str, row: str | None):
    from semcl.registry.tables import get_table
    from semcl.runs import plan_runs

    table = get_table(table_id)
    runs = [r for r in plan_runs(table, "paper") if r.row_label == (row or table.rows[0].label)]
    run = runs[0]
    return run, table.resources_for(run.row_label, "paper")


def pace(family: str, device: torch.device, work: Path, batch: int | None, per_class: int, epochs: int) -> dict:
    """Images/s of one family's paper row on one GPU through the engine's loop."""
    from semcl.data import load
    from semcl.data.registry import DATASETS
    from semcl.data.synthetic import ensure_synthetic
    from semcl.engine.train import train
    from semcl.methods.base import DataInfo
    from semcl.methods.registry import method_spec
    from semcl.models.layout import apply_memory_format
    from semcl.runtime.checkpoint import seed_everything

    table_id, row = FAMILIES[family]
    run, res = _paper_run(table_id, row)
    cfg = copy.deepcopy(run.config)
    gpus = max(1, res.gpus)
    per_gpu = batch or max(1, cfg.optim.batch_size // gpus)
    cfg.optim.batch_size, cfg.optim.accum_steps, cfg.schedule.epochs = per_gpu, None, epochs
    d = cfg.data
    # one stand-in per dataset, shared by the families that train on it
    root = ensure_synthetic(work.parent / "data" / d.name, [d.name], train_per_class=per_class, test_per_class=1)
    seed_everything(run.seed)
    train_set = load(d.name, root, "train", d.image_size)
    counts = torch.bincount(train_set.labels, minlength=train_set.num_classes)
    info = DataInfo(DATASETS[d.name].num_classes, train_set.images.shape[1], train_set.fine_to_coarse, counts,
                    tuple(train_set.class_names))
    method = apply_memory_format(method_spec(cfg.method.name).load()(cfg, info).to(device), cfg.model.memory_format)
    folder = work / "runs" / run.run_id
    torch.cuda.reset_peak_memory_stats() if device.type == "cuda" else None
    history = train(method, train_set, cfg, run.seed, folder / "checkpoints" / "last.pt", device, data_root=root)
    last = history[-1]
    steps = len(train_set.labels) // per_gpu
    out = {"family": family, "table": table_id, "row": run.row_label, "batch_per_gpu": per_gpu,
           "paper_gpus": gpus, "image_size": d.image_size, "amp": cfg.optim.amp, "steps": steps,
           "epoch_s": round(last["seconds"], 3), "images_per_s": round(steps * per_gpu / last["seconds"], 1)}
    from semcl.estimate.gpu_hours import training_pace

    out["estimate_images_per_s"] = round(training_pace(run.config), 1)  # semcl plan's one-A100 pace for this row
    if device.type == "cuda":
        out["peak_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return out


def exact_resume(device: torch.device, work: Path) -> list[dict]:
    """Smoke runs on `device`: uninterrupted vs. stopped after the first epoch and resumed."""
    import semcl.engine.train as train_mod
    from semcl.engine.job import execute_run
    from semcl.registry.tables import get_table
    from semcl.runs import Run, Store, make_run_id, plan_runs

    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    results = []
    for row in ("Cross-entropy", "RINCE-in"):
        base = next(r for r in plan_runs(get_table("rince/tab2"), "smoke") if r.row_label == row)
        cfg = copy.deepcopy(base.config)
        cfg.schedule.epochs = 3
        run = Run(base.table_id, base.row_label, base.seed, "smoke", cfg, make_run_id(cfg, base.seed))
        want = execute_run(run, Store(work / "a"), work, device)
        real_save, saves = train_mod.save_atomic, []

        def stop_after_first(state, path, real_save=real_save, saves=saves):
            real_save(state, path)
            saves.append(state["epoch"])
            if state["epoch"] == 1 and state.get("step", 0) == 0:
                raise KeyboardInterrupt("stopped after the first epoch (gpu_check)")

        train_mod.save_atomic = stop_after_first
        store = Store(work / "b")
        try:
            execute_run(run, store, work, device)
        except KeyboardInterrupt:
            pass
        finally:
            train_mod.save_atomic = real_save
        got = execute_run(run, store, work, device)
        results.append({"row": row, "epochs": 3, "metrics_equal": got["metrics"] == want["metrics"],
                        "loss_history_equal": [h["loss"] for h in got["history"]] == [h["loss"] for h in want["history"]]})
    torch.use_deterministic_algorithms(False)
    return results


def _versus(p: dict) -> str:
    est = p.get("estimate_images_per_s")
    return f"{est} ({p['images_per_s'] / est:.2f}x)" if est else ""


def render(device: torch.device, paces: list[dict], resumes: list[dict], seconds: float) -> str:
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    lines = [f"## GPU check ({name}, torch {torch.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"{seconds:.0f} s)", "",
             "One GPU; each family's paper row through the engine's loop (loader included) on stand-in data in the real "
             "format and size, at the row's per-GPU batch; images/s of the second epoch.", "",
             "| family | table / row | per-GPU batch | amp | images/s | plan's A100 estimate (measured / estimate) | peak GB "
             "| note |", "|---|---|---|---|---|---|---|---|"]
    for p in paces:
        if "error" in p:
            lines.append(f"| {p['family']} | {p['table']} / {p['row']} | | | | | | FAILED: {p['error']} |")
        else:
            lines.append(f"| {p['family']} | {p['table']} / {p['row']} | {p['batch_per_gpu']} | {p['amp'] or 'fp32'} | "
                         f"{p['images_per_s']} | {_versus(p)} | {p.get('peak_gb', '')} | {p['steps']} steps, {p['epoch_s']} s |")
    lines += ["", "Exact resume on this device (smoke rows, 3 epochs, stopped after epoch 1, deterministic kernels):", ""]
    lines += [f"- {r['row']}: metrics {'identical' if r['metrics_equal'] else 'DIFFER'}, loss history "
              f"{'identical' if r['loss_history_equal'] else 'DIFFERS'}" for r in resumes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated, of: " + ", ".join(FAMILIES))
    ap.add_argument("--batch", type=int, default=None, help="per-GPU batch (default: the row's)")
    ap.add_argument("--per-class", type=int, default=None, help="stand-in images per class (default: 2 epochs of "
                    "~20 steps where the class count allows)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results.md")
    ap.add_argument("--json", type=Path, default=None, help="also write the numbers as JSON here")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here (run it on a GPU machine, or --device cpu for a dry run)", file=sys.stderr)
        return 2
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    t0 = time.time()
    paces = []
    with tempfile.TemporaryDirectory(prefix="semcl-gpu-check-") as tmp:
        for family in args.families.split(","):
            table_id, row = FAMILIES[family]
            per_class = args.per_class or 2
            try:
                paces.append(pace(family, device, Path(tmp) / family, args.batch, per_class, args.epochs))
            except Exception as err:  # one family's failure is a row of the report, not the end of the check
                traceback.print_exc()
                paces.append({"family": family, "table": table_id, "row": row or "(first)",
                              "error": f"{type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''}"})
            print(json.dumps(paces[-1]), flush=True)
        resumes = exact_resume(device, Path(tmp) / "resume")
        print(json.dumps(resumes), flush=True)
    from gpu_section import write_gpu_section

    body = render(device, paces, resumes, time.time() - t0)
    write_gpu_section(args.out, body)
    if args.json:
        args.json.write_text(json.dumps({"pace": paces, "resume": resumes}, indent=2))
    print(body)
    return 0 if all("error" not in p for p in paces) and all(r["metrics_equal"] and r["loss_history_equal"]
                                                           for r in resumes) else 1


if __name__ == "__main__":
    sys.exit(main())
