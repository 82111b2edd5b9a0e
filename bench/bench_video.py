"""Video decoding throughput per worker process (RINCE video, issue 11), for both layouts.

One worker = one process with one torch thread; times are process CPU seconds (PyAV's decoder
threads included), i.e. the cost on one dedicated core. A training sample is one anchor video:
the sampler's three clips (x_f, x_s, x_v; 16 frames at stride 3), each distinct frame decoded once
-- what RINCE's video step consumes per video. Layouts: frame folders of 320×240 JPEGs (UCF101's
size) resized to 171×128 on decode, frame folders extracted at 171×128, and the .avi files
(decoded from the start to the last needed frame). A last, informational row times the four
augmented 128×128 views per sample on one CPU thread.

The "decoded in workers" rows run the training loader itself (semcl.data.views.clip_loader, what the
engine uses for the video methods): plans (clip positions and the four views' augmentation draws) drawn
in this process, the clips decoded in 2 persistent worker processes and handed back through shared
memory. Per worker = samples over the workers' CPU seconds (/proc, their decoder threads included),
the same per-core measure as the rows above; the wall rate of the 2 workers is in the note. The
finish (augmentation on the device) is left out: it runs on the GPU in training.

GPU need (assumption, stated): an A100 trains r3d_18 at 16×112×112 with batch 128 in ~0.5 s per
step, i.e. 256 samples/s; "4 workers keep one A100 busy" (issue 11) means ≥ 64 samples/s per
worker. The 128×128 crops of the paper cost ~1.3× more GPU time than 112², so the true need is
somewhat lower: the target is conservative.

The data are the synthetic UCF101 writer's (moving square over noise, MPEG-4 at qscale 2 and
JPEG q95): noise makes both formats larger than real UCF101 frames/XviD, so decode times here are,
if anything, pessimistic.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from common import RATES, Row, write_rates, write_section

from semcl.data.video import ClipAugment, ClipSampler, load_video_split, write_synthetic_video
from semcl.data.views.clip_loader import ClipLoader, ClipViews, decode_clips

GPU_SAMPLES_PER_S = 128 / 0.5  # A100, r3d_18, batch 128, ~0.5 s per step (assumption)
WORKERS = 4
NEED_PER_WORKER = GPU_SAMPLES_PER_S / WORKERS
LOADER_WORKERS = 2  # the loader rows (this machine's cores)


def _cpu_seconds(fn: Callable[[], object], rounds: int) -> float:
    """Median process CPU time of one call (all threads): the cost on a dedicated worker core,
    robust to other processes sharing the machine (wall time here is several times larger)."""
    fn()  # warm-up
    times = []
    for _ in range(rounds):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


class _Planner:
    """The video pre-training plan (x_f, x_s, x_v; four augmented views) without a model; its finish hands
    the decoded uint8 clips back as they are (the loader rows time the decode, not the device's part)."""

    def __init__(self, sampler: ClipSampler, aug: ClipAugment) -> None:
        self.sampler, self.aug = sampler, aug

    def clip_plan(self, train_set, idx, generator, augs) -> ClipViews:
        frames = self.sampler.sample(train_set.frame_counts[idx], generator).frames
        h, w = train_set.frame_size
        return ClipViews(idx, frames, tuple((k, self.aug.draw(len(idx), h, w, generator)) for k in (0, 0, 1, 2)))

    def finish_views(self, decoded: torch.Tensor, plan: ClipViews, device: torch.device) -> list[torch.Tensor]:
        return [decoded]


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system, all threads) of process `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _loader_rate(s, sampler: ClipSampler, aug: ClipAugment, steps: int) -> tuple[float, float]:
    """(samples per worker CPU second, samples per wall second) of the clip loader, whole set per step."""
    loader = ClipLoader(s, decode_clips, workers=LOADER_WORKERS)
    planner, n = _Planner(sampler, aug), len(s)
    order = torch.arange(n).repeat(steps)
    gen = torch.Generator().manual_seed(0)

    def epoch() -> float:
        feed = loader.epoch(planner, [], gen, order, n, range(steps), slice(None), torch.device("cpu"))
        t0 = time.perf_counter()
        for _ in range(steps):
            next(feed)
        return time.perf_counter() - t0

    try:
        epoch()  # starts the workers (persistent), warms their decoders
        pids = [w.pid for w in loader._data._iterator._workers]
        cpu0 = sum(map(_cpu_of, pids))
        wall = epoch()
        cpu = sum(map(_cpu_of, pids)) - cpu0
    finally:
        loader.close()
    # samples over the workers' summed CPU seconds: what one worker on a dedicated core decodes per second
    return steps * n / cpu, steps * n / wall


def run(rounds: int = 3, videos: int = 4, frames: int = 150, loader_steps: int = 8) -> list[Row]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rows: list[Row] = []
    sampler, aug = ClipSampler(), ClipAugment(size=128)
    gen = torch.Generator().manual_seed(0)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            big, small = Path(tmp) / "big", Path(tmp) / "small"
            common = {"num_classes": videos // 2, "train_per_class": 2, "test_per_class": 1,
                      "frames": (frames, frames)}
            write_synthetic_video("ucf101", big, size=(240, 320), **common)
            write_synthetic_video("ucf101", small, size=(128, 171), layouts=("frames",), **common)
            cases = [
                ("frame folders, 320×240 JPEG resized to 171×128", big, "frames", (128, 171)),
                ("frame folders extracted at 171×128 JPEG", small, "frames", None),
                ("video files, 320×240 MPEG-4 .avi (PyAV) resized to 171×128", big, "videos", (128, 171)),
            ]
            clips, loader_rows = None, []
            for what, root, layout, size in cases:
                s = load_video_split("ucf101", root, "train", layout=layout, frame_size=size)

                def decode(s=s) -> torch.Tensor:
                    return s.clips(range(len(s)), sampler.sample(s.frame_counts, gen).frames)

                rate = len(s) / _cpu_seconds(decode, rounds)
                clips = decode() if clips is None else clips
                # plans need the frame size before decoding: the stored one here (resizing to it is a no-op)
                planned = s if size else load_video_split("ucf101", root, "train", layout=layout, frame_size=(128, 171))
                per_worker, wall = _loader_rate(planned, sampler, aug, loader_steps)
                if not loader_rows:  # the first case: the frame folders the estimate's video rows read
                    RATES.update(video_frames=round(per_worker, 1), video_clip_frames=round(3 * rate))
                loader_rows.append(Row(
                    f"Video: samples per worker decoded in workers (clip loader), {what}", f"{per_worker:,.1f} samples/s",
                    f"{NEED_PER_WORKER:.0f} samples/s", per_worker / NEED_PER_WORKER, f"≥ 1× ({WORKERS} workers per A100)",
                    per_worker >= NEED_PER_WORKER,
                    f"the training loader: plans drawn in the training process, {LOADER_WORKERS} persistent workers "
                    f"decode, shared memory back; {wall:,.1f} samples/s wall from the {LOADER_WORKERS} workers "
                    f"on this shared machine; vs {rate:,.1f} samples/s decoding in one process (the row above)"))
                rows.append(Row(
                    f"Video: decoded samples per worker, {what}", f"{rate:,.1f} samples/s",
                    f"{NEED_PER_WORKER:.0f} samples/s", rate / NEED_PER_WORKER,
                    f"≥ 1× ({WORKERS} workers per A100)", rate >= NEED_PER_WORKER,
                    f"{3 * rate:,.0f} clips/s (x_f, x_s, x_v of 16 frames at stride 3); an A100 at "
                    f"{GPU_SAMPLES_PER_S:.0f} samples/s (r3d_18, batch 128 per ~0.5 s, assumed) needs "
                    f"{GPU_SAMPLES_PER_S / rate:.1f} such workers"))
            rows += loader_rows
            rate = len(clips) / _cpu_seconds(lambda: [aug(clips[:, v], gen) for v in (0, 0, 1, 2)], rounds)
            rows.append(Row("Video: 4 augmented 128² views per sample on one CPU thread", f"{rate:,.1f} samples/s",
                            "—", None, "informational", None,
                            "ClipAugment runs on any device (draws on the CPU generator, ops where the clips are): "
                            f"on the CPU it would need {GPU_SAMPLES_PER_S / rate:.0f} cores per A100, so augment "
                            "on the GPU and keep the workers for decoding"))
    finally:
        torch.set_num_threads(threads)
    return rows


if __name__ == "__main__":
    got = run()
    for r in got:
        print(r)
    if "--write" in sys.argv:  # this bench's section of results.md, the rest kept
        write_section("video", "Video loader rows (issue 22)", got, Path(__file__).resolve().parent / "results.md")
        write_rates(RATES)
