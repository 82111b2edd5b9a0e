"""Writers shared by every file the tool writes for users (run configs, tables, claims, reports,
figures, README blocks) and the file permissions of the results store.

Every writer goes temp-then-rename: a temp file unique to the writer in the target's folder, fsync,
the mode a plain file would get, then os.replace. A reader (or a crash, or a full disk) sees the old
file or the new one, never an empty or cut one; a failed write leaves the old file as it was."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def file_mode() -> int:
    """The mode a plainly created file gets here (0666 less the umask). Temp files from mkstemp
    are 0600; they are set to this before the rename so that all of a run's files match."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: Path, write: Callable[[IO[bytes]], Any], *, exclusive: bool = False,
                 durable: bool = True) -> None:
    """Call `write(f)` on a binary temp file beside `path`, fsync, chmod, rename over `path`. An
    OSError without a file name (a full disk mid-write) is raised again naming `path`. With `exclusive`, an
    existing file is never replaced (FileExistsError): the temp file is hard-linked into place, which fails
    atomically if `path` exists. `durable=False` skips the fsync, for files rewritten often or thrown away
    (progress lines, caches, scratch checkpoints): still never seen half-written, but a node crash may lose them."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.chmod(tmp, file_mode())
        if exclusive:
            _link_into_place(tmp, path)
        else:
            move(tmp, path)
    except FileExistsError:
        raise
    except OSError as err:
        if err.filename is None:  # f.write / fsync name no file: say which one could not be written
            raise OSError(err.errno, err.strerror or str(err), str(path)) from err
        raise
    finally:
        Path(tmp).unlink(missing_ok=True)  # gone after the rename; a failed write's leftover otherwise


def _link_into_place(tmp: str, path: Path) -> None:
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise FileExistsError(f"{path}: exists and is never rewritten") from None
    except OSError as err:
        if err.errno in DISK_FULL:
            raise
        if path.exists():  # a file system without hard links: check, then rename (a narrow race)
            raise FileExistsError(f"{path}: exists and is never rewritten") from None
        move(tmp, path)


def write_json_atomic(path: Path, obj: Any, *, exclusive: bool = False) -> None:
    """`obj` as indented, key-sorted JSON, written atomically (`exclusive`: never over an existing file)."""
    write_bytes_atomic(Path(path), json.dumps(obj, indent=2, sort_keys=True).encode(), exclusive=exclusive)


def write_bytes_atomic(path: Path, data: bytes, *, exclusive: bool = False, durable: bool = True) -> None:
    write_atomic(path, lambda f: f.write(data), exclusive=exclusive, durable=durable)


def move(src: Path, dst: Path) -> None:
    """Rename `src` to `dst` in one step (same file system), replacing a file at `dst`: the one rename of the
    package, so every atomic write and set-aside goes through this module."""
    os.replace(src, dst)


def fill_folder_atomic(target: Path, fill: Callable[[Path], None], *, merge: bool = False) -> Path:
    """Run `fill(tmp)` on a fresh temporary sibling folder of `target`, then move it into place, replacing
    `target` (`merge`: move each of its files into `target` instead, keeping what else is there). An
    interrupted fill never leaves a half-written folder a reader would accept."""
    import shutil

    target = Path(target)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        fill(tmp)
        if merge and target.exists():
            for path in sorted(p for p in tmp.rglob("*") if p.is_file()):
                dest = target / path.relative_to(tmp)
                dest.parent.mkdir(parents=True, exist_ok=True)
                move(path, dest)
        else:
            if target.exists():
                shutil.rmtree(target)
            move(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def write_text_atomic(path: Path, text: str, encoding: str = "utf-8") -> None:
    write_bytes_atomic(path, text.encode(encoding))


def save_figure_atomic(fig, path: Path, **savefig: Any) -> None:
    """A matplotlib figure saved atomically, in the format of `path`'s suffix."""
    fmt = savefig.pop("format", None) or Path(path).suffix.lstrip(".") or None
    write_atomic(path, lambda f: fig.savefig(f, format=fmt, **savefig))


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


# below this, a job's own files (its result, its log, failed.json) may not have been written
LOW_SPACE_BYTES = 16 * 2**20


