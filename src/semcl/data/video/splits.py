"""The official split-1 files of UCF101 and HMDB51, parsed into (video ids, labels, class names).

UCF101 (``ucfTrainTestlist/`` of the official ``UCF101TrainTestSplits-RecognitionTask.zip``):

    classInd.txt       "<1-based label> <ClassName>"                 e.g. "1 ApplyEyeMakeup"
    trainlist01.txt    "<ClassName>/<video>.avi <1-based label>"     e.g. "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1"
    testlist01.txt     "<ClassName>/<video>.avi"                     (no label: it is the class folder's)

The official files use CRLF line ends, and one class is spelled two ways (folder/classInd
``HandstandPushups``, video names ``v_HandStandPushups_...``), so class folders are matched to
classInd case-insensitively and only the folder part of a path decides the class.

HMDB51 (``testTrainMulti_7030_splits/`` of the official ``test_train_splits.rar``): one file per
class and split, ``<class>_test_split<k>.txt``, each line ``"<video>.avi <tag>"`` with tag 1 = train,
2 = test, 0 = unused in that split (lines often carry a trailing space). Labels are the 51 class
names in sorted order (the order every public loader uses; the archive defines no numbering).

A video id is ``<class folder>/<video file stem>``; the layouts (frame folders, video files) map it
to files (semcl.data.video.videoset).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from semcl.errors import DataError


@dataclass(frozen=True)
class SplitList:
    """One split: video ids ``<class>/<stem>``, the listed file names, labels and all class names."""

    ids: list[str]
    files: list[str]  # as listed, e.g. "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi"
    labels: list[int]
    class_names: list[str]
    sources: list[Path]  # the split files that define it


def _lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot read split file ({type(err).__name__})") from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def _stem(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else name


def read_class_index(path: Path) -> list[str]:
    """Class names of ``classInd.txt`` ordered by their 1-based label; DataError on gaps."""
    by_label: dict[int, str] = {}
    for n, line in enumerate(_lines(path), start=1):
        parts = line.split()
        if len(parts) != 2 or not parts[0].isdigit():
            raise DataError(f"{path}: line {n}: expected '<label> <ClassName>', got {line!r}")
        by_label[int(parts[0])] = parts[1]
    if not by_label:
        raise DataError(f"{path}: empty class index")
    if sorted(by_label) != list(range(1, len(by_label) + 1)):
        raise DataError(f"{path}: labels must run 1..{len(by_label)} without gaps")
    return [by_label[k] for k in range(1, len(by_label) + 1)]


def read_ucf_split(folder: Path, split: str, number: int = 1) -> SplitList:
    """UCF101-style split ``number`` (``train`` | ``test``) from ``folder`` = ``.../ucfTrainTestlist``."""
    if split not in ("train", "test"):
        raise DataError(f"unknown split '{split}' (known: train, test)")
    names = read_class_index(folder / "classInd.txt")
    index = {c.lower(): i for i, c in enumerate(names)}
    path = folder / f"{split}list{number:02d}.txt"
    ids, files, labels = [], [], []
    for n, line in enumerate(_lines(path), start=1):
        parts = line.split()
        rel = parts[0].replace("\\", "/")
        cls = rel.split("/")[0] if "/" in rel else ""
        if len(parts) > 2 or cls.lower() not in index:
            raise DataError(f"{path}: line {n}: expected '<ClassName>/<video>.avi[ <label>]' with a class "
                            f"of classInd.txt, got {line!r}")
        y = index[cls.lower()]
        if len(parts) == 2 and (not parts[1].isdigit() or int(parts[1]) != y + 1):
            raise DataError(f"{path}: line {n}: label {parts[1]} disagrees with classInd.txt ({cls} = {y + 1})")
        ids.append(f"{cls}/{_stem(rel.split('/')[-1])}")
        files.append(rel)
        labels.append(y)
    if not ids:
        raise DataError(f"{path}: empty split file")
    return SplitList(ids, files, labels, names, [folder / "classInd.txt", path])


_HMDB_FILE = re.compile(r"^(?P<cls>.+)_test_split(?P<k>\d+)\.txt$")
HMDB_TAGS = {"train": 1, "test": 2}


def read_hmdb_split(folder: Path, split: str, number: int = 1) -> SplitList:
    """HMDB51 split ``number`` from ``folder`` = ``.../testTrainMulti_7030_splits``."""
    if split not in HMDB_TAGS:
        raise DataError(f"unknown split '{split}' (known: train, test)")
    try:
        found = sorted(p for p in folder.iterdir() if (m := _HMDB_FILE.match(p.name)) and int(m["k"]) == number)
    except OSError as err:
        raise DataError(f"{folder}: cannot list split files ({type(err).__name__})") from None
    if not found:
        raise DataError(f"{folder}: no '<class>_test_split{number}.txt' files")
    names = sorted(_HMDB_FILE.match(p.name)["cls"] for p in found)
    index = {c: i for i, c in enumerate(names)}
    want = HMDB_TAGS[split]
    ids, files, labels = [], [], []
    for path in found:
        cls = _HMDB_FILE.match(path.name)["cls"]
        for n, line in enumerate(_lines(path), start=1):
            parts = line.split()
            if len(parts) != 2 or parts[1] not in ("0", "1", "2"):
                raise DataError(f"{path}: line {n}: expected '<video>.avi <0|1|2>', got {line!r}")
            if int(parts[1]) == want:
                ids.append(f"{cls}/{_stem(parts[0])}")
                files.append(f"{cls}/{parts[0]}")
                labels.append(index[cls])
    if not ids:
        raise DataError(f"{folder}: split {number} lists no {split} videos")
    return SplitList(ids, files, labels, names, found)
