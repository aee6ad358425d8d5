"""A run store as tables: one row per run (config and path), the tidy metrics of a selection of runs, the run
index with its timings, and the arms a claims table reads (real runs, negative controls, warmup-0)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from geomcap import store
from geomcap.analysis.protocol import RUN_KEYS
from geomcap.config import MEASUREMENT_ONLY_FIELDS, SCHEDULE_FIELDS


def load_runs(root=None, complete_only: bool = True, one_per_setting: bool = True, **filters) -> pd.DataFrame:
    """One row per run directory under ``root``: its config and path. ``root`` None: the committed
    runs (:func:`geomcap.store.committed_data` ``("runs")``).

    ``one_per_setting``: runs that trained the same model and differ only in what they measured
    (:data:`~geomcap.config.MEASUREMENT_ONLY_FIELDS`, e.g. the grid's plain run of a seed and its
    re-run with the costly measures) count once: :func:`one_run_per_setting`. ``filters`` keep
    rows whose column equals the value, or is in it when a list/tuple is given, e.g.
    ``load_runs(task="mod", level=["easy", "hard"])``.
    """
    runs = store.list_runs(store.committed_data("runs") if root is None else root)
    if runs.empty:
        return runs
    if complete_only:
        runs = runs[runs["complete"]]
    if one_per_setting:
        runs = one_run_per_setting(runs)
    for key, value in filters.items():
        if value is None:
            continue
        if key not in runs.columns:
            raise KeyError(f"unknown run field {key!r}; fields: {', '.join(runs.columns)}")
        runs = runs[runs[key].isin(value if isinstance(value, (list, tuple, set)) else [value])]
    return runs.sort_values(list(RUN_KEYS)).reset_index(drop=True)


def one_run_per_setting(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` (rows of :func:`geomcap.store.list_runs`) with one row per training setting: among
    runs whose configs agree on every field but :data:`~geomcap.config.MEASUREMENT_ONLY_FIELDS`, the
    one with the most measures is kept; among those, one with a ``costly_window`` (it records the
    costly measures at more checkpoints), then the smallest ``costly_every``, then the first run id.
    Their shared metrics are equal by construction, so dropping the others loses nothing, and a seed
    is not counted twice."""
    if runs.empty:
        return runs
    setting = setting_key(runs)
    n_measures = runs.get("measures", pd.Series(0, index=runs.index)).apply(
        lambda m: len(m) if isinstance(m, (list, tuple)) else 0)
    windowed = runs.get("costly_window", pd.Series(None, index=runs.index)).apply(lambda w: not is_missing(w))
    every = pd.to_numeric(runs.get("costly_every", pd.Series(np.nan, index=runs.index)), errors="coerce")
    order = pd.DataFrame({"setting": setting, "n_measures": n_measures, "windowed": windowed,
                          "every": every.fillna(np.inf), "run": runs["run"]})
    order = order.sort_values(["setting", "n_measures", "windowed", "every", "run"],
                              ascending=[True, False, False, True, True])
    return runs.loc[sorted(order.drop_duplicates("setting").index)]


def setting_key(runs: pd.DataFrame, ignore=()) -> pd.Series:
    """Per run of ``runs`` (rows of :func:`geomcap.store.list_runs`), its config as one text, without the
    fields that choose what is measured (:data:`~geomcap.config.MEASUREMENT_ONLY_FIELDS`) and those in
    ``ignore``: runs with equal keys trained the same model."""
    columns = [c for c in runs.columns if c not in ("run", "path", "complete", *MEASUREMENT_ONLY_FIELDS, *ignore)]
    # dicts (task_params) and lists are not hashable; their JSON text is, and absent fields (NaN) read as null
    return runs[columns].apply(
        lambda row: json.dumps({k: None if is_missing(v) else v for k, v in row.items()}, sort_keys=True,
                               default=str), axis=1)


def reruns_of(runs: pd.DataFrame, reruns: pd.DataFrame) -> dict:
    """{run id of ``runs``: run id of ``reruns``} for each run that a rerun trained again with another checkpoint
    schedule or stop (configs equal but for :data:`~geomcap.config.SCHEDULE_FIELDS` and what is measured);
    both tables are rows of :func:`geomcap.store.list_runs`."""
    if runs.empty or reruns.empty:
        return {}
    columns = sorted(set(runs.columns) | set(reruns.columns))
    both = pd.concat([runs.reindex(columns=columns), reruns.reindex(columns=columns)], ignore_index=True)
    keys = setting_key(both, ignore=SCHEDULE_FIELDS)
    by_key = dict(zip(keys.iloc[len(runs):], reruns["run"]))
    return {run: by_key[key] for run, key in zip(runs["run"], keys.iloc[:len(runs)]) if key in by_key}


