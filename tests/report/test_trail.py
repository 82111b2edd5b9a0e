"""`semcl show <table> --files`: each row's files come from the declarations (MethodSpec.cls / losses / builder,
DatasetSpec.reader, the protocols' EVALUATION and their metric imports), name the defining modules, and a
rince/tab2 cell is at most 8 files from its YAML."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from semcl.methods.registry import METHODS
from semcl.registry.tables import get_table
from semcl.report.trail import module_file, row_trail, spec_ref, table_trails

REPO = Path(__file__).resolve().parents[2]
SPECS = sorted(METHODS.values(), key=lambda s: s.name)


def _resolve(ref: str):
    module, _, name = ref.partition(":")
    return module, getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_class_string_names_the_defining_module(spec):
    module, cls = _resolve(spec.cls)
    assert inspect.isclass(cls) and cls.__module__ == module


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_losses_and_builder_resolve_to_what_their_module_defines(spec):
    for ref in spec.losses:
        module, fn = _resolve(ref)
        assert inspect.isfunction(fn) and fn.__module__ == module, ref
    if spec.builder:
        module, builder = _resolve(spec.builder)
        assert callable(builder) and builder.__module__ == module, spec.builder


def _calls(spec, name: str, module: str) -> bool:
    """`name` (or a function / class of `module` that calls it) appears in the source of the Method class or its bases."""
    _, cls = _resolve(spec.cls)
    text = "\n".join(Path(inspect.getfile(c)).read_text() for c in cls.__mro__ if c.__module__.startswith("semcl."))
    if re.search(rf"\b{name}\b", text):
        return True
    src = module_file(module).read_text()
    callers = [n.name for n in ast.parse(src).body if isinstance(n, ast.FunctionDef | ast.ClassDef)
               and n.name != name and re.search(rf"\b{name}\b", ast.get_source_segment(src, n) or "")]
    return any(re.search(rf"\b{c}\b", text) for c in callers)  # e.g. VID's VIDHead calls vid_loss


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_declared_losses_and_builder_are_what_the_class_calls(spec):
    trains = spec.cost(spec.schema()) > 0 if callable(spec.train_cost) else spec.train_cost > 0
    assert bool(spec.losses) == trains, "a method that trains declares its losses; one that trains nothing, none"
    for ref in (*spec.losses, *([spec.builder] if spec.builder else [])):
        module, _, name = ref.partition(":")
        assert _calls(spec, name, module), f"{spec.name}: {ref} is not called by {spec.cls}"


def test_every_spec_is_found_in_the_module_beside_its_schema():
    for spec in SPECS:
        ref = spec_ref(spec)
        assert ref.module == spec.schema.__module__ and ref.name, spec.name
        held = getattr(sys.modules[ref.module], ref.name.split("[")[0])
        assert held is spec or spec in held


def _refs(trail):
    return [(r.role, r.shown, r.name) for r in trail.refs]


def test_rince_row_trail_names_the_defining_files():
    table = get_table("rince/tab2")
    trail = row_trail(table, table.row("RINCE-in"))
    assert _refs(trail) == [
        ("registry", "experiments/rince/tab2.yaml", None),
        ("preset", "experiments/presets/cifar100_resnet50.yaml", None),
        ("spec", "semcl/methods/ranked_contrastive/__init__.py", "RINCE"),
        ("class", "semcl/methods/ranked_contrastive/method.py", "RankedContrastive"),
        ("loss", "semcl/losses/ranked.py", "ranked_info_nce"),
        ("builder", "semcl/models/backbones.py", "build_backbone"),
        ("dataset", "semcl/data/sets/cifar.py", "read_cifar100"),
    ]
    cols = {c.key: (c.protocol.shown, [(m.shown, m.name) for m in c.metrics]) for c in trail.columns}
    assert cols["top1"] == ("semcl/evals/protocols/linear_probe.py", [("semcl/evals/linear_probe.py", "linear_probe")])
    assert cols["ap_coarse"] == ("semcl/evals/protocols/retrieval.py",
                                 [("semcl/evals/retrieval.py", "retrieval_scores")])
    assert cols["auroc_cifar10"] == ("semcl/evals/protocols/ood.py", [("semcl/evals/ood.py", "class_gaussian_auroc")])
    # registry, preset, spec, class, loss, protocol, metric
    assert trail.files_to_a_cell() == 7


def test_every_file_of_rince_tab2_exists_and_defines_what_it_names():
    table = get_table("rince/tab2")
    for trail in table_trails(table, table.rows):
        for ref in trail.refs + tuple(r for c in trail.columns for r in (c.protocol, *c.metrics)):
            assert ref.path.is_file(), ref
            if ref.module is None:  # a registry file, shown from the repository root
                assert (REPO / ref.shown).resolve() == ref.path.resolve(), ref
            if ref.module and ref.role != "spec" and ref.name != "EVALUATION":
                assert getattr(importlib.import_module(ref.module), ref.name).__module__ == ref.module, ref
            if ref.module:
                assert Path(importlib.import_module(ref.module).__file__) == ref.path, ref


def test_rince_tab2_cells_are_at_most_8_files_from_the_yaml():
    table = get_table("rince/tab2")
    counts = {t.label: t.files_to_a_cell() for t in table_trails(table, table.rows)}
    assert max(counts.values()) <= 8, counts
    assert counts["RINCE-in"] == counts["Cross-entropy"] == 7  # torch's functional.py is CE's loss file
    # a select row: its own YAML + rince/tab9's YAML, preset, spec, class, loss, protocol, metric
    assert counts["Label smoothing (superclass)"] == 8


def test_hsa_and_scns_kd_counts():
    hsa = get_table("hsa/linear")
    assert row_trail(hsa, hsa.row("CsMl, 200 ep, single crop")).files_to_a_cell() == 7
    kd = get_table("scns/kd-cifar100")
    trail = row_trail(kd, kd.row("SCNS-class wrn-40-2 to wrn-16-2"))
    # yaml, preset, distill/__init__.py, contrast.py, losses: functional.py (CE), logits.py (KD), crd.py,
    # latent_mixup.py; protocol accuracy.py, metric evals/accuracy.py
    assert trail.files_to_a_cell() == 10
    assert [r.shown for r in trail.refs if r.role == "class"] == ["semcl/methods/distill/contrast.py"]


def _semcl(*args):
    return subprocess.run([sys.executable, "-c", "import sys; from semcl.cli.main import main; rc = main(sys.argv[1:]); "
                           "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', file=sys.stderr); sys.exit(rc)",
                           *args], capture_output=True, text=True, cwd=REPO, env={**os.environ})


def test_show_files_text_and_json_without_torch():
    res = _semcl("show", "rince/tab2", "--files", "--row", "RINCE-in")
    assert res.returncode == 0, res.stderr
    assert res.stderr.strip().splitlines()[-1] == "NO-TORCH"
    lines = res.stdout.splitlines()
    assert "  RINCE-in (method rince, implemented): 7 files from its YAML to a cell" in lines
    assert "    loss      semcl/losses/ranked.py  ranked_info_nce" in lines
    assert sum(line.endswith("files from its YAML to a cell") for line in lines) == 1  # only the row asked for
    res = _semcl("show", "rince/tab2", "--files", "--row", "RINCE-in", "--row", "SCL-in", "--format", "json")
    assert res.returncode == 0 and res.stderr.strip().splitlines()[-1] == "NO-TORCH"
    doc = json.loads(res.stdout)
    assert [r["label"] for r in doc["rows"]] == ["RINCE-in", "SCL-in"]
    loss = next(f for f in doc["rows"][0]["files"] if f["role"] == "loss")
    assert (loss["file"], loss["module"], loss["name"]) == ("semcl/losses/ranked.py", "semcl.losses.ranked",
                                                            "ranked_info_nce")
    assert doc["rows"][0]["files_to_a_cell"] == 7 and doc["rows"][0]["columns"][0]["key"] == "top1"


def test_show_unknown_row_is_one_line():
    res = _semcl("show", "rince/tab2", "--files", "--row", "No such row")
    assert res.returncode == 2
    err = [line for line in res.stderr.strip().splitlines() if line != "NO-TORCH"]
    assert len(err) == 1 and "--row 'No such row': table rince/tab2 has no such row" in err[0]


def test_every_registry_row_has_a_trail_of_existing_files():
    from semcl.registry.tables import load_registry

    for table in load_registry().values():
        for trail in table_trails(table, table.rows):
            refs = [*trail.refs, *(r for c in trail.columns for r in (c.protocol, *c.metrics))]
            assert refs and all(r is not None and r.path.is_file() for r in refs), (table.id, trail.label)
