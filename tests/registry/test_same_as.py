"""`{same_as: "<table>/<row>/<column>"}` reported cells: one source per number, resolved when the registry loads."""

from __future__ import annotations

import dataclasses

import pytest

from semcl.errors import ConfigError
from semcl.registry.same_as import split
from semcl.registry.tables import get_table, load_registry
from semcl.report.tables import same_as_notes

# (table, row) -> the cell it shows: every paper number of these rows is written once, in the target entry
REFERENCES = {
    ("gpaco/tab2", "PaCo ResNet-50"): ("paco/imagenet-lt", "PaCo ResNet-50"),
    ("gpaco/tab2", "PaCo ResNeXt-50 32x4d"): ("paco/imagenet-lt", "PaCo ResNeXt-50 32x4d (code tau 0.07)"),
    ("gpaco/tab2", "GPaCo ResNet-50"): ("gpaco/imagenet-lt", "GPaCo ResNet-50 (code alpha 0.045)"),
    ("gpaco/tab2", "GPaCo ResNeXt-50 32x4d"): ("gpaco/imagenet-lt", "GPaCo ResNeXt-50 32x4d (code lr 0.06)"),
    ("gpaco/tab2", "GPaCo ResNeXt-101 32x4d"): ("gpaco/imagenet-lt", "GPaCo ResNeXt-101 32x4d (code lr 0.06)"),
    ("gpaco/tab13", "Multi-task, w 0.5"): ("gpaco/full-cifar100", "Multi-task ResNet-50"),
    ("gpaco/tab13", "GPaCo (uniform prior, official code)"):
        ("gpaco/full-cifar100", "GPaCo ResNet-50 (uniform prior, official code)"),
    ("gpaco/tab13-vit", "Multi-task ViT-B, w 0.5"): ("gpaco/mae-robustness", "Multi-task ViT-B"),
    ("gpaco/tab13-vit", "GPaCo ViT-B"): ("gpaco/mae-robustness", "GPaCo ViT-B"),
    ("gpaco/tab5", "PaCo ResNet-101"): ("paco/full-imagenet", "PaCo ResNet-101"),
    ("gpaco/tab5", "PaCo ResNet-200"): ("paco/full-imagenet", "PaCo ResNet-200"),
    ("gpaco/fig1a", "PaCo ResNet-50"): ("paco/imagenet-lt", "PaCo ResNet-50"),
    ("gpaco/fig1a", "PaCo ResNeXt-50 32x4d"): ("paco/imagenet-lt", "PaCo ResNeXt-50 32x4d (code tau 0.07)"),
    ("gpaco/fig1a", "GPaCo ResNet-50"): ("gpaco/imagenet-lt", "GPaCo ResNet-50 (code alpha 0.045)"),
    ("gpaco/fig1a", "ResNeXt-50-32x4d (GPaCo)"): ("gpaco/imagenet-lt", "GPaCo ResNeXt-50 32x4d (code lr 0.06)"),
    ("gpaco/fig1a", "ResNeXt-101-32x4d (GPaCo)"): ("gpaco/imagenet-lt", "GPaCo ResNeXt-101 32x4d (code lr 0.06)"),
}
# the README values these cells resolve to (gpaco/imagenet-lt, paco/imagenet-lt, full-cifar100, mae-robustness, paco/full-imagenet)
VALUES = {"PaCo ResNet-50": 57.0, "PaCo ResNeXt-50 32x4d": 58.2, "GPaCo ResNet-50": 58.5, "GPaCo ResNeXt-50 32x4d": 58.9,
          "GPaCo ResNeXt-101 32x4d": 60.8, "Multi-task, w 0.5": 79.1, "GPaCo (uniform prior, official code)": 80.3,
          "Multi-task ViT-B, w 0.5": 83.4, "GPaCo ViT-B": 84.0, "PaCo ResNet-101": 80.9, "PaCo ResNet-200": 81.8,
          "ResNeXt-50-32x4d (GPaCo)": 58.9, "ResNeXt-101-32x4d (GPaCo)": 60.8}


def _plain(rep):
    return dataclasses.replace(rep, same_as=None)


@pytest.mark.parametrize(("cell", "target"), list(REFERENCES.items()), ids=[f"{t}:{r}" for t, r in REFERENCES])
def test_reference_shows_the_target_cell(cell, target):
    reg = load_registry()
    rep = reg[cell[0]].row(cell[1]).reported["top1"]
    src = reg[target[0]].row(target[1]).reported["top1"]
    assert rep.value == VALUES[cell[1]] == src.value
    assert _plain(rep) == src and src.same_as is None  # value, provenance, source, std and further sources
    assert rep.same_as == f"{target[0]}/{target[1]}/top1"


