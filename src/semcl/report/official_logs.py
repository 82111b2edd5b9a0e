"""The authors' training logs, read into per-epoch values to draw beside our curves (`semcl curves --official-log`).

Each format is what the official training script prints (read in the repositories at the commits named):

  pcl           PaCo / GPaCo (dvlab-research/Parametric-Contrastive-Learning @fe56535, paco_lt.py / paco_imagenet.py:
                ProgressMeter.display writes `Epoch: [E][ i/N]\\tTime ...\\tData ...\\tLoss 4.1234e+00 (4.2000e+00)\\t
                Acc@1 ...` every print_freq steps, E counted from 0; validate() appends ` * Acc@1 57.000 Acc@5 ...`)
  rince-cifar   RINCE cifar branch (boschresearch/rince @1a060ae, main_supcon.py: `Train: [E][i/N]\\tBT ...\\tDT ...\\t
                loss 5.123 (5.200)` every print_freq steps, E from 1; then `epoch E, total time T`)
  repdistiller  CRD teachers (HobbitLong/RepDistiller @b84f547, helper/loops.py train_vanilla: `Epoch: [E][i/N]\\t
                Time ...\\tData ...\\tLoss 1.2345 (1.3000)\\tAcc@1 ...`, E from 1; validate: ` * Acc@1 72.340 Acc@5 ...`)

Per epoch: `loss` is the last running average the epoch printed (the scripts' AverageMeter, the mean over the
steps so far: at the epoch's last print, close to semcl's per-epoch mean loss); `test_top1` the ` * Acc@1` that
follows the epoch, where the script evaluates each epoch. Epochs are numbered from 1, as semcl's history.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from semcl.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

_NUM = r"([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|nan|inf)"
# format -> (the step line: epoch, loss running average; the epoch offset to count from 1)
FORMATS: dict[str, tuple[re.Pattern, int]] = {
    "pcl": (re.compile(rf"^Epoch: \[(\d+)\]\[\s*\d+/\d+\].*?\bLoss {_NUM} \({_NUM}\)"), 1),
    "rince-cifar": (re.compile(rf"^Train: \[(\d+)\]\[\s*\d+/\d+\].*?\bloss {_NUM} \({_NUM}\)"), 0),
    "repdistiller": (re.compile(rf"^Epoch: \[(\d+)\]\[\s*\d+/\d+\].*?\bLoss {_NUM} \({_NUM}\)"), 0),
}
_TEST = re.compile(rf"^\s*\* Acc@1 {_NUM}")
_SCIENTIFIC = re.compile(r"\bLoss \d\.\d+e[-+]\d+ ")  # PCL's meters print the loss as {:.4e}


def detect(lines: list[str]) -> str | None:
    """The format whose step lines the log holds (PCL and RepDistiller share the line; PCL's loss is {:.4e})."""
    for line in lines:
        if FORMATS["rince-cifar"][0].match(line):
            return "rince-cifar"
        if FORMATS["pcl"][0].match(line):
            return "pcl" if _SCIENTIFIC.search(line) else "repdistiller"
    return None


def parse_log(path: Path, fmt: str | None = None,
              hint: str = "; name it with --official-log-format") -> tuple[str, pd.DataFrame]:
    """(format, one line per epoch: epoch, loss, test_top1 (NaN where the log has none)); DataError in one line
    naming the file when it cannot be read or holds no step line of the format."""
    path = Path(path)
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError as err:
        raise DataError(f"{path}: the official log cannot be read ({err.strerror or err})") from None
    if fmt is not None and fmt not in FORMATS:
        raise DataError(f"{path}: unknown log format {fmt!r} (known: {', '.join(FORMATS)})")
    fmt = fmt or detect(lines)
    if fmt is None:
        raise DataError(f"{path}: no training line of a known official log format ({', '.join(FORMATS)}){hint}")
    step, offset = FORMATS[fmt]
    loss: dict[int, float] = {}
    top1: dict[int, float] = {}
    last = None
    for line in lines:
        m = step.match(line)
        if m:
            last = int(m.group(1)) + offset
            loss[last] = float(m.group(3))
            continue
        t = _TEST.match(line)
        if t and last is not None:
            top1[last] = float(t.group(1))
    if not loss:
        raise DataError(f"{path}: no training line of the {fmt!r} format")
    import pandas as pd  # here: the CLI's parser reads FORMATS at start-up

    epochs = sorted(loss)
    return fmt, pd.DataFrame({"epoch": epochs, "loss": [loss[e] for e in epochs],
                              "test_top1": [top1.get(e, float("nan")) for e in epochs]})
