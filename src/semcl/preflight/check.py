"""Preflight: every distinct row config of a profile run through the whole pipeline once, on the CPU,
before any GPU-hour is spent (`semcl check`).

Per distinct config (seeds collapsed: the first seed's run; a config already checked for another
table is reported as the same): the synthetic stand-in of its datasets written in the real on-disk
layout (semcl.data.synthetic) and read back at the run's real input size (at REAL_STEP_SIZE where that is
larger: the fake step below has the full size), the real model (the real
class count, not the stand-in's), its dependencies (a base run, a teacher, ensemble members: the
rows checked before it, in a scratch store), one step of the engine's own training loop at a small batch
(the run harness, semcl.engine.harness, under a stand-in Env with a budget of 1 step: semcl.engine.train with the
same views, loader partners, autocast, loss scaling and gradient accumulation, capped at one cycle of 2 batches, as a
run; its checkpoint), that checkpoint read
back (semcl.runtime.checkpoint), and every evaluation of the run on the stand-in's few test images (probe
for one epoch). Nothing of the step is written twice: what is kept here is the measuring and the report.
Rows of one code path share the real step and rows of one memory shape the fake step; checks run in
parallel processes and passed ones are cached (semcl.preflight.plan, semcl.preflight.shapes, semcl.preflight.pool).

GPU memory, full-size checks: one more step of a fake-tensor copy of the checked method at the row's real batch
per GPU, its peak followed by a live-storage counter (semcl.preflight.live_bytes; parameters, gradients, the row's
optimiser state, activations, temporaries; HSA's kNN mining at the real training-set size), plus CONTEXT_GB
(semcl.preflight.fake). A method that cannot run faked keeps the formula below, and the report says why. The
formula (also the reduced check's):

Activation memory per sample is measured, not guessed: the bytes of the tensors autograd saves for
backward during the training step (torch.autograd.graph.saved_tensors_hooks, storages counted once),
divided by the batch. The GPU memory estimate for the batch per GPU the entry asks for:

    mem = state + (grad + optimiser state) + activations * batch_per_gpu + CONTEXT_GB
        state = bytes of state_dict() (weights, buffers, queues, momentum encoders)
        grad + optimiser state = trainable parameter bytes * (1 + slots), slots 1 (SGD momentum), 2 (Adam)
        batch_per_gpu = optim.batch_size / max(1, resources.gpus)  (with AMP the activations halve)

against the cluster profile's `gpu_mem_gb`. A CPU estimate of a GPU's peak: cuDNN workspaces and
allocator fragmentation are covered only by the fixed CONTEXT_GB, so treat "fits" within ~10% as marginal.
"""

from __future__ import annotations

import dataclasses
import math
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from semcl.preflight.report import RowCheck

CONTEXT_GB = 1.5  # CUDA context + cuDNN/cuBLAS workspaces, a measured-on-A100 order of magnitude
ADAM_LIKE = ("adam", "adamw", "lamb", "lars")


@dataclass(frozen=True)
class Reduce:
    """What a reduced (CI) preflight shrinks; None keeps the entry's value."""

    backbone: str | None = None  # e.g. resnet_tiny: the width and depth
    image_size: int | None = None  # file-backed sets' decode size
    head_hidden: int | None = None
    head_dim: int | None = None
    drop_pretrained: bool = False  # a user-supplied weights file (model.pretrained) is not needed
    # method fields that name a network or a weights file, replaced where the row's method has the field
    # (ViTs, video and segmentation networks are method knobs, not model.backbone)
    method: dict | None = None

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in dataclasses.asdict(self).items() if v is not None]
        return ", ".join(parts) or "nothing"


def _replace(cfg, **dotted):
    """A copy of the run config with dotted keys replaced (sections are dataclasses)."""
    sections: dict[str, dict] = {}
    for key, value in dotted.items():
        section, name = key.split(".", 1)
        sections.setdefault(section, {})[name] = value
    return dataclasses.replace(cfg, **{s: dataclasses.replace(getattr(cfg, s), **kw) for s, kw in sections.items()})


# The small real step's input side where the row's is larger (file-backed sets at 224 px, video frames, segmentation
# crops). What that step is for (finite values, the checkpoint read back, the readers, every evaluation) is the same
# code at 64 px, at ~1/12 of a 224-px network's arithmetic (a cold `--all --profile paper` spent most of its time
# there); the row's own size is what the memory check's fake step runs at full batch (shapes and peak,
# semcl.preflight.fake). 64: the smallest side at which every network here still has a spatial map to pool
# (a ResNet's 32x stride: 2 x 2; ViT/16: 4 x 4 patches, its position embeddings built for that grid).
REAL_STEP_SIZE = 64


