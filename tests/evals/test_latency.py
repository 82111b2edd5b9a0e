"""Latency: the timer against a fake clock, the registry's latency column, evaluate(), and the table."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from semcl.config import hashable_config
from semcl.data import ImageSet
from semcl.engine.evaluate import evaluate
from semcl.errors import ConfigError
from semcl.evals.latency import measure_latency, percentile
from semcl.evals.protocols import describe, metric_key
from semcl.files import write_json_atomic
from semcl.registry.plan import plan_runs
from semcl.registry.tables import _column, get_table
from semcl.report.tables import long_table, render, summary
from semcl.store import Store


class FakeTime:
    """A clock that only moves when the timed function runs: call k takes durations_ms[k]."""

    def __init__(self, durations_ms: list[float]) -> None:
        self.now, self.durations, self.calls, self.events = 100.0, list(durations_ms), 0, []

    def clock(self) -> float:
        self.events.append("clock")
        return self.now

    def fn(self, example) -> None:
        self.events.append(("fn", example))
        self.now += self.durations[self.calls] / 1000.0
        self.calls += 1

    def sync(self) -> None:
        self.events.append("sync")


def test_median_and_p90_from_a_fake_clock():
    # 2 warm-up calls (1000 ms each, ignored), then 10 timed calls of 5, 1, 4, 2, 3, 9, 7, 6, 8, 10 ms.
    # Sorted 1..10: median (5 + 6) / 2 = 5.5; p90 at position 9 * 0.9 = 8.1 -> 9 + 0.1 * (10 - 9) = 9.1.
    t = FakeTime([1000, 1000, 5, 1, 4, 2, 3, 9, 7, 6, 8, 10])
    got = measure_latency(t.fn, "x", warmup=2, repeats=10, clock=t.clock)
    assert got["median_ms"] == pytest.approx(5.5, abs=1e-9)
    assert got["p90_ms"] == pytest.approx(9.1, abs=1e-9)
    assert got["repeats"] == 10 and t.calls == 12
    # an odd count: median is the middle value
    t = FakeTime([3.0, 1.0, 2.0])
    got = measure_latency(t.fn, "x", warmup=0, repeats=3, clock=t.clock)
    assert (got["median_ms"], got["p90_ms"]) == pytest.approx((2.0, 2.8))


def test_sync_runs_before_every_clock_read():
    t = FakeTime([1.0] * 4)
    measure_latency(t.fn, "batch", warmup=1, repeats=3, clock=t.clock, sync=t.sync)
    timed = ["sync", "clock", ("fn", "batch"), "sync", "clock"]
    assert t.events == [("fn", "batch"), *timed * 3]


def test_percentile_and_bad_arguments():
    assert percentile([4.0], 90) == 4.0
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 50) == 3.0 and percentile([1.0, 2.0, 3.0, 4.0, 5.0], 90) == 4.6
    with pytest.raises(ValueError, match="repeats >= 1"):
        measure_latency(lambda x: x, 0, repeats=0)


def test_latency_column_maps_to_its_metric():
    col = _column({"key": "lat", "label": "Latency (ms)", "eval": "latency"}, "x.yaml")
    assert metric_key(col, {}) == "latency_ms" and "batch size and GPU are unknown" in describe(col)
    with pytest.raises(ConfigError, match="key 'out' does not apply to eval 'latency' \\(it takes: no other key\\)"):
        _column({"key": "lat", "label": "L", "eval": "latency", "out": "mnist"}, "x.yaml")


def test_only_tables_with_a_latency_column_ask_for_it():
    fig = get_table("gpaco/fig1a")
    row = fig.row("ResNeXt-50-32x4d (GPaCo)")
    assert fig.config_tree(row, "paper")["eval"]["latency"] is True
    cfg = fig.resolve(row, "smoke")
    assert cfg.eval.latency is True and cfg.eval.latency_batch is None
    other = get_table("gpaco/cifar100-lt")
    tree = other.config_tree(other.rows[0], "paper")
    assert "latency" not in tree["eval"]  # so the run ids of tables without one do not move
    hashed = hashable_config(other.resolve(other.rows[0], "paper"))["eval"]
    assert "latency" not in hashed and "latency_batch" not in hashed


class Classifier(nn.Module):
    has_classifier = True

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Flatten()
        self.fc = nn.Linear(3 * 8 * 8, 4)
        self.seen: list[tuple[int, ...]] = []

    def classify(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(tuple(x.shape))
        return self.fc(self.backbone(x))


def _set(n: int) -> ImageSet:
    g = torch.Generator().manual_seed(0)
    return ImageSet("cifar100", torch.randint(0, 256, (n, 3, 8, 8), dtype=torch.uint8, generator=g),
                    torch.arange(n) % 4, [str(i) for i in range(4)])


def test_evaluate_times_the_classifier_on_one_batch():
    fig = get_table("gpaco/fig1a")
    cfg = fig.resolve(fig.row("ResNeXt-50-32x4d (GPaCo)"), "smoke")
    cfg.data.name, cfg.eval.latency_batch = "cifar100", 5
    method = Classifier()
    m = evaluate(method, cfg, _set(12), _set(3), data_root=None, seed=0)  # 3 test images, repeated to 5
    assert m["latency_batch"] == 5 and 0 < m["latency_ms"] <= m["latency_p90_ms"]
    assert method.seen.count((5, 3, 8, 8)) == 60 and not method.training  # 10 warm-up + 50 timed, eval mode
    cfg.eval.latency_repeats = 1  # the preflight's setting: 1 warm-up + 1 timed call
    method = Classifier()
    evaluate(method, cfg, _set(12), _set(3), data_root=None, seed=0)
    assert method.seen.count((5, 3, 8, 8)) == 2
    cfg.eval.latency = None
    assert "latency_ms" not in evaluate(Classifier(), cfg, _set(12), _set(3), data_root=None, seed=0)


def test_table_shows_our_latency_beside_the_paper(tmp_path):
    fig, store = get_table("gpaco/fig1a"), Store(tmp_path)
    for run in plan_runs(fig, "paper"):
        write_json_atomic(store.metrics_path(run.run_id), {"run_id": run.run_id, "metrics": {"latency_ms": 12.0}})
    md = render(fig, "paper", summary(fig, "paper", long_table(fig, "paper", store)), "md")
    line = next(x for x in md.splitlines() if x.startswith("| ResNeXt-50-32x4d (GPaCo) |"))
    assert line.endswith("| 12.00 ± 0.00 (n=3) / 13.10 / -1.10* |")
    assert "median ms per batch" in md
