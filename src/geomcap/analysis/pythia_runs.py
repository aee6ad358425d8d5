"""The stored Pythia runs, read without torch: the benchmark runs of a model, notebook 06's run store and
selection, its timing and cost tables. Computing them is :func:`geomcap.pythia.run`'s; C7's gap table and row
are :mod:`geomcap.claims.c7`'s."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from geomcap import diagnostics, store
from geomcap.analysis.pythia_revisions import (STANDIN_NAME, available_revisions, check_model, model_label,
                                               revision_step, select_revisions)
from geomcap.analysis.runs import load_runs
from geomcap.parameters import PARAMETERS, ParameterError, check_selection, check_value, refusal
from geomcap.schema import SettingError


def committed_runs_root() -> Path:
    """The committed Pythia run store: data/pythia/runs (:func:`geomcap.store.committed_data`)."""
    return store.committed_data("pythia", "runs")


def load_benchmark_runs(root=None, model=None, benchmarks="all") -> pd.DataFrame:
    """One row per complete Pythia run (one benchmark of one model) under ``root`` (default the
    committed data/pythia/runs), in the benchmarks' order. ValueError when a (model, benchmark)
    has several runs (e.g. two stand-ins built differently in one store). ``benchmarks``: through their row
    (``geomcap.parameters.PARAMETERS``), a SettingError naming them if one is unknown."""
    benchmarks = PARAMETERS["benchmarks"].chosen(benchmarks)
    root = Path(root) if root is not None else committed_runs_root()
    runs = load_runs(root, model=model, task=benchmarks) if root.exists() else pd.DataFrame()
    if runs.empty:
        return runs
    dup = runs[runs.duplicated(["model", "task"], keep=False)]
    if len(dup):
        raise ValueError(f"several runs for model {dup['model'].iloc[0]!r}, benchmark {dup['task'].iloc[0]!r} in "
                         f"{root} ({', '.join(dup['run'])}): use a store holding one")
    order = {b: i for i, b in enumerate(diagnostics.BENCHMARKS)}
    return runs.sort_values(["model", "task"], key=lambda c: c.map(order) if c.name == "task" else c
                            ).reset_index(drop=True)


def section_root(model="standin", root="") -> Path:
    """Notebook 06's run store: ``root``; "" means the committed data/pythia/runs
    (:func:`committed_runs_root`) for the stand-in and the user store ``~/.cache/geomcap/pythia-runs``
    (:func:`geomcap.store.user_root`) for a hub name or a local root, so that metrics computed by a
    reader never land in the committed data unless that root is given explicitly."""
    if root:
        return Path(root)
    return committed_runs_root() if model == STANDIN_NAME else store.user_root("pythia-runs")


def check_section(model="standin", revisions="all", benchmarks="all", root="",
                  delete_downloads: bool = False) -> Path:
    """Check notebook 06's parameters and return its run store (:func:`section_root`).

    ``model``: "standin" (the stand-in's committed metrics), a hub name or a local checkpoint
    root. Bad values raise ``ParameterError`` naming the parameter.
    Reads and computes nothing: computing a model's metrics is the notebook's own call of
    :func:`geomcap.pythia.run`, reading them :func:`model_runs`.
    """
    check_selection("benchmarks", benchmarks)
    check_value("delete_downloads", delete_downloads)
    if model != STANDIN_NAME:
        try:
            check_model(model)
        except ValueError as exc:
            raise ParameterError(f"parameter {exc}; or 'standin' for the committed stand-in metrics") from None
        try:
            select_revisions(revisions, available_revisions(model))
        except SettingError as exc:
            raise refusal(exc) from None
    return section_root(model, root)


def model_runs(model="standin", benchmarks="all", root="") -> pd.DataFrame:
    """The stored runs of one model, one row per benchmark (:func:`load_benchmark_runs`), from
    ``root`` (:func:`section_root`). ``model``: "standin", a hub name or a local root (its runs
    are stored under its label, :func:`geomcap.pythia.run`). Reads only; ValueError when none is stored."""
    root = section_root(model, root)
    name = STANDIN_NAME if model == STANDIN_NAME else model_label(model)[0]
    runs = load_benchmark_runs(root, model=name, benchmarks=benchmarks)
    if runs.empty:
        raise ValueError(f"no complete run of model {name!r} in {root}: see data/pythia/README.md "
                         "(`geomcap pythia standin`, then `geomcap pythia run`)")
    return runs


def select_metrics(metrics: pd.DataFrame, revisions="all") -> pd.DataFrame:
    """The rows of the chosen revisions (:func:`select_revisions` over the steps present)."""
    present = [f"step{s}" for s in sorted(metrics["step"].unique())]
    try:
        chosen = select_revisions(revisions, present)
    except SettingError as exc:
        raise refusal(exc) from None
    steps = {revision_step(r) for r in chosen}
    missing = [r for r in chosen if revision_step(r) not in set(metrics["step"])]
    if missing:
        raise ParameterError(f"parameter revisions: {', '.join(missing[:5])} not stored")
    return metrics[metrics["step"].isin(steps)].reset_index(drop=True)


def timing_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per run: the device, revisions stored, and the median seconds to load a revision and to
    score the benchmark at one revision (from status.json)."""
    rows = []
    for run in runs.itertuples():
        status = store.read_status(run.path) or {}
        score = list(status.get("score_seconds", {}).values())
        load = list(status.get("load_seconds", {}).values())
        rows.append({"benchmark": run.task, "n_items": run.n_items, "device": status.get("device"),
                     "revisions": len(status.get("revisions", [])),
                     "skipped": len(status.get("skipped", {})),
                     "median_load_s": float(np.median(load)) if load else np.nan,
                     "median_score_s": float(np.median(score)) if score else np.nan})
    return pd.DataFrame(rows)


def describe(runs: pd.DataFrame, metrics: pd.DataFrame) -> str:
    """One paragraph saying what the figures are computed from (the stand-in is named as such)."""
    model = runs["model"].iloc[0]
    steps = sorted(metrics["step"].unique())
    config = store.read_config(runs["path"].iloc[0])
    status = store.read_status(runs["path"].iloc[0]) or {}
    where = f"{len(steps)} revisions (step{steps[0]} .. step{steps[-1]}), {len(runs)} benchmarks, computed on " \
            f"{status.get('device', '?')} in {status.get('dtype', '?')}"
    too_long = {run.task: (store.read_status(run.path) or {}).get("items_too_long", 0) for run in runs.itertuples()}
    if any(too_long.values()):
        where += "; items longer than the model's context, left out: " + ", ".join(
            f"{b} {n} of {n_items}" for (b, n), n_items in zip(too_long.items(), runs["n_items"]) if n)
    if model == STANDIN_NAME:
        s = config["standin"]
        return (f"Model: the offline stand-in built here, NOT Pythia: a GPT-NeoX with {s['layers']} layers x "
                f"{s['width']} trained {s['steps']} steps of {config['tokens_per_step']} tokens on Python's "
                f"documentation and templated sentences"
                + (f", with {s['puzzles']} solved {'/'.join(map(str, s['puzzle_objects']))}-object ordering puzzles"
                   if s.get("puzzles") else "") + f". {where}.")
    return f"Model: {model}. {where}."


#: the columns of :func:`shortcut_split`
SHORTCUT_SPLIT_COLUMNS = ["build", "benchmark", "revision", "step", "class", "items", "accuracy", "chance"]


def shortcut_split(path, build: str | None = None) -> pd.DataFrame:
    """A deduction benchmark's accuracy split by the unnamed-object shortcut, as a tidy table: the record
    ``scripts/deduction_shortcut.py`` writes of a model's revisions (``data/pythia/shortcut-*.json``), or the one
    ``scripts/deduction_probe.py`` writes of its scorings during training (``data/pythia/probe-*.json``; its
    steps read as revisions ``stepN``).

    One row per benchmark, revision and class (``"all"``, then :data:`geomcap.diagnostics.SHORTCUT_CLASSES`):
    ``build`` (default the file's name without ``shortcut-`` and ``.json``), ``benchmark``, ``revision``,
    ``step``, ``class``, ``items``, ``accuracy`` (NaN for a class without items), ``chance`` (the benchmark's,
    from its committed file); sorted by benchmark, step and class. ValueError, naming the file, for a record
    of another form or a class the rule does not have."""
    path = Path(path)
    record = json.loads(path.read_text())
    if isinstance(record, dict) and isinstance(record.get("rows"), list) and "benchmark" in record:  # a probe's
        record = {"benchmarks": {record["benchmark"]: {"revisions": {
            f"step{row['step']}": {k: v for k, v in row.items() if k not in ("step", "train_loss", "seconds")}
            for row in record["rows"]}}}}
    if not isinstance(record, dict) or not isinstance(record.get("benchmarks"), dict):
        raise ValueError(f"{path}: not a shortcut split (a JSON object with 'benchmarks', as "
                         f"scripts/deduction_shortcut.py writes, or with 'rows', as scripts/deduction_probe.py does)")
    classes = ("all", *diagnostics.SHORTCUT_CLASSES)
    build = path.stem.removeprefix("shortcut-") if build is None else build
    rows = []
    for benchmark, entry in record["benchmarks"].items():
        chance = diagnostics.chance(diagnostics.load_benchmark(benchmark))
        for revision, table in entry["revisions"].items():
            unknown = set(table) - set(classes)
            if unknown:
                raise ValueError(f"{path}: {benchmark} {revision}: unknown class(es) {sorted(unknown)}")
            for name in classes:
                cell = table.get(name, {"items": 0, "accuracy": None})
                rows.append({"build": build, "benchmark": benchmark, "revision": revision,
                             "step": revision_step(revision), "class": name, "items": int(cell["items"]),
                             "accuracy": np.nan if cell["accuracy"] is None else float(cell["accuracy"]),
                             "chance": chance})
    frame = pd.DataFrame(rows, columns=SHORTCUT_SPLIT_COLUMNS)
    order = {name: i for i, name in enumerate(classes)}
    return frame.sort_values(["benchmark", "step", "class"], key=lambda c: c.map(order) if c.name == "class" else c,
                             kind="stable").reset_index(drop=True)


def committed_shortcut_splits(benchmark: str = "logical_deduction_3") -> pd.DataFrame:
    """Every committed shortcut split (:func:`shortcut_split`): the stand-ins' (``data/pythia/shortcut-*.json``),
    then the probes' (``data/pythia/probe-*.json``), each in name order; the rows of ``benchmark`` only; empty
    (with the columns) where none is committed."""
    folder = store.committed_data("pythia")
    paths = sorted(folder.glob("shortcut-*.json")) + sorted(folder.glob("probe-*.json"))
    frames = [shortcut_split(p) for p in paths]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=SHORTCUT_SPLIT_COLUMNS)
    return frame[frame["benchmark"] == benchmark].reset_index(drop=True)