# The small real step's gradient accumulation where the row's is longer: one cycle of 2 batches runs every branch of
# the accumulation (semcl.preflight.shapes.code_of: rows differing above it share one real step).
REAL_STEP_ACCUM = 2


def real_step_size(run, reduce: Reduce | None) -> int | None:
    """The side the row's small real step decodes at when smaller than the row's own (REAL_STEP_SIZE); None where it
    is the row's own (in-memory sets at their native size, a reduced CI check)."""
    from semcl.data.registry import DATASETS

    d = run.config.data
    spec = DATASETS[d.name]
    if reduce is not None or (d.image_size is None and not spec.file_backed):
        return None
    return REAL_STEP_SIZE if (d.image_size or spec.size) > REAL_STEP_SIZE else None


def own_side(run) -> int | None:
    """The row's own input side (data.image_size, else a file-backed set's decode size); None: an in-memory set at
    its native size."""
    from semcl.data.registry import DATASETS

    d = run.config.data
    spec = DATASETS[d.name]
    return d.image_size or (spec.size if spec.file_backed else None)


def reductions(run, reduce: Reduce | None) -> str | None:
    """What the row's small real step and its evaluations run below the row's own config, in words (the report's
    `reduced`; the fake step runs the row's own: semcl.preflight.fake); None where nothing per row is."""
    parts = []
    if (side := real_step_size(run, reduce)) is not None:
        parts.append(f"input {own_side(run)}→{side} px for the real step and evaluations")
    if (accum := run.config.optim.accum_steps or 1) > REAL_STEP_ACCUM:
        parts.append(f"gradient accumulation {accum}→{REAL_STEP_ACCUM} batches")
    return "; ".join(parts) or None


def check_config(run, reduce: Reduce | None, batch: int, train_per_class: int = 2, full_size: bool = False):
    """The run's config as the preflight runs it: synthetic data (`train_per_class` training and 1 test
    image per stand-in class, more where an evaluation's quick run needs it: Evaluation.quick_test_per_class),
    the small batch (a fixed-structure batch shrunk to it: StandIn.batch), a one-epoch probe, each
    evaluation's quick settings (Evaluation.quick: 8 OOD images, 1 image per robustness set, 2 clips per test
    video, latency timed once), images at real_step_size unless `full_size` (the memory check's); `reduce` shrinks
    model and images (CI)."""
    from semcl.models.backbones import BACKBONES

    d = run.config.data
    over = {"data.synthetic": True, "data.synthetic_train_per_class": train_per_class,
            "data.synthetic_test_per_class": 1,
            "optim.batch_size": min(batch, run.config.optim.batch_size), "probe.epochs": 1,
            "data.train_per_class": None, "data.test_limit": None, "data.imbalance_factor": None}
    from semcl.evals.protocols import EVALUATIONS

    for spec in EVALUATIONS.values():  # each evaluation's own quick settings (Evaluation.quick)
        if spec.quick is not None:
            over.update({f"eval.{name}": value for name, value in spec.quick(run.config.eval).items()})
        used = spec.settings is not None and any(getattr(run.config.eval, f.name, None)
                                                 for f in dataclasses.fields(spec.settings))
        if used and spec.quick_test_per_class > over["data.synthetic_test_per_class"]:  # e.g. alignment's pairs
            over["data.synthetic_test_per_class"] = spec.quick_test_per_class
    if getattr(run.config.probe, "milestones", None) is not None:
        over["probe.milestones"] = []
    if not full_size and (side := real_step_size(run, reduce)) is not None:
        over["data.image_size"] = side
    if (run.config.optim.accum_steps or 1) > REAL_STEP_ACCUM:
        over["optim.accum_steps"] = REAL_STEP_ACCUM
    from semcl.methods.registry import METHODS

    # a fixed-structure batch in the small batch's size (StandIn.batch), not a retry at the full one
    fields = METHODS[run.config.method.name].stand_in.batch_of(run.config, over["optim.batch_size"])
    over.update({f"method.{name}": value for name, value in fields.items()})
    if reduce is not None:
        # the KD families name their own networks (semcl.models.kd): those stay
        backbone = reduce.backbone if run.config.model.backbone in BACKBONES else None
        for key, value in (("model.backbone", backbone), ("model.head_hidden", reduce.head_hidden),
                           ("model.head_dim", reduce.head_dim)):
            if value is not None:
                over[key] = value
        if reduce.drop_pretrained:
            over["model.pretrained"] = None
        from semcl.data.registry import DATASETS

        # file-backed sets decode at their real size when data.image_size is unset (segmentation: 512)
        if reduce.image_size is not None and (d.image_size is not None or DATASETS[d.name].file_backed):
            over["data.image_size"] = reduce.image_size
        schema_fields = {f.name for f in dataclasses.fields(run.config.method)}
        for field_name, value in (reduce.method or {}).items():
            if field_name in schema_fields:  # a reduction knob applies to the methods whose schema has it
                over[f"method.{field_name}"] = value
    return _replace(run.config, **{k: v for k, v in over.items() if hasattr(getattr(run.config, k.split(".")[0]),
                                                                           k.split(".")[1])})


