"""A bench result against its targets, and the projection of the paper's grid from it."""

from __future__ import annotations

from geomcap import tasks
from geomcap.bench.step import GRID_STEPS, flops_per_token
from geomcap.models import PRESETS

TARGETS = {
    "peer_ratio_min": 1.0,          # geomcap tokens/s / transformers peer tokens/s, every measured preset
    "peak_fraction_min": 0.40,      # achieved FLOP/s / same-run matmul peak, the second preset
    "geometry_share_max": 0.10,     # per-checkpoint geometry / training time, default schedule
    "rankme_speedup_min": 1.0,      # naive SVD time / geomcap RankMe time, every size
    "rankme_abs_diff_max": 1e-6,    # |geomcap RankMe - naive RankMe|, every size
}



# --- targets and projections --------------------------------------------------

def check_targets(result: dict) -> list[dict]:
    """The performance targets (``TARGETS``) against a bench result: one row per target and preset/size.

    Each row: target, subject, value, threshold, met (bool), and ``by``: the
    value over (for a minimum) or under (for a maximum) the threshold as a
    fraction of the threshold (negative = missed by that much).
    """
    rows = []

    def add(target, subject, value, threshold, kind):
        if value is None:
            return
        met = value >= threshold if kind == "min" else value <= threshold
        by = (value - threshold) / threshold if kind == "min" else (threshold - value) / threshold
        rows.append({"target": target, "subject": subject, "value": value, "threshold": threshold,
                     "kind": kind, "met": bool(met), "by": by})

    tp = result.get("throughput") or {}
    presets = tp.get("presets", [])
    for row in presets:
        add("geomcap / peer tokens/s", row["preset"], row.get("peer_ratio"), TARGETS["peer_ratio_min"], "min")
    if len(presets) >= 2:
        second = presets[1]
        add("fraction of matmul peak", second["preset"], second["models"]["geomcap"]["peak_fraction"],
            TARGETS["peak_fraction_min"], "min")
    geo = result.get("geometry") or {}
    for row in geo.get("presets", []):
        sched = row["schedules"][0]
        add(f"geometry share ({sched['steps']}-step run)", row["preset"], sched["geometry_share"],
            TARGETS["geometry_share_max"], "max")
    rk = result.get("rankme") or {}
    for row in rk.get("sizes", []):
        subject = f"{row['n']} x {row['d']}"
        add("RankMe speedup over naive SVD", subject, row["speedup"], TARGETS["rankme_speedup_min"], "min")
        add("RankMe |difference|", subject, row["abs_diff"], TARGETS["rankme_abs_diff_max"], "max")
    return rows


def project_grid(result: dict, steps_by_level: dict | None = None, n_tasks: int = len(tasks.TASKS),
                 seeds: int = 1) -> dict:
    """Projected hours of the paper's grid (every preset x ``n_tasks`` tasks x 3 levels x ``seeds``) on this device.

    Per step: the measured ms/step of geomcap (eager) where the preset was
    timed; otherwise extrapolated as FLOPs per step / the achieved FLOP/s of
    the largest timed preset (larger models usually run closer to the peak,
    so this over-estimates). Plus the checkpoint overhead: the measured
    ``eval_share`` of the preset, or of the largest preset with one (it
    shrinks as models grow). Steps: ``steps_by_level`` (default the committed
    grid's 2000 / 4000 / 3000). The tokens per step are those of the bench's
    task; other tasks' sequences are 8 to 33 tokens.
    """
    steps_by_level = steps_by_level or GRID_STEPS
    tp = result.get("throughput") or {}
    measured = {r["preset"]: r for r in tp.get("presets", [])}
    if not measured:
        raise ValueError("the result has no throughput part to project from")
    seq_len = tp["seq_len"]
    tokens_per_step = tp["tokens_per_step"]
    largest = max(measured.values(), key=lambda r: r["parameters"])
    achieved = largest["models"]["geomcap"]["achieved_flops_per_s"]
    overhead = {r["preset"]: r["schedules"][0]["eval_share"] for r in (result.get("geometry") or {}).get("presets", [])}
    steps_per_run_set = sum(steps_by_level.values())
    rows = []
    for preset in PRESETS:
        if preset in measured:
            ms = measured[preset]["models"]["geomcap"]["ms_per_step"]
            source = "measured"
        else:
            ms = 1000 * flops_per_token(preset, tasks.VOCAB_SIZE, seq_len) * tokens_per_step / achieved
            source = f"extrapolated from {largest['preset']}"
        known = [p for p in PRESETS if p in overhead and list(PRESETS).index(p) <= list(PRESETS).index(preset)]
        share = overhead[known[-1]] if known else (overhead[next(iter(overhead))] if overhead else 0.0)
        total_steps = n_tasks * steps_per_run_set * seeds
        hours = total_steps * ms / 1000 * (1 + share) / 3600
        rows.append({"preset": preset, "ms_per_step": ms, "source": source, "checkpoint_overhead": share,
                     "runs": n_tasks * len(steps_by_level) * seeds, "steps": total_steps, "hours": hours})
    return {"steps_by_level": dict(steps_by_level), "tasks": n_tasks, "seeds": seeds,
            "device": (result.get("machine") or {}).get("device"), "presets": rows,
            "total_hours": sum(r["hours"] for r in rows)}
