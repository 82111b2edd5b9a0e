"""`semcl plan`'s GPU-hour estimate of one paper-profile run, from the row's own networks.

Wall time of training = epochs x max(model time, loader time) per epoch, where
- model time: each network the row runs, per training sample: its passes (the method's `train_cost` in
  fwd+bwd units; a KD student's cost beyond its own pass runs at
  its teacher's rate) / its fwd+bwd rate on one A100 at the row's
  precision (measured where timm has the network, semcl.estimate.throughput; else the FLOP formula: training FLOPs /
  the sustained FLOP/s of the ResNet-50 anchor), x the data-parallel scaling efficiency of the GPUs it holds;
  A published whole run of the network (and method) sets its rate where the table has one; no step is faster
  than the per-step host floor (semcl.estimate.throughput);
- loader time: samples / (GPUs x workers per GPU x one worker's measured rate); workers = cpus_per_gpu - 1.
Evaluation (linear probe epochs, feature passes for kNN / retrieval / OOD, test sets, robustness sets, video
clips) runs forwards (1/3 of fwd+bwd) on the evaluation GPU, bounded by a single-view loader likewise.
GPU-hours = training wall time x GPUs held + evaluation wall time x 1 GPU.
A run whose GPU work is another program's (MethodSpec.external_job: detectron2) costs that program's published
seconds per iteration x iterations x trials; one that computes on the CPU alone (MethodSpec.on_gpu: a logit
ensemble) costs no GPU-hour.
"""

from __future__ import annotations

from dataclasses import dataclass

from semcl.data.registry import DATASETS
from semcl.data.views.recipes import parse_augment
from semcl.estimate import throughput
from semcl.estimate.catalog import BACKBONE_GFLOPS, VIDEO_GMACS, VIT_GMACS
from semcl.estimate.workload import networks, train_samples
from semcl.methods.registry import METHODS

# catalog entries counted as fwd+bwd FLOPs (scripts/count_kd_gflops.py); the others are 3 x forward GMACs
COUNTED_FLOPS = frozenset({
    "resnet8", "resnet14", "resnet20", "resnet32", "resnet44", "resnet56", "resnet110", "resnet8x4", "resnet32x4",
    "ResNet50", "wrn_16_1", "wrn_16_2", "wrn_40_1", "wrn_40_2", "vgg8", "vgg11", "vgg13", "vgg16", "vgg19",
    "MobileNetV2", "ShuffleV1", "ShuffleV2"})
ROBUSTNESS_SIZES = {"imagenet_c": "imagenet_c", "imagenet_r": "imagenet_r", "imagenet_sketch": "imagenet_sketch"}


@dataclass(frozen=True)
class Estimate:
    gpus: int
    train_wall_h: float
    eval_wall_h: float
    bound: str  # what sets the training pace: "model", "loader"; "published" (ExternalJob), "cpu" (no GPU work)

    @property
    def gpu_hours(self) -> float:
        return self.train_wall_h * self.gpus + self.eval_wall_h


def train_flops(name: str) -> float:
    """FLOPs of one fwd+bwd of a catalog backbone at the size it is used with (10 GFLOPs-units if unknown)."""
    value = BACKBONE_GFLOPS.get(name, 10.0)
    return value * 1e9 if name in COUNTED_FLOPS else 2 * value * 1e9  # GMACs -> FLOPs


def network_rate(cfg, network: str | None = None) -> float:
    """fwd+bwd samples/s of one A100 on the row's trained network (or `network`, a catalog backbone)."""
    amp = bool(cfg.optim.amp) or cfg.optim.precision == "fast"
    nets = networks(cfg)
    info = DATASETS.get(cfg.data.name)
    target = network or (nets.trained if nets.family in ("vit", "video") else cfg.model.backbone)
    published = throughput.published_rate(target, cfg.method.name, amp)
    if published is not None:  # a whole published run of this network (and method) beats any formula
        rate, size = published
        side = cfg.data.image_size or (224 if nets.family == "vit" else info.size if info else 224)
        return rate * (size / side) ** 2
    if network is None and nets.family == "vit" and nets.trained in VIT_GMACS:
        side = cfg.data.image_size or 224
        rate = throughput.measured_rate(nets.trained, amp)
        if rate is not None:
            return rate * (224 / side) ** 2
        return throughput.sustained_flops(amp) / (6e9 * VIT_GMACS[nets.trained] * (side / 224) ** 2)
    if network is None and nets.family == "video" and nets.trained in VIDEO_GMACS:
        side = cfg.data.image_size or 112
        return throughput.sustained_flops(amp) / (6e9 * VIDEO_GMACS[nets.trained] * nets.frames / 16 * (side / 112) ** 2)
    name = network or cfg.model.backbone
    side = cfg.data.image_size or (info.size if info else 224)
    rate = throughput.measured_rate(name, amp) if side >= 64 else None  # timm rows: ImageNet-size inputs
    if rate is not None:
        return rate * (224 / side) ** 2
    return throughput.sustained_flops(amp) / train_flops(name)


