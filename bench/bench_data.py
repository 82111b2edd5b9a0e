"""Data pipeline throughput per worker process (item 4): one thread, two views per image.

* CIFAR (32x32): the batched ``supcon`` recipe (semcl.data.views.augment) on a uint8 batch vs torchvision's
  per-image PIL pipeline with the same transforms (RandomResizedCrop(32, (0.2, 1)), flip, ColorJitter
  (0.4, 0.4, 0.4, 0.1) p=0.8, RandomGrayscale 0.2, ToTensor, Normalize), both from uint8 images in
  memory, interleaved. Targets: ratio ≥ 1 over torchvision; ≥ 600 two-view images/s per worker.
* 224 (ImageNet scale): PIL decode of a 500x375 JPEG, whole (the training decode), + GPaCo's two views
  (``randcls_timm`` and ``sim``, per-image torchvision / timm recipes). Target ≥ 120 two-view
  images/s per worker.

"Workers a GPU needs" = what one GPU consumes / images per second per worker, with stated
assumptions for the GPU side (A100-class): CIFAR ResNet-50 two-view contrastive ≈ 2,500 two-view
images/s (the cost model's ~5,000 single-view images/s), ImageNet ResNet-50 two-view (one view
through a key encoder) ≈ 1,000 two-view images/s with AMP.
"""

from __future__ import annotations

import io

import numpy as np
import torch
from common import RATES, Row, interleaved, median, paired_ratio

from semcl.data import stats
from semcl.data.views.build import build_augment

GPU_CIFAR = 2500.0
GPU_224 = 1000.0


