"""Registry and schema: the real entry loads; malformed entries fail with the file and the key."""

from __future__ import annotations

import pytest

from semcl.errors import ConfigError
from semcl.methods.ranked_contrastive import RinceMethod
from semcl.registry.tables import get_table, load_registry
from semcl.run_config import build_config


def test_rince_tab2_lists_every_method_of_the_paper_table():
    t = get_table("rince/tab2")
    assert [r.label for r in t.rows] == [
        "Cross-entropy", "Cross-entropy s.a.", "Label smoothing (superclass)", "Two heads", "Two heads (lambda = 0.1)",
        "SCL two heads", "Triplet", "Hierarchical triplet", "FastAP", "SCL-in", "SCL-out", "RINCE-out", "RINCE-in",
        "RINCE-out-in", "SCL-in (paper text)", "SCL-out (paper text)", "RINCE-out (summed, paper text)",
        "RINCE-in (summed, paper text)", "RINCE-out-in (summed, paper text)",
        # the authors' checkpoints of the cifar branch (registry `released:`)
        "SCL-in (authors checkpoint)", "SCL-out (authors checkpoint)", "RINCE-in (authors checkpoint)",
        "RINCE-out (authors checkpoint)", "RINCE-out-in (authors checkpoint)"]
    assert [r.label for r in t.rows if not r.implemented] == []
    # no RINCE number is known: every reported cell is null
    assert all(v is None for r in t.rows for v in r.reported.values())
    assert t.seeds == [123, 546, 937]


def test_paper_profile_resolves_the_paper_hyperparameters():
    t = get_table("rince/tab2")
    cfg = t.resolve(t.row("RINCE-in"), "paper")
    assert isinstance(cfg.method, RinceMethod)
    assert (cfg.method.form, cfg.method.taus, cfg.method.bank_size, cfg.method.momentum) == ("in", [0.1, 0.225], 4096, 0.99)
    # the default row runs the official CIFAR code's loss (issue 23); the paper text's sum is a named row
    assert (cfg.method.positives, cfg.method.rank_reduction, cfg.method.key_first_rank_only) == ("cumulative", "mean", True)
    summed = t.resolve(t.row("RINCE-in (summed, paper text)"), "paper").method
    assert (summed.positives, summed.rank_reduction, summed.key_first_rank_only) == ("rank", "sum", False)
    assert (cfg.optim.lr, cfg.optim.batch_size, cfg.schedule.epochs, cfg.model.backbone) == (0.5, 512, 1000, "resnet50_cifar")
    ce = t.resolve(t.row("Cross-entropy"), "paper")
    assert (ce.optim.lr, ce.schedule.epochs, ce.data.augment) == (0.8, 500, "crop_flip")
    assert ce.eval.ood == ["cifar10", "tinyimagenet"] and ce.eval.retrieval == ["coarse", "fine"]


def test_mini_profile_substitutes_mnist_and_drops_tinyimagenet():
    t = get_table("rince/tab2")
    cfg = t.resolve(t.row("SCL-out"), "mini")
    assert cfg.eval.ood == ["mnist"] and cfg.data.name == "fashion_mnist"
    assert cfg.method.bank_size == 4096 and cfg.method.form == "out"


def test_code_variant_fills_the_official_code_knobs():
    cfg = build_config({"method": {"name": "rince", "variant": "code"}}, where="x")
    assert (cfg.method.positives, cfg.method.rank_reduction, cfg.method.key_first_rank_only) == ("cumulative", "mean", True)
    # an explicit knob wins over the variant
    cfg = build_config({"method": {"name": "rince", "variant": "code", "rank_reduction": "sum"}}, where="x")
    assert cfg.method.rank_reduction == "sum"


@pytest.mark.parametrize("tree, message", [
    ({"optim": {"lrr": 1}}, "x: unknown key 'optim.lrr'"),
    ({"optim": {"lr": "fast"}}, "x: 'optim.lr' must be a number, got 'fast'"),
    ({"schedule": {"epochs": 1.5}}, "x: 'schedule.epochs' must be an integer, got 1.5"),
    ({"method": {"name": "moco"}}, "x: unknown method 'method.name' = 'moco'"),
    ({"method": {"name": "ce", "tau": 0.1}}, "x: unknown key 'method.tau'"),
    ({"method": {"name": "rince", "form": "sideways"}}, "x: 'method.form' = 'sideways' is not one of"),
    ({"method": {"name": "mmseg_seg"}}, "(planned, not implemented yet)"),
])
def test_schema_errors_name_the_key(tree, message):
    with pytest.raises(ConfigError) as err:
        build_config(tree, where="x")
    assert message in str(err.value) and "\n" not in str(err.value)


