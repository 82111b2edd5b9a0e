"""The newcomer's first hour: the cached registry index, CLI help and version, the README table
blocks, and the linear probe's reuse of the shared feature passes."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from semcl import __version__
from semcl.cli import args as cli_args
from semcl.cli import main as cli
from semcl.locations import registry_root
from semcl.registry.index import load_index
from semcl.registry.tables import PROFILE_NAMES, load_registry, load_table

ROOT = registry_root()


def _small_registry(tmp_path: Path) -> Path:
    reg = tmp_path / "experiments"
    shutil.copytree(ROOT / "presets", reg / "presets")
    (reg / "rince").mkdir()
    for name in ("tab2", "tab9", "tab10"):  # tab2's select rows read tab9 and tab10
        shutil.copy(ROOT / "rince" / f"{name}.yaml", reg / "rince" / f"{name}.yaml")
    return reg


def test_profile_names_match_the_registry():
    assert cli_args.PROFILE_NAMES == PROFILE_NAMES


def test_index_is_cached_and_invalidated_by_a_registry_change(tmp_path, monkeypatch):
    reg = _small_registry(tmp_path)
    monkeypatch.setenv("SEMCL_CACHE", str(tmp_path / "cache"))
    first = load_index("mini", reg)
    from semcl.registry.plan import plan_runs

    table = load_table(reg / "rince" / "tab2.yaml", reg / "presets")
    assert [r[0] for r in first["runs"]["rince/tab2"]] == [r.run_id for r in plan_runs(table, "mini")]
    paper_rows = [r for r in table.rows if r.released is None]  # the authors' checkpoints are not the paper's rows
    assert next(t for t in first["tables"] if t["id"] == "rince/tab2")["rows"] == len(paper_rows)

    import semcl.registry.tables

    def refuse(*a, **k):
        raise AssertionError("the registry was loaded although nothing changed")

    monkeypatch.setattr(semcl.registry.tables, "load_registry", refuse)
    assert load_index("mini", reg) == first  # served from the cache
    path = reg / "rince" / "tab2.yaml"
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # any edit moves the mtime
    with pytest.raises(AssertionError, match="registry was loaded"):
        load_index("mini", reg)


def test_every_option_has_a_help_line_and_version(capsys):
    parser = cli.build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"{name} {'/'.join(a.option_strings) or a.dest}"
               for name, sp in [("semcl", parser), *subs.choices.items()] for a in sp._actions
               if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction) and not a.help]
    assert missing == []
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.strip() == f"semcl {__version__}"


def test_readme_blocks_are_regenerated_from_the_store(tmp_path):
    from semcl.registry.plan import plan_runs
    from semcl.report.readme import update_readme
    from semcl.store import Store

    reg = _small_registry(tmp_path)
    table = load_registry(reg)["rince/tab2"]  # linked: its select rows read tab9 / tab10
    store = Store(tmp_path / "results")
    runs = [r for r in plan_runs(table, "mini") if r.row_label == "SCL-in"]
    values = [70.0, 72.0, 77.0]  # mean 73.0, sample std sqrt(((3)^2 + 1 + 4^2) / 2) = sqrt(13) = 3.61
    for run, v in zip(runs, values, strict=True):
        store.run_dir(run.run_id).mkdir(parents=True)
        store.metrics_path(run.run_id).write_text(json.dumps(
            {"run_id": run.run_id, "metrics": {"linear_top1_last": v}}))
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- semcl:table rince/tab2 mini -->\nstale\n<!-- /semcl -->\nafter\n")
    assert update_readme(readme, store, lambda tid: table) == [("rince/tab2", "mini")]
    text = readme.read_text()
    assert text.startswith("intro\n<!-- semcl:table rince/tab2 mini -->\n| Row | Top-1 | ")
    assert "stale" not in text and text.endswith("<!-- /semcl -->\nafter\n")
    assert "| SCL-in | 73.00 ± 3.61 | — |" in text
    assert "AUROC C-10 (→ mnist)" in text and "AUROC TIN" not in text  # null substitute: not measured
    assert "| Cross-entropy | — |" in text
    # rows=REGEX keeps the matching rows only
    readme.write_text("<!-- semcl:table rince/tab2 mini rows=^SCL-(in|out)$ -->\n<!-- /semcl -->\n")
    update_readme(readme, store, lambda tid: table)
    body = readme.read_text().splitlines()
    assert body[0] == "<!-- semcl:table rince/tab2 mini rows=^SCL-(in|out)$ -->" and body[-1] == "<!-- /semcl -->"
    assert [ln.split(" | ")[0] for ln in body[3:-1]] == ["| SCL-in", "| SCL-out"]
    # a block whose table has no runs in this store keeps its text (README filled from several stores)
    kept = "<!-- semcl:table rince/tab2 smoke -->\nfrom another store\n<!-- /semcl -->\n"
    readme.write_text(kept)
    assert update_readme(readme, store, lambda tid: table) == [] and readme.read_text() == kept
    readme.write_text(text)
    before = readme.read_text()
    readme.write_text(before + "<!-- semcl:table rince/tab2 nosuch -->\n<!-- /semcl -->\n")
    with pytest.raises(Exception, match="README.md:.*nosuch"):
        update_readme(readme, store, lambda tid: table)


def test_probe_on_shared_features_is_bit_identical():
    from semcl.data.views.build import build_augment
    from semcl.evals.features import extract_features
    from semcl.evals.linear_probe import linear_probe

    g = torch.Generator().manual_seed(3)
    train = torch.randint(0, 256, (40, 1, 8, 8), dtype=torch.uint8, generator=g)
    test = torch.randint(0, 256, (20, 1, 8, 8), dtype=torch.uint8, generator=g)
    ytr, yte = torch.arange(40) % 4, torch.arange(20) % 4
    w = torch.randn(64, 6, generator=g)

    def encode(x):
        return x.flatten(1) @ w

    tt = build_augment("test", size=8, mean=(0.5,), std=(0.25,))
    kw = dict(num_classes=4, train_transform=tt, test_transform=tt, epochs=5, lr=0.1, batch_size=16,
              milestones=(3,), augment=False, seed=7)
    alone = linear_probe(encode, train, ytr, test, yte, **kw)
    shared = linear_probe(encode, train, ytr, test, yte, **kw,
                          test_feats=extract_features(encode, test, tt), train_feats=extract_features(encode, train, tt))
    assert shared.history == alone.history and len(alone.history) == 5
