"""ViT fine-tuning from MAE checkpoints (GPaCo Sec. IV-C, docs/papers/paco.md §c.6, §d.2): the MAE cross-entropy
baseline, GPaCo's multi-task baseline and GPaCo, all on timm ViTs with MAE's recipe (AdamW with
layer-wise lr decay, drop-path, warm-up + half-cycle cosine, effective batch 1024)."""

from dataclasses import dataclass

from semcl.methods.spec import MethodSpec, Networks, StandIn

ARCHS = frozenset({"vit_base_patch16", "vit_large_patch16", "vit_tiny_test"})


@dataclass
class _ViTFields:
    """Knobs shared by the three ViT methods (MAE main_finetune defaults; docs/papers/paco.md §d.2)."""

    arch: str = "vit_base_patch16"  # vit_large_patch16 for the ViT-L rows
    # MAE pre-trained encoder, {"model": state_dict}; a relative path is under the data root;
    # None: random init (smoke profiles)
    checkpoint: str | None = "mae_pretrain_vit_base.pth"
    layer_decay: float = 0.65  # 0.75 for ViT-L (official scripts)
    drop_path: float = 0.1  # 0.2 for ViT-L
    label_smoothing: float = 0.1  # MAE / GPaCo ViT scripts (--smoothing 0.1)
    beta1: float = 0.9  # AdamW betas: torch defaults, as MAE's main_finetune
    beta2: float = 0.999
    head_init_std: float = 2e-5  # MAE: trunc_normal_(head.weight, std=2e-5)

    def _check(self) -> None:
        if not 0.0 < self.layer_decay <= 1.0:
            raise ValueError(f"key 'method.layer_decay' = {self.layer_decay} must be in (0, 1]")
        if not 0.0 <= self.drop_path < 1.0 or not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError("keys 'method.drop_path' and 'method.label_smoothing' must be in [0, 1)")


@dataclass
class MaeFinetuneMethod(_ViTFields):
    """MAE fine-tuning: CE with label smoothing on mixup / cutmix targets (MAE defaults)."""

    name: str = "mae_finetune"
    mixup: float = 0.8  # Beta(alpha, alpha) of mixup; 0 disables it
    cutmix: float = 1.0  # Beta(alpha, alpha) of cutmix; 0 disables it
    mixup_prob: float = 1.0  # probability of mixing a batch at all
    mixup_switch_prob: float = 0.5  # probability of cutmix instead of mixup when both are on

    def __post_init__(self) -> None:
        self._check()


@dataclass
class MultiTaskViTMethod(_ViTFields):
    """GPaCo's multi-task baseline on a ViT: label-smoothed CE on both views' logits + weight * SupCon
    (main_finetune_multitask.py: MultiTaskLoss, alpha 0.5, temperature 0.2, queue 8192, no mixup)."""

    name: str = "multitask_vit"
    weight: float = 0.5
    tau: float = 0.2
    queue_size: int = 8192
    queue_init: str = "official"  # semcl.methods.paco QUEUE_INIT (official: models_vit_paco.py's queue)

    def __post_init__(self) -> None:
        self._check()


@dataclass
class GPacoViTMethod(_ViTFields):
    """GPaCo on a ViT (main_finetune_gpaco.py): PaCo loss over both views and a queue of 8192 inside
    the model; alpha 0.2 and centre label smoothing 0.1 are the code's (paper silent, docs/papers/paco.md §g.5)."""

    name: str = "gpaco_vit"
    alpha: float = 0.2
    tau: float = 0.2
    queue_size: int = 8192
    queue_init: str = "official"

    def __post_init__(self) -> None:
        self._check()


_M = "semcl.methods.vit.method"
_BUILDER = "semcl.models.vit:build_vit"
_CHOICES = {"arch": ARCHS}
_QUEUE_INIT = frozenset({"official", "random"})  # semcl.methods.paco.QUEUE_INIT without "empty"


def vit_networks(m, model) -> Networks:
    """A ViT row trains `method.arch` (model.backbone names no network here)."""
    return Networks(m.arch, "vit")


# every ViT row: per-rank in-model randomness (MAE main_finetune.py: seed = args.seed + misc.get_rank()); the
# preflight's stand-in root gets an MAE checkpoint at `method.checkpoint`
_VIT = dict(rank_seeded=True, stand_in=StandIn(files=f"{_M}:write_stand_in_checkpoint"))
MAE_FINETUNE = MethodSpec("mae_finetune", MaeFinetuneMethod, f"{_M}:MaeFinetune", train_cost=1.0,
                          choices=_CHOICES, summary="MAE ViT fine-tuning with label-smoothed CE, mixup and cutmix",
                          losses=("semcl.methods.vit.mixup:soft_target_cross_entropy",), builder=_BUILDER,
                          networks=vit_networks, **_VIT)
MULTITASK_VIT = MethodSpec("multitask_vit", MultiTaskViTMethod, f"{_M}:MultiTaskViT", train_cost=2.0,
                           choices={**_CHOICES, "queue_init": _QUEUE_INIT}, summary="CE + 0.5 x SupCon fine-tuning of MAE ViTs",
                           losses=("torch.nn.functional:cross_entropy", "semcl.losses.paco:supcon_loss"), builder=_BUILDER,
                           networks=vit_networks, head_layers=3, **_VIT)  # vit_projector: 3 linear layers
GPACO_VIT = MethodSpec("gpaco_vit", GPacoViTMethod, f"{_M}:GPaCoViT", train_cost=2.0,
                       choices={**_CHOICES, "queue_init": _QUEUE_INIT},
                       summary="GPaCo fine-tuning of MAE ViTs (queue inside the model)",
                       losses=("semcl.losses.paco:paco_loss",), builder=_BUILDER, networks=vit_networks,
                       head_layers=3, **_VIT)  # vit_projector: 3 linear layers
