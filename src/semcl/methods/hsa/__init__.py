"""HSA / CsMl ("Seed the Views", docs/papers/hsa.md §c, §g): MoCo v2 with kNN positives, CutMix between
neighbours and companion losses at intermediate stages; and plain MoCo v2 (`mocov2`), its baseline.

The default variant `paper` is the paper's method (k 10 from f_q, CutMix alpha 1, companion losses) trained
with the official code's loss scale and warm-up (haohang96/CSML @be34e84 main_moco.py:418-433): the three
terms divided by 3 and the neighbour weight 0 while `epoch > 10` is false. The paper's batch 1024 / lr 0.12 is
the code's 256 / 0.03, a learning rate tuned on the divided loss, so the row compared with 76.6 runs the
divided loss (docs/papers/hsa.md §g.4, §g.5). `paper_text` is the paper's text read literally (Eq. 5: the
plain sum, no warm-up): 3x the default's loss scale at the same lr, a named variant row. `code` is the
official code throughout (docs/papers/hsa.md §g). `variant` fills every knob left unset (None), as RINCE's variants do.
"""

from dataclasses import dataclass, field
from typing import Any

from semcl.methods.spec import MethodSpec, StandIn

STAGES = frozenset({"layer1", "layer2", "layer3", "layer4"})

# docs/papers/hsa.md §g.1, §g.2, §g.3, §g.4, §g.5, §g.8. Warm-up 11: the official neighbour weight is 0 for 0-indexed epochs 0..10
# (`epoch > 10` false; semcl.losses.hsa.CODE_WARMUP_EPOCHS); mini / smoke profiles set 1 (their 8-10 / 2
# epochs hold about half an epoch of the code's 11 / 200, rounded up so the phase exists)
_PAPER = {"k": 10, "features": "query", "cutmix_alpha": 1.0, "companions": True}
HSA_VARIANTS: dict[str, dict[str, Any]] = {
    "paper": {**_PAPER, "reduction": "mean", "warmup_epochs": 11},
    # Eq. 5 as printed: L_qa + L_qp + L_qmix summed (each stage's likewise), no warm-up
    "paper_text": {**_PAPER, "reduction": "sum", "warmup_epochs": 0},
    # official code: 5 neighbours from the key encoder, Beta(2, 2), (L_qa + L_qp + L_qmix) / 3, the 11-epoch
    # warm-up, no intermediate-stage losses
    "code": {"k": 5, "features": "key", "cutmix_alpha": 2.0, "reduction": "mean", "warmup_epochs": 11,
             "companions": False},
}


@dataclass
class HSAMethod:
    """Every knob of docs/papers/hsa.md §c / §d. Ablation switches: `neighbours` (kNN positives), `cutmix`, `companions`."""

    name: str = "hsa"
    queue_size: int = 65536  # K (official code; paper silent)
    tau: float = 0.2
    momentum: float = 0.999  # key-encoder EMA
    variant: str = "paper"  # a key of HSA_VARIANTS; fills the knobs below that are None
    neighbours: bool = True  # kNN positives (False: MoCo v2's loss; cutmix and companions still allowed off)
    k: int | None = None  # neighbourhood size (paper 10, code 5)
    refresh: int = 5  # mine the kNN table on epochs 0, refresh, 2 refresh, ...
    features: str | None = None  # mining features: query (f_q, paper) | key (f_k, code)
    knn_backend: str = "torch"  # torch (chunked matmul on the device) | faiss (faiss-cpu, exact)
    mining_batch: int = 256  # images per forward pass while mining
    own_weight: float = 0.5  # weight of the query's own key
    neighbour_weight: float = 0.5  # weight of the paired image's key
    warmup_epochs: int | None = None  # epochs with weights (1, 0) first (paper / code 11, paper_text 0)
    # code (two InfoNCE terms) | single_softmax (both positives in one softmax) | byol (BYOL's regression with a
    # predictor on the query side, no negatives: the appendix's "on BYOL" rows, docs/papers/hsa.md §c.7 proposal)
    loss_form: str = "code"
    reduction: str | None = None  # mean of L_qa, L_qp, L_qmix (paper / code: / 3) | sum (paper_text)
    # neighbours (and mixed images) per anchor and step (appendix "more positives"; None = 1, the paper's
    # setting); m > 1 draws m distinct neighbours and uses semcl.losses.hsa.multi_positive_hsa_loss
    positives: int | None = None
    # multi-crop (SwAV-style; counts and sizes unknown in the paper): this many small crops of each anchor
    # (None = 0) at multicrop_size x the global side (None = 96 / 224), area scale multicrop_scale (None =
    # SwAV's 0.05-0.14); each is one more query with the anchor's loss (semcl.methods.hsa.method)
    multicrop: int | None = None
    multicrop_size: float | None = None
    multicrop_scale: list[float] | None = None
    # CsMl with small crops (no code exists for it): "split" (default) keeps the global terms at the code's
    # weighting (L_qa + L_qp + L_qmix reduced by `reduction`: / 3 at the lr tuned with it) and adds the mean of
    # the small-crop terms; "all" reduces the global and small-crop terms together (mean: / 9 with 6 crops, a
    # SwAV-like reading that gives each global term 1/9, a third of the code's). None without small crops.
    multicrop_reduction: str | None = None
    cutmix: bool = True  # mixed query: anchor with a box of its neighbour
    cutmix_alpha: float | None = None  # Beta(alpha, alpha) (paper 1, code 2)
    cutmix_mode: str = "batch"  # one box per batch, per rank under DDP (code; paper silent) | sample
    companions: bool | None = None  # intermediate-stage losses (paper on, code off)
    stages: list[str] = field(default_factory=lambda: ["layer2", "layer3"])  # where companions attach
    stage_branch: str = "bottleneck"  # bottleneck + MLP (paper) | mlp (loss attached directly, ablation)
    stage_weight: float = 1.0  # weight of each stage's loss

    def __post_init__(self) -> None:
        for knob, value in HSA_VARIANTS[self.variant].items():
            if getattr(self, knob) is None:
                setattr(self, knob, value)
        if self.cutmix and not self.neighbours:
            raise ValueError("'method.cutmix' mixes an anchor with its kNN neighbour: it needs 'method.neighbours' true")
        if self.positives is not None and not 1 <= self.positives <= (self.k or 1):
            raise ValueError(f"'method.positives' = {self.positives} must be in [1, method.k = {self.k}]")
        if self.warmup_epochs < 0:
            raise ValueError(f"'method.warmup_epochs' = {self.warmup_epochs} must be >= 0")
        if self.k < 1 or self.refresh < 1 or self.mining_batch < 1:
            raise ValueError("'method.k', 'method.refresh' and 'method.mining_batch' must be >= 1")
        if self.multicrop is not None and (self.multicrop < 0 or (self.positives or 1) > 1 or self.loss_form == "byol"):
            raise ValueError("'method.multicrop' must be >= 0 and goes with one positive and the InfoNCE forms")
        if self.multicrop and self.neighbours and self.multicrop_reduction is None:
            self.multicrop_reduction = "split"
        if self.multicrop_reduction is not None and not (self.multicrop and self.neighbours):
            raise ValueError("'method.multicrop_reduction' weighs CsMl's small-crop terms: it needs 'method.multicrop' "
                             ">= 1 and 'method.neighbours' true")
        if self.loss_form == "byol" and self.companions:
            raise ValueError("'method.loss_form' byol: companion losses on BYOL are not defined (set companions false)")
        if self.companions and not self.stages:
            raise ValueError("'method.companions' is true but 'method.stages' is empty")


