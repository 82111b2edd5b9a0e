"""Video readers on hand-written files in the real formats: UCF101 / HMDB51 split files, frame folders."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from semcl.data.video import load_video_split
from semcl.data.video.decode import import_av, scan_frame_folder
from semcl.data.video.splits import read_hmdb_split, read_ucf_split
from semcl.errors import DataError


def _ucf_lists(folder: Path, train: str, test: str) -> None:
    folder.mkdir(parents=True)
    # CRLF line ends and the HandstandPushups / HandStandPushups spelling, as in the official files
    (folder / "classInd.txt").write_bytes(b"1 ApplyEyeMakeup\r\n2 HandstandPushups\r\n")
    (folder / "trainlist01.txt").write_bytes(train.encode())
    (folder / "testlist01.txt").write_bytes(test.encode())


def test_ucf_split_labels_from_class_index(tmp_path: Path) -> None:
    lists = tmp_path / "ucfTrainTestlist"
    _ucf_lists(lists, "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1\r\nHandstandPushups/v_HandStandPushups_g08_c02.avi 2\r\n",
               "HandstandPushups/v_HandStandPushups_g01_c01.avi\r\n")
    train = read_ucf_split(lists, "train")
    assert train.ids == ["ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01", "HandstandPushups/v_HandStandPushups_g08_c02"]
    assert train.labels == [0, 1] and train.class_names == ["ApplyEyeMakeup", "HandstandPushups"]
    test = read_ucf_split(lists, "test")
    assert test.labels == [1] and test.files == ["HandstandPushups/v_HandStandPushups_g01_c01.avi"]


def test_ucf_label_disagreeing_with_class_index_is_one_line_error(tmp_path: Path) -> None:
    lists = tmp_path / "ucfTrainTestlist"
    _ucf_lists(lists, "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 2\r\n", "")
    with pytest.raises(DataError, match=r"trainlist01.txt: line 1: label 2 disagrees") as err:
        read_ucf_split(lists, "train")
    assert "\n" not in str(err.value)


def test_hmdb_split_tags(tmp_path: Path) -> None:
    folder = tmp_path / "testTrainMulti_7030_splits"
    folder.mkdir()
    # "climb" prefixes "climb_stairs": the class is the file name minus "_test_split1.txt"
    (folder / "climb_stairs_test_split1.txt").write_text("a_climb_stairs_0.avi 1 \nb_climb_stairs_1.avi 2 \n")
    (folder / "climb_test_split1.txt").write_text("c_climb_0.avi 2 \nd_climb_1.avi 0 \ne_climb_2.avi 1 \n")
    (folder / "climb_test_split2.txt").write_text("c_climb_0.avi 1 \n")  # another split: ignored
    train = read_hmdb_split(folder, "train")
    assert train.class_names == ["climb", "climb_stairs"]
    assert sorted(zip(train.ids, train.labels, strict=True)) == [("climb/e_climb_2", 0), ("climb_stairs/a_climb_stairs_0", 1)]
    test = read_hmdb_split(folder, "test")
    assert sorted(zip(test.ids, test.labels, strict=True)) == [("climb/c_climb_0", 0), ("climb_stairs/b_climb_stairs_1", 1)]
    (folder / "climb_test_split1.txt").write_text("c_climb_0.avi 3\n")
    with pytest.raises(DataError, match=r"climb_test_split1.txt: line 1: expected"):
        read_hmdb_split(folder, "train")


def _png(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((4, 6, 3), value, dtype=np.uint8)).save(path)


def test_frame_folder_naming(tmp_path: Path) -> None:
    # TSN-style folder with flow images next to the RGB frames; numbers without padding
    for k in (1, 2, 10):
        _png(tmp_path / "v" / f"img_{k}.png", k)
        _png(tmp_path / "v" / f"flow_x_{k}.png", 200)
    assert scan_frame_folder(tmp_path / "v").names == ("img_1.png", "img_2.png", "img_10.png")
    for k in (3, 1, 2):
        _png(tmp_path / "w" / f"frame{k:06d}.png", k)
    assert scan_frame_folder(tmp_path / "w").names == ("frame000001.png", "frame000002.png", "frame000003.png")
    with pytest.raises(DataError, match="no frames"):
        (tmp_path / "empty").mkdir()
        scan_frame_folder(tmp_path / "empty")


def _ucf_frames_root(root: Path, nested: bool) -> None:
    base = root / "UCF101"
    _ucf_lists(base / "ucfTrainTestlist", "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi 1\r\n"
               "HandstandPushups/v_HandStandPushups_g08_c01.avi 2\r\n", "ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi\r\n")
    for vid, n, offset in (("ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01", 5, 0),
                           ("HandstandPushups/v_HandStandPushups_g08_c01", 3, 100),
                           ("ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01", 2, 50)):
        folder = base / "frames" / (vid if nested else vid.split("/")[1])
        for k in range(n):
            _png(folder / f"{k + 1:05d}.png", offset + k)


@pytest.mark.parametrize("nested", [True, False])
def test_ucf_frames_layout_reads_pixels_and_warns_on_size(tmp_path: Path, nested: bool, caplog) -> None:
    _ucf_frames_root(tmp_path, nested)
    with caplog.at_level(logging.WARNING, logger="semcl.data"):
        s = load_video_split("ucf101", tmp_path, "train")
    assert s.layout == "frames" and s.frame_counts.tolist() == [5, 3] and s.labels.tolist() == [0, 1]
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["ucf101 split 1 train: 2 videos, the real set has 9537 (synthetic or different split files?)"]
    x = s.read_frames(0, [4, 0, 4])
    assert x.shape == (3, 3, 4, 6) and x.dtype == torch.uint8
    assert x[:, 0, 0, 0].tolist() == [4, 0, 4]
    clips = s.clips([1, 0], torch.tensor([[[0, 2]], [[1, 3]]]))  # [B=2, V=1, T=2]
    assert clips.shape == (2, 1, 3, 2, 4, 6)
    assert clips[:, 0, 1, :, 2, 3].tolist() == [[100, 102], [1, 3]]
    resized = load_video_split("ucf101", tmp_path, "test", frame_size=(2, 3))
    assert resized.read_frames(0, [1]).shape == (1, 3, 2, 3)
    assert resized.read_frames(0, [1])[0, 0].unique().tolist() == [51]


def test_missing_frame_folder_and_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"missing UCF101/ucfTrainTestlist \(dataset ucf101"):
        load_video_split("ucf101", tmp_path, "train")
    _ucf_frames_root(tmp_path, True)
    import shutil

    shutil.rmtree(tmp_path / "UCF101" / "frames" / "HandstandPushups")
    with pytest.raises(DataError, match=r"v_HandStandPushups_g08_c01: missing frame folder"):
        load_video_split("ucf101", tmp_path, "train")
    with pytest.raises(DataError, match=r"missing UCF101/UCF-101/ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi \(and 1"):
        load_video_split("ucf101", tmp_path, "train", layout="videos")


def test_pyav_missing_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "av", None)  # import av -> ImportError
    with pytest.raises(DataError, match=r"pip install 'semcl\[video\]'"):
        import_av()
