"""The KD zoo's catalog costs are the counted ones (scripts/count_kd_gflops.py), not guesses."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from semcl.estimate.catalog import BACKBONE_GFLOPS
from semcl.models.kd import KD_MODELS

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "count_kd_gflops.py"


def test_every_kd_model_has_a_cost():
    assert set(KD_MODELS) <= set(BACKBONE_GFLOPS)


@pytest.mark.parametrize("name", ["resnet8", "wrn_16_1"])
def test_catalog_equals_the_flop_counter(name):
    spec = importlib.util.spec_from_file_location("count_kd_gflops", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fwd, total = mod.count(name)
    assert BACKBONE_GFLOPS[name] == pytest.approx(total, rel=1e-3)
    # a plain CNN's backward is twice its forward (input and weight gradients)
    assert total == pytest.approx(3 * fwd, rel=0.02)