def _where(table, err: BaseException) -> str:
    """The error as one line, with the table's file in front unless it already names a file."""
    text = f"{type(err).__name__}: {err}".splitlines()[0]
    tb = traceback.extract_tb(err.__traceback__)
    origin = f" [{Path(tb[-1].filename).name}:{tb[-1].lineno}]" if tb else ""
    return text + origin if "/" in text.split(":")[0] else f"{table.path}: {text}{origin}"


def _saved_bytes():
    """A context manager counting the bytes autograd saves for backward (each storage once)."""
    import torch

    seen: dict[int, int] = {}

    def pack(t: torch.Tensor):
        try:
            st = t.untyped_storage()
            seen[st.data_ptr()] = max(seen.get(st.data_ptr(), 0), st.nbytes())
        except (RuntimeError, NotImplementedError):  # sparse / nested tensors: count their elements
            seen[id(t)] = t.numel() * t.element_size()
        return t

    return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), seen


def check_run(run, table, store, resources, gpu_mem_gb: float | None, *, reduce: Reduce | None = None,
              batch: int = 4, for_dependents: bool = True, fake: bool | None = None,
              memory_only: bool = False, dep_runs: tuple = ()) -> RowCheck:
    """Run one config through the pipeline (module docstring); never raises: the first error is in
    the result, and the run's scratch folder holds what its dependents need (checkpoint, logits).
    A method whose batch has a fixed structure (hierarchical triplet: l' + l'c + t = batch) refuses
    the small batch; it is checked again at the entry's batch, on enough stand-in images. `for_dependents`
    False (no row of the check builds on this one): the BN-calibrated checkpoint and the test logits, which only
    dependents read, are not written again; the engine's own checkpoint and its read-back are. `fake` (default:
    a full-size check, `reduce` None): the GPU memory is measured by a fake-tensor step at the real batch per GPU
    (semcl.preflight.fake), the formula being the fallback. `memory_only` (a row whose code path another row's
    real step covered, semcl.preflight.shapes.code_key): the data, the model and the engine up to its first
    batch, then the fake step alone; no real step, checkpoint or evaluation. A method that cannot run faked
    gets the whole check (its formula needs the real step's activations)."""
    from semcl.runtime.checkpoint import scratch_writes

    fake = reduce is None if fake is None else fake
    with scratch_writes():
        if memory_only and fake:
            out = _check_with_retry(run, table, store, resources, gpu_mem_gb, reduce, batch, False, True, True, True,
                                    dep_runs)
            if out.error is not None or out.est_gpu_gb is not None:
                return out
            # the fake step failed: the formula's whole check at the row's own size, without faking again
            whole = _check_with_retry(run, table, store, resources, gpu_mem_gb, reduce, batch, for_dependents, False,
                                      False, True, dep_runs, full_size=True)
            return dataclasses.replace(whole, fake_note=out.fake_note, seconds=whole.seconds + out.seconds)
        # a real step below the row's size measures no memory: its memory check does (semcl.preflight.plan)
        fake = fake and real_step_size(run, reduce) is None
        return _check_with_retry(run, table, store, resources, gpu_mem_gb, reduce, batch, for_dependents, fake,
                                 False, memory_only, dep_runs)


