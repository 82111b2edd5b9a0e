"""The official ImageNet-100 class-name similarities (stsb-roberta-large, shipped as package data) give the
paper's rank-2 pairs; rince/tab3 / tab6 read them at the paper profile; the ImageNet branch's momentum
step runs before the keys (method.key_update before_keys)."""

from __future__ import annotations

import copy
import hashlib

import pytest
import torch

from semcl.data.imagenet100 import imagenet100_class_names
from semcl.data.semantics.name_similarity import (
    OFFICIAL_FILE,
    OFFICIAL_FILE_SHA256,
    load_similarity,
    name_ranks,
    similarity_file,
)
from semcl.errors import DataError
from semcl.methods.base import Batch, DataInfo, run_step
from semcl.methods.registry import method_class
from semcl.run_config import build_config

pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py


def test_packaged_official_matrix_gives_the_papers_pairs():
    assert hashlib.sha256(OFFICIAL_FILE.read_bytes()).hexdigest() == OFFICIAL_FILE_SHA256
    names = imagenet100_class_names()  # the dataset's class order (sorted wnids)
    got, sim = load_similarity("official", names)
    assert got == names and sim.shape == (100, 100) and torch.equal(sim, sim.T)
    idx = {n: i for i, n in enumerate(names)}
    ranks, _ = name_ranks(sim, 0.45)
    readme, _ = name_ranks(sim, "readme")
    assert int((ranks == 2).sum()) // 2 == 63 and int((readme == 2).sum()) // 2 == 131

    def rank(a, b, r=ranks):
        return int(r[idx[a], idx[b]])

    # values of the official file (float32, shown rounded): 0.740, 0.454, 0.447
    assert round(float(sim[idx["Shih-Tzu"], idx["toy terrier"]]), 3) == 0.740
    assert rank("Shih-Tzu", "toy terrier") == 2 and rank("toy terrier", "Shih-Tzu") == 2
    assert rank("laptop", "lorikeet") == 2  # 0.4537: just above the paper's 0.45
    assert rank("standard poodle", "English foxhound") == 0  # 0.4474: below 0.45 ...
    assert rank("standard poodle", "English foxhound", readme) == 2  # ... above the README's 0.4
    assert rank("laptop", "laptop") == 1


def test_official_alias_checks_the_packaged_bytes(tmp_path, monkeypatch):
    assert similarity_file("official") == OFFICIAL_FILE
    bad = tmp_path / "word_sims_imagenet100.npy"
    bad.write_bytes(OFFICIAL_FILE.read_bytes()[:-1] + b"\0")
    monkeypatch.setattr("semcl.data.semantics.name_similarity.OFFICIAL_FILE", bad)
    with pytest.raises(DataError, match="not the official file's"):
        similarity_file("official")
    with pytest.raises(DataError, match="similarity file not found"):
        similarity_file(tmp_path / "absent.npy")


@pytest.mark.parametrize("key_update", [None, "before_keys"])
def test_key_update_order(key_update):
    """before_keys: this step's keys come from the EMA that already took this step (ImageNet branch);
    unset: from the EMA of the previous step (CIFAR branch). Either way the EMA takes one step."""
    method = {"name": "scl", "bank_size": 8, "momentum": 0.5, **({"key_update": key_update} if key_update else {})}
    cfg = build_config({"method": method, "model": {"backbone": "resnet_tiny", "head_hidden": 8, "head_dim": 4}},
                       where="test")
    torch.manual_seed(0)
    m = method_class("scl")(cfg, DataInfo(3, 1, None)).double()
    with torch.no_grad():  # online and key nets differ, so the order shows in the keys
        for p in m.backbone.parameters():
            p.add_(0.1 * torch.randn_like(p))
    g = torch.Generator().manual_seed(1)
    views = [torch.randn(4, 1, 12, 12, generator=g, dtype=torch.float64) for _ in range(2)]
    ref = copy.deepcopy(m)
    if key_update == "before_keys":
        ref.keys.update()
    with torch.no_grad():
        expected = ref.key_head(ref.key_backbone(views[1]))
    if key_update != "before_keys":
        ref.keys.update()
    run_step(m, Batch.of(views, torch.tensor([0, 1, 2, 0])))
    m.after_backward()  # enqueues the keys at slots 0-3
    torch.testing.assert_close(m.bank.features[:4], expected, rtol=0, atol=1e-12)
    for p, p_ref in zip(m.key_backbone.parameters(), ref.key_backbone.parameters(), strict=True):
        torch.testing.assert_close(p, p_ref, rtol=0, atol=0)
