"""The ImageNet-C / -R / -Sketch evaluation (GPaCo Sec. IV-C columns) against its floor: the same images
decoded and classified with no bookkeeping.

Synthetic ImageNet and ImageNet-C (15 corruptions x 5 severities) / -R / -Sketch in their real folder layouts
(`semcl.data.synthetic`, 2 test images per class and folder) under a temp root, 64 px. Candidate: the
protocol's `run` (`semcl.evals.protocols.robustness`): one file set per corruption and severity read from its
folder, labels mapped to the model's classes, the 200-class logit mask for ImageNet-R, both mCE forms. Floor:
every image file of those folders decoded (`semcl.data.fileset.decode`, the same eval decode) and classified
one set folder per batch (as the protocol batches), argmax taken. The classifier (`resnet_tiny` + a linear
layer) is the same in both, so the ratio is what the protocol adds: folder walks, 77 file sets, label maps.
Target <= 1.25x. One thread, interleaved rounds, median of per-round ratios.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from common import Row, interleaved, median, paired_ratio

SIZE = 64
SETS = ["imagenet_c", "imagenet_r", "imagenet_sketch"]


class _Classifier(torch.nn.Module):
    """A tiny CNN classifier: the evaluation's cost is the protocol plus this forward, in both arms."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        from semcl.models.backbones import resnet_tiny

        self.backbone, self.fc = resnet_tiny(), torch.nn.Linear(64, classes)
        self.has_classifier = True

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.backbone(x))


def run(rounds: int = 3) -> list[Row]:
    from semcl.data import ensure_synthetic, load
    from semcl.data.fileset import decode
    from semcl.evals.protocols import robustness
    from semcl.evals.protocols.context import EvalContext
    from semcl.run_config import build_config

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = ensure_synthetic(Path(tmp), ["imagenet", *SETS], train_per_class=1, test_per_class=2)
            cfg = build_config({"data": {"name": "imagenet", "image_size": SIZE}, "eval": {"robustness": SETS}},
                               where="bench")
            train = load("imagenet", root, "train", SIZE)
            torch.manual_seed(0)
            model = _Classifier(train.num_classes).eval()
            ctx = EvalContext(model, cfg, train, train, root, 0)
            files = sorted(p for name in ("imagenet-c", "imagenet-r", "sketch") for p in (root / name).rglob("*")
                           if p.suffix.lower() in (".jpeg", ".jpg", ".png"))
            tf = ctx.test_transform
            gen = torch.Generator().manual_seed(0)

            # one batch per set folder (<set>/<corruption>/<severity>/ or <set>/), as the protocol batches them
            groups: dict[Path, list[Path]] = {}
            for p in files:
                groups.setdefault(p.parent.parent, []).append(p)

            def floor() -> None:
                for group in groups.values():
                    for i in range(0, len(group), 256):
                        batch = torch.stack([decode(p, SIZE) for p in group[i:i + 256]])
                        model.classify(tf(batch, gen)).argmax(1)

            def candidate() -> None:
                robustness.run(ctx)

            with torch.no_grad():
                times = interleaved({"floor": floor, "cand": candidate}, rounds)
            n = len(files)
    finally:
        torch.set_num_threads(saved)
    ratio = paired_ratio(times, "cand", "floor")
    return [Row(f"Eval: ImageNet-C/R/Sketch protocol ({n:,} synthetic files, {SIZE}px, tiny CNN)",
                f"{median(times['cand']):.2f} s", f"{median(times['floor']):.2f} s (decode + classify the same files)",
                ratio, "≤ 1.25×", ratio <= 1.25, "77 file sets: 75 corruption x severity folders, -R, -Sketch")]


if __name__ == "__main__":
    for r in run():
        print(r)
