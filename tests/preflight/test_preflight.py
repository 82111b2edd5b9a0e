"""Preflight (`semcl check`): the GPU memory formula, the measured activation bytes, the slurm refusal,
and the CI run of the preflight over every registered table at a reduced size.

What the CI run reduces (so it fits in about a minute here): the backbone (resnet_tiny4: width and
depth, with the four stages the stage columns name), the decode size of the file-backed sets (32 px,
segmentation included), the projection head (64 / 32), ViT / video / segmentation networks (method
knobs: tiny stand-ins), and the rows: one row per method per table (plus what it builds on), each
distinct config once. The data layout, the real class count, the method, the optimiser, the
checkpoint round trip and every evaluation of the row are the real ones.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from semcl.cli import main as cli
from semcl.preflight.check import CONTEXT_GB, Reduce, _saved_bytes, estimate_gpu_gb
from semcl.preflight.plan import check_tables
from semcl.registry.tables import load_registry

# Failures the preflight found that are not fixed yet: message fragment -> what is wrong. The CI test
# fails on any other error, and on a listed one that no longer occurs (then delete its line).
# first errors the preflight is known to find, with the reason; each entry is a defect to fix, not a pass
KNOWN_FAILURES: dict[str, str] = {
    # a defect of the reduction, found at HEAD e97a473 too: the CI check shrinks the pre-training backbone
    # to resnet_tiny4, which the detectron2 export (semcl/methods/transfer/export.py) refuses as not a
    # torchvision ResNet-50; a full-size check exports the real ResNet-50
    "not a torchvision ResNet-50 backbone": "the reduced backbone cannot be exported for detectron2",
}


class _Cfg:
    class optim:  # noqa: N801 (a stand-in for the config section)
        amp = None


def test_gpu_estimate_is_the_documented_formula():
    m = nn.Linear(10, 5)  # 55 float32 parameters = 220 bytes
    m.register_buffer("queue", torch.zeros(4, 8))  # 128 bytes of state, no gradient
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    got = estimate_gpu_gb(m, _Cfg, opt, act_per_sample=100.0, batch_per_gpu=8)
    # state (220 + 128) + grad and momentum (2 * 220) + activations 100 * 8
    assert got == pytest.approx((348 + 440 + 800) / 2**30 + CONTEXT_GB)
    adam = torch.optim.Adam(m.parameters())
    assert estimate_gpu_gb(m, _Cfg, adam, 100.0, 8) == pytest.approx((348 + 660 + 800) / 2**30 + CONTEXT_GB)


def test_saved_activation_bytes_are_counted_once_per_storage():
    x = torch.randn(4, 6)  # 96 bytes
    w = torch.randn(6, 3, requires_grad=True)
    hooks, saved = _saved_bytes()
    with hooks:
        y = (x @ w).relu()  # mm saves x (w's gradient needs it); relu saves its output [4, 3] = 48 bytes
    y.sum().backward()
    assert sum(saved.values()) == 96 + 48


def test_slurm_run_refuses_a_table_without_a_passed_preflight(tmp_path, capsys):
    code = cli.main(["--results", str(tmp_path), "run", "rince/tab2", "--executor", "slurm"])
    assert code == 2
    assert "refusing to submit: rince/tab2: no preflight on record" in capsys.readouterr().err
    (tmp_path / "preflight").mkdir()
    (tmp_path / "preflight" / "paper.json").write_text(json.dumps(
        {"rince/tab2": {"ok": False, "run_ids": [], "errors": ["Triplet: ValueError: x"]}}))
    assert cli.main(["--results", str(tmp_path), "run", "rince/tab2", "--executor", "slurm"]) == 2
    assert "its preflight failed (Triplet: ValueError: x)" in capsys.readouterr().err


def test_preflight_of_every_registered_table_at_ci_size(tmp_path):
    tables = [t for t in load_registry().values()
              if "paper" in t.profiles and any(r.implemented and not r.reference for r in t.rows)]
    reduce = Reduce(backbone="resnet_tiny4", image_size=32, head_hidden=64, head_dim=32, drop_pretrained=True,
                    method={"arch": "vit_tiny_test", "checkpoint": None, "backbone": "r3d_small",
                            "segmenter": "deeplabv3_tiny"})
    results = check_tables(tables, "paper", tmp_path, 80.0, reduce=reduce, rows_per_method=1)
    errors = [f"{r.table} / {r.row}: {r.error}" for r in results if r.error]
    assert [e for e in errors if not any(k in e for k in KNOWN_FAILURES)] == []
    assert [k for k in KNOWN_FAILURES if not any(k in e for e in errors)] == []  # fixed: delete its line
    assert {r.table for r in results} == {t.id for t in tables}
    trained = [r for r in results if r.act_bytes_per_sample is not None and r.error is None]
    assert trained and all(r.params > 0 and r.act_bytes_per_sample > 0 and r.est_gpu_gb > CONTEXT_GB
                           for r in trained)
