"""File permissions shared by every writer of the results store."""

from __future__ import annotations

import os


def file_mode() -> int:
    """The mode a plainly created file gets here (0666 less the umask). Temp files from mkstemp
    are 0600; they are set to this before the rename so that all of a run's files match."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask
