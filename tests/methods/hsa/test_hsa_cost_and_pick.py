"""HSA: the plan's compute estimate follows its knobs; the file loader's neighbour pick."""

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


def test_the_loaders_neighbour_pick_replays_its_generator():
    import torch

    from semcl.data.semantics.neighbours import pick_neighbours

    table = torch.tensor([[4, 5, 6, 7], [0, 2, 3, 1]])
    g = torch.Generator().manual_seed(3)
    want_col = int(torch.randint(4, (1,), generator=torch.Generator().manual_seed(3)))
    assert pick_neighbours(table, 1, 0, g) == [int(table[0, want_col])]
    cols = torch.rand(4, generator=torch.Generator().manual_seed(9)).argsort()[:3]
    got = pick_neighbours(table, 3, 1, torch.Generator().manual_seed(9))
    assert got == table[1, cols].tolist() and len(set(got)) == 3 and set(got) <= {0, 1, 2, 3}
    with pytest.raises(ValueError, match="cannot pick 5 distinct neighbours of 4"):
        pick_neighbours(table, 5, 0, g)