def _check_with_retry(run, table, store, resources, gpu_mem_gb, reduce, batch: int, for_dependents: bool,
                      fake: bool, memory_only: bool = False, private: bool = False, dep_runs: tuple = (),
                      full_size: bool = False) -> RowCheck:
    full_size = full_size or memory_only
    out = _check_run(run, table, store, resources, gpu_mem_gb, reduce, batch, stand_in_images_per_class(run), for_dependents,
                     fake, memory_only, private, dep_runs, full_size)
    if out.error and "optim.batch_size" in out.error and run.config.optim.batch_size > batch:
        from semcl.data.registry import DATASETS

        want = run.config.optim.batch_size
        per_class = -(-want // DATASETS[run.config.data.name].synthetic_classes) + 1
        out = _check_run(run, table, store, resources, gpu_mem_gb, reduce, want, per_class, for_dependents, fake,
                         memory_only, private, dep_runs, full_size)
    return out


def stand_in_images_per_class(run) -> int:
    """2 training images per stand-in class, or enough for a neighbour search over k of them (HSA's k 40
    on the 20 stand-in classes needs more than 40 images), or what the method's spec declares (StandIn.per_class:
    SCNS-instance's teacher pass over every image)."""
    from semcl.data.registry import DATASETS
    from semcl.methods.registry import METHODS

    needs, classes = METHODS[run.config.method.name].stand_in, DATASETS[run.config.data.name].synthetic_classes
    declared = needs.per_class_of(run.config, classes)
    if declared is not None:
        return declared
    k = needs.neighbours_of(run.config.method)
    return max(2, -(-(k + 1) // classes) + 1)


def _calibrate_norm(method, views) -> None:
    """BN running statistics from the step's batch (cumulative average) before the evaluation. After one
    step they are still about the init's (mean 0, var 1), under which a deep net's eval forward overflows
    (ResNet-200: NaN logits) though its training step is fine; a real run's statistics come from epochs."""
    import torch

    x = views[0] if isinstance(views, (list, tuple)) else views
    bns = [m for m in method.modules()
           if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
    if not bns or not isinstance(x, torch.Tensor):
        return
    momenta = [m.momentum for m in bns]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    method.train()
    with torch.no_grad():
        method.features(x)
    for m, momentum in zip(bns, momenta, strict=True):
        m.momentum = momentum


@contextmanager
def _cpu_half_as_bf16():
    """Inside the engine's fp16 autocast on the CPU, bf16 instead: the CPU has no fast fp16 kernels (a ResNet-200
    step took ~15 min, a conv ~140x its float32 time), while bf16 saves the same 2 bytes per activation and
    the GradScaler (enabled by optim.amp fp16) still scales, steps and is checkpointed."""
    import torch

    if torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.float16:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            yield
    else:
        yield


class FirstBatch(Exception):
    """Raised by a memory-only check's step hook once the engine has made its first batch: the step itself
    is not run."""


class StepMeter:
    """The dry run's step hook (semcl.engine.harness): the bytes autograd saves in the first step's
    forward, its batch size and views (for the BN calibration); later steps pass through. Every step's
    fp16 autocast runs as bf16 on the CPU (_cpu_half_as_bf16)."""

    def __init__(self, stop: bool = False) -> None:
        self.stop = stop  # a memory-only check: the first batch is kept and the step is not run (FirstBatch)
        self.bytes: int | None = None
        self.batch = 0
        self.views = None
        self.first = None  # the first step's Batch (the fake step's structure and image size)

    @contextmanager
    def step(self, batch):
        if self.views is not None:
            with _cpu_half_as_bf16():
                yield
            return
        if self.stop:
            self.batch, self.views, self.first = len(batch.labels), batch.views, batch
            raise FirstBatch
        hooks, saved = _saved_bytes()
        with hooks, _cpu_half_as_bf16():
            yield
        self.bytes, self.batch, self.views, self.first = sum(saved.values()), len(batch.labels), batch.views, batch


def _check_run(run, table, store, resources, gpu_mem_gb, reduce, batch: int, per_class: int,
               for_dependents: bool = True, fake: bool = False, memory_only: bool = False,
               private: bool = False, dep_runs: tuple = (), full_size: bool = False) -> RowCheck:
    """The run harness (semcl.engine.harness) under a stand-in Env: data and model as the engine's job builds them
    (on the stand-in), the engine's own training loop for one step (semcl.engine.train: loader workers' views and
    partners, autocast, loss scaling, gradient accumulation, its checkpoint), the checkpoint read back, and the
    engine's evaluation on a few images."""
    import torch

    from semcl.engine.harness import Env, RunHarness
    from semcl.estimate.workload import train_samples
    from semcl.methods.registry import method_spec
    from semcl.runtime.checkpoint import load as load_ckpt
    from semcl.runtime.checkpoint import restore, save_atomic
    from semcl.runtime.precision import effective_config

    out = RowCheck(table.id, run.row_label, run.run_id, gpus=resources.gpus, gpu_mem_gb=gpu_mem_gb)
    t0 = time.time()
    missing = None
    try:
        # `fast`: as the engine trains it
        cfg, missing = _without_missing_weights(effective_config(check_config(run, reduce, batch, per_class,
                                                                              full_size=full_size)))
        d = cfg.data
        out.batch_per_gpu = run.config.optim.batch_size / max(1, resources.gpus)
        folder = store.folder(run.run_id)
        # `private`: a memory check of a row whose run folder is its code path's (semcl.preflight.plan aliases it):
        # its own checkpoint elsewhere, no record (its dependents read the real step's)
        own = store.folders.memory / run.run_id if private else folder.path
        own.mkdir(parents=True, exist_ok=True)
        for_dependents = for_dependents and not private
        # one stand-in root per training set: stand-ins that share a folder (full ImageNet, ImageNet-100)
        # would otherwise read each other's classes
        pairs = d.synthetic_test_per_class  # > 1 where an evaluation needs same-class test pairs (check_config)
        root = store.root / (f"data{per_class}" + (f"-test{pairs}" if pairs > 1 else "")) / d.name
        ckpt = own / folder.checkpoint.relative_to(folder.path) if private else folder.checkpoint
        harness = RunHarness(run, Env(root, ckpt, torch.device("cpu"), splits=_stand_in_splits, stand_in=True,
                                      fake=memory_only, budget=1, eval_subset=_few_images), cfg)
        cls, deps = harness.method_class(store)
        if private and dep_runs:  # the folders are another network's (the code path's real step): fresh weights
            deps = _fresh_dependencies(deps, dep_runs, reduce, store)
        spec = method_spec(cfg.method.name)
        if spec.computed_metrics(cfg, deps) is not None:  # no model of its own: an ensemble, detectron2
            _memory_without_a_step(out, run)
            if not private:
                store.write_record(run.run_id, {"run_id": run.run_id, "metrics": {}})
            return out
        _ensure_stand_in(cfg, root, per_class)
        train_set, test_set = harness.data()
        method = harness.build(cls, deps, train_set)
        spec.stand_in.write_files(method, root)  # e.g. a stand-in MAE checkpoint: the loading code runs at full size
        out.params = sum(p.numel() for p in method.parameters())
        out.trainable = sum(p.numel() for p in method.parameters() if p.requires_grad)
        if not full_size:
            out.real_step_px = real_step_size(run, reduce)
        if memory_only:
            _memory_only(out, harness, test_set)
            return out
        meter = StepMeter()
        history = harness.train(hooks=(meter,))
        opt = method.configure_optimizer(cfg.optim)  # a fresh one: its state comes from the checkpoint
        if history:
            if not math.isfinite(history[-1]["loss"]):
                raise FloatingPointError(f"loss is {history[-1]['loss']} after one step")
            out.act_bytes_per_sample = meter.bytes / max(1, meter.batch)
            state = load_ckpt(ckpt)  # the engine's checkpoint, read back as a resume reads it
            restore(method, state["method"], ckpt)
            restore(opt, state["optimizer"], ckpt)
            if fake:
                _fake_estimate(out, method, cfg, opt, meter.first, train_samples(run.config))
            # rows that build on this one (a KD teacher in eval mode) read these statistics from the checkpoint
            _calibrate_norm(method, meter.views)
            if for_dependents:
                save_atomic({**state, "method": method.state_dict()}, ckpt)
        else:  # nothing trains (e.g. tau-norm): the checkpoint is the weights alone
            save_atomic({"method": method.state_dict()}, ckpt)
        metrics = harness.evaluate(train_set, test_set, logits_path=folder.logits if for_dependents else None)
        if not private:
            store.write_record(run.run_id, {"run_id": run.run_id, "metrics": metrics})
        if out.real_step_px is None:  # else a step below the row's size: its memory check has the figure
            # measured at the real batch; the formula is the fallback
            out.est_gpu_gb = out.fake_gpu_gb if out.fake_gpu_gb is not None else \
                estimate_gpu_gb(method, cfg, opt, out.act_bytes_per_sample or 0.0, out.batch_per_gpu)
        # the per-stage probes (HSA Fig. 3) train on the fly: the larger of the two peaks
        if cfg.eval.stage_probe and out.est_gpu_gb is not None:
            from semcl.evals.stage_probe import stage_probe_gpu_gb

            out.est_gpu_gb = max(out.est_gpu_gb, stage_probe_gpu_gb(method, cfg, test_set.images, CONTEXT_GB))
    except Exception as err:  # the report's one line; the traceback is not the user's business here
        out.error = _where(table, err)
    finally:  # also on the early returns (a memory-only check, an ensemble)
        out.seconds = time.time() - t0
        if missing is not None and out.error is None:
            out.error = f"{table.path}: {missing}"
    return out


def _ensure_stand_in(cfg, root: Path, per_class: int) -> Path:
    """The stand-in of the row's datasets in their real layout (semcl.data.synthetic), written once per root."""
    from semcl.data.synthetic import ensure_synthetic

    return ensure_synthetic(root, [cfg.data.name, *cfg.eval.ood], train_per_class=per_class,
                            test_per_class=cfg.data.synthetic_test_per_class)


def _stand_in_splits(cfg, root: Path):
    """(train, test) of a stand-in root (the harness's Env.splits): the test split's first 8 images (segmentation:
    1 scene; its multi-scale + flip pass at full size took ~14 min for 8 on one core), 8 classes' worth where the
    stand-in holds several test images a class (Evaluation.quick_test_per_class)."""
    import torch

    d = cfg.data
    train_set = _stand_in(d.name, root, "train", d.image_size)
    test_set = _stand_in(d.name, root, d.test_split or "test", d.image_size)
    first = min(1 if cfg.eval.seg_scales else 8 * d.synthetic_test_per_class, len(test_set.labels))
    return train_set, test_set.subset(torch.arange(first))


def _few_images(train_set, test_set):
    """The evaluations' subset (the harness's Env.eval_subset): one training image per class of up to
    EVAL_TRAIN_IMAGES classes, the stand-in's test images (8; segmentation: 1) and 8 OOD images (check_config)."""
    return train_set.subset(_few(train_set.labels)), test_set


# The evaluations' training images: one per class, as many classes as the large sets' stand-ins have (20 of
# ImageNet's 1,000). Every class of CIFAR-100 or Tiny-ImageNet (100, 200) ran the same code at 5-10x the forwards
# (each evaluation encodes them; rince/tab1's probe and retrieval were 7.6 of a row's 12 s).
EVAL_TRAIN_IMAGES = 20


def _few(labels):
    """Sorted indices of the evaluations' training images: one per class (select_per_class), at most
    EVAL_TRAIN_IMAGES, spread evenly over the classes."""
    import torch

    from semcl.data import select_per_class

    picked = select_per_class(labels, 1, seed=0)
    if len(picked) <= EVAL_TRAIN_IMAGES:
        return picked
    return picked[torch.linspace(0, len(picked) - 1, EVAL_TRAIN_IMAGES).round().long()]


def _memory_without_a_step(out: RowCheck, run) -> None:
    """The figure of a row with no step of ours: another program's published peak (MethodSpec.external_job; plus
    CONTEXT_GB, which a published allocator peak leaves out, as the fake step's does), or none on a GPU at all
    (MethodSpec.on_gpu: a logit ensemble)."""
    from semcl.methods.registry import METHODS

    spec = METHODS[run.config.method.name]
    if spec.external_job is not None:
        job = spec.external_job(run.config.method)
        out.est_gpu_gb = job.mem_gb + CONTEXT_GB
        out.memory_note = f"memory: published {job.mem_gb:g} GB per GPU ({job.source}; another program's step)"
    elif not spec.on_gpu:
        out.est_gpu_gb, out.batch_per_gpu = 0.0, None
        out.memory_note = "no GPU: sums the members' saved logits on the CPU"


def _memo(cache: dict, key, limit: int, make):
    """cache[key], made by make() on a miss; at `limit` entries the oldest goes (a worker moves from one set, or one
    teacher, to the next)."""
    if key not in cache:
        if len(cache) >= limit:
            cache.pop(next(iter(cache)))
        cache[key] = make()
    return cache[key]


_STAND_INS: dict[tuple, object] = {}  # this process's decoded stand-in splits (a worker runs many checks of one set)


def _stand_in(name: str, root: Path, split: str, size: int | None):
    """semcl.data.load of a stand-in split, decoded once per process: a stand-in root is written once and read
    by every check of its set (kd-tinyimagenet's ~230 memory checks decoded the same JPEGs 3 times each). A
    shallow copy each time, so a check that rebinds a field of its set does not reach the next check."""
    import copy

    from semcl.data import load

    key = (name, str(root), split, size)
    return copy.copy(_memo(_STAND_INS, key, 16, lambda: load(name, root, split, size)))


def _without_missing_weights(cfg) -> tuple:
    """(cfg, None), or, where the row's user-supplied weights file (`model.pretrained`) is not there, (cfg on random
    weights, why). The preflight checks such a row on random weights (the step, the evaluations and the memory figure
    do not depend on the values) and reports the file as the row's error: the run needs it."""
    path = getattr(cfg.model, "pretrained", None)
    if not path or Path(path).expanduser().is_file():
        return cfg, None
    return _replace(cfg, **{"model.pretrained": None}), (
        f"key 'model.pretrained': {path} is not there (user-supplied weights, never downloaded; "
        "checked on random weights, the memory figure stands)")


def _fresh_dependencies(deps: list, dep_runs: tuple, reduce, store) -> list:
    """`deps` whose weights are a fresh build of their own run's method (a memory check's teacher or base run:
    its network is the row's, its checkpoint on disk may be another network's; the values do not change a peak)."""
    by_id = {r.run_id: r for r in dep_runs}
    return [dataclasses.replace(d, load_state=lambda r=by_id[d.run_id]: _fresh_state(r, reduce, store))
            if d.run_id in by_id else d for d in deps]


_FRESH: dict[tuple, dict] = {}  # this process's fresh dependency states (a worker checks a teacher's ~19 students in turn)


def _fresh_state(run, reduce, store) -> dict:
    """A fresh build's state of `run`'s method, built once per process (the states are only read: load_state_dict
    copies them; a rebuild was ~0.1 s of each KD memory check)."""
    return _memo(_FRESH, (run.run_id, repr(reduce), str(store.root)), 4,
                 lambda: _build_fresh_state(run, reduce, store))


def _build_fresh_state(run, reduce, store) -> dict:
    from semcl.data.registry import DATASETS
    from semcl.data.synthetic import ensure_synthetic
    from semcl.engine.harness import stand_in_info
    from semcl.methods.registry import METHODS
    from semcl.runtime.precision import effective_config

    per_class = stand_in_images_per_class(run)
    # as the memory check builds it; a missing weights file is reported by the row's own check
    cfg, _ = _without_missing_weights(effective_config(check_config(run, reduce, 4, per_class, full_size=True)))
    d = cfg.data
    root = ensure_synthetic(store.root / f"data{per_class}" / d.name, [d.name, *cfg.eval.ood],
                            train_per_class=per_class, test_per_class=1)
    train_set = _stand_in(d.name, root, "train", d.image_size)
    method = METHODS[run.config.method.name].load()(cfg, stand_in_info(train_set, DATASETS[d.name].num_classes))
    return method.state_dict()


def _memory_only(out: RowCheck, harness, test_set) -> None:
    """The engine up to its first batch (on_train_start, the epoch's start: a teacher pass, HSA's mining on the
    stand-in), then the fake step at the real batch (check_run's `memory_only`). The optimiser's state is made by a
    real step on zero gradients (resident during a mining; the fake step starts from its fakes: semcl.preflight.fake)."""
    from semcl.estimate.workload import train_samples
    from semcl.preflight.fake import mining_search, warm_optimizer

    method, cfg, run = harness.method, harness.cfg, harness.run
    meter = StepMeter(stop=True)
    try:
        harness.train(hooks=(meter,))
    except FirstBatch:
        pass
    opt = method.configure_optimizer(cfg.optim)
    if meter.first is None:  # nothing trains (tau-norm): the formula on the weights, as the whole check has it
        out.est_gpu_gb = estimate_gpu_gb(method, cfg, opt, 0.0, out.batch_per_gpu)
        return
    # a real step on zero gradients makes the optimiser's state: what stays resident during a mining, and what the
    # fake step takes as fakes (cheaper than a faked warm step, except a fused optimiser's: a few ops faked, a
    # real pass over every weight; the fake step then warms its own). It moves this throwaway copy's weights.
    if mining_search(method) is not None or not any(g.get("fused") for g in opt.param_groups):
        warm_optimizer(opt)
    _fake_estimate(out, method, cfg, opt, meter.first, train_samples(run.config))
    if out.fake_gpu_gb is None:  # check_run runs the whole check for the formula
        return
    out.est_gpu_gb = out.fake_gpu_gb
    if cfg.eval.stage_probe:
        from semcl.evals.stage_probe import stage_probe_gpu_gb

        out.est_gpu_gb = max(out.est_gpu_gb, stage_probe_gpu_gb(method, cfg, test_set.images, CONTEXT_GB))


def _fake_estimate(out: RowCheck, method, cfg, opt, batch, n_train: int) -> None:
    """The step's (and mining's) peak at the row's real batch per GPU under fake tensors (semcl.preflight.fake)
    into `out`; where the method cannot run faked, the reason, and `out` keeps the formula's estimate."""
    from semcl.preflight.fake import fake_peak

    size = max(1, math.ceil(out.batch_per_gpu or 1))
    try:
        peak = fake_peak(method, cfg, opt, batch, size, n_train)
    except Exception as err:  # noqa: BLE001 - any op fake tensors cannot run: this row falls back
        out.fake_note = f"fake step failed ({type(err).__name__}: {str(err).splitlines()[0][:120] if str(err) else ''})"
        return
    out.fake_gpu_gb = peak.peak_bytes / 2**30 + CONTEXT_GB
    out.fake_seconds = peak.seconds
    if peak.mining_bytes is not None:
        out.mining_gpu_gb = peak.mining_bytes / 2**30 + CONTEXT_GB


def estimate_gpu_gb(method, cfg, opt, act_per_sample: float, batch_per_gpu: float) -> float:
    """The formula of the module docstring, in GiB."""
    state = sum(t.numel() * t.element_size() for t in method.state_dict().values() if hasattr(t, "numel"))
    trainable = sum(p.numel() * p.element_size() for p in method.parameters() if p.requires_grad)
    slots = 2 if opt is not None and type(opt).__name__.lower() in ADAM_LIKE else 1
    grads = trainable * (1 + slots) if opt is not None else 0
    act = act_per_sample * batch_per_gpu * (0.5 if getattr(cfg.optim, "amp", None) else 1.0)
    return (state + grads + act) / 2**30 + CONTEXT_GB


def distinct_runs(table, profile: str) -> list:
    """One run per implemented row (its first seed), plus the runs it builds on, bases first."""
    from semcl.registry.plan import plan_runs

    runs = plan_runs(table, profile)
    first = table.seeds_for(profile)[0]
    wanted = {r.run_id for r in runs if r.seed == first}
    by_id = {r.run_id: r for r in runs}
    stack = list(wanted)
    while stack:  # dependencies may sit on other seeds (ensembles of repeats)
        for dep in by_id[stack.pop()].depends_on:
            if dep not in wanted:
                wanted.add(dep)
                stack.append(dep)
    return [r for r in runs if r.run_id in wanted]


@dataclass(frozen=True)
class TableRef:
    """What a check needs of its table (picklable, for the worker processes)."""

    id: str
    path: Path


def check_task(run, table: TableRef, work: Path, resources, gpu_mem_gb, reduce, batch: int,
                for_dependents: bool, memory_only: bool = False, dep_runs: tuple = ()) -> RowCheck:
    from semcl.store import Store

    return check_run(run, table, Store(work), resources, gpu_mem_gb, reduce=reduce, batch=batch,
                     for_dependents=for_dependents, memory_only=memory_only, dep_runs=dep_runs)


def real_step_cost(run) -> float:
    """A check's relative cost, for the pool's order: the row's model time per training sample (semcl.estimate.gpu_hours;
    the same networks, views and input size as the check's step), 0 where it cannot be told."""
    from semcl.estimate.gpu_hours import seconds_per_sample

    try:
        return seconds_per_sample(run.config)
    except Exception:  # noqa: BLE001 - an order hint only; the check itself reports the row's error
        return 0.0


def sample_runs(runs: list, per_method: int, seen_methods: set[str]) -> list:
    by_id = {r.run_id: r for r in runs}
    counts: dict[str, int] = {}
    keep: set[str] = set()
    for i, r in enumerate(runs):
        name = r.config.method.name
        if (name not in seen_methods and counts.get(name, 0) < per_method) or (i == 0 and not keep):
            counts[name] = counts.get(name, 0) + 1
            stack = [r.run_id]
            while stack:
                rid = stack.pop()
                if rid not in keep:
                    keep.add(rid)
                    stack.extend(d for d in by_id[rid].depends_on if d in by_id)
    seen_methods.update(counts)
    return [r for r in runs if r.run_id in keep]
