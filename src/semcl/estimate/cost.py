"""The one cost model's entry points for `semcl plan`: a run's cost as text, its minutes, the networks it runs
and the size of its training set. Paper-profile runs go to the GPU-hour model (semcl.estimate.gpu_hours);
the other profiles are FLOPs at one CPU core's rate. What a run trains is the method's declaration
(MethodSpec.networks, through semcl.estimate.workload), never a probe of its config."""

from __future__ import annotations

from semcl.config import RunConfig
from semcl.estimate.catalog import BACKBONE_GFLOPS, VIDEO_GMACS, VIT_GMACS
from semcl.estimate.workload import networks, train_samples
from semcl.methods.registry import METHODS

GPU_FLOPS = 20e12  # an A100-class GPU on a CIFAR ResNet-50 (~5,000 images/s)
CPU_FLOPS = 5e10  # one core of this class of machine on a small ResNet


def estimate_cost(cfg: RunConfig, profile: str, gpus: int = 1) -> str:
    """Compute estimate: GPU-hours held (all `gpus` of the job) for the paper profile, CPU-minutes otherwise."""
    minutes = estimated_minutes(cfg, profile, gpus)
    return f"{minutes / 60:.3g} GPU-h" if profile == "paper" else f"{minutes:.2g} CPU-min"


def network_gflops(cfg: RunConfig) -> float:
    """Forward + backward cost of one training sample of the networks the row runs (catalog units): a ViT at its
    image size, a video net per clip (frames x pixels), a KD teacher run's network, a student's own network plus
    its teacher's forward (a third of a forward + backward); else `model.backbone`."""
    nets = networks(cfg)
    if nets.family == "vit" and nets.trained in VIT_GMACS:
        return 3 * VIT_GMACS[nets.trained] * ((cfg.data.image_size or 224) / 224) ** 2
    if nets.family == "video" and nets.trained in VIDEO_GMACS:
        return 3 * VIDEO_GMACS[nets.trained] * nets.frames / 16 * ((cfg.data.image_size or 112) / 112) ** 2
    if nets.teacher in BACKBONE_GFLOPS:
        return BACKBONE_GFLOPS.get(cfg.model.backbone, 10.0) + BACKBONE_GFLOPS[nets.teacher] / 3
    return BACKBONE_GFLOPS.get(nets.trained, BACKBONE_GFLOPS.get(cfg.model.backbone, 10.0))


def estimated_minutes(cfg: RunConfig, profile: str, gpus: int = 1, cpus_per_gpu: int = 8) -> float:
    """The estimate in GPU-minutes held (paper profile: semcl.estimate.gpu_hours, the row's networks at measured A100
    rates, the loader bound, evaluation, on `gpus` GPUs) or minutes of one CPU core (others)."""
    if profile == "paper" and not cfg.data.synthetic:
        from semcl.estimate.gpu_hours import estimate

        return estimate(cfg, gpus, cpus_per_gpu).gpu_hours * 60
    n_train = train_samples(cfg)
    per_image = network_gflops(cfg) * 1e9
    # one fwd+bwd per view; momentum methods add a key forward (a third of a step)
    train = cfg.schedule.epochs * n_train * per_image * METHODS[cfg.method.name].cost(cfg.method)
    probe_passes = cfg.probe.epochs if cfg.probe.augment else 1
    probe = probe_passes * n_train * per_image / 3 if cfg.eval.linear_probe else 0.0
    flops = train + probe
    return flops / (GPU_FLOPS if profile == "paper" else CPU_FLOPS) / 60


def evaluation_cost(cfg: RunConfig, profile: str, gpus: int = 1) -> str:
    """The part of `estimate_cost` that evaluating alone costs: what a run pays whose training another run of the
    same training key does (semcl.registry.plan). Paper profile: the evaluation job's GPU-hours; else the probe's CPU-minutes."""
    if profile == "paper" and not cfg.data.synthetic:
        from semcl.estimate.gpu_hours import estimate

        return f"{estimate(cfg, gpus).eval_wall_h:.3g} GPU-h"
    per_image = network_gflops(cfg) * 1e9
    probe_passes = cfg.probe.epochs if cfg.probe.augment else 1
    probe = probe_passes * train_samples(cfg) * per_image / 3 if cfg.eval.linear_probe else 0.0
    return f"{probe / (GPU_FLOPS if profile == 'paper' else CPU_FLOPS) / 60:.2g} CPU-min"
