"""SHA256SUMS of a folder (semcl.files): the format `sha256sum -c` reads, and every way a folder can differ from it."""

import hashlib
import os
import shutil
import subprocess

import pytest

from semcl.files import SUMS_FILE, sha256_file, sha256sums_problems, write_sha256sums


def _folder(tmp_path):
    root = tmp_path / "bundle"
    (root / "runs" / "abc").mkdir(parents=True)
    (root / "runs" / "abc" / "metrics.json").write_text('{"top1": 71.5}\n')
    (root / "README.md").write_bytes(b"# card\n")
    return root


def test_sums_are_sha256sums_own_lines_and_check_clean(tmp_path):
    root = _folder(tmp_path)
    write_sha256sums(root)
    expected = "".join(f"{hashlib.sha256((root / n).read_bytes()).hexdigest()}  {n}\n"
                       for n in ["README.md", "runs/abc/metrics.json"])
    assert (root / SUMS_FILE).read_text() == expected
    assert sha256_file(root / "README.md") == hashlib.sha256(b"# card\n").hexdigest()
    assert sha256sums_problems(root) == []
    if shutil.which("sha256sum"):
        assert subprocess.run(["sha256sum", "-c", "--quiet", SUMS_FILE], cwd=root).returncode == 0


def test_every_difference_is_one_line_naming_the_file(tmp_path):
    root = _folder(tmp_path)
    write_sha256sums(root)
    (root / "runs" / "abc" / "metrics.json").write_text('{"top1": 71.6}\n')  # one changed byte
    (root / "extra.bin").write_bytes(b"x")
    os.symlink("/etc/hostname", root / "out")
    problems = sha256sums_problems(root)
    assert problems == [f"{(root / 'runs/abc/metrics.json').resolve()}: sha256 differs from SHA256SUMS",
                        f"{(root / 'extra.bin').resolve()}: not listed in SHA256SUMS",
                        f"{root.resolve() / 'out'}: a symbolic link (a bundle holds plain files only)"]


@pytest.mark.parametrize("line", ["0" * 64 + "  ../secret", "0" * 64 + "  /etc/passwd", "nonsense"])
def test_a_listed_path_that_leaves_the_folder_or_a_malformed_line_is_refused(tmp_path, line):
    root = _folder(tmp_path)
    write_sha256sums(root)
    with open(root / SUMS_FILE, "a") as f:
        f.write(line + "\n")
    (problem,) = sha256sums_problems(root)
    assert "line 3" in problem and ("leaves the folder" in problem or "is not" in problem)


def test_a_folder_without_sums_says_so(tmp_path):
    root = _folder(tmp_path)
    assert sha256sums_problems(root) == [f"{root.resolve() / SUMS_FILE}: missing (no checksums to verify against)"]
