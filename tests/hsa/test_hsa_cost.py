"""The plan's compute estimate follows HSA's knobs (positives, mixed images, multi-crop, companions)."""

import pytest

from semcl.methods.hsa import HSAMethod
from semcl.methods.registry import METHODS


@pytest.mark.parametrize(("knobs", "want"), [
    # anchor + neighbour + mixed queries (3), two keys (2/3), companions at 2 stages (x 1.1), mining 1/(3 * 5)
    ({}, (3 + 2 / 3) * 1.1 + 1 / 15),
    # appendix "3 positives + 3 mixed": 1 + 3 * 2 queries, 1 + 3 keys
    ({"positives": 3, "k": 10}, (7 + 4 / 3) * 1.1 + 1 / 15),
    # 6 small crops at 96 / 224 of the side: 6 * (96/224)^2 more query passes
    ({"multicrop": 6}, (3 + 6 * (96 / 224) ** 2 + 2 / 3) * 1.1 + 1 / 15),
    # official-code knobs: no companions; no CutMix
    ({"variant": "code", "cutmix": False}, 2 + 2 / 3 + 1 / 15),
    # MoCo v2 with every addition off: one query, one key
    ({"neighbours": False, "cutmix": False, "companions": False}, 4 / 3),
])
def test_hsa_cost_counts_every_pass(knobs, want):
    assert METHODS["hsa"].cost(HSAMethod(**knobs)) == pytest.approx(want, rel=1e-12)
    assert METHODS["mocov2"].cost(None) == 4 / 3  # a constant cost ignores the config
