"""Detection / segmentation transfer through detectron2 (HSA docs/papers/hsa.md §d.4): a second stage
(`init_from`: a pre-training row) that exports the base backbone in detectron2's format
(semcl.models.weight_formats), runs our detectron2 entry point `semcl.methods.transfer.train_net` (it registers MoCo's
`Res5ROIHeadsExtraNorm`, which detectron2's own tools/train_net.py does not) once per trial with the MoCo
detection configs' values, and reports the mean over the trials (MoCo and the paper: 5) of the final
AP / AP50 / AP75. The suite does not reimplement detectron2."""

from dataclasses import dataclass

from semcl.methods.spec import ExternalJob, MethodSpec

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

# detectron2's own published runs of the nearest configs (facebookresearch/detectron2 MODEL_ZOO.md @02478d2, COCO
# baselines, R50-C4 1x: 8 V100s, 16 images a step, PyTorch 1.3): (s/iter, train mem GB, which). VOC runs the Faster
# R-CNN (no mask head), COCO the Mask R-CNN. Not measurements of these configs: the zoo freezes the stem and res2
# with frozen BN, MoCo's configs train every stage with SyncBN (more memory and time), and VOC's shorter sides
# (480-800) are smaller than COCO's (640-800); V100 pace, where the other estimates are A100 arithmetic.
PUBLISHED_RUNS: dict[str, tuple[float, float, str]] = {
    "voc": (0.551, 4.8, "Faster R-CNN R50-C4"),
    "coco": (0.584, 5.2, "Mask R-CNN R50-C4"),
}
ZOO_SOURCE = "detectron2 MODEL_ZOO.md @02478d2"


def max_iter(benchmark: str) -> int:
    """SOLVER.MAX_ITER of the benchmark's registered options."""
    opts = BENCHMARK_OPTS[benchmark]
    return int(opts[opts.index("SOLVER.MAX_ITER") + 1])


def published_job(method_cfg) -> ExternalJob:
    """The transfer's trials at detectron2's published pace and memory (PUBLISHED_RUNS)."""
    sec, mem, which = PUBLISHED_RUNS[method_cfg.benchmark]
    return ExternalJob(max_iter(method_cfg.benchmark) * method_cfg.trials, sec, 8, mem,
                       f"{ZOO_SOURCE}: {which} 1x, 8 V100, 2 images per GPU")


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
                                 builder=None,  # detectron2 builds and trains the detector in its own process
                                 external_job=published_job, computes="semcl.methods.transfer.method:transfer_metrics")
