"""README.md of a bundle: a model card whose YAML front matter is the bundle's model-index (the same document as
model-index.yml, so `hf upload` or a Papers-with-Code reader finds it either way), then the prose: what it holds,
how it was made, the tables as `semcl table` renders them, how to load the weights and how to verify the bundle."""

from __future__ import annotations

import yaml

from semcl.report.escape import md_text


def dump_yaml(doc: dict) -> str:
    """The YAML both files hold: block style, keys in the order written, unicode as is."""
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=False, width=120)


def card(doc: dict, *, target: str, profile: str, tables_md: list[str], runs: int, with_weights: int,
         timm_folders: list[str], commits: list[str]) -> str:
    papers = "; ".join(f"{c['Paper']['Title']} ({c['Paper']['URL']})" for c in doc["Collections"])
    lines = [
        "---", dump_yaml(doc).rstrip("\n"), "---", "",
        f"# semcl results: {md_text(target)} (profile {md_text(profile)})", "",
        f"Reproduction runs of {md_text(papers)}, made with semcl ({len(doc['Models'])} table rows, {runs} runs, "
        f"{with_weights} with weights). The same model-index is in `model-index.yml`.", "",
        "## How it was made", "",
        f"`semcl run {md_text(target)} --profile {md_text(profile)}`, then `semcl publish {md_text(target)} "
        f"--profile {md_text(profile)} --out <DIR>`; code commit(s): {', '.join(md_text(c) for c in commits)}. "
        "Each run's folder under `runs/<run id>/` holds the store's own record files: `metrics.json` (the record: "
        "metrics, resolved config, code commit, package versions, device, wall time), `config.yaml`, "
        "`history.jsonl` (one line per epoch), `log.txt`, `trained.json` where present, `tensorboard/` where the "
        "run logged events, and `weights/model.safetensors` (the trained backbone; heads left behind). "
        "`environment.json` holds the publishing machine and each distinct environment the runs recorded.", "",
        "## Results", "",
        "Per cell: our mean ± sample std over seeds (n), then the paper's value where one is known "
        "(model-index: `Mean`, `Std`, `N`, `Paper`; null where unknown).", "",
        *[block.rstrip("\n") + "\n" for block in tables_md],
        "## Loading the weights", "",
        "```python",
        "from safetensors.torch import load_file",
        "state = load_file('runs/<run id>/weights/model.safetensors')  # no code runs on load",
        "```", "",
        "The file's metadata (`safetensors.safe_open(...).metadata()`) names the run, table, row, network and the "
        "call that rebuilds the network (`load`), into which the tensors load strictly.",
    ]
    if timm_folders:
        lines += ["", "Where timm builds the network, `weights/` is a timm folder (`config.json` + "
                  "`model.safetensors`), loadable offline:", "", "```python", "import timm",
                  f"model = timm.create_model('local-dir:{timm_folders[0]}', pretrained=True)", "```"]
    lines += ["", "## Verifying", "",
              "```", "sha256sum -c SHA256SUMS          # inside this folder: every file as published",
              "semcl publish --verify <DIR>      # the sums, the model-index schema, no pickle, no executable, "
              "no link", "```", ""]
    return "\n".join(lines)
