"""Cross-entropy baselines: `ce` (crop + flip) and `ce_sa` (the contrastive methods' strong augmentation);
both differ only in `data.augment`, which the registry row sets."""

from dataclasses import dataclass

from semcl.methods.spec import MethodSpec


@dataclass
class CEMethod:
    name: str = "ce"


@dataclass
class CESAMethod:
    """Cross-entropy with the contrastive methods' strong augmentation (RINCE's "CE s.a.")."""

    name: str = "ce_sa"


CE = MethodSpec("ce", CEMethod, "semcl.methods.ce.method:CrossEntropy", train_cost=1.0,
                summary="cross-entropy, backbone + linear head", losses=("torch.nn.functional:cross_entropy",))
CE_SA = MethodSpec("ce_sa", CESAMethod, "semcl.methods.ce.method:CrossEntropy", train_cost=1.0,
                   summary="cross-entropy with strong augmentation", losses=("torch.nn.functional:cross_entropy",))