def low_space_note(folder: Path) -> str | None:
    """When a job failed without a word: the disk-full line for `folder` if it has under LOW_SPACE_BYTES free
    (a full disk loses the job's own error with its log), else None."""
    import shutil

    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return None
    return disk_full_message(Path(folder) / "x") if free < LOW_SPACE_BYTES else None


def disk_full_message(path: Path, detail: str = "") -> str:
    """What a write of `path` that ran out of space says (the OSError's strerror; its filename names
    `path`): the disk (or quota) is full, where, and how much is left."""
    import shutil

    folder = Path(path).parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        free = f"{shutil.disk_usage(folder).free / 2**20:.1f} MiB free"
    except OSError:
        free = "free space unknown"
    extra = f"; {detail}" if detail else ""
    return f"the disk holding {folder} is full or over quota ({free}{extra}); free space and rerun"


def inflation_problem(path: Path) -> str | None:
    """Why a torch checkpoint file would hold more in memory than on disk (None when it would not).

    torch.save writes its zip entries stored, never compressed, so a checkpoint's tensors take in memory what
    the file takes on disk. torch.load still inflates deflated entries: a crafted 510 KB file can become a
    512 MiB tensor. An entry that is compressed, or that declares more bytes than the file holds, is refused
    before anything is decompressed. A file that is not a zip (torch's legacy format) cannot be compressed."""
    import zipfile

    try:
        if not zipfile.is_zipfile(path):
            return None
        with zipfile.ZipFile(path) as archive:
            entries = archive.infolist()
    except (OSError, zipfile.BadZipFile, ValueError) as err:
        return f"unreadable zip directory ({type(err).__name__}: {err})"
    size = Path(path).stat().st_size
    packed = [e for e in entries if e.compress_type != zipfile.ZIP_STORED]
    if packed:
        return (f"{len(packed)} compressed entr{'y' if len(packed) == 1 else 'ies'}, e.g. {packed[0].filename!r} "
                f"(torch.save never compresses; {sum(e.file_size for e in packed):,} bytes once inflated)")
    total = sum(e.file_size for e in entries)
    if total > size:
        return f"its entries declare {total:,} bytes, more than the file's {size:,}"
    return None


SUMS_FILE = "SHA256SUMS"


def sha256_file(path: Path, chunk: int = 2**20) -> str:
    """Hex sha256 of a file's bytes, read in chunks (what `sha256sum FILE` prints)."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def write_sha256sums(folder: Path) -> Path:
    """`folder/SHA256SUMS` over every regular file below `folder` (itself excepted), in `sha256sum`'s text format
    (`<hex>  <relative posix path>`, sorted by path), so `sha256sum -c SHA256SUMS` run inside `folder` checks it."""
    folder = Path(folder)
    lines = [f"{sha256_file(p)}  {p.relative_to(folder).as_posix()}\n"
             for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink() and p.name != SUMS_FILE]
    write_text_atomic(folder / SUMS_FILE, "".join(lines))
    return folder / SUMS_FILE


def sha256sums_problems(folder: Path) -> list[str]:
    """What is wrong with `folder` against its SHA256SUMS, one line each naming the file: a missing or malformed
    sums file, a listed path that leaves the folder (absolute, `..`, or through a symlink), a missing file, a
    changed byte, and a file present but not listed. An empty list: every file is exactly as summed."""
    folder = Path(folder).resolve()
    sums = folder / SUMS_FILE
    if not sums.is_file():
        return [f"{sums}: missing (no checksums to verify against)"]
    problems, listed = [], set()
    for n, line in enumerate(sums.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest) or not name:
            problems.append(f"{sums}: line {n} is not '<sha256>  <path>'")
            continue
        target = (folder / name)
        if name.startswith("/") or ".." in Path(name).parts or not target.resolve().is_relative_to(folder):
            problems.append(f"{sums}: line {n}: {name!r} leaves the folder")
            continue
        listed.add(target.resolve())
        if not target.is_file():
            problems.append(f"{target}: listed in {SUMS_FILE} but missing")
        elif sha256_file(target) != digest:
            problems.append(f"{target}: sha256 differs from {SUMS_FILE}")
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            problems.append(f"{p}: a symbolic link (a bundle holds plain files only)")
        elif p.is_file() and p.name != SUMS_FILE and p.resolve() not in listed:
            problems.append(f"{p}: not listed in {SUMS_FILE}")
    return problems
