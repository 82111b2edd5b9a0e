"""Each module uses another's public names only, and one module renames files into place.

A name that starts with `_` is its module's own: another module (in src/semcl, bench/ or scripts/) that imports it
leans on a detail its owner may change without notice, so the owner makes it public (and says so) or the caller
finds another way. Every temp-then-rename goes through semcl.files (write_atomic, move, fill_folder_atomic), where
the fsync, the file mode and the disk-full rule live once."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREES = [ROOT / "src" / "semcl", ROOT / "bench", ROOT / "scripts"]
RENAMES = {("os", "replace"), ("os", "rename"), ("shutil", "move")}
RENAMER = ROOT / "src" / "semcl" / "files.py"  # the one module that renames


def _files() -> list[Path]:
    return [f for tree in TREES for f in sorted(tree.rglob("*.py"))]


def private_imports(path: Path, base: Path = ROOT) -> list[str]:
    """`from semcl... import _name` statements of `path`, as 'file:line: module._name' (file relative to base)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "semcl":
            out += [f"{path.relative_to(base)}:{node.lineno}: {node.module}.{a.name}" for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def renames(path: Path, base: Path = ROOT) -> list[str]:
    """Calls of os.replace / os.rename / shutil.move in `path`, as 'file:line: module.function'."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        f = node.func if isinstance(node, ast.Call) else None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (f.value.id, f.attr) in RENAMES:
            out.append(f"{path.relative_to(base)}:{node.lineno}: {f.value.id}.{f.attr}")
    return out


def test_no_module_imports_another_modules_private_name():
    found = [hit for f in _files() for hit in private_imports(f)]
    assert found == [], "import a public name instead (make it public where it is defined):\n" + "\n".join(found)


def test_only_semcl_files_renames_a_file_into_place():
    found = [hit for f in _files() if f != RENAMER for hit in renames(f)]
    assert found == [], "write through semcl.files (write_atomic, move, fill_folder_atomic):\n" + "\n".join(found)


def test_the_checks_see_what_they_look_for(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import os\nfrom semcl.files import _link_into_place\n\n\ndef f(a, b):\n"
                     "    from semcl.data.fileset import _decoded\n    os.replace(a, b)\n")
    assert private_imports(probe, tmp_path) == ["probe.py:2: semcl.files._link_into_place",
                                                "probe.py:6: semcl.data.fileset._decoded"]
    assert renames(probe, tmp_path) == ["probe.py:7: os.replace"]