def random_images(n: int, h: int, w: int, gen: np.random.Generator) -> np.ndarray:
    """Smooth random colour fields plus fine noise: JPEGs of realistic size, not noise-sized."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    out = np.empty((n, h, w, 3), dtype=np.uint8)
    for i in range(n):
        img = np.zeros((h, w, 3), dtype=np.float32)
        for c in range(3):
            for _ in range(4):
                fy, fx, ph = gen.uniform(0.002, 0.05), gen.uniform(0.002, 0.05), gen.uniform(0, 6.3)
                img[..., c] += np.sin(fy * yy * 6.3 + fx * xx * 6.3 + ph)
        img = 127 + 30 * img + gen.normal(0, 12, size=img.shape)
        out[i] = np.clip(img, 0, 255).astype(np.uint8)
    return out


def _torchvision_pipeline(size: int, mean, std):
    from torchvision import transforms as T

    return T.Compose([
        T.RandomResizedCrop(size, scale=(0.2, 1.0)),
        T.RandomHorizontalFlip(),
        T.RandomApply([T.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
        T.RandomGrayscale(p=0.2),
        T.ToTensor(),
        T.Normalize(mean, std),
    ])


def run(rounds: int = 5) -> list[Row]:
    from PIL import Image

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rows: list[Row] = []
    try:
        gen = np.random.default_rng(0)
        tgen = torch.Generator().manual_seed(0)
        mean, std = stats("cifar100")

        # ---- CIFAR 32x32 ----
        n = 256
        cifar = random_images(n, 32, 32, gen)
        batch = torch.from_numpy(cifar).permute(0, 3, 1, 2).contiguous()
        pils = [Image.fromarray(a) for a in cifar]
        aug = build_augment("supcon", size=32, mean=mean, std=std)
        tv = _torchvision_pipeline(32, mean, std)

        def ours() -> None:
            aug(batch, tgen)
            aug(batch, tgen)

        def theirs() -> None:
            for im in pils:
                tv(im)
                tv(im)

        times = interleaved({"ours": ours, "tv": theirs}, rounds)
        ours_rate, tv_rate = n / median(times["ours"]), n / median(times["tv"])
        rows.append(Row("Data: supcon 2 views 32px vs torchvision PIL (1 thread)", f"{ours_rate:,.0f} img/s",
                        f"{tv_rate:,.0f} img/s torchvision", ours_rate / tv_rate, "≥ 1× (speed-up)",
                        ours_rate >= tv_rate))
        RATES["memory32_2views"] = round(ours_rate)
        rows.append(Row("Data: supcon 2 views 32px per worker vs GPU need", f"{ours_rate:,.0f} img/s",
                        "600 img/s", ours_rate / 600, "≥ 600 img/s", ours_rate >= 600,
                        f"a GPU at ~{GPU_CIFAR:,.0f} two-view img/s needs {GPU_CIFAR / ours_rate:.1f} workers "
                        f"(torchvision: {GPU_CIFAR / tv_rate:.1f})"))

        # ---- 224 from JPEG ----
        # the GPaCo ImageNet pair (randcls_timm + sim, per-image recipes) on whole decoded images, as a
        # file-backed training set hands them to the views (semcl.data.fileset.WholeImages)
        recipes = ["randcls_timm", "sim"]
        n = 32
        jpegs = []
        for a in random_images(n, 375, 500, gen):
            buf = io.BytesIO()
            Image.fromarray(a).save(buf, format="JPEG", quality=90)
            jpegs.append(buf.getvalue())
        kb = np.mean([len(j) for j in jpegs]) / 1024
        imean, istd = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
        augs = [build_augment(r, size=224, mean=imean, std=istd) for r in recipes]
        tv224 = _torchvision_pipeline(224, imean, istd)

        def decode(j: bytes):
            return Image.open(io.BytesIO(j)).convert("RGB")

        def ours224() -> None:
            whole = [torch.from_numpy(np.asarray(decode(j)).copy()).permute(2, 0, 1) for j in jpegs]
            for a in augs:
                a(whole, tgen)

        def tv224_run() -> None:
            for j in jpegs:
                im = decode(j)
                tv224(im)
                tv224(im)

        def decode_only() -> None:
            for j in jpegs:
                decode(j)

        times = interleaved({"ours": ours224, "tv": tv224_run, "decode": decode_only}, max(3, rounds - 2))
        r_ours, r_tv = n / median(times["ours"]), n / median(times["tv"])
        r_dec = n / median(times["decode"])
        which = "randcls_timm + sim on whole images"
        rows.append(Row("Data: 2 views 224px from JPEG per worker vs GPU need", f"{r_ours:,.0f} img/s",
                        "120 img/s", r_ours / 120, "≥ 120 img/s", r_ours >= 120,
                        f"{which}; 500x375 JPEG ~{kb:.0f} KB, decode alone {r_dec:,.0f} img/s; torchvision PIL "
                        f"{r_tv:,.0f} img/s ({r_ours / r_tv:.2f}× ours/tv); a GPU at ~{GPU_224:,.0f} two-view "
                        f"img/s needs {GPU_224 / r_ours:.1f} workers"))
        rows.append(_loader_row(jpegs, recipes, imean, istd, rounds))
    finally:
        torch.set_num_threads(threads)
    return rows


def _loader_row(jpegs: list[bytes], recipes: list[str], mean, std, rounds: int) -> Row:
    """The training loader of file-backed sets (semcl.data.views.file_views.step_views): one epoch of 4 steps of
    32 JPEG files with the GPaCo pair, worker processes (one per core) against the same views in-process."""
    import os
    import tempfile
    from pathlib import Path

    from semcl.data.fileset import WholeImages
    from semcl.data.views.file_views import step_views

    cores = len(os.sched_getaffinity(0))
    augs = build_augment("+".join(recipes), size=224, mean=mean, std=std).views
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, j in enumerate(jpegs * 4):
            paths.append(Path(tmp) / f"{i}.jpg")
            paths[-1].write_bytes(j)
        images = WholeImages(paths, 224)
        order = torch.arange(len(paths))

        def epoch(workers: int):
            return lambda: list(step_views(images, augs, seed=0, epoch=0, order=order, batch_size=32,
                                           steps=range(len(paths) // 32), part=slice(0, 32), workers=workers))

        times = interleaved({"in": epoch(0), "workers": epoch(cores)}, max(3, rounds - 2))
    speed = 1 / paired_ratio(times, "workers", "in")
    rate = len(paths) / median(times["workers"])
    return Row(f"Data: training loader, {cores} worker processes vs in-process (224px, 2 views)",
               f"{rate:,.0f} img/s", f"{len(paths) / median(times['in']):,.0f} img/s in-process", speed,
               f"≥ {0.8 * cores:.1f}× (0.8 per core)", speed >= 0.8 * cores,
               f"one epoch of {len(paths) // 32} steps of 32 files, worker start included; the views are the same "
               f"for any worker count (tests/data/test_file_views.py); cpus_per_gpu 8 gives 7 workers")


if __name__ == "__main__":
    for r in run():
        print(r)
