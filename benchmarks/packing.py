"""Packing where it pays: the same small sweep with ``--workers 2`` and with ``--pack K``, side by side.

    python benchmarks/packing.py --out data/bench/packing-2core.json
    python benchmarks/packing.py --presets 405k,405k-deep --packs 2,4 --out data/bench/packing-2core.json

For each preset, one grid of runs (``--tasks`` x easy x ``--seeds``, ``--steps`` steps, a checkpoint schedule
with the protocol's ratio of checkpoints to steps on a short run: ``--dense-steps`` then ``--linear``
checkpoints; every other setting the default, the full test set at every checkpoint) is trained by
:func:`geomcap.sweep.run_sweep` into a fresh store once per arm: ``workers`` (each run alone, ``--workers``
processes), then ``pack K`` for each K (packs of K runs, ``--workers`` processes): the same runs, the same
cores, one after the other. The wall time of each arm is the figure (a run's ``status.json`` splits it).
A preset is skipped, and said so, when the time spent would pass ``--budget-s``.

Writes one JSON file (``schema`` "packing-1": the book's bench plots read only schema 1; its performance page
reads this one): the command, the machine, the load average at the start and end of each arm, the grid, and
per preset and arm the wall time, the runs' summed training and measuring seconds, and the ratio to the
workers arm (< 1: faster). Works from a checkout without installing the package.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
os.environ.setdefault("OMP_NUM_THREADS", "1")


def _arm(configs, workers: int, pack: int | None) -> dict:
    from geomcap import store
    from geomcap.bench.machine import load_average
    from geomcap.sweep import run_sweep

    with tempfile.TemporaryDirectory(prefix="geomcap-packing-") as root:
        start_load = load_average()
        t0 = time.perf_counter()
        results = run_sweep(configs, root=root, workers=workers, pack=pack, progress=False, threads=1)
        wall = time.perf_counter() - t0
        failed = [r.error for r in results if not r.ok]
        if failed:
            raise RuntimeError(f"a run failed: {failed[0]}")
        statuses = [store.read_status(r.run_dir) for r in results]
    return {"workers": workers, "pack": pack, "wall_s": round(wall, 2),
            "train_s": round(sum(s["train_s"] for s in statuses), 2),
            "measure_s": round(sum(s["eval_s"] + s["costly_s"] + s.get("write_s", 0.0) for s in statuses), 2),
            "steps": [s.get("stopped_at") or c.steps for s, c in zip(statuses, configs)],
            "checkpoints": [s["checkpoints"] for s in statuses],
            "load_average_start": start_load, "load_average_end": load_average()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", default="405k", help="comma-separated presets, in order")
    parser.add_argument("--packs", default="2,4", help="comma-separated pack sizes K")
    parser.add_argument("--workers", type=int, default=2, help="worker processes in every arm")
    parser.add_argument("--tasks", default="copy,reverse,compare,parity")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--dense-steps", type=int, default=16)
    parser.add_argument("--linear", type=int, default=20, help="linear checkpoints after the dense part")
    parser.add_argument("--budget-s", type=float, default=780.0, help="skip a preset that would pass this")
    parser.add_argument("--out", required=True, help="the JSON file to write")
    args = parser.parse_args(argv)

    import torch

    from geomcap.bench.machine import machine_info
    from geomcap.sweep import grid

    packs = [int(k) for k in args.packs.split(",")]
    settings = dict(tasks=args.tasks.split(","), levels=["easy"], seeds=[int(s) for s in args.seeds.split(",")],
                    steps=args.steps, dense_steps=args.dense_steps, n_linear_checkpoints=args.linear)
    torch.set_num_threads(1)
    result = {"schema": "packing-1", "command": "python benchmarks/packing.py " + shlex.join(argv or sys.argv[1:]),
              "machine": machine_info(torch.device("cpu")), "grid": settings,
              "started_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "presets": [],
              "skipped": []}
    t0 = time.perf_counter()
    for preset in args.presets.split(","):
        configs = grid(sizes=[preset], **settings)
        spent = time.perf_counter() - t0
        per_arm = statistics.mean(a["wall_s"] for p in result["presets"] for a in p["arms"]) if result["presets"] \
            else 0.0
        if result["presets"] and spent + per_arm * (1 + len(packs)) * _relative_cost(preset) > args.budget_s:
            result["skipped"].append({"preset": preset, "why": f"would pass --budget-s {args.budget_s:g}"})
            print(f"{preset}: skipped (budget)", flush=True)
            continue
        arms = [_arm(configs, args.workers, None)]
        print(f"{preset} workers {args.workers}: {arms[0]['wall_s']} s", flush=True)
        for k in packs:
            arms.append(_arm(configs, args.workers, k))
            print(f"{preset} pack {k}: {arms[-1]['wall_s']} s", flush=True)
        for arm in arms:
            arm["ratio_to_workers"] = round(arm["wall_s"] / arms[0]["wall_s"], 3)
        result["presets"].append({"preset": preset, "runs": len(configs), "arms": arms})
        result["wall_s"] = round(time.perf_counter() - t0, 1)
        Path(args.out).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    result["finished_at"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    Path(args.out).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


def _relative_cost(preset: str) -> float:
    """A preset's cost relative to 405k's (its parameters), for the budget's guess."""
    from geomcap.models import preset_table

    params = {row["preset"]: row["parameters"] for row in preset_table(32)}
    return max(params[preset] / params["405k"], 1.0)


if __name__ == "__main__":
    sys.exit(main())
