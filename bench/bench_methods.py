"""Method step overhead on one backbone (item 3): CIFAR ResNet-18, batch 128, 32x32, CPU.

Each implemented method is built from the real config schema (``semcl.run_config.build_config``) and
the real method registry, then one training step is timed exactly as ``engine.train`` runs it:
``prepare`` and ``loss`` (forward, key forward, loss, momentum update), ``zero_grad``, ``backward``,
``after_backward`` (enqueue), ``optimizer.step``. The CE step on the same batch is the unit; the
methods run interleaved, a few rounds, and the ratio is the median of per-round ratios.

Floors (compute counted in backbone passes): a momentum-encoder method does one fwd+bwd (≈ 3 fwd)
plus one key forward, ≈ 1.33× CE; a two-view single-encoder method (GPaCo) ≈ 2×. Target: within
~10 % of the floor (RINCE / SCL / PaCo ≤ 1.45×, GPaCo ≤ 2.2×).

Also checked on a RINCE step: the momentum update is one fused multi-tensor op per encoder
(``aten::_foreach_lerp_``, no per-parameter ``lerp_``/``mul_``/``add_``), and the bank enqueue
writes in place (same storage before and after).
"""

from __future__ import annotations

import torch
from common import Row, interleaved, median, paired_ratio

from semcl.data.classnames import CIFAR100_FINE_TO_COARSE
from semcl.methods.base import Batch, DataInfo, run_step
from semcl.methods.registry import METHODS, method_class
from semcl.run_config import build_config

BATCH = 128
# name -> (config method section, floor, limit)
CASES: dict[str, tuple[dict, float, float]] = {
    "scl": ({"name": "scl", "form": "in"}, 4 / 3, 1.45),
    "rince": ({"name": "rince", "form": "in"}, 4 / 3, 1.45),
    "paco": ({"name": "paco"}, 4 / 3, 1.45),
    "gpaco": ({"name": "gpaco"}, 2.0, 2.2),
}


def _build(method_section: dict):
    tree = {"method": method_section, "model": {"backbone": "resnet18_cifar", "head_hidden": 512, "head_dim": 128},
            "optim": {"batch_size": BATCH}, "data": {"name": "cifar100"}}
    cfg = build_config(tree, where="bench")
    info = DataInfo(num_classes=100, in_channels=3, fine_to_coarse=torch.tensor(CIFAR100_FINE_TO_COARSE),
                    class_counts=torch.full((100,), 500, dtype=torch.long))
    method = method_class(cfg.method.name)(cfg, info)
    method.train()
    opt = torch.optim.SGD(method.param_groups(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    bank = getattr(method, "bank", None)
    if bank is not None:  # a full bank of random keys with real labels, as after the first epoch
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():
            bank.features.copy_(torch.nn.functional.normalize(torch.randn(bank.features.shape, generator=gen), dim=1))
            bank.labels.copy_(torch.randint(0, 100, bank.labels.shape, generator=gen))
    return method, opt


def _stepper(method, opt, views, labels):
    def step() -> None:
        loss = run_step(method, Batch.of(views[: method.num_views], labels))["loss"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        method.after_backward()
        opt.step()

    return step


def _check_side_effects(method, step) -> tuple[bool, str]:
    from torch.profiler import ProfilerActivity, profile

    bank = method.bank
    ptrs = (bank.features.data_ptr(), bank.labels.data_ptr())
    start = int(bank.ptr)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    counts: dict[str, int] = {}
    for e in prof.events():
        counts[e.name] = counts.get(e.name, 0) + 1
    fused = counts.get("aten::_foreach_lerp_", 0)
    # On the CPU the foreach op loops over its tensors inside one call (multi-tensor fusion is a
    # CUDA kernel), so per-tensor lerp_ events are fine as its children; a Python loop is not.
    loose = sum(1 for e in prof.events() if e.name in ("aten::lerp_", "aten::lerp")
                and (e.cpu_parent is None or e.cpu_parent.name != "aten::_foreach_lerp_"))
    in_place = (bank.features.data_ptr(), bank.labels.data_ptr()) == ptrs
    advanced = int(bank.ptr) == (start + BATCH) % bank.size
    ok = fused == 2 and loose == 0 and in_place and advanced
    return ok, (f"_foreach_lerp_ calls per step: {fused} (backbone + head), per-tensor lerp: {loose}; "
                f"bank storage unchanged: {in_place}; pointer advanced by {BATCH}: {advanced}")


def run(rounds: int = 3) -> list[Row]:
    torch.set_num_threads(2)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    views = [torch.randn(BATCH, 3, 32, 32, generator=gen) for _ in range(2)]
    labels = torch.randint(0, 100, (BATCH,), generator=gen)
    steps = {}
    missing: list[str] = []
    errors: dict[str, str] = {}
    built = {}
    ce, ce_opt = _build({"name": "ce"})
    steps["ce"] = _stepper(ce, ce_opt, views, labels)

    def key_forward() -> None:  # what a momentum method adds: one train-mode forward, no grad
        with torch.no_grad():
            ce.backbone(views[1])

    steps["key_fwd"] = key_forward
    both = [torch.cat(views)]
    steps["ce_2x"] = _stepper(ce, ce_opt, both, torch.cat([labels, labels]))  # CE on 2 x 128 images
    for name, (section, _, _) in CASES.items():
        if section["name"] not in METHODS:
            missing.append(name)
            continue
        try:
            built[name] = _build(section)
        except Exception as err:  # report, and still time the others
            missing.append(name)
            errors[name] = f"{type(err).__name__}: {err}"
            continue
        steps[name] = _stepper(*built[name], views, labels)
    times = interleaved(steps, rounds, warmup=1)
    rows = []
    t_ce = median(times["ce"])
    # Measured floor of a momentum method on this machine: CE step + one no-grad forward.
    measured_floor = 1.0 + median([f / c for f, c in zip(times["key_fwd"], times["ce"], strict=True)])
    two_view_floor = paired_ratio(times, "ce_2x", "ce")
    for name, (_, floor, limit) in CASES.items():
        if name in missing:
            rows.append(Row(f"Method step: {name} / ce", "not measured", f"{floor:.2f}× CE", None, f"≤ {limit:g}×",
                            None, errors.get(name, f"method '{name}' is not in semcl.methods.METHODS yet")))
            continue
        ratio = paired_ratio(times, name, "ce")
        note = f"{ratio / floor:.2f}× its nominal floor"
        if floor < 2.0:
            note += f"; measured floor here (CE step + one no-grad fwd) = {measured_floor:.2f}×"
        else:
            note += f"; measured floor here (CE step on both views, batch {2 * BATCH}) = {two_view_floor:.2f}×"
        rows.append(Row(f"Method step: {name} / ce (ResNet-18, B={BATCH})", f"{median(times[name]):.2f} s/step",
                        f"{t_ce:.2f} s/step CE; floor {floor:.2f}×", ratio, f"≤ {limit:g}×", ratio <= limit, note))
    if "rince" in built:
        method, opt = built["rince"]
        ok, note = _check_side_effects(method, steps["rince"])
        rows.append(Row("Method side effects (rince): fused momentum, in-place bank", "see note", "—", None,
                        "fused + in place", ok, note))
    return rows


if __name__ == "__main__":
    for r in run():
        print(r)
