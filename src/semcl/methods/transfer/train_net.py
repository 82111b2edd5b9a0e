"""The suite's detectron2 training entry point for the transfer rows (semcl.methods.transfer):

    python -m semcl.methods.transfer.train_net [--config-file F] --num-gpus N [--resume] KEY VALUE ...

It does what MoCo's (and CSML's) detection/train_net.py does, in our words: registers
`Res5ROIHeadsExtraNorm` -- detectron2's Res5ROIHeads with one more norm layer (MODEL.RESNETS.NORM, SyncBN in
the MoCo configs) after the res5 stage, as the MoCo paper describes -- so that `MODEL.ROI_HEADS.NAME
Res5ROIHeadsExtraNorm` resolves (detectron2's stock tools/train_net.py fails there with a registry
KeyError); evaluates COCO sets with COCOEvaluator and VOC sets with PascalVOCDetectionEvaluator; and
otherwise is detectron2's DefaultTrainer, whose hooks run precise BN before each evaluation when
TEST.PRECISE_BN.ENABLED is true (the MoCo configs set it; the transfer rows pass it). Without
--config-file the config starts from detectron2's defaults. detectron2 is imported only here, lazily.
"""

from __future__ import annotations

import importlib.util
import os
import sys

from semcl.errors import ConfigError

HEAD = "Res5ROIHeadsExtraNorm"
INSTALL = "pip install 'git+https://github.com/facebookresearch/detectron2.git' (it is not on PyPI)"


def require_detectron2() -> None:
    """One line naming the package when detectron2 is not importable."""
    if importlib.util.find_spec("detectron2") is None:
        raise ConfigError(f"detectron2_transfer needs detectron2, which is not installed: {INSTALL}")


def register_extra_norm_head():
    """Register `Res5ROIHeadsExtraNorm` once (a second call returns the registered class)."""
    from detectron2.layers import get_norm
    from detectron2.modeling.roi_heads import ROI_HEADS_REGISTRY, Res5ROIHeads

    if HEAD in ROI_HEADS_REGISTRY:
        return ROI_HEADS_REGISTRY.get(HEAD)

    class Res5ROIHeadsExtraNorm(Res5ROIHeads):
        """Res5ROIHeads whose res5 block ends in one more norm layer of MODEL.RESNETS.NORM (MoCo)."""

        @classmethod
        def _build_res5_block(cls, cfg):  # a classmethod in detectron2 >= 0.3 (from_config builds the head)
            seq, out_channels = super()._build_res5_block(cfg)
            seq.add_module("norm", get_norm(cfg.MODEL.RESNETS.NORM, out_channels))
            return seq, out_channels

    ROI_HEADS_REGISTRY.register(Res5ROIHeadsExtraNorm)
    return Res5ROIHeadsExtraNorm


def build_trainer_class():
    from detectron2.engine import DefaultTrainer
    from detectron2.evaluation import COCOEvaluator, PascalVOCDetectionEvaluator

    class Trainer(DefaultTrainer):
        @classmethod
        def build_evaluator(cls, cfg, dataset_name, output_folder=None):
            if "coco" in dataset_name:
                return COCOEvaluator(dataset_name, output_dir=output_folder or os.path.join(cfg.OUTPUT_DIR, "inference"))
            if "voc" in dataset_name:
                return PascalVOCDetectionEvaluator(dataset_name)
            raise ConfigError(f"detectron2_transfer: no evaluator for dataset {dataset_name!r} (coco_* or voc_*)")

    return Trainer


def setup(args):
    from detectron2.config import get_cfg
    from detectron2.engine import default_setup

    cfg = get_cfg()
    if args.config_file:
        cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts)
    cfg.freeze()
    default_setup(cfg, args)
    return cfg


def main(args):
    register_extra_norm_head()  # in every worker process: launch() spawns them
    cfg = setup(args)
    trainer = build_trainer_class()(cfg)
    trainer.resume_or_load(resume=args.resume)
    return trainer.train()


def run(argv: list[str]) -> None:
    require_detectron2()
    from detectron2.engine import default_argument_parser, launch

    args = default_argument_parser().parse_args(argv)
    launch(main, args.num_gpus, num_machines=args.num_machines, machine_rank=args.machine_rank,
           dist_url=args.dist_url, args=(args,))


if __name__ == "__main__":
    try:
        run(sys.argv[1:])
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
