"""The GPU check's section of bench/results.md: written by scripts/gpu_check.py, kept by bench/run_all.py."""

from __future__ import annotations

from pathlib import Path

BEGIN = "<!-- gpu-check: begin (scripts/gpu_check.sh) -->"
END = "<!-- gpu-check: end -->"


def section_of(text: str) -> str | None:
    if BEGIN in text and END in text:
        return text[text.index(BEGIN):text.index(END) + len(END)]
    return None


def keep_gpu_section(path: Path, new_text: str) -> str:
    """`new_text` with the GPU section of the file at `path` (if any) appended again."""
    old = section_of(path.read_text()) if path.exists() else None
    return new_text.rstrip("\n") + ("\n\n" + old + "\n" if old else "\n")


def write_gpu_section(path: Path, body: str) -> None:
    """Replace (or add) the GPU section of the file at `path` with `body`."""
    text = path.read_text() if path.exists() else ""
    old = section_of(text)
    block = f"{BEGIN}\n{body.rstrip()}\n{END}"
    path.write_text(text.replace(old, block) if old else text.rstrip("\n") + "\n\n" + block + "\n")