def _edit(root, old, new):
    path = root / "rince" / "tab2.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize("old, new, message", [
    ("method.tau: 0.1, method.bank_size: 4096}", "method.tua: 0.1}",
     "row 'SCL-in (paper text)', profile 'paper': unknown key 'method.tua'"),
    ("    method: fastap", "    method: fastapp", "rows[8]: unknown method 'fastapp'"),
    ("title: CIFAR", "titel: CIFAR", "unknown key 'titel'"),
    ("      schedule.epochs: 6", "      schedule.epochs: eight", "profile 'mini': 'schedule.epochs' must be an integer"),
    ("eval: ood, out: cifar10}", "eval: odd, out: cifar10}", "'eval' = 'odd' is not one of"),
    ("seeds: [123, 546, 937]", "seeds: [123, 546, 937", "invalid YAML"),
])
def test_malformed_registry_entry_names_file_and_key(registry_copy, old, new, message):
    path = _edit(registry_copy, old, new)
    with pytest.raises(ConfigError) as err:
        load_registry()
    text = str(err.value)
    assert text.startswith(str(path)) and message in text and "\n" not in text


@pytest.mark.parametrize("asked, message", [
    ("rince/tab99", "unknown table 'rince/tab99'; did you mean rince/tab9?"),
    ("RINCE/Tab2", "unknown table 'RINCE/Tab2'; did you mean rince/tab2?"),
    ("gpaco/fig1", "unknown table 'gpaco/fig1'; did you mean gpaco/fig1a?"),
    ("rince/nope", "unknown table 'rince/nope' (tables of rince: rince/align-uniform, rince/fig2, "),
    ("foo/bar", "unknown table 'foo/bar' (papers: gpaco, hsa, paco, rince, scns; `semcl list` shows the "),
])
def test_an_unknown_table_names_close_matches_or_its_papers_tables(asked, message):
    with pytest.raises(ConfigError) as err:
        get_table(asked)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_get_table_reads_only_its_files_once_the_registry_was_checked_whole(tmp_path, monkeypatch, registry_copy):
    import semcl.registry.tables as registry_mod

    monkeypatch.setenv("SEMCL_CACHE", str(tmp_path / "cache"))
    loaded = []
    real = registry_mod.load_table
    monkeypatch.setattr(registry_mod, "load_table", lambda path, presets: loaded.append(path.name) or real(path, presets))
    registry_mod.load_registry.cache_clear()  # as in a new process
    whole = registry_mod.get_table("rince/tab2")  # no index yet: the whole registry, then its table list is kept
    assert len(loaded) > 40
    loaded.clear()
    fast = registry_mod.get_table("rince/tab2")
    assert sorted(loaded) == ["tab10.yaml", "tab2.yaml", "tab9.yaml"]  # the table and the two it selects from
    assert fast.rows == whole.rows and sorted(fast.linked) == sorted(whole.linked) == ["rince/tab10", "rince/tab9"]
    with pytest.raises(ConfigError, match="unknown table 'rince/nope' \\(tables of rince: .*rince/tab2"):
        registry_mod.get_table("rince/nope")
    # any edit under the registry: the whole registry is checked again
    (registry_copy / "rince" / "tab9.yaml").write_text((registry_copy / "rince" / "tab9.yaml").read_text() + "\n")
    loaded.clear()
    registry_mod.load_registry.cache_clear()
    registry_mod.get_table("rince/tab2")
    assert len(loaded) > 40


def test_a_poisoned_index_cache_cannot_point_a_table_at_another_file(tmp_path, monkeypatch, registry_copy):
    """The index cache may be shared ($SEMCL_CACHE): a path outside the registry, or another table's file under
    a table's id, is not trusted; the registry is read whole and the index rewritten."""
    import json as _json

    import semcl.registry.tables as registry_mod
    from semcl.registry.index_store import cache_file, table_paths

    monkeypatch.setenv("SEMCL_CACHE", str(tmp_path / "cache"))
    registry_mod.load_registry.cache_clear()
    registry_mod.get_table("rince/tab2")  # writes the table list
    index = cache_file(registry_copy)
    good = _json.loads(index.read_text())
    for target in ("/etc/passwd.yaml", str(registry_copy / "rince" / "tab9.yaml")):
        data = _json.loads(index.read_text())
        for t in data["tables"]:
            if t["id"] == "rince/tab2":
                t["path"] = target
        index.write_text(_json.dumps(data))
        registry_mod.load_registry.cache_clear()
        assert registry_mod.get_table("rince/tab2").id == "rince/tab2"
        assert table_paths(registry_copy)["rince/tab2"] == next(t["path"] for t in good["tables"]
                                                                if t["id"] == "rince/tab2")
