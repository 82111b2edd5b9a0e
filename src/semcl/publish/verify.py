"""`semcl publish --verify DIR`: everything a bundle must be before anyone reads it, one line per problem naming the
file; reads only, writes nothing.

- its SHA256SUMS (semcl.files.sha256sums_problems): every file listed and unchanged, no listed path leaving the
  bundle, no symbolic link anywhere, no file unlisted;
- no pickle and nothing executable: no .pt / .pth / .pkl (or other pickle) file, no file starting with a pickle's
  protocol header or a torch zip (data.pkl inside), no execute bit; every .safetensors header parses;
- model-index.yml parses (safe YAML) and passes the schema (semcl.publish.schema); README.md's front matter holds
  the same document; environment.json and each run's metrics.json are JSON.
"""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path

from semcl.files import SUMS_FILE, sha256sums_problems
from semcl.publish.schema import model_index_problems

MODEL_INDEX, CARD, ENVIRONMENT, RUNS = "model-index.yml", "README.md", "environment.json", "runs"
PICKLE_SUFFIXES = (".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".bin", ".joblib")


def _pickle_problem(path: Path) -> str | None:
    """Why `path` holds (or would be loaded as) a pickle; None when it does not."""
    if path.suffix.lower() in PICKLE_SUFFIXES:
        return f"{path}: a {path.suffix} file (a pickle; a bundle holds safetensors weights only)"
    with open(path, "rb") as f:
        head = f.read(2)
    if len(head) == 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return f"{path}: starts with a pickle header (a bundle holds no pickle)"
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as z:
                if any(n.endswith(".pkl") for n in z.namelist()):
                    return f"{path}: a zip holding a pickle (torch.save's format)"
        except (OSError, zipfile.BadZipFile, ValueError):
            return f"{path}: an unreadable zip archive"
    return None


def _safetensors_problem(path: Path) -> str | None:
    from safetensors import safe_open

    try:
        with safe_open(path, "pt") as f:
            f.keys()
    except Exception as err:  # the parser's own errors (SafetensorError, OSError) name the fault
        return f"{path}: safetensors header does not parse ({type(err).__name__}: {str(err).splitlines()[0][:120]})"
    return None


def _yaml_front_matter(text: str) -> str | None:
    """The YAML between a leading '---' line and the next one, None without front matter."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return None
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "\n".join(lines[1:i])
    return None


def _load_yaml(text: str, where: str) -> tuple[object, str | None]:
    from semcl.errors import ConfigError
    from semcl.yaml_strict import load_text

    try:
        return load_text(text, where), None
    except ConfigError as err:
        return None, str(err).splitlines()[0]


def _files_problems(folder: Path) -> list[str]:
    problems = []
    for p in sorted(folder.rglob("*")):
        if p.is_symlink() or not p.is_file():
            continue  # symlinks: sha256sums_problems names each
        mode = p.stat().st_mode
        if mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH):
            problems.append(f"{p}: executable (mode {stat.filemode(mode)}); a bundle holds data only")
        why = _pickle_problem(p) or (_safetensors_problem(p) if p.suffix == ".safetensors" else None)
        if why:
            problems.append(why)
    return problems


def _documents_problems(folder: Path) -> list[str]:
    problems = []
    index_path, card_path = folder / MODEL_INDEX, folder / CARD
    doc = None
    if not index_path.is_file() or index_path.is_symlink():
        problems.append(f"{index_path}: missing")
    else:
        doc, err = _load_yaml(index_path.read_text(encoding="utf-8", errors="replace"), str(index_path))
        problems += [err] if err else model_index_problems(doc, folder, str(index_path))
    if not card_path.is_file() or card_path.is_symlink():
        problems.append(f"{card_path}: missing")
    else:
        front = _yaml_front_matter(card_path.read_text(encoding="utf-8", errors="replace"))
        if front is None:
            problems.append(f"{card_path}: no YAML front matter (the model-index between '---' lines)")
        elif doc is not None:
            card_doc, err = _load_yaml(front, f"{card_path} (front matter)")
            if err or card_doc != doc:
                problems.append(err or f"{card_path}: front matter differs from {MODEL_INDEX}")
    json_files = [folder / ENVIRONMENT, *sorted((folder / RUNS).glob("*/metrics.json"))]
    for path in json_files:
        if path.is_symlink():
            continue
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            problems.append(f"{path}: missing")
        except (OSError, ValueError) as err:
            problems.append(f"{path}: not JSON ({type(err).__name__})")
    runs = folder / RUNS
    if runs.is_dir():
        for run in sorted(runs.iterdir()):
            if run.is_dir() and not run.is_symlink() and not (run / "metrics.json").is_file():
                problems.append(f"{run}: a run folder without metrics.json")
    return problems


def verify_bundle(folder: Path) -> list[str]:
    """Every problem of the bundle `folder`, one line each naming the file (empty: the bundle is sound)."""
    folder = Path(folder)
    if not folder.is_dir():
        return [f"{folder}: no such folder"]
    if folder.is_symlink():
        return [f"{folder}: a symbolic link, not the bundle's folder"]
    if not (folder / SUMS_FILE).is_file():
        return [f"{folder / SUMS_FILE}: missing (not a bundle written by semcl publish)"]
    problems = sha256sums_problems(folder)
    problems += _files_problems(folder)
    problems += _documents_problems(folder)
    return list(dict.fromkeys(problems))
