"""Detection / segmentation transfer through detectron2 (HSA hsa.md d.4): a second stage
(`init_from`: a pre-training row) that exports the base backbone in detectron2's format
(semcl.export) and runs detectron2's `train_net.py` with the MoCo detection configs' values,
then reads the final AP / AP50 / AP75 back into metrics.json. The suite does not reimplement detectron2."""

from dataclasses import dataclass

from semcl.methods.spec import MethodSpec

# hsa.md d.4 (official configs pascal_voc_R_50_C4_24k_moco.yaml / coco_R_50_C4_2x_moco.yaml), as
# detectron2 command-line overrides on top of `config_file`
BENCHMARK_OPTS: dict[str, list[str]] = {
    "voc": ["DATASETS.TRAIN", "('voc_2007_trainval', 'voc_2012_trainval')", "DATASETS.TEST", "('voc_2007_test',)",
            "INPUT.MIN_SIZE_TRAIN", "(480, 512, 544, 576, 608, 640, 672, 704, 736, 768, 800)",
            "INPUT.MIN_SIZE_TEST", "800", "SOLVER.MAX_ITER", "24000", "SOLVER.STEPS", "(18000, 22000)",
            "SOLVER.WARMUP_ITERS", "100", "SOLVER.IMS_PER_BATCH", "16", "SOLVER.BASE_LR", "0.02",
            "MODEL.BACKBONE.FREEZE_AT", "0", "MODEL.RESNETS.STRIDE_IN_1X1", "False", "MODEL.RESNETS.NORM", "SyncBN",
            "MODEL.ROI_HEADS.NAME", "Res5ROIHeadsExtraNorm", "MODEL.PIXEL_MEAN", "[123.675, 116.280, 103.530]",
            "MODEL.PIXEL_STD", "[58.395, 57.120, 57.375]", "INPUT.FORMAT", "RGB"],
    "coco": ["DATASETS.TRAIN", "('coco_2017_train',)", "DATASETS.TEST", "('coco_2017_val',)",
             "INPUT.MIN_SIZE_TRAIN", "(640, 672, 704, 736, 768, 800)", "SOLVER.MAX_ITER", "180000",
             "SOLVER.STEPS", "(120000, 160000)", "MODEL.MASK_ON", "True", "MODEL.BACKBONE.FREEZE_AT", "0",
             "MODEL.RESNETS.STRIDE_IN_1X1", "False", "MODEL.RESNETS.NORM", "SyncBN",
             "MODEL.ROI_HEADS.NAME", "Res5ROIHeadsExtraNorm", "MODEL.PIXEL_MEAN", "[123.675, 116.280, 103.530]",
             "MODEL.PIXEL_STD", "[58.395, 57.120, 57.375]", "INPUT.FORMAT", "RGB"],
}


@dataclass
class Detectron2TransferMethod:
    """Export the base backbone and run detectron2's train_net.py on it."""

    name: str = "detectron2_transfer"
    benchmark: str = "voc"  # voc | coco: the registered values of hsa.md d.4
    train_net: str | None = None  # path of detectron2's tools/train_net.py (None: $SEMCL_DETECTRON2_TRAIN_NET)
    config_file: str | None = None  # base config (detectron2 configs/PascalVOC-Detection/faster_rcnn_R_50_C4.yaml ...)
    num_gpus: int = 8
    python: str | None = None  # interpreter for train_net.py (None: this one)


DETECTRON2_TRANSFER = MethodSpec("detectron2_transfer", Detectron2TransferMethod,
                                 "semcl.methods.transfer.method:Detectron2Transfer", train_cost=0.0,
                                 depends="init_from", choices={"benchmark": frozenset(BENCHMARK_OPTS)},
                                 summary="detection transfer of the exported backbone via detectron2 train_net.py")