def test_every_reference_of_the_registry_is_listed_here():
    found = {(t.id, r.label) for t in load_registry().values() for r in t.rows for rep in r.reported.values()
             if rep is not None and rep.same_as}
    assert found == set(REFERENCES)


def test_get_table_from_the_index_resolves_as_the_whole_registry(tmp_path, monkeypatch, registry_copy):
    import semcl.registry.tables as registry_mod

    monkeypatch.setenv("SEMCL_CACHE", str(tmp_path / "cache"))
    whole = registry_mod.get_table("gpaco/tab13")  # no index yet: the whole registry
    loaded = []
    real = registry_mod.load_table
    monkeypatch.setattr(registry_mod, "load_table", lambda path, presets: loaded.append(path.name) or real(path, presets))
    fast = registry_mod.get_table("gpaco/tab13")
    assert sorted(loaded) == ["full-cifar100.yaml", "tab13.yaml"]  # the table and the one it references
    assert fast.rows == whole.rows
    assert fast.row("Multi-task, w 0.5").reported["top1"].value == 79.1


def test_notes_name_where_the_number_is_held():
    lines = same_as_notes(get_table("gpaco/tab13"))
    assert lines == [
        "Multi-task, w 0.5 / Top-1: paper value 79.1 [official-readme] is the number of "
        "gpaco/full-cifar100/Multi-task ResNet-50/top1 (held there once, shown here by reference).",
        "GPaCo (uniform prior, official code) / Top-1: paper value 80.3 [official-readme] is the number of "
        "gpaco/full-cifar100/GPaCo ResNet-50 (uniform prior, official code)/top1 (held there once, shown here by "
        "reference)."]


def test_split_takes_the_longest_known_table_id():
    assert split("a/b/row/with/slash/top1", {"a/b"}) == ("a/b", "row/with/slash", "top1")
    assert split("a/b/c/row/top1", {"a/b", "a/b/c"}) == ("a/b/c", "row", "top1")
    assert split("x/y/row/top1", {"a/b"}) is None


TAB13 = "gpaco/tab13.yaml"
W05 = 'same_as: "gpaco/full-cifar100/Multi-task ResNet-50/top1"'


@pytest.mark.parametrize(("text", "message"), [
    ('same_as: "gpaco/full-cifar10/Multi-task ResNet-50/top1"',
     "no table of the registry is named by its start ('<table id>/<row label>/<column key>')"),
    ('same_as: "gpaco/full-cifar100/Multi-task ResNet-18/top1"', "gpaco/full-cifar100 has no row 'Multi-task ResNet-18'"),
    ('same_as: "gpaco/full-cifar100/Multi-task ResNet-50/top5"', "gpaco/full-cifar100 has no column 'top5'"),
    ('same_as: "gpaco/full-cifar100/GPaCo ResNet-50/top1"', "that cell holds no reported number (null)"),
    ('same_as: "gpaco/tab13/GPaCo (uniform prior, official code)/top1"', "that cell is itself a same_as reference"),
])
def test_a_bad_reference_is_one_line_naming_file_and_key(registry_copy, text, message):
    path = registry_copy / TAB13
    path.write_text(path.read_text().replace(W05, text))
    with pytest.raises(ConfigError) as err:
        load_registry()
    msg = str(err.value)
    assert msg.startswith(f"{path}: 'rows[2].reported.top1.same_as' = ") and message in msg and "\n" not in msg


@pytest.mark.parametrize(("text", "message"), [
    ('same_as: "gpaco/full-cifar100/top1"', "'rows[2].reported.top1.same_as' = 'gpaco/full-cifar100/top1' is not "
                                           "'<table id>/<row label>/<column key>'"),
    (W05 + ", value: 79.1", "'rows[2].reported.top1': a same_as cell has no other key ('value')"),
])
def test_a_malformed_reference_is_refused_at_parse(registry_copy, text, message):
    path = registry_copy / TAB13
    path.write_text(path.read_text().replace(W05, text))
    with pytest.raises(ConfigError) as err:
        load_registry()
    assert str(err.value) == f"{path}: {message}" or (str(err.value).startswith(str(path)) and message in str(err.value))
