"""The model-index checks, one line per problem naming the file and key: the checks mmpretrain's CI makes on a
metafile (open-mmlab/mmpretrain `.dev_scripts/check_metafile.py`: a collection has Name, README (present) and Paper
with Title; a model has Name, Metadata with Parameters, Results whose Dataset is a string, Config (present) and In
Collection), plus the ones a bundle needs: Results with Task / Dataset / Metrics, an In Collection that names a
collection, unique model names, every named file inside the bundle. FLOPs are not required: the suite does not
measure them (semcl.publish.model_index)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def _inside(folder: Path, name: object) -> str | None:
    """Why `name` is no file of the bundle `folder` (None when it is one)."""
    if name is None:
        return "missing"
    if not isinstance(name, str) or not name:
        return f"is {name!r}, not a path in the bundle"
    if name.startswith("/") or ".." in Path(name).parts:
        return f"{name!r} leaves the bundle"
    path = folder / name
    if path.is_symlink() or not path.resolve().is_relative_to(folder.resolve()):
        return f"{name!r} leaves the bundle"
    if not path.is_file():
        return f"{name!r}: no such file in the bundle"
    return None


def _text(entry: Mapping, key: str) -> bool:
    return isinstance(entry.get(key), str) and bool(entry[key].strip())


def model_index_problems(doc: object, folder: Path, where: str) -> list[str]:
    """What breaks the schema in the parsed model-index `doc` of the bundle `folder` (`where`: the file named)."""
    if not isinstance(doc, Mapping):
        return [f"{where}: not a mapping with keys 'Collections' and 'Models'"]
    problems = []
    colls, models = doc.get("Collections"), doc.get("Models")
    if not isinstance(colls, list) or not colls:
        problems.append(f"{where}: key 'Collections' missing or not a non-empty list")
        colls = []
    if not isinstance(models, list) or not models:
        problems.append(f"{where}: key 'Models' missing or not a non-empty list")
        models = []
    names = set()
    for i, c in enumerate(colls):
        at = f"{where}: Collections[{i}]"
        if not isinstance(c, Mapping):
            problems.append(f"{at}: not a mapping")
            continue
        if not _text(c, "Name"):
            problems.append(f"{at}: key 'Name' missing")
        names.add(c.get("Name"))
        why = _inside(folder, c.get("README"))
        if why:
            problems.append(f"{at}: key 'README' {why}")
        paper = c.get("Paper")
        if not isinstance(paper, Mapping) or not _text(paper, "Title"):
            problems.append(f"{at}: key 'Paper' needs a mapping with 'Title' (and 'URL')")
    seen = set()
    for i, m in enumerate(models):
        at = f"{where}: Models[{i}]"
        if not isinstance(m, Mapping):
            problems.append(f"{at}: not a mapping")
            continue
        if not _text(m, "Name"):
            problems.append(f"{at}: key 'Name' missing")
        elif m["Name"] in seen:
            problems.append(f"{at}: key 'Name' {m['Name']!r} repeats an earlier model's")
        seen.add(m.get("Name"))
        if m.get("In Collection") not in names:
            problems.append(f"{at}: key 'In Collection' is {m.get('In Collection')!r}, no collection's Name")
        why = _inside(folder, m.get("Config"))
        if why:
            problems.append(f"{at}: key 'Config' {why}")
        if "Weights" in m and (why := _inside(folder, m["Weights"])):
            problems.append(f"{at}: key 'Weights' {why}")
        meta = m.get("Metadata")
        if not isinstance(meta, Mapping):
            problems.append(f"{at}: key 'Metadata' missing or not a mapping")
        elif "Weights" in m and not (isinstance(meta.get("Parameters"), int) and meta["Parameters"] > 0):
            problems.append(f"{at}: key 'Metadata.Parameters' missing or not a positive count")
        res = m.get("Results")
        if not isinstance(res, list) or not res:
            problems.append(f"{at}: key 'Results' missing or not a non-empty list")
            continue
        for j, r in enumerate(res):
            rat = f"{at}: Results[{j}]"
            if not isinstance(r, Mapping):
                problems.append(f"{rat}: not a mapping")
                continue
            for key in ("Task", "Dataset"):
                if not _text(r, key):
                    problems.append(f"{rat}: key '{key}' missing or not a string")
            if not isinstance(r.get("Metrics"), Mapping) or not r["Metrics"]:
                problems.append(f"{rat}: key 'Metrics' missing or not a non-empty mapping")
    return problems
