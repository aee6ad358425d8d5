"""The LLC at a cheaper SGLD setting, on whole grid runs: what it costs and what the precursor reading sees.

    python benchmarks/llc_settings.py --runs 7a25b3094efd 7ad651d40ea5 --chains 1 --draws 100 \\
        --out data/bench/llc-settings-2core.json

The calibration (``geomcap bench --parts llc_calibration``) compared settings at six checkpoints of one run.
Here each committed run of ``--runs`` (in data/runs, recorded with the LLC at ``LLC_DEFAULTS``) is trained
again with the LLC alone (``measures = llc``) at ``--chains`` x ``--draws`` -- the same model, since the
LLC's settings only choose what is measured -- into ``--store`` (a run store: rerun the same command to
resume). ``--reference-too`` also trains the LLC alone at the default setting, so that the LLC's own cost
is measured before and after on the same run (the committed run's ``costly_s`` holds all four costly
measures); where the committed run was trained on another CPU and so took another trajectory (rounding
is chaotic: its training metrics differ), the cheap setting is compared with that default run instead
(``reference``). Per run the result holds ``llc_setting_agreement`` (bias, rank correlation, both transitions,
the not-flat shares), the seconds of status.json and ``costly_over_training`` of each run, and whether the
training metrics (every measure both record but the costly ones) are identical to the committed run's.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
from pathlib import Path

import torch

from geomcap import compare, measures, store
from geomcap.bench import llc_setting_agreement, machine_info
from geomcap.train import TrainConfig, train

ROOT = Path(__file__).resolve().parents[1]
COSTLY_NAMES = {m.name for m in measures.MEASURES if m.costly}


def timing(run_dir: Path, metrics) -> dict:
    """status.json's seconds, the costly measures' share of training, and how many checkpoints took the LLC."""
    status = store.read_status(run_dir) or {}
    train_s, costly_s = status.get("train_s"), status.get("costly_s")
    return {"train_s": train_s, "costly_s": costly_s, "eval_s": status.get("eval_s"),
            "costly_over_training": costly_s / train_s if train_s else None,
            "llc_checkpoints": int((metrics["measure"] == "llc").sum())}


def same_training(a, b) -> bool:
    """Do two runs' metrics agree on every row both record but the costly measures' (NaN equal to NaN)?
    :func:`geomcap.compare.compare_metrics` on the rows both hold: a run trained since the probe control and
    the parameter norm were added records more measures than the committed runs."""
    training = lambda m: m[~m["measure"].isin(COSTLY_NAMES)]  # noqa: E731
    return compare.compare_metrics(training(a), training(b))["identical"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", nargs="+", required=True, help="run ids in --source that recorded the LLC")
    parser.add_argument("--source", default=str(ROOT / "data" / "runs"))
    parser.add_argument("--store", default=str(ROOT / "data" / "bench" / "llc-settings"))
    parser.add_argument("--chains", type=int, default=1)
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--reference-too", nargs="*", default=[], help="run ids also trained with the LLC alone "
                                                                        "at the default setting")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    out = {"schema": "llc-settings-1",
           "command": "python benchmarks/llc_settings.py " + " ".join(argv or __import__("sys").argv[1:]),
           "started_at": started, "machine": machine_info(torch.device("cpu")), "chains": args.chains, "draws": args.draws,
           "runs": []}
    for run in args.runs:
        source = Path(args.source) / run
        cfg = TrainConfig.from_dict(store.read_config(source))
        if "llc" not in cfg.measures:
            raise SystemExit(f"{run}: recorded no LLC (measures {cfg.measures})")
        committed = reference = store.read_metrics(source)
        entry = {"run": run, "task": cfg.task, "level": cfg.level, "size": cfg.size, "seed": cfg.seed,
                 "committed": timing(source, committed)}
        variants = {"cheap": (args.chains, args.draws)}
        if run in args.reference_too:  # first: the cheap setting is then compared with it
            variants = {"llc_alone_default": (cfg.llc_chains, cfg.llc_draws), **variants}
        entry["reference"] = "committed"
        for name, (chains, draws) in variants.items():
            alone = dataclasses.replace(cfg, measures=("llc",), llc_chains=chains, llc_draws=draws)
            run_dir = train(alone, out=store.run_dir_for(alone.to_dict(), args.store), device="cpu", progress=True)
            metrics = store.read_metrics(run_dir)
            entry[name] = {"run": run_dir.name, "chains": chains, "draws": draws, **timing(run_dir, metrics),
                           "training_metrics_identical": same_training(metrics, committed),
                           "agreement": llc_setting_agreement(reference, metrics)}
            if name == "llc_alone_default" and not entry[name]["training_metrics_identical"]:
                # trained on another CPU, the committed run took another trajectory (rounding is chaotic):
                # compare the cheap setting with the default on this machine's trajectory instead
                reference, entry["reference"] = metrics, "llc_alone_default"
        out["runs"].append(entry)
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")  # after each run: nothing lost
    out["finished_at"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
