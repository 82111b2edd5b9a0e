"""Semi-supervised fine-tuning (semi_finetune): the subset lists, the epoch over the subset, the loss."""

import pytest
import torch
import torch.nn.functional as F

from semcl.data import load
from semcl.data.synthetic import ensure_synthetic
from semcl.errors import ConfigError, DataError
from semcl.methods.base import Batch, DataInfo, Dependency, TrainContext, run_step
from semcl.methods.registry import method_class
from semcl.methods.semi.method import read_subset, subset_list_path
from semcl.run_config import build_config

pytestmark = pytest.mark.usefixtures("single_thread")  # tests/conftest.py


def _cfg(**knobs):
    return build_config({"method": {"name": "semi_finetune", **knobs}, "model": {"backbone": "resnet_tiny"},
                         "data": {"name": "imagenet"}}, where="test")


@pytest.fixture(scope="module")
def train_set(tmp_path_factory):
    root = ensure_synthetic(tmp_path_factory.mktemp("data"), ["imagenet"], train_per_class=3, test_per_class=1)
    return load("imagenet", root, "train", image_size=16)


def test_subset_lists_select_the_named_training_images(train_set, tmp_path):
    paths = train_set.paths
    lst = subset_list_path(paths, "1percent")
    assert lst.parts[-3:] == ("imagenet", "semi", "1percent.txt")
    rows = read_subset(lst, paths)
    # the synthetic writer lists the first image of each class: one per class, 20 classes
    assert rows.numel() == 20 and sorted(train_set.labels[rows].tolist()) == list(range(20))
    assert set(lst.read_text().split()) == {paths[i].name for i in rows.tolist()}
    own = tmp_path / "list.txt"
    own.write_text(f"{paths[5].name}\n\n{paths[2].name}\n")
    assert read_subset(own, paths).tolist() == [2, 5]
    own.write_text("n01440764_10026.JPEG\n")
    with pytest.raises(DataError, match=r"list.txt: line 1: 'n01440764_10026.JPEG' is not an image"):
        read_subset(own, paths)
    with pytest.raises(DataError, match="absent.txt: label-subset list not found"):
        read_subset(tmp_path / "absent.txt", paths)


def test_an_epoch_visits_the_subset_once_and_the_loss_is_cross_entropy(train_set):
    cfg = _cfg(subset="10percent", classifier_lr_scale=10.0)
    torch.manual_seed(0)
    m = method_class("semi_finetune")(cfg, DataInfo(train_set.num_classes, 3, None))
    m.on_train_start(TrainContext(train_set, [], torch.device("cpu"), None, 0))
    assert m.epoch_size(len(train_set.labels)) == 40
    order = m.epoch_order(train_set.labels, train_set.num_classes, torch.Generator().manual_seed(1), 8)
    assert sorted(order.tolist()) == m.subset.tolist() and order.numel() == 40
    groups = m.configure_optimizer(cfg.optim).param_groups
    assert groups[1]["lr_scale"] == 10.0 and groups[0]["nesterov"] is True
    x, y = torch.randn(4, 3, 16, 16), torch.tensor([0, 3, 3, 7])
    m.train()
    loss = run_step(m, Batch.of([x], y))["loss"]
    ref = F.cross_entropy(m.classifier(m.backbone(x)), y)
    torch.testing.assert_close(loss, ref)


def test_base_backbone_is_loaded_and_mining_is_planned():
    torch.manual_seed(1)
    base = method_class("mocov2")(build_config({"method": {"name": "mocov2", "queue_size": 8},
                                                "model": {"backbone": "resnet_tiny"}, "data": {"name": "imagenet"}},
                                               where="test"), DataInfo(20, 3, None))
    m = method_class("semi_finetune")(_cfg(), DataInfo(20, 3, None))
    dep = Dependency("init_from", "r", None, base.state_dict, dict, dict)
    m.load_dependencies([dep])
    for k, v in base.backbone.state_dict().items():
        assert torch.equal(m.backbone.state_dict()[k], v)
    with pytest.raises(ConfigError, match="method.mining 'entropy'.*planned"):
        _cfg(mining="entropy")
