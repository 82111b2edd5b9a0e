"""RepDistiller's default loss weights: total = γ·CE + α·KD + β·L_distill.

Source: HobbitLong/RepDistiller @ b84f547c5db6a35318d4671d7d5c4de74c822403, scripts/run_cifar_distill.sh
(one line per method, resnet32x4 → resnet8x4; flags -r γ, -a α, -b β; -r defaults to 1 in
train_student.py), transcribed in docs/papers/scns.md §d.2. The β values were tuned against
RepDistiller's loss forms; where a loss here defaults to the paper's form (CC, PKT, FT: see their
``variant``), ``tuned_for`` names the variant the β belongs to. RepDistiller's AB and FSP add no
distillation term after their 30-epoch initialisation stage (helper/loops.py sets loss_kd = 0), so
their β multiplies nothing in the main stage.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DistillWeights:
    gamma: float  # cross-entropy on the labels
    alpha: float  # KD (Hinton, T = 4)
    beta: float  # the method's own distillation term
    distill: str  # RepDistiller's --distill name
    tuned_for: str = "repdistiller"


REPDISTILLER_WEIGHTS: dict[str, DistillWeights] = {
    "kd": DistillWeights(0.1, 0.9, 0.0, "kd"),  # -r 0.1 -a 0.9 -b 0
    "fitnet": DistillWeights(1.0, 0.0, 100.0, "hint"),  # -a 0 -b 100
    "at": DistillWeights(1.0, 0.0, 1000.0, "attention"),  # -a 0 -b 1000
    "sp": DistillWeights(1.0, 0.0, 3000.0, "similarity"),  # -a 0 -b 3000
    "cc": DistillWeights(1.0, 0.0, 0.02, "correlation"),  # -a 0 -b 0.02
    "vid": DistillWeights(1.0, 0.0, 1.0, "vid"),  # -a 0 -b 1
    "rkd": DistillWeights(1.0, 0.0, 1.0, "rkd"),  # -a 0 -b 1
    "pkt": DistillWeights(1.0, 0.0, 30000.0, "pkt"),  # -a 0 -b 30000
    "ab": DistillWeights(1.0, 0.0, 1.0, "abound"),  # -a 0 -b 1
    "ft": DistillWeights(1.0, 0.0, 200.0, "factor"),  # -a 0 -b 200
    "fsp": DistillWeights(1.0, 0.0, 50.0, "fsp"),  # -a 0 -b 50
    "nst": DistillWeights(1.0, 0.0, 50.0, "nst"),  # -a 0 -b 50
    "crd": DistillWeights(1.0, 0.0, 0.8, "crd"),  # -a 0 -b 0.8
    "crd_kd": DistillWeights(1.0, 1.0, 0.8, "crd"),  # -a 1 -b 0.8
}

INIT_EPOCHS = 30  # --init_epochs: the initialisation stage of AB, FT (paraphraser) and FSP
HINT_LAYER = 2  # --hint_layer: FitNet's hint/guided layer index into the feature list
