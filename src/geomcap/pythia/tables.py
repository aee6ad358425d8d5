"""Analysis of the stored Pythia runs: the notebook's tables (gaps, C7, timings, cost)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from geomcap import diagnostics, events, store
from geomcap.parameters import ParameterError
from geomcap.pythia.revisions import (STANDIN_NAME, available_revisions, check_model, model_label, revision_step,
                                     select_revisions)
from geomcap.pythia.runs import check_benchmarks, committed_runs_root


def load_benchmark_runs(root=None, model=None, benchmarks="all") -> pd.DataFrame:
    """One row per complete Pythia run (one benchmark of one model) under ``root`` (default the
    committed data/pythia/runs), in the benchmarks' order. ValueError when a (model, benchmark)
    has several runs (e.g. two stand-ins built differently in one store)."""
    from geomcap import results

    benchmarks = check_benchmarks(benchmarks)
    root = Path(root) if root is not None else committed_runs_root()
    runs = results.load_runs(root, model=model, task=benchmarks) if root.exists() else pd.DataFrame()
    if runs.empty:
        return runs
    dup = runs[runs.duplicated(["model", "task"], keep=False)]
    if len(dup):
        raise ValueError(f"several runs for model {dup['model'].iloc[0]!r}, benchmark {dup['task'].iloc[0]!r} in "
                         f"{root} ({', '.join(dup['run'])}): use a store holding one")
    order = {b: i for i, b in enumerate(diagnostics.BENCHMARKS)}
    return runs.sort_values(["model", "task"], key=lambda c: c.map(order) if c.name == "task" else c
                            ).reset_index(drop=True)


def check_layers(layers, available) -> list[int]:
    """'final' -> [last], 'all' -> every layer, or a list of layer indices (0 = embeddings)."""
    available = sorted(int(a) for a in available)
    if isinstance(layers, str):
        if layers == "final":
            return available[-1:]
        if layers == "all":
            return available
        raise ParameterError(f"parameter layers: {layers!r}; use 'final', 'all' or a list of layer indices "
                         f"({available[0]} .. {available[-1]})")
    layers = [layers] if isinstance(layers, (int, np.integer)) else list(layers)
    bad = [l for l in layers if isinstance(l, bool) or not isinstance(l, (int, np.integer)) or int(l) not in available]
    if bad or not layers:
        raise ParameterError(f"parameter layers: {bad or layers} not among the recorded layers "
                         f"{available[0]} .. {available[-1]}")
    return sorted(int(l) for l in layers)


def gap_table(runs: pd.DataFrame, metrics: pd.DataFrame, layers="final", measure: str = "rankme",
                  threshold: float = 0.5, patience: int = 3) -> pd.DataFrame:
    """Per benchmark and layer: acquisition, ``measure``'s transition and the precursor gap.

    Acquisition: chance-corrected accuracy ``(acc - chance) / (1 - chance) >
    threshold`` at ``patience`` consecutive revisions
    (:func:`geomcap.events.acquisition_step`); transition: where the series
    leaves its early course, read from step 0 (the paper's reading,
    :func:`geomcap.events.transition_step`);
    gap = acquisition - transition (:func:`geomcap.events.precursor`), also in
    tokens (x the run's tokens per step) and as a fraction of the last step.
    ``floor_step``: the step of the final layer's minimum after initialisation
    (:func:`geomcap.events.collapse`), and ``acquired_after_floor`` the
    project's data-driven "hard" (:func:`geomcap.results.difficulty_class`).
    """
    from geomcap import results

    rows = []
    for run in runs.itertuples():
        m = metrics[metrics["run"] == run.run]
        steps, acc = events.tidy_series(m, "accuracy")
        corrected = events.chance_corrected(acc, run.chance)
        r_layers, r_steps, values = events.layer_matrix(m, measure)
        if not np.array_equal(r_steps, steps):
            raise ValueError(f"run {run.run}: {measure} and accuracy recorded at different revisions")
        final = int(r_layers[-1])
        floor = events.collapse(steps, values[-1]) if len(steps) >= 2 else None
        for layer in check_layers(layers, r_layers):
            p = events.precursor(steps, values[list(r_layers).index(layer)], corrected, threshold=threshold,
                                 patience=patience)
            rows.append({
                "model": run.model, "benchmark": run.task, "level": run.level, "chance": run.chance,
                "revisions": len(steps), "last_step": int(steps[-1]), "final_accuracy": float(acc[-1]),
                "best_accuracy": float(np.max(acc)), "acquisition_step": p.acquisition_step,
                "layer": layer, "final_layer": layer == final, "transition_step": p.measure_step,
                "gap_steps": p.gap_steps, "gap_checkpoints": p.gap_checkpoints,
                "gap_tokens": None if p.gap_steps is None else p.gap_steps * int(run.tokens_per_step),
                "gap_fraction": None if p.gap_steps is None else p.gap_steps / int(steps[-1]),
                "is_precursor": p.is_precursor, "floor_step": floor.floor_step if floor else None,
                "rankme_floor_step": floor.floor_step if floor else None})
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    table["data_class"] = results.difficulty_class(table).where(table["final_layer"])
    table = table.drop(columns="rankme_floor_step")
    for column in ("acquisition_step", "transition_step", "gap_steps", "gap_checkpoints", "gap_tokens",
                   "floor_step"):
        table[column] = table[column].astype("Int64")
    return table


def claim_c7(table: pd.DataFrame) -> dict:
    """The C7 row of the paper-vs-ours table: the hard task's gap at the final layer, and how many
    easy benchmarks show a precursor. The value is the hard gap in steps (NaN when undefined)."""
    from geomcap import results

    final = table[table["final_layer"]]
    if final.empty:
        return results.claim_row("C7", "no benchmark selected")
    model = final["model"].iloc[0]
    who = ("the offline stand-in (NOT Pythia)" if model == STANDIN_NAME else model)
    hard = final[final["level"] == "hard"]
    easy = final[final["level"] == "easy"]
    parts, value = [who + ":"], float("nan")
    for row in hard.itertuples():
        if pd.isna(row.acquisition_step):
            parts.append(f"{row.benchmark} never acquired (best accuracy {row.best_accuracy:.2f}, "
                         f"chance {row.chance:.2f}), so no gap;")
        else:
            parts.append(f"{row.benchmark} gap {row.gap_steps} steps ({row.gap_fraction:.0%} of training);")
            value = float(row.gap_steps)
    acquired = easy[easy["acquisition_step"].notna()]
    parts.append(f"easy benchmarks with a RankMe precursor: {int(acquired['is_precursor'].sum())}/{len(acquired)} "
                 f"acquired ({len(easy)} selected)")
    judged = results.claim_c7(table)  # the verdict and its rule: one rule for C7, in results
    return results.claim_row("C7", " ".join(parts), value, judged["verdict"], judged["rule"])


def c7_claim_from_store(model: str = "standin", root="") -> dict:
    """The C7 row (:func:`claim_c7`) from the stored metrics of ``model`` at every stored revision,
    final layer (root "" as in :func:`section_root`): the book's results page. Reads only."""
    runs = model_runs(model, "all", root)
    from geomcap import results

    return claim_c7(gap_table(runs, select_metrics(results.load_metrics(runs), "all")))


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
    :func:`run`, reading them :func:`model_runs`.
    """
    try:
        check_benchmarks(benchmarks)
    except ValueError as exc:
        raise ParameterError(f"parameter {exc}") from None
    if not isinstance(delete_downloads, bool):
        raise ParameterError(f"parameter delete_downloads: must be True or False, got {delete_downloads!r}")
    if model != STANDIN_NAME:
        try:
            check_model(model)
        except ValueError as exc:
            raise ParameterError(f"parameter {exc}; or 'standin' for the committed stand-in metrics") from None
        try:
            select_revisions(revisions, available_revisions(model))
        except ValueError as exc:
            raise ParameterError(f"parameter {exc}") from None
    return section_root(model, root)


def model_runs(model="standin", benchmarks="all", root="") -> pd.DataFrame:
    """The stored runs of one model, one row per benchmark (:func:`load_benchmark_runs`), from
    ``root`` (:func:`section_root`). ``model``: "standin", a hub name or a local root (its runs
    are stored under its label, :func:`run`). Reads only; ValueError when none is stored."""
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
    except ValueError as exc:
        raise ParameterError(f"parameter {exc}") from None
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
    for b in check_benchmarks(benchmarks):
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
