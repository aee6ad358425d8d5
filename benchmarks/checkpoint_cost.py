"""What a checkpoint costs, in training steps of its own run: before and after a change, side by side.

    python benchmarks/checkpoint_cost.py --before 799efd6 --out data/bench/checkpoint-cost-2core.json

For each preset, one short run (reverse/easy, ``--steps`` steps, the protocol's checkpoint schedule: a
checkpoint at every step up to 128, then 150 evenly spaced) is trained twice at the same time, on the same
cores: with the source tree of commit ``--before`` (``git archive``) and with this checkout's. Each process
records status.json's timers (``train_s``, ``eval_s`` with ``geometry_s`` inside it, ``costly_s``, and
``write_s``: for a tree that has none, the time in ``train.save_state``, which then wrote state.pt and the
whole metrics.csv), the wall time of the ``train()`` call and of the whole process (imports and data
included); and whether the two metrics.csv are byte-identical. Each is reported per checkpoint in training
steps of that run (seconds per checkpoint / seconds per step) and as a share of the training time.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: one run, timed (run in a fresh process with the tree to time first on the path)
CHILD = r"""
import json, os, sys, time
t_start = time.perf_counter()
import geomcap.train as T
size, out, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
written = [0.0]
if not hasattr(T, "CheckpointWriter"):  # the tree before write_s: time save_state (state.pt and metrics.csv)
    real = T.save_state
    def timed(*args, **kwargs):
        t = time.perf_counter(); real(*args, **kwargs); written[0] += time.perf_counter() - t
    T.save_state = timed
cfg = T.TrainConfig(task="reverse", level="easy", size=size, steps=steps)
t0 = time.perf_counter()
T.train(cfg, out=out, progress=False)
t1 = time.perf_counter()
status = json.load(open(os.path.join(out, "status.json")))
status.setdefault("write_s", written[0])
status.update(train_call_s=t1 - t0, process_s=t1 - t_start)
print(json.dumps(status))
"""


def per_checkpoint(status: dict, steps: int) -> dict:
    """status.json's timers -> per checkpoint in training steps, and as shares of the training time."""
    reached = status.get("stopped_at") or steps
    step_s = status["train_s"] / reached
    parts = {"evaluation": status["eval_s"] - status["geometry_s"], "geometry": status["geometry_s"],
             "costly": status["costly_s"], "writing": status["write_s"]}
    parts["measuring"] = sum(parts.values())
    return {"ms_per_step": round(1000 * step_s, 1), "checkpoints": status["checkpoints"],
            "steps_per_checkpoint": {k: round(v / status["checkpoints"] / step_s, 3) for k, v in parts.items()},
            "share_of_training": {k: round(v / status["train_s"], 3) for k, v in parts.items()},
            "train_call_over_training": round(status["train_call_s"] / status["train_s"], 3),
            "process_over_training": round(status["process_s"] / status["train_s"], 3),
            "seconds": {k: round(status[k], 2) for k in ("train_s", "eval_s", "geometry_s", "costly_s", "write_s",
                                                         "train_call_s", "process_s")}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the commit to compare with (its src/ via git archive)")
    parser.add_argument("--presets", default="405k,405k-deep,1.3m")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = {"schema": "checkpoint-cost-1", "before": args.before,
              "after": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                      text=True).stdout.strip(),
              "command": "python benchmarks/checkpoint_cost.py " + " ".join(argv or sys.argv[1:]),
              "run": f"reverse/easy, {args.steps} steps, the default checkpoint schedule, one torch thread",
              "started_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "load_average_start": list(os.getloadavg()), "presets": []}
    with tempfile.TemporaryDirectory(prefix="geomcap-ckpt-") as tmp:
        tmp = Path(tmp)
        archive = subprocess.run(["git", "archive", args.before, "src"], cwd=ROOT, capture_output=True, check=True)
        (tmp / "before").mkdir()
        subprocess.run(["tar", "-x", "-C", str(tmp / "before")], input=archive.stdout, check=True)
        trees = {"before": str(tmp / "before" / "src"), "after": str(ROOT / "src")}
        for preset in args.presets.split(","):
            procs = {arm: subprocess.Popen([sys.executable, "-c", CHILD, preset, str(tmp / f"{arm}-{preset}"),
                                            str(args.steps)], env={**env, "PYTHONPATH": tree},
                                           stdout=subprocess.PIPE, text=True) for arm, tree in trees.items()}
            row = {"preset": preset}
            for arm, proc in procs.items():
                out, _ = proc.communicate()
                if proc.returncode:
                    raise SystemExit(f"{preset} {arm}: the run failed")
                row[arm] = per_checkpoint(json.loads(out.strip().splitlines()[-1]), args.steps)
            row["metrics_byte_identical"] = ((tmp / f"before-{preset}" / "metrics.csv").read_bytes()
                                             == (tmp / f"after-{preset}" / "metrics.csv").read_bytes())
            result["presets"].append(row)
            print(json.dumps(row), flush=True)
    result["load_average_end"] = list(os.getloadavg())
    Path(args.out).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
