"""HSA (issue 12): kNN positive mining and the training step with neighbour views, against their floors.

- Mining: ``knn_table`` (chunked similarity blocks, self masked by index, running top-k merge) over N
  features against the floor of one ``[N, d] x [d, N]`` product computed in the same query chunks
  (the work any exact search must do). Target <= 1.5x: the top-k merges are the only extra.
- Step: one HSA training step (anchor + neighbour + CutMix query passes with grad, anchor + neighbour key
  passes without, the neighbours' two augmentations, queues, companion losses off) on a CIFAR ResNet-18 at
  batch 64, against the floor measured from its parts on the same batch: 3 x (fwd + bwd) of the query
  encoder, 2 x no-grad forward of the key encoder and 2 augmentations of the batch. Target <= 1.25x.
"""

from __future__ import annotations

import torch
from common import Row, interleaved, median, paired_ratio

from semcl.data.semantics.neighbours import knn_table
from semcl.methods.base import Batch, DataInfo, TrainContext, run_step
from semcl.methods.registry import method_class
from semcl.run_config import build_config

N, D, K = 50_000, 128, 10
BATCH = 64


def _mining_rows(rounds: int) -> list[Row]:
    gen = torch.Generator().manual_seed(0)
    feats = torch.nn.functional.normalize(torch.randn(N, D, generator=gen), dim=1)

    def floor() -> None:
        for q0 in range(0, N, 4096):
            feats[q0:q0 + 4096] @ feats.T

    times = interleaved({"knn": lambda: knn_table(feats, K), "matmul": floor}, rounds, warmup=1)
    r = paired_ratio(times, "knn", "matmul")
    return [Row(f"HSA kNN mining: knn_table N={N:,} d={D} k={K}", f"{median(times['knn']):.2f} s",
                f"{median(times['matmul']):.2f} s (chunked [N,d]x[d,N])", r, "≤ 1.5×", r <= 1.5)]


def _step_rows(rounds: int) -> list[Row]:
    from semcl.data.views.build import build_augment

    n_train = 512
    gen = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (n_train, 3, 32, 32), dtype=torch.uint8, generator=gen)
    labels = torch.randint(0, 10, (n_train,), generator=gen)
    tree = {"method": {"name": "hsa", "companions": False, "queue_size": 4096},
            "model": {"backbone": "resnet18_cifar", "head_hidden": 2048, "head_dim": 128},
            "optim": {"batch_size": BATCH}, "data": {"name": "cifar10"}}
    cfg = build_config(tree, where="bench")
    info = DataInfo(10, 3, None, torch.bincount(labels, minlength=10))
    method = method_class("hsa")(cfg, info)
    aug = build_augment("supcon", size=32, mean=(0.5,) * 3, std=(0.25,) * 3)
    augs = aug.views if hasattr(aug, "views") else [aug]
    train_set = type("Train", (), {"images": images, "labels": labels, "num_classes": 10})()
    method.on_train_start(TrainContext(train_set, augs, torch.device("cpu"), None, 0))
    method.train()
    method.on_epoch_start(0)  # mines the first kNN table
    opt = torch.optim.SGD(method.param_groups(), lr=0.03, momentum=0.9)
    idx = torch.arange(BATCH)
    g = torch.Generator().manual_seed(1)
    views = [augs[k % len(augs)](images[idx], g) for k in range(2)]

    def step() -> None:
        loss = run_step(method, Batch(views, labels[idx], idx, 0, 0, g))["loss"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        method.after_backward()
        opt.step()

    def query_pass() -> None:  # the query encoder's fwd + bwd on one view
        z = method.head(method.backbone(views[0]))
        z.square().mean().backward()
        method.zero_grad(set_to_none=True)

    def key_pass() -> None:
        with torch.no_grad():
            method.key_head(method.key_backbone(views[1]))

    def augment() -> None:
        augs[0](images[idx], g)

    times = interleaved({"hsa": step, "q": query_pass, "k": key_pass, "aug": augment}, rounds, warmup=1)
    floors = [3 * q + 2 * k + 2 * a for q, k, a in zip(times["q"], times["k"], times["aug"], strict=True)]
    times["floor"] = floors
    r = paired_ratio(times, "hsa", "floor")
    return [Row(f"HSA step with neighbour + CutMix views (ResNet-18, B={BATCH})", f"{median(times['hsa']):.2f} s/step",
                f"{median(floors):.2f} s (3 fwd+bwd, 2 key fwd, 2 augmentations)", r, "≤ 1.25×", r <= 1.25)]


def run(rounds: int = 3) -> list[Row]:
    torch.set_num_threads(2)
    return _mining_rows(rounds) + _step_rows(rounds)


if __name__ == "__main__":
    for row in run():
        print(row)
