"""The registry index's cache key covers the whole package's source, wherever the index module sits: a source
edit anywhere (a method, an evaluation, the config schema) must make `semcl list` / `plan` rebuild the index."""

from __future__ import annotations

from pathlib import Path

import semcl
from semcl.registry import index_store


def test_the_key_walks_the_whole_package_not_the_index_modules_folder():
    package = Path(semcl.__file__).resolve().parent
    assert index_store.SRC == package and Path(index_store.__file__).resolve().parent != package
    key = index_store.source_key()
    for module in ("config.py", "methods/spec.py", "evals/protocols/__init__.py", "data/registry.py",
                   "registry/tables.py", "engine/job.py"):
        assert f"{package / module}," in key, module


def test_a_source_edit_outside_registry_changes_the_key(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    (pkg / "registry").mkdir(parents=True)
    (pkg / "methods").mkdir()
    (pkg / "registry" / "index_store.py").write_text("# index\n")
    method = pkg / "methods" / "toy.py"
    method.write_text("A = 1\n")
    reg = tmp_path / "experiments"
    reg.mkdir()
    (reg / "t.yaml").write_text("id: t\n")
    monkeypatch.setattr(index_store, "SRC", pkg)
    before = index_store.source_key(reg)
    method.write_text("A = 22\n")  # another size: a key without methods/ would not see it
    assert index_store.source_key(reg) != before
