"""RIDE (Wang et al., ICLR 2021) as GPaCo's Table II baseline."""

from dataclasses import dataclass

from semcl.methods.spec import MethodSpec


@dataclass
class RideMethod:
    """RIDE (Wang et al., ICLR 2021): shared early stages, experts with their own last two stages and
    cosine classifiers, LDAM-DRW per expert + a diversity term; no router, no distillation (GPaCo Table II).
    Defaults: the official ImageNet-LT configs (configs/config_imagenet_lt_resnet50_ride.json)."""

    name: str = "ride"
    num_experts: int = 3
    expert_width: float = 0.75  # experts' stage widths x 0.75 (official reduce_dimension: 192/256, 384/512)
    max_margin: float = 0.5  # LDAM: largest margin (rarest class)
    scale: float = 30.0  # logits = scale * cos(feature, class weight)
    drw_epoch: int | None = 80  # 0-based epoch from which DRW applies (official: last 20 of 100); None: never
    drw_beta: float = 0.9999  # effective-number class weights under DRW
    diversity_weight: float = -0.2  # lambda, added as is (negative: experts pushed away from the ensemble)
    diversity_temperature: float = 1.0
    diversity_reweight: float = 0.02  # per-class diversity temperatures under DRW (official reweight_factor)


# three 0.75-width experts are ~1.66x a ResNet-50 (39.0M vs 23.5M parameters)
RIDE = MethodSpec("ride", RideMethod, "semcl.methods.ride.method:Ride", train_cost=1.66,
                  summary="RIDE: LDAM-DRW experts with a diversity loss", losses=("semcl.losses.ride:ride_loss",),
                  builder="semcl.models.ride:RideBackbone")
