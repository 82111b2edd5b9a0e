"""Per-stage linear probes (HSA Fig. 3): the cached-feature probe, the feature table, the protocol."""

import pytest
import torch

from semcl.evals.linear_probe import linear_probe
from semcl.evals.protocols import eval_section, metric_key, validate_column
from semcl.evals.stage_probe import probe_on_features, stage_feature_table

pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py


def _to_float(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return images.float() / 255.0


def _data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 3, 2, 2), generator=g, dtype=torch.uint8), torch.randint(0, 4, (n,), generator=g)


def test_probe_on_features_equals_the_cached_linear_probe():
    # Same generator draws and schedule as linear_probe(augment=False): identical top-1 on identical features.
    (xtr, ytr), (xte, yte) = _data(40, 0), _data(17, 1)
    args = dict(epochs=4, lr=0.7, batch_size=8, momentum=0.9, weight_decay=1e-3, milestones=(2, 3), gamma=0.1, seed=5)
    ref = linear_probe(lambda x: x.flatten(1), xtr, ytr, xte, yte, num_classes=4, train_transform=_to_float,
                       test_transform=_to_float, augment=False, eval_batch_size=9, **args)
    got = probe_on_features(_to_float(xtr, None).flatten(1), ytr, _to_float(xte, None).flatten(1), yte,
                            num_classes=4, **args)
    assert got == ref.top1_last


def test_probe_on_separable_features_is_exact():
    feats = torch.eye(3).repeat(4, 1) * 5.0  # class c is the unit vector e_c: linearly separable
    labels = torch.arange(3).repeat(4)
    assert probe_on_features(feats, labels, feats[:3], labels[:3], num_classes=3, epochs=20, lr=1.0,
                             batch_size=4) == 100.0


def test_stage_feature_table_keeps_order_across_batches():
    images, _ = _data(11, 2)

    def stages(x):
        return {"stem": x.mean(dim=(2, 3)), "layer1": x.flatten(1)}

    table = stage_feature_table(stages, images, _to_float, ["layer1", "stem"], batch_size=4)
    torch.testing.assert_close(table["layer1"], images.float().flatten(1) / 255.0)
    torch.testing.assert_close(table["stem"], images.float().mean(dim=(2, 3)) / 255.0)


def test_columns_set_the_stages_and_a_profile_drops_one():
    cols = [validate_column({"key": s, "label": s, "eval": "stage_probe", "stage": s}, "f.yaml", i)
            for i, s in enumerate(["layer4", "stem", "layer2"])]
    ev: dict = {}
    eval_section(cols, {"layer4": None}, ev)
    assert ev["stage_probe"] == ["stem", "layer2"] and ev["linear_probe"] is False
    assert metric_key(cols[0], {"layer4": None}) is None
    assert metric_key(cols[2], {}) == "stage_probe_top1_layer2"
