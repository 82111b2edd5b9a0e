"""The shipped RINCE class lists (ImageNet-100, ImageNet outlier splits, TinyImageNet outliers) and
the outliers20 OOD subset on a TinyImageNet folder written in the real layout."""

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from semcl.data import load
from semcl.data.imagenet100 import (
    LIST_FILES,
    LISTS,
    imagenet100_class_names,
    imagenet100_wnids,
    imagenet_outlier_wnids,
    packaged_file,
    read_wnid_list,
    read_wnid_names,
    wnid_list,
)
from semcl.data.imageset import ImageSet
from semcl.data.ood_subsets import restrict_to_wnids, tinyimagenet_outliers20
from semcl.data.sets.tinyimagenet import tinyimagenet_wnids
from semcl.errors import DataError

SHARED = Path("/work/shared/rince")


def test_imagenet100_list():
    wnids = imagenet100_wnids()
    assert len(wnids) == 100 == len(set(wnids)) and wnids == sorted(wnids)
    assert wnid_list("imagenet100")[:3] == ["n07836838", "n04111531", "n04493381"]  # file order kept
    names = imagenet100_class_names()
    assert len(names) == 100
    assert names[0] == "robin" and wnids[0] == "n01558993"  # first in wnid order
    assert dict(zip(wnids, names, strict=True))["n02086240"] == "Shih-Tzu"


def test_outlier_lists_are_disjoint():
    splits = [set(imagenet_outlier_wnids(k)) for k in (1, 2, 3)]
    assert [len(s) for s in splits] == [100, 100, 100]
    assert imagenet_outlier_wnids(1)[:3] == ["n07693725", "n12985857", "n01644373"]
    everything = set(imagenet100_wnids())
    for s in splits:
        assert not s & everything
        everything |= s
    assert len(everything) == 400
    tiny = wnid_list("tiny_imagenet_outliers")
    assert len(tiny) == 20 == len(set(tiny)) and tiny[0] == "n07720875"
    with pytest.raises(ValueError, match="1, 2 or 3"):
        imagenet_outlier_wnids(4)


@pytest.mark.skipif(not SHARED.exists(), reason="shared/rince not present")
@pytest.mark.parametrize("name", LISTS)
def test_shipped_lists_equal_the_official_files(name):
    shipped = packaged_file(LIST_FILES[name])
    assert shipped.read_bytes() == (SHARED / shipped.name).read_bytes()
    assert (packaged_file("ImageNet-100_wnid_names.txt").read_bytes()
            == (SHARED / "ImageNet-100_wnid_names.txt").read_bytes())


def test_readers_reject_bad_lines(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("n01440764\n\nn01443537")  # blank line, no trailing newline
    assert read_wnid_list(good) == ["n01440764", "n01443537"]
    bad = tmp_path / "bad.txt"
    bad.write_text("n01440764\ngoldfish\n")
    with pytest.raises(DataError, match=r"bad.txt: line 2: 'goldfish' is not a WordNet id"):
        read_wnid_list(bad)
    bad.write_text("n01440764\nn01440764\n")
    with pytest.raises(DataError, match="line 2: n01440764 listed twice"):
        read_wnid_list(bad)
    names = tmp_path / "names.txt"
    names.write_text("n01440764 tench\nn01443537 great white shark\n")
    assert read_wnid_names(names) == {"n01440764": "tench", "n01443537": "great white shark"}
    names.write_text("n01440764\n")
    with pytest.raises(DataError, match="line 1: expected '<wnid> <name>'"):
        read_wnid_names(names)
    with pytest.raises(DataError, match="has 100"):
        imagenet100_wnids(good)


def write_tiny_root(root: Path, wnids: list[str]) -> None:
    """A TinyImageNet-200 folder (wnids.txt, words.txt, val/) with one 64x64 val JPEG per class,
    whose pixel value encodes the class position in ``wnids``."""
    base = root / "tiny-imagenet-200"
    (base / "val" / "images").mkdir(parents=True)
    (base / "wnids.txt").write_text("\n".join(wnids) + "\n")
    (base / "words.txt").write_text("".join(f"{w}\tthing {i}\n" for i, w in enumerate(wnids)))
    lines = []
    for i, w in enumerate(wnids):
        Image.fromarray(np.full((64, 64, 3), 10 * i, dtype=np.uint8)).save(base / "val" / "images" / f"val_{i}.JPEG")
        lines.append(f"val_{i}.JPEG\t{w}\t0\t0\t63\t63\n")
    (base / "val" / "val_annotations.txt").write_text("".join(lines))


def test_outliers20_on_a_real_layout(tmp_path):
    outliers = wnid_list("tiny_imagenet_outliers")
    inliers = ["n01443537", "n01629819", "n01641577"]  # three of TinyImageNet's other classes
    write_tiny_root(tmp_path, inliers + outliers)
    full = load("tinyimagenet", tmp_path, "test")
    class_wnids = tinyimagenet_wnids(tmp_path)
    assert class_wnids == sorted(inliers + outliers) and len(full) == 23
    sub = tinyimagenet_outliers20(full, class_wnids)
    assert len(sub) == 20
    assert sorted(class_wnids[i] for i in sub.labels.tolist()) == sorted(outliers)
    assert sub.class_names == full.class_names  # labels keep their meaning


def test_restrict_to_wnids_selects_rows_and_checks_the_list():
    images = torch.zeros(6, 3, 4, 4, dtype=torch.uint8)
    s = ImageSet("toy", images, torch.tensor([0, 1, 2, 1, 0, 2]), ["a", "b", "c"])
    wnids = ["n00000001", "n00000002", "n00000003"]
    sub = restrict_to_wnids(s, wnids, ["n00000002", "n00000003"])
    assert sub.labels.tolist() == [1, 2, 1, 2]
    with pytest.raises(DataError, match="1 of the 2 listed wnids are not classes of this set"):
        restrict_to_wnids(s, wnids, ["n00000002", "n09999999"])
    assert restrict_to_wnids(s, wnids, ["n00000002", "n09999999"], strict=False).labels.tolist() == [1, 1]
    with pytest.raises(DataError, match="no image"):
        restrict_to_wnids(s, wnids, ["n09999999"], strict=False)


def test_wnid_class_names_become_words_for_name_similarities():
    # ImageNet folder sets name classes by wnid; the name similarities are of the words
    from semcl.data.imagenet100 import words_of_wnids

    wnids = imagenet100_wnids()
    assert words_of_wnids(wnids) == imagenet100_class_names(wnids)
    assert words_of_wnids(["maple_tree", "oak_tree"]) == ["maple_tree", "oak_tree"]
    assert words_of_wnids([wnids[0], "not_a_wnid"]) == [wnids[0], "not_a_wnid"]


def test_official_matrix_serves_a_run_whose_classes_are_wnids():
    from semcl.data.semantics.name_similarity import load_similarity
    from semcl.methods.base import DataInfo
    from semcl.methods.ranked_contrastive import RinceMethod
    from semcl.methods.ranked_contrastive.method import name_similarity

    wnids = imagenet100_wnids()
    m = RinceMethod(ranks="names", name_similarity_file="official")
    names, sim = name_similarity(m, DataInfo(100, 3, None, None, tuple(wnids)))
    _, direct = load_similarity("official", imagenet100_class_names(wnids))
    assert names == imagenet100_class_names(wnids) and torch.equal(sim, direct)
