"""Train C6's ties again with a checkpoint at every step, so that the order of acquisition and recovery is read.

    python scripts/rerun_ties.py [--out runs-reruns] [--dry-run]

A tie is a run acquired at the very checkpoint its final layer's RankMe recovered (geomcap.results.tied): both
events fall somewhere between that checkpoint and the one before it. Over the committed real runs (data/runs,
data/scale), each tie is trained again from its own config with a checkpoint at every step up to a little past
the tie, where it stops (geomcap.results.rerun_config): the same training steps, read at every step. The runs
committed under data/reruns count as trained; the rest train into OUT, one at a time, one torch thread
(resumable: rerun the command). geomcap.results.read_ties_again reads them; copy them into data/reruns
(scripts/copy_runs.sh OUT data/reruns).
"""

from __future__ import annotations

import argparse

import pandas as pd

from geomcap import store, sweep
from geomcap.config import TrainConfig
from geomcap.results import RERUN_STORE, load_runs, rerun_config, summary_table, tied


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs-reruns", help="the run store to train into (default runs-reruns)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, train nothing")
    args = parser.parse_args(argv)
    runs = pd.concat([load_runs(store.committed_data(name)) for name in ("runs", "scale")
                      if store.committed_data(name).is_dir()], ignore_index=True)
    summary = summary_table(runs)
    ties = summary[tied(summary)]
    paths = dict(zip(runs["run"], runs["path"]))
    configs = [rerun_config(TrainConfig.from_dict(store.read_config(paths[r.run])), r.acquisition_step)
               for r in ties.itertuples()]
    print(f"{len(configs)} tie{'' if len(configs) == 1 else 's'}: " + ", ".join(
        f"{r.task}/{r.level} {r.size} seed {r.seed} at step {int(r.acquisition_step)}" for r in ties.itertuples()))
    stores = [store.committed_data(RERUN_STORE), args.out]
    if args.dry_run:
        from geomcap.planning import plan

        print("\n".join(plan(configs, stores, workers=1).lines()))
        return 0
    results = sweep.train_missing(configs, stores, workers=1, threads=1)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
