"""The GPU-hour estimate against public arithmetic (bench/bench_estimate.py), published runs brought to an A100,
the per-step host floor, a user's throughput file, and the loader rates equal to bench/results.md."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from semcl.errors import ConfigError
from semcl.estimate import throughput

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import bench_estimate  # noqa: E402


def test_range_ratio_is_one_inside_and_against_the_nearer_end_outside():
    assert bench_estimate.range_ratio(5.0, 4.0, 8.0) == 1.0
    assert bench_estimate.range_ratio(10.0, 4.0, 8.0) == 1.25
    assert bench_estimate.range_ratio(3.0, 4.0, 8.0) == 0.75


def test_the_six_rows_are_within_a_quarter_of_public_arithmetic():
    got = {(p["table"], p["row"]): ratio for p, _, _, ratio in bench_estimate.ratios()}
    assert len(got) == 6
    assert all(abs(r - 1) <= bench_estimate.TOLERANCE for r in got.values()), got


def test_a_published_vit_run_is_brought_to_one_a100_by_nvidias_figures():
    # MAE ViT-B: 154.8 img/s per V100 on 32 GPUs with AMP; one pass per image; V100 AMP 8-GPU efficiency
    # 8322 / 8 / 1200; A100 / V100 with AMP 2470 / 1200
    rate, size = throughput.published_rate("vit_base_patch16", "gpaco_vit", amp=True)
    assert size == 224
    assert rate == pytest.approx(154.8 / (1040.3 / 1200) * 2470 / 1200, rel=1e-12)
    # the MoCo v2 run speaks for momentum-encoder methods only: a supervised ResNet-50 keeps NVIDIA's figure
    assert throughput.published_rate("resnet50", "hsa", amp=False)[0] == pytest.approx(
        167.8 * 1.3333 / (356.9 / 367) * 938 / 367, rel=1e-12)
    assert throughput.published_rate("resnet50", "gpaco", amp=False) is None


def test_no_step_is_faster_than_the_host_floor():
    from semcl.estimate.gpu_hours import estimate
    from semcl.registry.plan import plan_runs
    from semcl.registry.tables import get_table

    run = next(r for r in plan_runs(get_table("scns/kd-cifar100"), "paper") if r.row_label == "KD resnet56 to resnet20")
    cfg = run.config
    steps = -(-50_000 // cfg.optim.batch_size)
    assert (cfg.optim.batch_size, cfg.schedule.epochs, steps) == (64, 240, 782)
    assert estimate(cfg, 1).train_wall_h == pytest.approx(240 * 782 * 0.0045 / 3600, rel=1e-12)


def test_a_users_throughput_file_wins_and_a_bad_value_is_one_line(tmp_path, monkeypatch):
    header = (ROOT / "src/semcl/data/files/train_throughput.csv").read_text().splitlines()[0]
    user = tmp_path / "measured.csv"
    user.write_text(header + "\nhost,step_floor,measured,9,ms per step,,,,,,,gpu_check on our A100,,\n")
    monkeypatch.setenv("SEMCL_THROUGHPUT", str(user))
    assert throughput.step_floor_s() == 0.009
    user.write_text(header + "\nhost,step_floor,measured,fast,ms per step,,,,,,,x,,\n")
    throughput._read.cache_clear()
    with pytest.raises(ConfigError, match=r"measured.csv:2: key 'value' is 'fast'"):
        throughput.step_floor_s()
    throughput._read.cache_clear()


# the packaged loader rates and the bench/results.md lines they come from (a rerun of the bench that moves a
# rate fails here until the table follows)
RESULTS_LINES = {
    "jpeg224_2views": r"\| 1 \| Loader: GPaCo 2 views 224px from JPEG per worker[^|]*\| ([\d.,]+) img/s",
    "jpeg_decode": r"stages alone: decode_jpeg ([\d.,]+)",
    "memory32_2views": r"\| \d+ \| Data: supcon 2 views 32px per worker vs GPU need \| ([\d.,]+) img/s",
    "video_frames": r"\| 4 \| Video: samples per worker decoded in workers \(clip loader\), frame folders, 320×240"
                    r"[^|]*\| ([\d.,]+) samples/s",
    "video_clip_frames": r"video rows: bench/bench_video.py -->(?s:.*?)- \[1\] ([\d.,]+) clips/s",
}


def test_the_loader_rates_equal_bench_results():
    text = (ROOT / "bench" / "results.md").read_text()
    for name, pattern in RESULTS_LINES.items():
        found = re.search(pattern, text)
        assert found, f"bench/results.md: no line for loader rate {name}"
        assert throughput.loader_rate(name) == float(found.group(1).replace(",", "")), name
