"""The check's Markdown page, from the JSON document (every number the page shows is in the JSON)."""

from __future__ import annotations


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _table(rows: list[dict], keys: list[str]) -> list[str]:
    out = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    out += ["| " + " | ".join(_fmt(r.get(k)) for k in keys) + " |" for r in rows]
    return out


def render(doc: dict) -> str:
    s = doc["sections"]
    lines = [f"# GPU check ({doc['mode']}, {doc['device']}, {doc['finished_at']}, {doc['seconds']:.0f} s)", ""]
    lines += ["| section | status | seconds |", "|---|---|---|"]
    lines += [f"| {name} | {sec['status']} | {sec['seconds']:.1f} |" for name, sec in s.items()]
    for name, sec in s.items():
        lines += ["", f"## {name}: {sec['status']}", ""]
        if sec.get("error"):
            lines += ["```", sec["error"], "```"]
            continue
        if name == "a_versions":
            lines += [f"- {k}: {_fmt(v)}" for k, v in sec.items() if k not in ("group", "status", "seconds", "ok")]
            lines.append(f"- 1-rank group: {sec['group']}")
        elif name == "b_pace":
            lines += _table(sec["rows"], ["family", "row", "batch_per_gpu", "paper_gpus", "amp", "image_size",
                                          "steps_timed", "images_per_s", "device_resident_images_per_s",
                                          "loader_bound", "estimate_a100_images_per_s", "ok"])
        elif name == "c_memory":
            lines += _table(sec["rows"], ["family", "batch_per_gpu", "act_bytes_per_sample", "estimate_gb",
                                          "peak_allocated_gb", "peak_reserved_gb", "ratio", "ok"])
        elif name == "d_two_ranks":
            lines += [f"- {k}: {_fmt(v)}" for k, v in sec.items() if k not in ("status", "seconds")]
        elif name == "e_resume":
            lines += _table(sec["rows"], ["row", "amp", "loader_workers", "stopped_at", "params_equal",
                                          "loss_equal", "ok"])
        elif name == "f_precision":
            flat = [{"family": r["family"], "batch": r.get("batch"), "fp32 loss": r.get("fp32", {}).get("loss"),
                     **{f"{d} {k}": r.get(d, {}).get(k) for d in ("fp16", "bf16")
                        for k in ("loss_rel_diff", "grad_cosine", "grad_norm_ratio")}, "ok": r["ok"]}
                    for r in sec["rows"]]
            lines += _table(flat, list(flat[0]) if flat else ["family"])
        elif name == "g_mining":
            lines += [f"- {k}: {_fmt(v)}" for k, v in sec.items() if k not in ("status", "seconds")]
    return "\n".join(lines) + "\n"
