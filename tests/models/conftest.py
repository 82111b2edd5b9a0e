"""Shared fixtures of the model tests."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_thread():
    """Pin torch to one intra-op thread for the model tests.

    On a shared, busy CPU two OpenMP threads contend and a batch-2 ResNet-50 forward
    gets ~10x slower; batches this small gain nothing from more threads.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
