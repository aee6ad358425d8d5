"""The ``geomcap`` command.

    geomcap train --task add --level hard --size 405k --seed 0 --steps 3000 --out runs/add-hard
    geomcap presets
    geomcap show runs/add-hard
    geomcap show --json runs/add-hard/metrics.csv
    geomcap bench --threads 1                     # JSON into data/bench (see data/bench/README.md)
    geomcap pythia standin --out /tmp/standin
    geomcap pythia run --model /tmp/standin --revisions all --benchmarks all --out data/pythia/runs
    geomcap pythia run --model EleutherAI/pythia-2.8b --revisions every:4000 --out data/pythia/runs --delete-downloads
    geomcap checkpoints my_run/ --prompts prompts.txt --out my_run_geometry   # checkpoint-<N> or step<N> folders

Bad input prints one line on stderr and exits with status 2, writing nothing.
"""

from __future__ import annotations

import argparse
import errno
import json
import sys

from geomcap import __version__


class _Parser(argparse.ArgumentParser):
    """argparse's parser, reporting a usage error in one line (:class:`UsageError`)."""

    def error(self, message):
        """One line, exit 2 (argparse would also print the usage block): raised for :func:`main`."""
        raise UsageError(f"{self.prog}: {message}")


class UsageError(Exception):
    """A command line argparse refused: :func:`main` prints it in one line and exits 2."""


def build_parser() -> argparse.ArgumentParser:
    """The ``geomcap`` command's parser: one subcommand per job; ``geomcap train``'s config options are
    TrainConfig's schema rows (:data:`geomcap.config.SETTINGS`)."""
    from geomcap.config import SETTINGS
    from geomcap.parameters import SWEEP, TRAIN_OPTIONS
    from geomcap.sweep import SETTABLE_FIELDS

    parser = _Parser(prog="geomcap", description="Geometry of capability acquisition in small transformers.")
    parser.add_argument("--version", action="version", version=f"geomcap {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("train", help="train one run, recording geometry at every checkpoint")
    _config_options(p)
    p.add_argument("--from", dest="from_config", default=None, metavar="CONFIG",
                   help="rerun a recorded run exactly: its config.json (or run directory) gives the whole config, "
                        "the thread count, device and compile setting; takes no other config option. Reports "
                        "whether metrics.csv is byte-identical, else the largest relative difference and the "
                        "first step where a value departs by more than 1e-4 (geomcap.compare)")
    p.add_argument("--out", default=None,
                   help="the run directory itself (default: the run store root $GEOMCAP_RUNS or ./runs, under the config hash)")
    for name, row in TRAIN_OPTIONS.items():  # --device, --threads: checked through the same rows (cmd_train)
        _row_option(p, name, row)
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the training steps (not part of the config hash; equal metrics up to round-off)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar, even on a terminal: a line as the run starts and ends, and a summary "
                        "every 5 minutes, as off a terminal (a log)")

    p = sub.add_parser("sweep", help="run a grid tasks x levels x sizes x seeds into the run store (resumable)")
    for axis in (*GRID_AXES, "steps"):
        _row_option(p, axis)
    p.add_argument("--root", default=None, help="run store root (default $GEOMCAP_RUNS or ./runs)")
    p.add_argument("--done", action="append", default=[], metavar="STORE",
                   help="a run store whose complete runs count as trained (read, never written), e.g. a "
                        "committed data/scale in a fresh checkout (repeatable)")
    for name, row in SWEEP.items():  # --workers, --device, --threads, --measures, --pack: checked through the rows
        _row_option(p, name, row)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a training setting for every run (repeatable): " + ", ".join(
                       f"{name} (default {SETTINGS[name].default_text()})" for name in SETTABLE_FIELDS))
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars, even on a terminal: the plan, a line as each run starts and ends, and "
                        "a summary every 5 minutes, as off a terminal (a log)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (what it would train, what the store has, and for how long) and stop")

    sub.add_parser("presets", help="print the model presets with their parameter counts")

    p = sub.add_parser("runs", help="list the complete runs of a run store (task, level, size, seed, wall time)")
    p.add_argument("--root", default=None, help="run store root (default $GEOMCAP_RUNS or ./runs)")
    p.add_argument("--csv", default=None, help="also write the table to this CSV file")

    p = sub.add_parser("show", help="summarise a run directory (or a bare metrics.csv): acquisition, collapse, "
                                    "precursors, top-down, under the analysis protocol")
    p.add_argument("run_dir", help="a run directory, or a metrics.csv")
    p.add_argument("--json", action="store_true", help="print the summary as strict JSON (null, never NaN)")

    _bench_parser(sub)

    _pythia_parsers(sub)
    _checkpoints_parser(sub)
    return parser