def is_missing(value) -> bool:
    """Whether a cell of a runs table is missing (None or NaN: a field its run's config did not have); a list,
    dict or text cell is present."""
    return not isinstance(value, (list, tuple, dict, str)) and pd.isna(value)


def load_metrics(runs: pd.DataFrame, measures=None) -> pd.DataFrame:
    """The tidy metrics of every run in ``runs``, with the run's task, level, size, seed and run id."""
    frames = []
    for row in runs.itertuples():
        m = store.read_metrics(row.path)
        if measures is not None:
            m = m[m["measure"].isin(measures)]
        frames.append(m.assign(**{k: getattr(row, k) for k in RUN_KEYS}, run=row.run))
    if not frames:
        return pd.DataFrame(columns=["step", "layer", "measure", "value", *RUN_KEYS, "run"])
    return pd.concat(frames, ignore_index=True)


#: status.json's timers (seconds), as :func:`run_index` lists them
TIMERS = ("train_s", "eval_s", "geometry_s", "costly_s", "write_s")


def run_index(root=None) -> pd.DataFrame:
    """One row per complete run (every one that trained, so a setting run twice is listed twice):
    task, level, size, seed, steps, measures, wall time and throughput; ``trained_steps`` (the step a run
    stopped at after acquisition, else ``steps``), its number of checkpoints, ``geometry_share``
    (per-checkpoint geometry seconds / training seconds), and status.json's timers in seconds (``train_s``,
    ``eval_s`` with ``geometry_s`` inside it, ``costly_s``, ``write_s``; NaN where a run's code did not time
    that part: ``write_s`` is timed since checkpoints append their rows)."""
    runs = load_runs(root, one_per_setting=False)
    rows = []
    for row in runs.itertuples():
        status = store.read_status(row.path) or {}
        wall = sum(status.get(k, 0.0) for k in ("train_s", "eval_s", "costly_s"))
        rows.append({"run": row.run, **{k: getattr(row, k) for k in (*RUN_KEYS, "steps")},
                     "measures": ",".join(row.measures), "wall_s": round(wall, 1),
                     "ms_per_step": status.get("ms_per_step"),
                     "trained_steps": status.get("stopped_at") or row.steps,
                     "checkpoints": status.get("checkpoints"), "geometry_share": status.get("geometry_share"),
                     **{k: status.get(k, float("nan")) for k in TIMERS}})
    return pd.DataFrame(rows)


#: the negative controls' store, beside the committed runs
CONTROLS = "controls"
#: the committed store of the scale grid's negative controls (data/scale-controls)
SCALE_CONTROLS = "scale-controls"


def is_shuffled_control(runs: pd.DataFrame) -> pd.Series:
    """Per run of a :func:`load_runs` table, whether it is a negative control (``control`` "shuffled_answers":
    nothing learnable)."""
    return runs.get("control", pd.Series(None, index=runs.index)).apply(lambda c: c == "shuffled_answers")


def load_arms(root="", controls_root=None) -> dict:
    """The runs a claims table reads, by arm: ``real`` (every complete run of ``root``; "" = the committed
    data/runs), ``control`` (``controls_root``'s runs with ``control == "shuffled_answers"``; default the
    committed data/controls when ``root`` is "", else none) and ``warmup0`` (its real runs with
    ``warmup_steps == 0``). Each arm is a :func:`load_runs` table (empty when absent)."""
    real = load_runs(Path(root) if root else None)
    if controls_root is None and not root:
        controls_root = store.committed_data(CONTROLS)
    empty = real.iloc[:0]
    if controls_root is None or not Path(controls_root).exists():
        return {"real": real, "control": empty, "warmup0": empty}
    others = load_runs(Path(controls_root))
    if others.empty:
        return {"real": real, "control": empty, "warmup0": empty}
    is_control = is_shuffled_control(others)
    warmup0 = (~is_control) & (pd.to_numeric(others["warmup_steps"], errors="coerce") == 0)
    return {"real": real, "control": others[is_control], "warmup0": others[warmup0]}
