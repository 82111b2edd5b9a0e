"""Shared fixtures: a scratch registry and results store."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from semcl.registry import load_registry

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fresh_registry_cache():
    load_registry.cache_clear()
    yield
    load_registry.cache_clear()


@pytest.fixture
def registry_copy(tmp_path, monkeypatch) -> Path:
    """A writable copy of the real registry, selected through SEMCL_REGISTRY."""
    root = tmp_path / "experiments"
    shutil.copytree(REPO / "experiments", root)
    monkeypatch.setenv("SEMCL_REGISTRY", str(root))
    return root