def _pythia_parsers(sub) -> None:
    """``geomcap pythia`` and its subcommands: standin, run, benchmarks, show."""
    from geomcap.parameters import STANDIN_BUILD

    p = sub.add_parser("pythia", help="Pythia validation (claim C7): stand-in, benchmarks, metrics per revision")
    pythia_sub = p.add_subparsers(dest="pythia_command", required=True, parser_class=_Parser)

    p = pythia_sub.add_parser("standin", help="build the offline stand-in: a small GPT-NeoX saved at Pythia-like "
                                              "revisions (minutes at the defaults)")
    p.add_argument("--out", required=True, help="the checkpoint root to create (one stepN folder per revision)")
    for name, row in STANDIN_BUILD.items():  # checked through the same rows (cmd_pythia)
        aliases = ["--vocab"] if name == "vocab_size" else []  # its option's first name
        p.add_argument("--" + name.replace("_", "-"), *aliases, dest=name, default=row.default, help=row.describe())
    _row_option(p, "device")
    p.add_argument("--quiet", action="store_true")

    p = pythia_sub.add_parser("run", help="accuracy and per-layer RankMe of every revision x benchmark into a "
                                          "run store (resumable; a missing revision is reported and skipped)")
    p.add_argument("--model", required=True, help="hub name (EleutherAI/pythia-160m) or local checkpoint root")
    _row_option(p, "revisions")
    _row_option(p, "benchmarks")
    p.add_argument("--out", required=True, help="run store root (one run directory per benchmark)")
    p.add_argument("--cache-dir", default=None, help="hub download cache (default: the Hugging Face cache)")
    p.add_argument("--delete-downloads", action="store_true",
                   help="remove each hub revision from the download cache once its metrics are stored")
    _row_option(p, "device")
    _row_option(p, "batch_tokens")
    p.add_argument("--label", default=None, help="model name recorded for a local root (default: its own)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = pythia_sub.add_parser("benchmarks", help="write the benchmark files (deterministic: the committed ones)")
    p.add_argument("--out", default=None, help="folder (default data/pythia/benchmarks)")

    p = pythia_sub.add_parser("show", help="acquisition and RankMe precursor gap per benchmark of a run store")
    p.add_argument("--root", default=None, help="run store root (default data/pythia/runs)")
    p.add_argument("--model", default=None, help="one model of the store (default: each)")
    _row_option(p, "layers")


def _row_option(p, name: str, row=None) -> None:
    """The option ``--NAME`` of a parameter row (``row``, default the row of that name in
    ``geomcap.parameters.PARAMETERS``): its default and help; the value is checked through the row where it is
    used (:func:`_option`)."""
    from geomcap.parameters import PARAMETERS

    row = PARAMETERS[name] if row is None else row
    p.add_argument("--" + name.replace("_", "-"), dest=name, default=row.default, help=row.describe())


def _option(name: str, value, row=None):
    """``value`` of the option ``--NAME`` through its parameter row (``row``, default the row of that name; a
    selection's "all" as the row's choices, where it has them); ValueError in the row's one line as the command
    words it (:func:`_refusal`)."""
    from geomcap.parameters import PARAMETERS
    from geomcap.schema import SettingError

    row = PARAMETERS[name] if row is None else row
    try:
        return row.chosen(value) if row.type is list else row.read(value)
    except SettingError as exc:
        raise _refusal(exc, name) from None


def _refusal(exc, name: str | None = None) -> ValueError:
    """A row's SettingError as the command words it: "--NAME: REASON" (a notebook: "parameter NAME: REASON")."""
    return ValueError(f"--{(name or exc.name).replace('_', '-')}: {exc.reason}")


def config_fields() -> list[str]:
    """The TrainConfig fields, each an option of geomcap train (``--batch-size`` sets ``batch_size``)."""
    from geomcap.config import SETTINGS

    return list(SETTINGS)


def _config_options(p) -> None:
    """geomcap train's config options: one per TrainConfig field, from its schema row (type, choices, help,
    default). An option not given is not in the namespace (argparse.SUPPRESS): --from tells which were."""
    from geomcap.config import SETTINGS

    for name, param in SETTINGS.items():  # values are checked by TrainConfig, through the same rows
        p.add_argument("--" + name.replace("_", "-"), dest=name, type=param.parser(), default=argparse.SUPPRESS,
                       help=param.describe())


def cmd_train(args) -> int:
    """``geomcap train``: one run (or ``--from``: a recorded run again, reporting how its metrics agree)."""
    from geomcap.config import TrainConfig
    from geomcap.parameters import TRAIN_OPTIONS
    from geomcap.store import check_writable
    from geomcap.train import train

    _check_path(args.out, "--out")
    given = {name: getattr(args, name) for name in config_fields() if hasattr(args, name)}
    device, threads, compile = args.device, args.threads, args.compile
    source = None
    if args.from_config is not None:
        if given:
            option = next(iter(given))
            raise ValueError(f"--from reruns a recorded run as it was: it takes no --{option.replace('_', '-')}")
        source, recorded = _recorded_run(args.from_config)
        cfg = TrainConfig.from_dict(recorded)
        provenance = recorded.get("provenance") or {}
        threads = threads if threads is not None else provenance.get("threads")
        device = device if device is not None else provenance.get("device")
        compile = compile or provenance.get("compile") or False
    else:
        for required in ("task", "level"):
            if required not in given:
                raise ValueError(f"the following arguments are required: --{required} (or --from CONFIG)")
        cfg = TrainConfig(**given)
    # through their rows, as given or (--from) recorded
    threads = _option("threads", 1 if threads is None else threads, TRAIN_OPTIONS["threads"])
    device = _option("device", device or "auto", TRAIN_OPTIONS["device"])
    if args.out is not None:
        check_writable(args.out)
    run_dir = train(cfg, out=args.out, device=device, compile=compile, threads=threads,
                    bars=False if args.quiet else None)
    print(run_dir)
    if source is not None and (source / "metrics.csv").exists():
        from geomcap import compare

        print(compare.rerun_report(source, run_dir))
    return 0


def _recorded_run(path: str):
    """--from: a config.json or a run directory -> (its run directory, its config with provenance)."""
    from pathlib import Path

    path = Path(path)
    config_file = path / "config.json" if path.is_dir() else path
    if not config_file.is_file():
        raise FileNotFoundError(f"--from {path}: no such config.json or run directory")
    try:
        recorded = json.loads(config_file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"--from {config_file}: not a readable config.json ({type(exc).__name__})") from None
    if not isinstance(recorded, dict) or "task" not in recorded or "level" not in recorded:
        raise ValueError(f"--from {config_file}: not a geomcap run config (no task or level)")
    return config_file.parent, recorded


def _check_path(path: str | None, option: str) -> None:
    """ValueError naming ``option`` when ``path`` is given but empty (it would be the current directory)."""
    if path is not None and not path.strip():  # an empty path would be the current directory
        raise ValueError(f"{option} is empty: give a directory")


def _check_store_root(root: str | None) -> None:
    """ValueError, naming where the root came from (``--root`` or ``$GEOMCAP_RUNS``), when the run store root
    is not a directory one can write runs into: before a sweep plans anything (its workers would each fail)."""
    import os

    from geomcap import store

    where = "--root" if root is not None else "$GEOMCAP_RUNS" if os.environ.get("GEOMCAP_RUNS") else "the run store"
    path = store.default_root() if root is None else root
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{where} {path} is a file, not a run store directory")
    store.check_writable(path)


#: the grid axes of ``geomcap sweep``: its --tasks, --levels, --sizes and --seeds, each a parameter row's selection
GRID_AXES = ("tasks", "levels", "sizes", "seeds")
#: the axes a sweep takes by name only: their "all" (a notebook's every size or seed stored) is not what to train
NAMED_AXES = ("sizes", "seeds")


def cmd_sweep(args) -> int:
    """``geomcap sweep``: the grid's runs into the run store; exit 1 if one failed, was skipped or deferred."""
    import time

    from geomcap.config import parse_steps
    from dataclasses import replace
    from pathlib import Path

    from geomcap import store
    from geomcap.parameters import PARAMETERS, SWEEP
    from geomcap.sweep import RunResult, grid, parse_settings, plan, run_sweep

    _check_path(args.root, "--root")
    _check_store_root(args.root)
    named = {axis: replace(PARAMETERS[axis], every=None) for axis in NAMED_AXES}  # their "all": not a value here
    axes = {axis: _option(axis, getattr(args, axis), named.get(axis)) for axis in GRID_AXES}
    given = {name: _option(name, getattr(args, name), row) for name, row in SWEEP.items()}  # the same rows as run_sweep
    configs = grid(**axes, steps=parse_steps(_option("steps", args.steps)), measures=given.pop("measures"),
                   **parse_settings(args.set))
    if given["until"] is None and given["until_margin"] != SWEEP["until_margin"].default:
        raise ValueError("--until-margin applies to a deadline: give --until as well")
    for done in args.done:
        _check_path(done, "--done")
        if not Path(done).is_dir():
            raise ValueError(f"--done {done} is not a directory")
    the_plan = plan(configs, [*args.done, args.root if args.root is not None else store.default_root()],
                    workers=given["workers"], pack=given["pack"])
    print("\n".join(the_plan.lines()), flush=True)  # what it will train, what exists, and for how long
    if given["until"] is not None:
        times = f" times {given['until_margin']:g}" if given["until_margin"] != 1 else ""
        print(f"until {time.strftime('%Y-%m-%d %H:%M', time.localtime(given['until']))}: a run whose projection"
              f"{times} ends later is not started (deferred)", flush=True)
    if args.dry_run:
        return 0
    done_elsewhere = [r for r in the_plan.runs if r.state == "exists" and Path(r.run_dir).parent.resolve()
                      != Path(the_plan.root).resolve()] if args.done else []
    if done_elsewhere:  # --done's runs are not trained again
        configs = [r.config for r in the_plan.runs if r not in done_elsewhere]
    results = run_sweep(configs, root=args.root, **given, plan=the_plan, bars=False if args.quiet else None)
    results += [RunResult(r.config, r.run_dir, seconds=0.0) for r in done_elsewhere]
    failed = [r for r in results if not r.ok and not r.locked and not r.deferred]
    skipped = [r for r in results if r.locked]  # each named in one line as the sweep ran, as the deferred are
    deferred = [r for r in results if r.deferred]
    print(f"{sum(r.ok for r in results)} runs complete, {len(failed)} failed"
          + (f", {len(skipped)} skipped: being written by another process" if skipped else "")
          + (f", {len(deferred)} deferred: projected to end after --until" if deferred else ""))
    for r in failed:
        print(f"--- {r.config.task}/{r.config.level} {r.config.size} seed {r.config.seed} ({r.run_dir})\n{r.error}",
              file=sys.stderr)
    return 1 if failed or skipped or deferred else 0


def cmd_runs(args) -> int:
    """``geomcap runs``: the complete runs of a store, one line each (and ``--csv``)."""
    from geomcap import results, store

    _check_path(args.root, "--root")
    root = args.root if args.root is not None else store.default_root()
    table = results.run_index(root)
    if args.csv:
        store.atomic_write_text(args.csv, table.to_csv(index=False))
    print(table.to_string(index=False) if len(table) else f"no complete run in {root}")
    return 0


def cmd_presets(args) -> int:
    """``geomcap presets``: the model presets, their shapes and parameter counts."""
    from geomcap.models import preset_table
    from geomcap.tasks import VOCAB_SIZE

    print(f"{'preset':<10}{'layers':>8}{'width':>8}{'heads':>8}{'parameters':>14}")
    for row in preset_table(VOCAB_SIZE):
        print(f"{row['preset']:<10}{row['layers']:>8}{row['width']:>8}{row['heads']:>8}{row['parameters']:>14,}")
    return 0


def _strict_json(value):
    """``value`` with NaN/inf as None and numpy scalars/arrays as Python ones (for strict JSON)."""
    import math

    import numpy as np

    if isinstance(value, dict):
        return {str(k): _strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict_json(v) for v in value]
    if isinstance(value, np.ndarray):
        return _strict_json(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def show_summary(path) -> dict:
    """What `geomcap show --json PATH` prints: config, status, the protocol and the run's summary.

    ``PATH`` is a run directory, or a bare metrics.csv (or a directory holding only one). Without a
    config the best constant answer's accuracy is unknown: ``chance_known`` is false and 0 is used.
    """
    from pathlib import Path

    import pandas as pd

    from geomcap import events, store
    from geomcap.analysis.integrity import integrity_table, left_out_steps, warn_copies
    from geomcap.results import run_chance

    path = Path(path)
    run_dir = path.parent if path.is_file() else path
    if path.is_file():
        metrics = pd.read_csv(path, dtype={"step": "int64", "layer": "int64", "measure": str, "value": "float64"})
    else:
        metrics = store.read_metrics(run_dir)
    config = store.read_config(run_dir) if (run_dir / store.CONFIG_FILE).exists() else None
    status = store.read_status(run_dir) if config else None
    chance_known = config is not None and all(k in config for k in ("task", "level", "seed"))
    # training writes the chance level into status.json (a Pythia run's config holds its benchmark's); runs older
    # than that regenerate their data for it
    recorded = (status or {}).get("chance_accuracy", (config or {}).get("chance"))
    chance = (recorded if recorded is not None else run_chance(config)) if chance_known else 0.0
    # revision integrity (a series of saved checkpoints records digests.json): copies are read out first
    integrity = integrity_table(store.read_digests(run_dir))
    metrics = metrics[~metrics["step"].isin(left_out_steps(integrity))]
    warn_copies(integrity, str(run_dir))
    out = {"path": str(path), "config": config, "status": status,
           "chance_known": chance_known,
           "note": None if chance_known else "no config with task, level and seed: the best constant answer's "
                                             "accuracy is unknown, acquisition uses chance 0",
           "protocol": events.PROTOCOL,
           "duplicate_of": {r.revision: r.duplicate_of for r in integrity.itertuples() if r.duplicate_of},
           "shares_files_with": {r.revision: r.shares_files_with for r in integrity.itertuples()
                                 if r.shares_files_with},
           "summary": events.summarize_run(metrics, chance=chance)}
    return _strict_json(out)


def cmd_show(args) -> int:
    """``geomcap show``: a run's summary under the analysis protocol (``--json``: :func:`show_summary`)."""
    from geomcap import events

    shown = show_summary(args.run_dir)
    if args.json:
        print(json.dumps(shown, indent=2, allow_nan=False))
        return 0
    config, status = shown["config"], shown["status"] or {}
    print(f"run        {args.run_dir}")
    if config:
        state = ("stopped early at step " + str(status["stopped_at"]) if status.get("stopped_at") is not None else
                 "complete" if status.get("complete") else "INCOMPLETE")
        print(f"config     {config.get('task')}/{config.get('level')}  size {config.get('size')}  seed "
              f"{config.get('seed')}  steps {config.get('steps')}  {state}")
    else:
        print(f"config     none: {shown['note']}")
    if shown["duplicate_of"]:
        print("duplicates " + ", ".join(f"{r} = {o}" for r, o in shown["duplicate_of"].items())
              + " (the same weights: left out of every reading)")
    if shown["shares_files_with"]:
        print("partial    " + "; ".join(f"{r} shares a weight file with {o}"
                                        for r, o in shown["shares_files_with"].items()))
    print(events.format_summary(shown["summary"]))
    return 0


def cmd_pythia(args) -> int:
    """``geomcap pythia standin|run|benchmarks|show``; ``run`` exits 1 when a revision was skipped."""
    from geomcap import diagnostics, pythia
    from geomcap.parameters import STANDIN_BUILD
    from geomcap.schema import SettingError
    from geomcap.store import check_writable

    if args.pythia_command == "standin":
        build = {name: _option(name, getattr(args, name), row) for name, row in STANDIN_BUILD.items()}
        device = _option("device", args.device)
        check_writable(args.out)
        out = pythia.build_standin(args.out, **build, device=device, progress=not args.quiet)
        info = pythia.standin_info(out)
        print(f"{out}: {len(info['revisions'])} revisions, {info['parameters']:,} parameters, "
              f"final loss {info['final_loss']:.2f}, built in {info['build_seconds']:.0f} s")
        return 0
    if args.pythia_command == "benchmarks":
        for path in diagnostics.write_benchmarks(args.out or diagnostics.benchmark_dir()):
            print(path)
        return 0
    if args.pythia_command == "show":
        layers = _option("layers", args.layers)
        runs = pythia.load_benchmark_runs(args.root, model=args.model)
        if runs.empty:
            print(f"no complete Pythia run in {args.root or pythia.committed_runs_root()}")
            return 0
        from geomcap import results

        metrics = results.load_metrics(runs)
        table = results.gap_table(runs, metrics, layers=layers)
        columns = ["model", "benchmark", "level", "layer", "final_accuracy", "acquisition_step", "transition_step",
                   "gap_steps", "gap_tokens", "is_precursor", "gap_refused"]
        print(table[columns].to_string(index=False))
        return 0
    # run: every parameter is checked before anything is written
    pythia.check_model(args.model)
    benchmarks, revisions = _option("benchmarks", args.benchmarks), _option("revisions", args.revisions)
    try:
        pythia.select_revisions(revisions, pythia.available_revisions(args.model))
    except SettingError as exc:  # a revision outside the hub's schedule
        raise _refusal(exc) from None
    _option("device", args.device)
    batch_tokens = _option("batch_tokens", args.batch_tokens)
    check_writable(args.out)
    report = pythia.run(args.model, revisions=revisions, benchmarks=benchmarks, root=args.out,
                        cache_dir=args.cache_dir, delete_downloads=args.delete_downloads, device=args.device,
                        batch_tokens=batch_tokens, label=args.label, progress=not args.quiet)
    print(f"{len(report['stored'])} revisions scored now, {len(report['skipped'])} skipped, "
          f"{len(report['duplicates'])} not scored (the weights of an earlier revision); "
          f"run directories under {args.out}")
    for revision, reason in report["skipped"].items():
        print(f"skipped {revision}: {reason}", file=sys.stderr)
    return 1 if report["skipped"] else 0


def _bench_parser(sub) -> None:
    """``geomcap bench`` and its options (see :mod:`geomcap.bench`): those of its rows
    (``geomcap.parameters.BENCH``), --out, --update and --quiet."""
    from geomcap.parameters import BENCH

    p = sub.add_parser("bench", help="benchmarks: throughput vs a transformers peer and the matmul peak, cost of "
                                     "the measures, RankMe vs a naive SVD (JSON into data/bench)")
    for name, row in BENCH.items():  # checked through the same rows (cmd_bench, run_bench)
        _row_option(p, name, row)
        if name == "parts":  # --out second, where the recorded command (_bench_command) has it
            p.add_argument("--out", default=None,
                           help="result file (default data/bench/<device>.json, e.g. cpu-2core.json)")
    p.add_argument("--update", action="store_true",
                   help="keep the other parts of an existing --out file and replace only the parts run now")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def _bench_command(args) -> str:
    """The bench command line with every option spelled out (recorded in the result)."""
    import shlex

    words = ["geomcap", "bench"]
    for key, value in vars(args).items():
        if isinstance(value, (list, tuple)):  # a row's default: --rankme-n 512,4096,32768; --compile none
            value = ",".join(map(str, value))
        if key == "command" or value in (None, False, ""):
            continue
        flag = "--" + key.replace("_", "-")
        words += [flag] if value is True else [flag, str(value)]
    return shlex.join(words)


def cmd_bench(args) -> int:
    """``geomcap bench``: the benchmarks' parts into a JSON file, then their figures and targets."""
    from geomcap import bench
    from geomcap.models import resolve_device
    from geomcap.parameters import BENCH

    given = {name: _option(name, getattr(args, name), row) for name, row in BENCH.items()}  # before any work
    dev = resolve_device(given["device"])
    out = args.out or str(bench.committed_results_dir() / bench.default_output_name(dev))
    result = bench.run_bench(out, parts=bench.parse_parts(given["parts"]), device=given["device"],
                             presets=args.presets,  # checked; the result records it as typed
                             task=given["task"], level=given["level"], batch_size=given["batch_size"],
                             rounds=given["rounds"], block_s=given["block_s"], max_step_s=given["max_step_s"],
                             peer=given["peer"], compile_presets=given["compile"],
                             rankme_sizes=bench.parse_sizes(given["rankme_n"], given["rankme_d"]),
                             rankme_repeats=given["rankme_repeats"], costly_repeats=given["costly_repeats"],
                             peak_n=given["peak_n"], threads=given["threads"],
                             command=_bench_command(args), update=args.update, progress=not args.quiet)
    table = bench.figures_table(result)
    print(table.to_string(index=False) if len(table) else "no figures")
    for row in result["targets"]:
        print(f"{'met   ' if row['met'] else 'MISSED'} {row['target']} [{row['subject']}]: {row['value']:.3g} "
              f"({'>=' if row['kind'] == 'min' else '<='} {row['threshold']:g})")
    print(out)
    return 0


def _checkpoints_parser(sub) -> None:
    """``geomcap checkpoints`` and its options (see :mod:`geomcap.checkpoints`): root, --prompts, --out and those
    of its rows (``geomcap.parameters.CHECKPOINTS``)."""
    from geomcap.parameters import CHECKPOINTS

    p = sub.add_parser("checkpoints", help="per-layer RankMe of every saved checkpoint (checkpoint-<N> or step<N> "
                                            "folders of any causal LM) on a file of prompts -> DIR/metrics.csv")
    p.add_argument("root", help="folder of checkpoint-<N> (Trainer) or step<N> (Pythia) subfolders")
    p.add_argument("--prompts", required=True, help="text file, one prompt per line")
    p.add_argument("--out", required=True, help="run directory for metrics.csv")
    for name, row in CHECKPOINTS.items():  # --position, --device: checked through the same rows (cmd_checkpoints)
        _row_option(p, name, row)


def cmd_checkpoints(args) -> int:
    """``geomcap checkpoints``: per-layer RankMe of a folder of saved checkpoints, and its collapse."""
    from geomcap import checkpoints, monitor
    from geomcap.parameters import CHECKPOINTS
    from geomcap.store import check_writable

    given = {name: _option(name, getattr(args, name), row) for name, row in CHECKPOINTS.items()}  # before any work
    check_writable(args.out)
    checkpoints.check_out(args.out, "--out")
    prompts = checkpoints.read_prompts(args.prompts, "--prompts")
    result = checkpoints.measure_checkpoints(args.root, prompts, args.out, **given,
                                             progress=lambda line: print(line, file=sys.stderr))
    series = result.checkpoints
    left_out = (f" ({series['prompts_left_out']} more left out: longer than the model's {series['context']} "
                "positions)" if series["prompts_left_out"] else "")
    skipped = (f", {len(series['skipped'])} skipped as unreadable ({', '.join(series['skipped'])})"
               if series["skipped"] else "")
    skipped += (f", {len(series['duplicates'])} not measured (the weights of an earlier checkpoint: "
                f"{', '.join(f'{c} = {o}' for c, o in series['duplicates'].items())})" if series["duplicates"] else "")
    print(f"wrote {args.out}/metrics.csv: {series['scored']} checkpoints scored{skipped}; "
          f"{series['prompts']} prompts{left_out}")
    print(monitor.collapse_summary(result))
    return 0


def _one_line_errors() -> tuple:
    """The exceptions main reports as one line with exit 2 (evaluated only once one is raised, so
    that the light commands do not import torch)."""
    from geomcap.store import RunLockedError

    return (UsageError, ValueError, FileNotFoundError, RunLockedError)


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """``warnings.formatwarning`` for the command: "geomcap: warning: MESSAGE", one line."""
    return f"geomcap: warning: {message}\n"


#: the errors of a write that found no room: a full disk, a file size limit (``ulimit -f``), a quota
DISK_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def main(argv=None) -> int:
    """Run the ``geomcap`` command on ``argv`` (default: sys.argv); returns the exit status (2: bad input,
    one line on stderr; 1: a write found no room, one line; 130: interrupted). A reader that stops reading
    (``geomcap show RUN | head -1``) ends it silently (status 1)."""
    import warnings

    warnings.formatwarning = _one_line_warning  # e.g. a run of the store skipped: one line naming its file
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        handler = {"train": cmd_train, "sweep": cmd_sweep, "presets": cmd_presets, "runs": cmd_runs, "show": cmd_show,
                   "pythia": cmd_pythia, "bench": cmd_bench, "checkpoints": cmd_checkpoints}[args.command]
        code = handler(args)
        sys.stdout.flush()  # a reader gone is found here, not in the interpreter's flush at exit
        return code
    except _one_line_errors() as exc:
        print(f"geomcap: error: {exc}".replace("geomcap: error: geomcap", "geomcap"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("geomcap: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    except BrokenPipeError:
        _drop_stdout()
        return 1
    except OSError as exc:
        if exc.errno not in DISK_FULL:
            raise
        print(f"geomcap: error: could not write {exc.filename or 'a file'}: {exc.strerror} (a full disk or a "
              "file size limit); what was saved is kept: make room and rerun the same command to resume",
              file=sys.stderr)
        return 1


def _drop_stdout() -> None:
    """Point stdout at /dev/null: its reader is gone, and the interpreter's last flush would fail again."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a file descriptor (a captured stream)
        pass


if __name__ == "__main__":
    sys.exit(main())
