"""Shared fixtures of the HSA tests: every test runs on one torch thread (tests/conftest.py)."""

import pytest


@pytest.fixture(autouse=True)
def _single_thread(single_thread):
    yield
