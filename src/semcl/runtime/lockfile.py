"""The hashed dependency locks under locks/ (`make lock` writes them with `uv pip compile --generate-hashes`; `make
setup` installs one with `pip install --require-hashes`): read one, check it against pyproject.toml (no network:
the lock's own header and `# via` lines say what asked for each package), and check it against this machine.

A lock is a pip requirements file: `name==version` followed by `--hash=sha256:...` lines, then uv's `# via` lines.
Its second line is the command that wrote it, which names the extras, the Python version and the platform.
"""

from __future__ import annotations

import hashlib
import platform
import re
import sys
import tomllib
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from semcl.errors import SemclError

LOCKS = ("setup", "all")  # locks/<name>.txt: what `make setup` installs, and every extra (`make test`, CI, containers)
SELF = "semcl (pyproject.toml)"  # uv's `# via` name for the project's own requirements
INSTALLED_FROM = "semcl-lock.txt"  # `make setup` writes `sha256  path` of the lock it installed into the venv


@dataclass
class Lock:
    path: Path
    extras: list[str]
    python: str | None  # "3.11"
    platform: str | None  # uv's --python-platform, e.g. "x86_64-manylinux_2_28"
    pins: dict[str, str] = field(default_factory=dict)  # canonical name -> version
    hashes: dict[str, list[str]] = field(default_factory=dict)
    via: dict[str, list[str]] = field(default_factory=dict)  # canonical name -> what asked for it


def read_lock(path: Path) -> Lock:
    """The lock at `path`; SemclError naming the file and the line where it is not a uv-written hashed lock."""
    try:
        lines = path.read_text().splitlines()
    except OSError as err:
        raise SemclError(f"{path}: unreadable lock ({err.strerror or err})") from None
    command = next((ln for ln in lines[:3] if "pip compile" in ln), None)
    if command is None:
        raise SemclError(f"{path}: no `uv pip compile` command in its header (write it with `make lock`)")
    words = command.lstrip("# ").split()
    lock = Lock(path, extras=[words[i + 1] for i, w in enumerate(words[:-1]) if w == "--extra"],
                python=_option(words, "--python-version"), platform=_option(words, "--python-platform"))
    current = None
    for n, line in enumerate(lines, 1):
        pin = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)", line)
        if pin:
            current = canonicalize_name(pin.group(1))
            lock.pins[current], lock.hashes[current], lock.via[current] = pin.group(2), [], []
        elif line.strip().startswith("--hash=sha256:") and current:
            lock.hashes[current].append(line.strip().split(":", 1)[1].rstrip(" \\"))
        elif line.startswith("    # via") and current:
            rest = line.split("# via", 1)[1].strip()
            if rest:
                lock.via[current].append(rest)
        elif line.startswith("    #   ") and current:
            lock.via[current].append(line.split("#", 1)[1].strip())
        elif line.strip() and not line.lstrip().startswith("#"):
            raise SemclError(f"{path}:{n}: not a pinned requirement, a hash or a comment: {line.strip()[:60]!r}")
    return lock


def _option(words: list[str], name: str) -> str | None:
    return words[words.index(name) + 1] if name in words and words.index(name) + 1 < len(words) else None


def project_requirements(pyproject: Path, extras: list[str]) -> list[Requirement]:
    """The default dependencies of pyproject.toml plus those of `extras` (SemclError naming an unknown extra)."""
    doc = tomllib.loads(pyproject.read_text())["project"]
    known = doc.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in known]
    if unknown:
        raise SemclError(f"{pyproject}: no extra {unknown[0]!r} (the lock names it: relock with `make lock`)")
    try:
        return [Requirement(r) for r in doc["dependencies"] + [r for e in extras for r in known[e]]]
    except InvalidRequirement as err:
        raise SemclError(f"{pyproject}: a requirement does not parse ({err})") from None