#: CPU forward pass measured on this project's 2-core machines: seconds for
#: a batch of 64 x 32 tokens through the exact configs (random weights)
CPU_FORWARD_SECONDS = {"160m": 3.4, "410m": 6.5, "2.8b": 41.0}


def cost_estimate(benchmarks="all", chars_per_token: float = 4.0, benchmark_dir=None) -> pd.DataFrame:
    """Tokens one revision's metrics need, per benchmark, and the CPU time that implies for Pythia.

    Tokens: one sequence per (item, choice), ``1 + len(context + choice) / chars_per_token``
    (Pythia's BPE averages ~4 characters per token on English; its tokenizer is not available
    offline, so this is an estimate). Seconds: tokens x the measured cost per token of a 64 x 32
    forward pass (``CPU_FORWARD_SECONDS``); longer sequences add attention cost, so these are
    lower bounds, and loading a revision (0.3 GB for 160m, 5.6 GB for 2.8b in fp16) is extra.
    """
    rows = []
    for b in PARAMETERS["benchmarks"].chosen(benchmarks):
        items = diagnostics.load_benchmark(b, benchmark_dir)
        tokens = sum(1 + len(it["context"] + c) / chars_per_token for it in items for c in it["choices"])
        row = {"benchmark": b, "items": len(items), "sequences": sum(len(it["choices"]) for it in items),
               "tokens": int(round(tokens))}
        for size, seconds in CPU_FORWARD_SECONDS.items():
            row[f"cpu_s_{size}"] = tokens * seconds / (64 * 32)
        rows.append(row)
    table = pd.DataFrame(rows)
    total = {"benchmark": "all", **table.drop(columns="benchmark").sum().to_dict()}
    return pd.concat([table, pd.DataFrame([total])], ignore_index=True)