@dataclass
class MoCoV2Method:
    """MoCo v2 (Chen et al. 2020): InfoNCE of a query against its momentum key and a queue. HSA with every
    addition off, on the same modules, so the ablation's first row is this baseline."""

    name: str = "mocov2"
    queue_size: int = 65536
    tau: float = 0.2
    momentum: float = 0.999


_M = "semcl.methods.hsa.method:HSA"
# the loss forms HSA's knobs choose between (loss_form, positives, neighbours); MoCo v2 is info_nce alone
_HSA_LOSSES = tuple(f"semcl.losses.hsa:{f}" for f in (
    "hsa_loss", "multi_positive_hsa_loss", "two_positive_loss", "info_nce", "byol_regression"))


def hsa_train_cost(m: HSAMethod) -> float:
    """Training FLOPs per image-epoch relative to CE's one forward + backward (forward 1/3, backward 2/3).

    Query passes with gradients: the anchor, and per positive its neighbour and (cutmix) the mixed image;
    key forwards (1/3 each): the anchor and each neighbour; multi-crop: each small crop is one more query
    at (multicrop_size)^2 of the global view's pixels; companion branches (one bottleneck at layer2 and at
    layer3 of ResNet-50, ~5 % of the network's FLOPs each) on every pass; mining one forward every
    `refresh` epochs. The paper's setting: (3 + 2/3) x 1.1 + 1/15 ~ 4.1.
    """
    if not m.neighbours:
        passes, keys = 1.0, 1
    else:
        p = m.positives or 1
        passes, keys = 1.0 + p * (2 if m.cutmix else 1), 1 + p
    if m.multicrop:
        passes += m.multicrop * (m.multicrop_size or 96 / 224) ** 2
    cost = (passes + keys / 3) * (1 + 0.05 * len(m.stages) if m.companions else 1.0)
    return cost + (1 / 3 / m.refresh if m.neighbours else 0.0)


HSA = MethodSpec("hsa", HSAMethod, _M, train_cost=hsa_train_cost,
                 choices={"variant": frozenset(HSA_VARIANTS), "features": frozenset({"query", "key"}),
                          "knn_backend": frozenset({"torch", "faiss"}),
                          "loss_form": frozenset({"code", "single_softmax", "byol"}), "reduction": frozenset({"sum", "mean"}),
                          "multicrop_reduction": frozenset({"split", "all"}),
                          "cutmix_mode": frozenset({"batch", "sample"}), "stages": STAGES,
                          "stage_branch": frozenset({"bottleneck", "mlp"})},
                 summary="HSA / CsMl: MoCo v2 + kNN positives, CutMix between neighbours, stage losses",
                 losses=_HSA_LOSSES,
                 stand_in=StandIn(neighbours="k", mining=f"{_M.partition(':')[0]}:mining_search"))
# one query pass with gradients + one key forward
MOCOV2 = MethodSpec("mocov2", MoCoV2Method, _M, train_cost=4 / 3,
                    summary="MoCo v2: momentum key encoder, queue of keys, InfoNCE", losses=("semcl.losses.hsa:info_nce",))
