"""The ``geomcap`` command.

    geomcap train --task add --level hard --size 405k --seed 0 --steps 3000 --out runs/add-hard
    geomcap presets
    geomcap show runs/add-hard

Bad input prints one line on stderr and exits with status 2, writing nothing.
"""

from __future__ import annotations

import argparse
import json
import sys

from geomcap import __version__


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse would also print the usage block)
        raise _UsageError(f"{self.prog}: {message}")


class _UsageError(Exception):
    pass


def _measures(text: str) -> tuple[str, ...]:
    return tuple(m.strip() for m in text.split(",") if m.strip())


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="geomcap", description="Geometry of capability acquisition in small transformers.")
    parser.add_argument("--version", action="version", version=f"geomcap {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("train", help="train one run, recording geometry at every checkpoint")
    p.add_argument("--task", required=True, help="copy, reverse, compare, parity, add, mod, sort, mul")
    p.add_argument("--level", required=True, help="easy, medium, hard")
    p.add_argument("--size", default="405k", help="model preset (see `geomcap presets`); default 405k")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=2000, help="optimizer steps; default 2000")
    p.add_argument("--out", default=None,
                   help="the run directory itself (default: the run store root $GEOMCAP_RUNS or ./runs, under the config hash)")
    p.add_argument("--device", default="auto", help="auto (cuda when present), cpu or cuda")
    p.add_argument("--measures", type=_measures, default=(),
                   help="comma-separated costly measures: grad_rank,grad_cov_rank,hessian,llc (default none)")
    p.add_argument("--costly-every", type=int, default=4, help="run the costly measures on every k-th checkpoint")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=None, help="default 0.1 (1.0 for mod)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = sub.add_parser("sweep", help="run a grid tasks x levels x sizes x seeds into the run store (resumable)")
    p.add_argument("--tasks", default="all", help="comma-separated tasks, or all")
    p.add_argument("--levels", default="all", help="comma-separated levels, or all")
    p.add_argument("--sizes", default="405k", help="comma-separated presets")
    p.add_argument("--seeds", default="0", help="comma-separated seeds, e.g. 0,1,2")
    p.add_argument("--steps", default="2000", help="steps, or per level: easy=1000,medium=3000,hard=6000")
    p.add_argument("--root", default=None, help="run store root (default $GEOMCAP_RUNS or ./runs)")
    p.add_argument("--workers", type=int, default=None, help="local worker processes (default: one per core)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (workers share the device)")
    p.add_argument("--measures", type=_measures, default=(), help="costly measures, as for train")
    p.add_argument("--quiet", action="store_true")

    sub.add_parser("presets", help="print the model presets with their parameter counts")

    p = sub.add_parser("runs", help="list the complete runs of a run store (task, level, size, seed, wall time)")
    p.add_argument("--root", default=None, help="run store root (default $GEOMCAP_RUNS or ./runs)")
    p.add_argument("--csv", default=None, help="also write the table to this CSV file")

    p = sub.add_parser("show", help="summarise a run directory: acquisition, collapse, precursors, top-down")
    p.add_argument("run_dir")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    return parser


def cmd_train(args) -> int:
    from geomcap.train import TrainConfig, check_writable, resolve_device, train

    cfg = TrainConfig(task=args.task, level=args.level, size=args.size, seed=args.seed, steps=args.steps,
                      batch_size=args.batch_size, lr=args.lr, weight_decay=args.weight_decay,
                      measures=args.measures, costly_every=args.costly_every)
    resolve_device(args.device)
    if args.out is not None:
        check_writable(args.out)
    run_dir = train(cfg, out=args.out, device=args.device, progress=not args.quiet)
    print(run_dir)
    return 0


def _names(text: str, allowed) -> list[str]:
    return list(allowed) if text == "all" else [t.strip() for t in text.split(",") if t.strip()]


def cmd_sweep(args) -> int:
    from geomcap.sweep import grid, parse_steps, run_sweep
    from geomcap.tasks import LEVELS, TASKS
    from geomcap.train import resolve_device

    configs = grid(tasks=_names(args.tasks, TASKS), levels=_names(args.levels, LEVELS),
                   sizes=_names(args.sizes, ()), seeds=[int(s) for s in args.seeds.split(",")],
                   steps=parse_steps(args.steps), measures=args.measures)
    resolve_device(args.device)
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be a positive integer, got {args.workers}")
    results = run_sweep(configs, root=args.root, device=args.device, workers=args.workers,
                        progress=not args.quiet)
    failed = [r for r in results if not r.ok]
    print(f"{len(results) - len(failed)} runs complete, {len(failed)} failed")
    for r in failed:
        print(f"--- {r.config.task}/{r.config.level} {r.config.size} seed {r.config.seed} ({r.run_dir})\n{r.error}",
              file=sys.stderr)
    return 1 if failed else 0


def cmd_runs(args) -> int:
    from geomcap import results, store

    root = args.root if args.root is not None else store.default_root()
    table = results.run_index(root)
    if args.csv:
        store.atomic_write_text(args.csv, table.to_csv(index=False))
    print(table.to_string(index=False) if len(table) else f"no complete run in {root}")
    return 0


def cmd_presets(args) -> int:
    from geomcap.models import preset_table
    from geomcap.tasks import VOCAB_SIZE

    print(f"{'preset':<8}{'layers':>8}{'width':>8}{'heads':>8}{'parameters':>14}")
    for row in preset_table(VOCAB_SIZE):
        print(f"{row['preset']:<8}{row['layers']:>8}{row['width']:>8}{row['heads']:>8}{row['parameters']:>14,}")
    return 0


def cmd_show(args) -> int:
    from geomcap import events, store

    from geomcap.results import run_chance

    config = store.read_config(args.run_dir)
    summary = events.summarize_run(store.read_metrics(args.run_dir), chance=run_chance(config))
    if args.json:
        print(json.dumps({"config": config, "summary": summary}, indent=2, default=str))
        return 0
    print(f"run        {args.run_dir}")
    print(f"config     {config['task']}/{config['level']}  size {config['size']}  seed {config['seed']}  steps {config['steps']}"
          f"  {'complete' if store.is_complete(args.run_dir) else 'INCOMPLETE'}")
    print(events.format_summary(summary))
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        handler = {"train": cmd_train, "sweep": cmd_sweep, "presets": cmd_presets, "runs": cmd_runs, "show": cmd_show}[args.command]
        return handler(args)
    except (_UsageError, ValueError, FileNotFoundError) as exc:
        print(f"geomcap: error: {exc}".replace("geomcap: error: geomcap", "geomcap"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("geomcap: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