def disagreements(lock: Lock, pyproject: Path) -> list[str]:
    """Why `lock` no longer installs what pyproject.toml asks for, one line each (empty: they agree):
    a requirement with no pinned, hashed line satisfying its specifier; a package the project no longer asks for,
    directly (`# via semcl`) or through another locked package; and, for locks/all.txt, an extra it leaves out."""
    where = lock.path
    out = []
    wanted = project_requirements(pyproject, lock.extras)
    direct = {canonicalize_name(r.name) for r in wanted}
    for req in wanted:
        name = canonicalize_name(req.name)
        if name not in lock.pins:
            out.append(f"{where}: {req} (pyproject.toml) has no line; relock with `make lock`")
        elif not req.specifier.contains(lock.pins[name], prereleases=True):
            out.append(f"{where}: {name}=={lock.pins[name]} does not satisfy {req} (pyproject.toml); relock with `make lock`")
        elif not lock.hashes[name]:
            out.append(f"{where}: {name}=={lock.pins[name]} has no --hash line; relock with `make lock`")
    # what something still asks for: the project's requirements, then whatever a wanted package names as its parent
    reached, grew = set(direct) & set(lock.pins), True
    while grew:
        new = {n for n, via in lock.via.items() if n not in reached
               and any(canonicalize_name(v) in reached for v in via if not v.startswith(("-c", "-r", SELF)))}
        reached |= new
        grew = bool(new)
    for name in lock.pins:
        if name not in reached:
            out.append(f"{where}: {name}=={lock.pins[name]} is asked for by nothing in pyproject.toml now; "
                       "relock with `make lock`")
    if lock.path.stem == "all":
        every = sorted(tomllib.loads(pyproject.read_text())["project"].get("optional-dependencies", {}))
        missing = [e for e in every if e not in lock.extras]
        if missing:
            out.append(f"{where}: leaves out the extra {missing[0]!r} of pyproject.toml; relock with `make lock`")
    return out


def platform_mismatch(lock: Lock) -> str | None:
    """One line when this interpreter and machine are not what `lock` was resolved for (None: they are)."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if lock.python and lock.python != here:
        return f"{lock.path}: locked for Python {lock.python}, this is Python {here}; use a Python {lock.python} venv"
    if lock.platform:
        arch, _, tag = lock.platform.partition("-")
        machine = platform.machine()
        if sys.platform != "linux" or machine != arch:
            return (f"{lock.path}: locked for {lock.platform} (Linux {arch}), this is {sys.platform} {machine}; "
                    "relock there: make lock")
        glibc = re.match(r"manylinux_(\d+)_(\d+)", tag)
        libc, version = platform.libc_ver()
        if glibc and libc == "glibc" and version:
            have = tuple(int(x) for x in version.split(".")[:2])
            if have < (int(glibc.group(1)), int(glibc.group(2))):
                return (f"{lock.path}: locked for glibc >= {glibc.group(1)}.{glibc.group(2)} ({lock.platform}), "
                        f"this machine has glibc {version}")
    return None


def installed_mismatch(lock: Lock) -> str | None:
    """One line naming the first locked package whose installed version differs from its pin (None: all match)."""
    for name, version in sorted(lock.pins.items()):
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            return f"{lock.path}: {name}=={version} is locked but not installed; reinstall with `make setup`"
        if have.split("+")[0] != version:  # torch reports 2.14.1+cu130 for PyPI's 2.14.1
            return f"{lock.path}: {name} is {have} here, the lock pins {version}; reinstall with `make setup`"
    return None


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def installed_lock(prefix: Path | None = None) -> dict | None:
    """{"lock": path, "sha256": ...} of the lock `make setup` installed into this venv (None: not installed from one)."""
    marker = Path(prefix or sys.prefix) / INSTALLED_FROM
    try:
        digest, _, path = marker.read_text().strip().partition("  ")
    except OSError:
        return None
    return {"lock": path, "sha256": digest} if re.fullmatch(r"[0-9a-f]{64}", digest) else None
