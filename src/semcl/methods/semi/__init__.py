"""Semi-supervised fine-tuning on the 1 % / 10 % ImageNet label subsets (HSA docs/papers/hsa.md §c.8, §d.3), a
second stage (`init_from`: a pre-training row) that fine-tunes the whole backbone and a new linear
classifier with cross-entropy on the labelled subset only.

The subsets are SimCLR's image lists, read from the data root:
`<root>/imagenet/semi/1percent.txt` / `10percent.txt`, one training file name per line
(e.g. `n01440764_10026.JPEG`). The recipe (inferred, docs/papers/hsa.md §d.3: the SimCLR / MoCo semi-supervised
protocol): SGD with Nesterov momentum 0.9, no weight decay, crop + flip, 60 epochs on the 1 %
subset / 30 on the 10 % subset (set in the table), the classifier at `classifier_lr_scale` times
the backbone's learning rate (1 = SimCLR; BYOL / SwAV use larger classifier rates).

The entropy-filtered data mining (c.8: pseudo-label the unlabelled images with the fine-tuned
model, keep those whose prediction entropy is below a threshold, fine-tune again) is the named
option `mining: entropy`; it is planned (threshold, rounds and schedule unknown) and refused.
"""

from dataclasses import dataclass

from semcl.methods.spec import MethodSpec

SUBSETS = ("1percent", "10percent")
MINING = ("none", "entropy")


@dataclass
class SemiFinetuneMethod:
    """Fine-tune backbone + new classifier on a SimCLR label subset (a second stage)."""

    name: str = "semi_finetune"
    subset: str = "1percent"  # 1percent | 10percent: <root>/imagenet/semi/<subset>.txt
    classifier_lr_scale: float = 1.0  # classifier lr / backbone lr (SimCLR: 1)
    mining: str = "none"  # entropy: docs/papers/hsa.md §c.8 pseudo-label mining (planned)

    def __post_init__(self) -> None:
        if self.mining == "entropy":
            raise ValueError("method.mining 'entropy' (docs/papers/hsa.md §c.8 entropy-filtered pseudo-labelling) is planned, "
                             "not implemented: its threshold, rounds and schedule are unknown")
        if not self.classifier_lr_scale > 0:
            raise ValueError(f"method.classifier_lr_scale must be > 0, got {self.classifier_lr_scale}")


SEMI_FINETUNE = MethodSpec("semi_finetune", SemiFinetuneMethod, "semcl.methods.semi.method:SemiFinetune",
                           train_cost=1.0, depends="init_from",
                           choices={"subset": frozenset(SUBSETS), "mining": frozenset(MINING)},
                           summary="fine-tuning backbone + classifier on the 1 % / 10 % ImageNet label subsets",
                           losses=("torch.nn.functional:cross_entropy",))
