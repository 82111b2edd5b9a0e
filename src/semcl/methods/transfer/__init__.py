"""Detection / segmentation transfer through detectron2 (HSA docs/papers/hsa.md §d.4): a second stage
(`init_from`: a pre-training row) that exports the base backbone in detectron2's format
(semcl.models.weight_formats), runs our detectron2 entry point `semcl.methods.transfer.train_net` (it registers MoCo's
`Res5ROIHeadsExtraNorm`, which detectron2's own tools/train_net.py does not) once per trial with the MoCo
detection configs' values, and reports the mean over the trials (MoCo and the paper: 5) of the final
AP / AP50 / AP75. The suite does not reimplement detectron2."""

from dataclasses import dataclass

from semcl.methods.spec import MethodSpec

# MoCo's detection configs as the official repository ships them (haohang96/CSML @be34e84
# detection/configs/Base-RCNN-C4-BN.yaml + pascal_voc_R_50_C4_24k(_moco).yaml / coco_R_50_C4_2x(_moco).yaml,
# with detectron2's Base-RCNN-C4.yaml under them), spelled out as command-line overrides of detectron2's
# defaults (whose C4 topology -- res4 features into RPN and ROI heads, res5 in the head -- they keep), so no
# config file is needed; a user's `config_file` is merged first and these win.
_COMMON = ["MODEL.META_ARCHITECTURE", "GeneralizedRCNN", "MODEL.RPN.PRE_NMS_TOPK_TEST", "6000",
           "MODEL.RPN.POST_NMS_TOPK_TEST", "1000", "MODEL.ROI_HEADS.NAME", "Res5ROIHeadsExtraNorm",
           "MODEL.BACKBONE.FREEZE_AT", "0", "MODEL.RESNETS.NORM", "SyncBN", "MODEL.RESNETS.STRIDE_IN_1X1", "False",
           "MODEL.PIXEL_MEAN", "[123.675, 116.280, 103.530]", "MODEL.PIXEL_STD", "[58.395, 57.120, 57.375]",
           "INPUT.FORMAT", "RGB", "TEST.PRECISE_BN.ENABLED", "True", "SOLVER.IMS_PER_BATCH", "16",
           "SOLVER.BASE_LR", "0.02"]
BENCHMARK_OPTS: dict[str, list[str]] = {
    "voc": [*_COMMON, "MODEL.MASK_ON", "False", "MODEL.ROI_HEADS.NUM_CLASSES", "20",
            "DATASETS.TRAIN", "('voc_2007_trainval', 'voc_2012_trainval')", "DATASETS.TEST", "('voc_2007_test',)",
            "INPUT.MIN_SIZE_TRAIN", "(480, 512, 544, 576, 608, 640, 672, 704, 736, 768, 800)",
            "INPUT.MIN_SIZE_TEST", "800", "SOLVER.MAX_ITER", "24000", "SOLVER.STEPS", "(18000, 22000)",
            "SOLVER.WARMUP_ITERS", "100"],
    "coco": [*_COMMON, "MODEL.MASK_ON", "True", "MODEL.ROI_HEADS.NUM_CLASSES", "80",
             "DATASETS.TRAIN", "('coco_2017_train',)", "DATASETS.TEST", "('coco_2017_val',)",
             "INPUT.MIN_SIZE_TRAIN", "(640, 672, 704, 736, 768, 800)", "INPUT.MIN_SIZE_TEST", "800",
             "SOLVER.MAX_ITER", "180000", "SOLVER.STEPS", "(120000, 160000)"],
}

# detectron2 metric name -> metrics.json key, per benchmark: the transfer tables' column keys (eval: detection)
METRIC_KEYS: dict[str, dict[str, str]] = {
    "voc": {"bbox/AP": "ap", "bbox/AP50": "ap50", "bbox/AP75": "ap75"},
    "coco": {"bbox/AP": "ap_bb", "bbox/AP50": "ap50_bb", "bbox/AP75": "ap75_bb",
             "segm/AP": "ap_mk", "segm/AP50": "ap50_mk", "segm/AP75": "ap75_mk"},
}


@dataclass
class Detectron2TransferMethod:
    """Export the base backbone and run detectron2 on it, `trials` times."""

    name: str = "detectron2_transfer"
    benchmark: str = "voc"  # voc | coco: the registered values of docs/papers/hsa.md §d.4
    # None: our entry point (python -m semcl.methods.transfer.train_net); else a script of the user's
    # ($SEMCL_DETECTRON2_TRAIN_NET also names one) taking the same command line
    train_net: str | None = None
    config_file: str | None = None  # a base config merged before the registered values (None: detectron2's defaults)
    num_gpus: int = 8
    python: str | None = None  # interpreter for the entry point (None: this one)
    trials: int = 5  # independent fine-tunes (detectron2 SEED 0..trials-1); the mean is reported (MoCo: 5)

    def __post_init__(self) -> None:
        if self.trials < 1 or self.num_gpus < 1:
            raise ValueError(f"'method.trials' = {self.trials} and 'method.num_gpus' = {self.num_gpus} must be >= 1")


DETECTRON2_TRANSFER = MethodSpec("detectron2_transfer", Detectron2TransferMethod,
                                 "semcl.methods.transfer.method:Detectron2Transfer", train_cost=0.0,
                                 depends="init_from", choices={"benchmark": frozenset(BENCHMARK_OPTS)},
                                 summary="detection transfer of the exported backbone via detectron2, mean of 5 trials",
                                 builder=None)  # detectron2 builds and trains the detector in its own process