def seconds_per_sample(cfg) -> float:
    """GPU-seconds of model time per training sample on one A100 (every network the row runs)."""
    spec, m, nets = METHODS[cfg.method.name], cfg.method, networks(cfg)
    if nets.teacher in BACKBONE_GFLOPS:  # a student: its own fwd+bwd; the cost beyond it is the teacher's forward
        return 1 / network_rate(cfg) + max(spec.cost(m) - 1, 0.0) / network_rate(cfg, nets.teacher)
    if nets.family == "image" and nets.trained != cfg.model.backbone and nets.trained in BACKBONE_GFLOPS:
        return spec.cost(m) / network_rate(cfg, nets.trained)  # a KD teacher run trains its teacher_arch
    return spec.cost(m) / network_rate(cfg)


def _loader_per_worker(cfg, views: int) -> float:
    """Training samples/s one worker delivers for this row's data (bench/results.md figures)."""
    info = DATASETS.get(cfg.data.name)
    if info is not None and info.video:
        return throughput.loader_rate("video_frames")
    if info is not None and info.file_backed:
        decode = 1 / throughput.loader_rate("jpeg_decode")
        per_view = (1 / throughput.loader_rate("jpeg224_2views") - decode) / 2
        return 1 / (decode + views * per_view)
    return throughput.loader_rate("memory32_2views") * 2 / max(views, 1)


def _views(cfg) -> int:
    try:
        recipes = len(parse_augment(cfg.data.augment))
    except ValueError:
        recipes = 1
    return recipes if recipes > 1 else (2 if METHODS[cfg.method.name].cost(cfg.method) > 1 else 1)


def _eval_forwards(cfg, n_train: int) -> tuple[float, int]:
    """(forward samples of the evaluation, of which decoded from files) on the evaluation GPU."""
    ev, info = cfg.eval, DATASETS.get(cfg.data.name)
    n_test = info.num_test if info else 10_000
    if cfg.data.test_limit:
        n_test = min(n_test, cfg.data.test_limit)
    fwd = 0.0
    if ev.linear_probe or ev.stage_probe:
        fwd += (cfg.probe.epochs if cfg.probe.augment else 1) * n_train + n_test
    if ev.knn or ev.retrieval or ev.ood:
        fwd += n_train + n_test
    if ev.accuracy:
        fwd += n_test
    for name in ev.robustness or ():
        spec = DATASETS.get(ROBUSTNESS_SIZES.get(name, name))
        fwd += spec.num_test if spec else 50_000
    for name in ev.ood or ():
        spec = DATASETS.get(name)
        fwd += min(spec.num_test if spec else 10_000, ev.ood_limit or 10**9)
    if ev.seg_scales:
        fwd += n_test * len(ev.seg_scales)
    if ev.video_accuracy or ev.video_retrieval:
        clips = ev.video_clips or 10
        fwd += clips * (n_test + (n_train if ev.video_retrieval else 0))
    return fwd, int(fwd)


def estimate(cfg, gpus: int = 1, cpus_per_gpu: int = 8) -> Estimate:
    """The run's estimate on `gpus` A100s (0 = counted as 1) with `cpus_per_gpu` CPUs each."""
    spec = METHODS[cfg.method.name]
    if spec.external_job is not None:  # another program's steps (detectron2): its published pace, all trials
        job = spec.external_job(cfg.method)
        held = max(gpus, 1)  # the same work on the GPUs held (data-parallel, as published)
        wall_h = job.iterations * job.seconds_per_iter * job.gpus / held / 3600
        return Estimate(held, wall_h, 0.0, "published")
    if not spec.on_gpu:  # computes on the CPU alone (a logit ensemble): nothing on a GPU
        return Estimate(0, 0.0, 0.0, "cpu")
    gpus = max(gpus, 1)
    amp = bool(cfg.optim.amp) or cfg.optim.precision == "fast"
    workers = max(cpus_per_gpu - 1, 1)
    n = train_samples(cfg)
    model_s = n * seconds_per_sample(cfg) / (gpus * throughput.scaling_efficiency(gpus, amp))
    # no step of a small network is faster than the host dispatching its ops
    model_s = max(model_s, -(-n // max(cfg.optim.batch_size, 1)) * throughput.step_floor_s())
    loader_s = n / (gpus * workers * _loader_per_worker(cfg, _views(cfg)))
    epoch_s = max(model_s, loader_s)
    fwd, _ = _eval_forwards(cfg, n)
    eval_model_s = fwd * (seconds_per_sample(cfg) / max(spec.cost(cfg.method), 1e-9)) / 3 if fwd else 0.0
    info = DATASETS.get(cfg.data.name)
    eval_rate = throughput.loader_rate("video_clip_frames") if info is not None and info.video else (
        throughput.loader_rate("jpeg_decode") if info is not None and info.file_backed
        else throughput.loader_rate("memory32_2views"))
    eval_s = max(eval_model_s, fwd / (workers * eval_rate))
    return Estimate(gpus, cfg.schedule.epochs * epoch_s / 3600, eval_s / 3600,
                    "loader" if loader_s > model_s else "model")


def training_pace(cfg, gpus: int = 1, cpus_per_gpu: int = 8) -> float:
    """Training samples/s per GPU the estimate assumes (the slower of model and loader), for comparing with a
    measured pace (scripts/gpu_check.py)."""
    est = estimate(cfg, gpus, cpus_per_gpu)
    if not est.train_wall_h or not cfg.schedule.epochs:
        return float("inf")
    return train_samples(cfg) * cfg.schedule.epochs / (est.train_wall_h * 3600 * est.gpus)
