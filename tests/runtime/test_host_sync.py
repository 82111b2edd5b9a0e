"""semcl.runtime.host_sync: which path a tensor takes, and value checks with and without a host read."""

from __future__ import annotations

import pytest
import torch

from semcl.runtime.host_sync import check, like_an_accelerator, reads_are_free


def test_cpu_tensors_read_freely_unless_told_to_take_the_accelerator_path():
    t = torch.zeros(2)
    assert reads_are_free(t)
    with like_an_accelerator():
        assert not reads_are_free(t)
        with like_an_accelerator():
            assert not reads_are_free(t)
        assert not reads_are_free(t)  # the inner block restores the outer state
    assert reads_are_free(t)
    assert not reads_are_free(torch.zeros(2, device="meta"))


@pytest.mark.parametrize("accelerator", [False, True])
def test_a_failed_check_is_a_value_error_on_both_paths(accelerator):
    labels = torch.tensor([0, 3, 1])
    with like_an_accelerator() if accelerator else torch.no_grad():
        check((labels >= 0).all(), "labels must be >= 0")  # passes: nothing raised
        with pytest.raises(ValueError, match=r"^labels must lie in \[0, 3\)$"):
            check((labels < 3).all(), "labels must lie in [0, 3)")
