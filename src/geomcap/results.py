"""Across runs: load a run store into tables, one row per run, for the notebooks.

    from geomcap import results
    runs = results.load_runs("data/runs")                 # configs, one row per complete run
    table = results.summary_table(runs)                   # events of every run (acquisition, floor, ...)
    metrics = results.load_metrics(runs, measures=["accuracy", "rankme"])   # tidy, with run columns
"""

from __future__ import annotations


from dataclasses import asdict
from functools import lru_cache, partial
from pathlib import Path

import numpy as np
import pandas as pd

from geomcap import events, store
from geomcap.parameters import ParameterError
from geomcap.tasks import LEVELS, chance_accuracy, make_task

RUN_KEYS = ("task", "level", "size", "seed")


def load_runs(root="data/runs", complete_only: bool = True, **filters) -> pd.DataFrame:
    """One row per run directory under ``root``: its config and path.

    ``filters`` keep rows whose column equals the value, or is in it when a
    list/tuple is given, e.g. ``load_runs(task="mod", level=["easy", "hard"])``.
    """
    runs = store.list_runs(root)
    if runs.empty:
        return runs
    if complete_only:
        runs = runs[runs["complete"]]
    for key, value in filters.items():
        if value is None:
            continue
        if key not in runs.columns:
            raise KeyError(f"unknown run field {key!r}; fields: {', '.join(runs.columns)}")
        runs = runs[runs[key].isin(value if isinstance(value, (list, tuple, set)) else [value])]
    return runs.sort_values(list(RUN_KEYS)).reset_index(drop=True)


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


def run_index(root="data/runs") -> pd.DataFrame:
    """One row per complete run: task, level, size, seed, steps, measures, wall time and throughput."""
    runs = load_runs(root)
    rows = []
    for row in runs.itertuples():
        status = store.read_status(row.path) or {}
        wall = sum(status.get(k, 0.0) for k in ("train_s", "eval_s", "costly_s"))
        rows.append({"run": row.run, **{k: getattr(row, k) for k in (*RUN_KEYS, "steps")},
                     "measures": ",".join(row.measures), "wall_s": round(wall, 1),
                     "ms_per_step": status.get("ms_per_step"), "geometry_share": status.get("geometry_share")})
    return pd.DataFrame(rows)


def summary_row(metrics: pd.DataFrame, **kwargs) -> dict:
    """A flat dict of :func:`geomcap.events.summarize_run` for one run's metrics.

    The ``rankme_*`` and ``top_down_*`` columns describe the collapse of the
    measure selected with ``measure=`` (default: the primary ``rankme``).
    """
    s = events.summarize_run(metrics, **kwargs)
    row = {"acquisition_step": s["acquisition_step"], "final_accuracy": s["final_accuracy"],
           "final_layer": s["final_layer"],
           "ordered_collapse_recovery_acquisition": s["order_collapse_recovery_acquisition"]}
    c = s["collapse"] or {}
    for key in ("initial_value", "peak_value", "peak_step", "onset_step", "floor_value", "floor_step",
                "recovery_step", "relative_drop", "collapsed"):
        row[f"rankme_{key}"] = c.get(key)
    for measure, p in s["precursors"].items():
        row[f"{measure}_transition_step"] = p["measure_step"]
        row[f"{measure}_gap_steps"] = p["gap_steps"]
        row[f"{measure}_gap_checkpoints"] = p["gap_checkpoints"]
        row[f"{measure}_is_precursor"] = p["is_precursor"]
    td = s["top_down"] or {}
    row["top_down_rho_step"] = td.get("rho_step")
    row["top_down_rho_floor"] = td.get("rho_floor")
    row["is_top_down"] = td.get("is_top_down")
    return row


@lru_cache(maxsize=None)
def chance_for(task: str, level: str, seed: int, n_train: int, n_test: int) -> float:
    """Accuracy of the best constant answer on a run's test set (:func:`geomcap.tasks.chance_accuracy`)."""
    data = make_task(task, level, seed=seed, n_train=n_train, n_test=n_test)
    return chance_accuracy(data.test_answers)


def run_chance(config: dict) -> float:
    # the answer order does not enter: reversing every answer's digits is a bijection on answers,
    # so the most common answer is as common either way
    return chance_for(config["task"], config["level"], int(config["seed"]), int(config["n_train"]),
                      int(config["n_test"]))


def summary_table(runs: pd.DataFrame, **kwargs) -> pd.DataFrame:
    """One row per run: its task, level, size, seed, steps and the events of :func:`summary_row`
    (acquisition on chance-corrected accuracy, see :func:`geomcap.events.summarize_run`)."""
    rows = []
    for row in runs.itertuples():
        chance = run_chance(row._asdict())
        rows.append({**{k: getattr(row, k) for k in (*RUN_KEYS, "steps", "run")}, "chance": chance,
                     **summary_row(store.read_metrics(row.path), chance=chance, **kwargs)})
    table = pd.DataFrame(rows)
    if not table.empty:
        step_columns = [c for c in table.columns
                        if (c.endswith("_step") or c.endswith("_steps")) and not c.startswith("top_down_rho")]
        for column in step_columns:
            table[column] = table[column].astype("Int64")
    return table


def rate(values) -> float:
    """Share of True among the non-missing values (NaN when none)."""
    values = pd.Series(values).dropna().astype(bool)
    return float(values.mean()) if len(values) else float("nan")


def check_choices(name: str, values, allowed) -> list:
    """Validate a notebook parameter: a value or list of values, each in ``allowed`` ('all' = every one).

    Raises ValueError with one line naming the parameter, the bad value and the choices.
    """
    if isinstance(values, str):
        from geomcap.parameters import as_list

        values = list(allowed) if values == "all" else as_list(values)  # also "a,b" and "['a', 'b']"
    values = list(values)
    for value in values:
        if value not in allowed:
            raise ParameterError(f"parameter {name}: unknown value {value!r}; choose from: "
                             f"{', '.join(map(str, allowed))} (or 'all')")
    if not values:
        raise ParameterError(f"parameter {name}: empty selection")
    return values


def check_positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ParameterError(f"parameter {name}: must be a positive integer, got {value!r}")
    return int(value)


def data_root() -> Path:
    """The committed run store: <repository>/data/runs (found from this file's location)."""
    return Path(__file__).resolve().parents[2] / "data" / "runs"


RANKME_VARIANTS = ("rankme", "rankme_centred", "rankme_all_positions", "rankme_mean_pooled")


def section_runs(tasks="all", levels="all", sizes=("405k",), seeds="all", root="", recompute=False,
                 steps="easy:2000,medium:4000,hard:3000", progress=True) -> pd.DataFrame:
    """Validate a notebook's parameters and return its runs (one row per complete run).

    tasks, levels, sizes: a name, a list of names, or "all"; seeds: an int, a
    list of ints, or "all" (every seed in the store). root "" = the committed
    store. With ``recompute`` the runs of the grid missing from the store are
    trained first (through :mod:`geomcap.sweep`; seeds must then be explicit)
    into ``root``, or with root "" into the user store
    (:func:`geomcap.store.user_root`, ``$GEOMCAP_RUNS`` or
    ``~/.cache/geomcap/runs``), never into the committed ``data/runs``; the
    runs returned are then exactly the grid's, from either store.
    Bad values raise ValueError naming the parameter.
    """
    from geomcap.models import PRESETS
    from geomcap.tasks import TASKS

    tasks = check_choices("tasks", tasks, TASKS)
    levels = check_choices("levels", levels, LEVELS)
    sizes = check_choices("sizes", sizes, tuple(PRESETS))
    if isinstance(seeds, str) and seeds != "all":
        raise ParameterError(f"parameter seeds: expected an int, a list of ints or 'all', got {seeds!r}")
    if not isinstance(seeds, str):
        seeds = [seeds] if isinstance(seeds, (int, np.integer)) else list(seeds)
        for seed in seeds:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
                raise ParameterError(f"parameter seeds: {seed!r} is not a non-negative integer")
    if not isinstance(recompute, bool):
        raise ParameterError(f"parameter recompute: must be True or False, got {recompute!r}")
    roots = [Path(root)] if root else [data_root()]
    if recompute:
        from geomcap.sweep import grid, parse_steps, run_sweep

        if seeds == "all":
            raise ParameterError("parameter seeds: give explicit seeds with recompute=True")
        try:
            steps_by_level = parse_steps(str(steps))
        except ValueError as exc:
            raise ParameterError(f"parameter steps: {exc}") from None
        if isinstance(steps_by_level, int):
            check_positive_int("steps", steps_by_level)
        target = Path(root) if root else store.user_root()
        if not root:
            roots.append(target)
        configs = grid(tasks=tasks, levels=levels, sizes=sizes, seeds=seeds, steps=steps_by_level)
        missing = [c for c in configs if not any(store.is_complete(store.run_dir_for(c.to_dict(), r)) for r in roots)]
        run_sweep(missing, root=target, progress=progress)
        wanted = {store.config_hash(c.to_dict()) for c in configs}
    if not roots[0].exists():
        raise ParameterError(f"parameter root: {roots[0]} does not exist")
    selected = [load_runs(r, task=tasks, level=levels, size=sizes, seed=None if seeds == "all" else seeds)
                for r in roots if r.exists()]
    runs = pd.concat([r for r in selected if not r.empty] or [selected[0]], ignore_index=True)
    if recompute and not runs.empty:  # exactly the grid's runs (its steps, its settings)
        runs = runs[runs["run"].isin(wanted)]
    if len(selected) > 1 and not runs.empty:  # a run in both stores: the committed one
        runs = runs.drop_duplicates("run").sort_values(list(RUN_KEYS)).reset_index(drop=True)
    root = " and ".join(str(r) for r in roots)
    if runs.empty:
        raise ValueError(f"no complete run in {root} for tasks={tasks}, levels={levels}, sizes={sizes}, "
                         f"seeds={seeds}: pass recompute=True to train them (see data/README.md)")
    return runs


def sensitivity_table(runs: pd.DataFrame, measures=RANKME_VARIANTS) -> pd.DataFrame:
    """Claims C1/C3 under each RankMe variant: per variant, runs, collapsed runs, runs ordered
    floor < recovery <= acquisition (of the acquired runs), mean floor and relative drop, and runs
    with a defined and negative top-down statistic."""
    rows = []
    for measure in measures:
        table = summary_table(runs, measure=measure)
        acquired = table["acquisition_step"].notna()
        ordered = table["ordered_collapse_recovery_acquisition"].fillna(False).astype(bool)
        rho = pd.to_numeric(table["top_down_rho_step"], errors="coerce")
        rows.append({"measure": measure, "runs": len(table),
                     "collapsed": int(table["rankme_collapsed"].fillna(False).astype(bool).sum()),
                     "acquired": int(acquired.sum()), "ordered": int(ordered.sum()),
                     "mean_floor": table["rankme_floor_value"].mean(),
                     "mean_relative_drop": table["rankme_relative_drop"].mean(),
                     "top_down_defined": int(rho.notna().sum()), "top_down": int((rho < 0).sum())})
    return pd.DataFrame(rows)


def training_setting(run) -> str:
    """The settings of a run (a row of :func:`load_runs`) that differ from :class:`geomcap.train.TrainConfig`'s
    defaults for its task, level and steps, as ``"key=value, ..."``; ``"default"`` when none does.
    Only the fields a sweep may set (:data:`geomcap.sweep.SETTABLE_FIELDS`) are compared."""
    from geomcap.sweep import SETTABLE_FIELDS
    from geomcap.train import TrainConfig

    # a namedtuple from itertuples(), or a dict / Series (whose .size is not the preset)
    get = (lambda key: getattr(run, key)) if hasattr(run, "_fields") else run.__getitem__
    default = asdict(TrainConfig(task=get("task"), level=get("level"), size=get("size"), seed=int(get("seed")),
                                 steps=int(get("steps"))))
    changed = []
    for key in sorted(SETTABLE_FIELDS):
        try:
            value = get(key)
        except (AttributeError, KeyError):  # a field added after this store's runs were made
            continue
        if SETTABLE_FIELDS[key] is str:
            if isinstance(value, str) and value != default[key]:  # NaN: a run made before the field existed
                changed.append(f"{key}={value}")
        elif not np.isclose(float(value), float(default[key])):
            changed.append(f"{key}={value:g}")
    return ", ".join(changed) or "default"


def setting_runs(root, baseline_root="") -> pd.DataFrame:
    """The runs of a sensitivity store (``root``, e.g. data/sensitivity) together with their
    baselines: the runs of ``baseline_root`` ("" = the committed data/runs, all at the default
    settings) with the same task, level, size, seed and steps. A ``setting`` column says which
    settings each run changed from the defaults (:func:`training_setting`)."""
    changed = load_runs(root)
    if changed.empty:
        raise ValueError(f"no complete run in {root}: run scripts/sensitivity_grid.sh")
    baseline = load_runs(Path(baseline_root) if baseline_root else data_root())
    keys = [*RUN_KEYS, "steps"]
    baseline = baseline.merge(changed[keys].drop_duplicates(), on=keys)
    runs = pd.concat([baseline, changed], ignore_index=True)
    runs["setting"] = [training_setting(row) for row in runs.itertuples()]
    return runs.sort_values([*keys, "setting"]).reset_index(drop=True)


def setting_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run of :func:`setting_runs`: its setting and the events behind claims C1, C2, C5
    (final-layer RankMe: floor, collapse and recovery steps, the ordering, the precursor gap)."""
    table = summary_table(runs).merge(runs[["run", "setting"]], on="run")
    columns = ["task", "level", "size", "seed", "setting", "final_accuracy", "acquisition_step",
               "rankme_initial_value", "rankme_floor_value", "rankme_floor_step", "rankme_recovery_step",
               "rankme_collapsed", "ordered_collapse_recovery_acquisition", "rankme_gap_steps", "rankme_is_precursor"]
    return table[columns]


def setting_claims(table: pd.DataFrame) -> pd.DataFrame:
    """Per setting of :func:`setting_table`: runs, acquired, collapsed, ordered collapse -> recovery ->
    acquisition (of the acquired), RankMe precursors (of the acquired), and MOD's floor."""
    rows = []
    for setting, group in table.groupby("setting", sort=False):
        acquired = group["acquisition_step"].notna()
        mod = group[group["task"] == "mod"]["rankme_floor_value"]
        rows.append({"setting": setting, "runs": len(group), "acquired": int(acquired.sum()),
                     "collapsed": int(group["rankme_collapsed"].fillna(False).astype(bool).sum()),
                     "ordered": int(group["ordered_collapse_recovery_acquisition"].fillna(False).astype(bool).sum()),
                     "rankme_precursors": int(group.loc[acquired, "rankme_is_precursor"].fillna(False).astype(bool).sum()),
                     "mod_floor": float(mod.mean()) if len(mod) else np.nan})
    order = ["default"] + sorted(s for s in table["setting"].unique() if s != "default")
    return pd.DataFrame(rows).set_index("setting").loc[[s for s in order if s in set(table["setting"])]].reset_index()


def setting_by_task(table: pd.DataFrame) -> pd.DataFrame:
    """Per task and setting of :func:`setting_table` (over seeds): runs, runs acquired, and the
    medians of the final layer's RankMe floor, its step, and the acquisition step (of the acquired
    runs). The default setting first within each task."""
    rows = []
    for (task, setting), group in table.groupby(["task", "setting"], sort=False):
        acquisition = pd.to_numeric(group["acquisition_step"], errors="coerce").dropna()
        rows.append({"task": task, "setting": setting, "runs": len(group), "acquired": len(acquisition),
                     "floor": float(group["rankme_floor_value"].astype(float).median()),
                     "floor_step": float(pd.to_numeric(group["rankme_floor_step"], errors="coerce").median()),
                     "acquisition_step": float(acquisition.median()) if len(acquisition) else np.nan})
    out = pd.DataFrame(rows)
    out["_order"] = out["setting"] != "default"
    return out.sort_values(["task", "_order", "setting"]).drop(columns="_order").reset_index(drop=True)


def collapse_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Collapse floor (final layer) per task x size: mean and spread over levels and seeds, with run counts."""
    grouped = summary.groupby(["task", "size"], sort=False)
    table = grouped.agg(runs=("run", "count"),
                        collapsed=("rankme_collapsed", lambda v: int(pd.Series(v).fillna(False).astype(bool).sum())),
                        floor_mean=("rankme_floor_value", "mean"),
                        floor_min=("rankme_floor_value", "min"),
                        floor_max=("rankme_floor_value", "max"),
                        initial_mean=("rankme_initial_value", "mean"))
    return table.reset_index()


def not_acquired_table(summary: pd.DataFrame, metrics: pd.DataFrame, memorised: float = 0.9) -> pd.DataFrame:
    """The task x level x size groups with runs that never acquired the task, and why.

    Per group: runs never acquired (of all runs), the step budget, and the means over those runs
    of the final test accuracy, the final train accuracy (``train_accuracy`` in ``metrics``, on
    ``train_eval_size`` training prompts) and the best constant answer's accuracy (``chance``).
    ``diagnosis``: "memorised" when the mean train accuracy is >= ``memorised`` (the training set
    is fitted, the test set is not: generalisation needs more steps or more data, as in grokking),
    "underfit" otherwise (the training set itself is not fitted: more steps or a larger model).
    """
    missed = summary[summary["acquisition_step"].isna()]
    columns = ["task", "level", "size", "not_acquired", "runs", "steps", "test_accuracy", "train_accuracy",
               "chance", "diagnosis"]
    if missed.empty:
        return pd.DataFrame(columns=columns)
    train = metrics[(metrics["measure"] == "train_accuracy") & metrics["run"].isin(missed["run"])]
    final_train = train.sort_values("step").groupby("run")["value"].last()
    missed = missed.assign(train_accuracy=missed["run"].map(final_train))
    keys = ["task", "level", "size"]
    totals = summary.groupby(keys).size().rename("runs")
    table = missed.groupby(keys).agg(not_acquired=("run", "count"), steps=("steps", "max"),
                                     test_accuracy=("final_accuracy", "mean"),
                                     train_accuracy=("train_accuracy", "mean"), chance=("chance", "mean"))
    table = table.join(totals).reset_index()
    table["diagnosis"] = np.where(table["train_accuracy"] >= memorised, "memorised", "underfit")
    table.loc[table["train_accuracy"].isna(), "diagnosis"] = "no train accuracy"
    return table[columns]


def top_down_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Per task x size: runs, the median Spearman rho of depth vs the step of each layer's RankMe
    minimum (and vs its relative floor), and whether the pair is top-down: median rho_step < 0.

    Runs whose rho is undefined (fewer than two informative layers, tied minima) are left out of
    the medians and counted in ``undefined``.
    """
    rows = []
    for (task, size), group in summary.groupby(["task", "size"], sort=False):
        rho_step = pd.to_numeric(group["top_down_rho_step"], errors="coerce")
        rho_floor = pd.to_numeric(group["top_down_rho_floor"], errors="coerce")
        median = rho_step.median()
        rows.append({"task": task, "size": size, "runs": len(group), "undefined": int(rho_step.isna().sum()),
                     "runs_top_down": int((rho_step < 0).sum()),
                     "median_rho_step": median, "median_rho_floor": rho_floor.median(),
                     "top_down": bool(median < 0) if pd.notna(median) else None})
    return pd.DataFrame(rows)


def probe_table(metrics: pd.DataFrame, runs: pd.DataFrame, threshold: float = 0.5, patience: int = 3) -> pd.DataFrame:
    """Per run: does a linear probe decode the answer before the model outputs it (claim C4)?

    Columns: ``probe_step0`` (best layer's probe accuracy at initialisation: what
    random features already allow), ``probe_acquisition_step`` (the acquisition
    rule applied to the best layer's probe accuracy at each checkpoint),
    ``first_token_acquisition_step`` and ``acquisition_step`` (the model's own,
    first answer token and exact match), the leads in steps
    (model's step - probe's step; positive = the probe is first), and
    ``probe_above_model_share``: among checkpoints where the model's exact-match
    accuracy is < 0.5, the share where the best layer's probe accuracy is higher
    (the paper's comparison) -- and the same against first-token accuracy.
    """
    rows = []
    for run in runs.itertuples():
        m = metrics[metrics["run"] == run.run]
        steps, acc = events.tidy_series(m, "accuracy")
        _, first = events.tidy_series(m, "first_token_accuracy")
        _, _, probe = events.layer_matrix(m, "probe_accuracy")
        best = np.nanmax(probe, axis=0)
        below = acc < 0.5
        p_acq = events.acquisition_step(steps, best, threshold, patience)
        f_acq = events.acquisition_step(steps, first, threshold, patience)
        m_acq = events.acquisition_step(steps, events.chance_corrected(acc, run_chance(run._asdict())),
                                        threshold, patience)
        rows.append({**{k: getattr(run, k) for k in RUN_KEYS}, "run": run.run,
                     "probe_step0": float(best[0]), "probe_final": float(best[-1]),
                     "probe_acquisition_step": p_acq, "first_token_acquisition_step": f_acq,
                     "acquisition_step": m_acq,
                     "lead_vs_exact_match": None if p_acq is None or m_acq is None else m_acq - p_acq,
                     "lead_vs_first_token": None if p_acq is None or f_acq is None else f_acq - p_acq,
                     "probe_above_model_share": float(np.mean(best[below] > acc[below])) if below.any() else np.nan,
                     "probe_above_first_token_share": float(np.mean(best[below] > first[below])) if below.any() else np.nan})
    table = pd.DataFrame(rows)
    for column in ("probe_acquisition_step", "first_token_acquisition_step", "acquisition_step",
                   "lead_vs_exact_match", "lead_vs_first_token"):
        if column in table:
            table[column] = table[column].astype("Int64")
    return table


#: the five measures of the precursor comparison (claim C5), in the paper's order
PRECURSOR_MEASURES = ("rankme", "grad_rank", "grad_cov_rank", "hessian_top", "llc")
#: RankMe's transition measured from its collapse floor onward
#: (:func:`geomcap.events.summarize_run`): does RankMe move again before behaviour does?
RANKME_AFTER_FLOOR = "rankme_after_floor"


def difficulty_class(summary: pd.DataFrame) -> pd.Series:
    """Hard vs easy from the data, per run (claim C6's rule, stated here once).

    * ``hard``: acquired strictly after the final layer's RankMe floor step --
      the model needed the collapse (and more) before it could do the task;
    * ``easy``: acquired at or before the floor step -- behaviour and geometry
      change together;
    * ``not acquired``: never acquired within the run.
    """
    acq = pd.to_numeric(summary["acquisition_step"], errors="coerce")
    floor = pd.to_numeric(summary["rankme_floor_step"], errors="coerce")
    cls = pd.Series("easy", index=summary.index)
    cls[acq > floor] = "hard"
    cls[acq.isna()] = "not acquired"
    return cls


def precursor_table(summary: pd.DataFrame, by: str = "difficulty", measures=PRECURSOR_MEASURES) -> pd.DataFrame:
    """Per measure and group: runs where the measure was recorded and the run acquired the task,
    how many show the measure's transition strictly before acquisition, the rate, and the
    median gap in steps. ``by``: "difficulty" (:func:`difficulty_class`) or "level"."""
    groups = difficulty_class(summary) if by == "difficulty" else summary[by]
    rows = []
    order = {name: i for i, name in enumerate(LEVELS)}  # levels easy -> hard, other groups by name
    ordered_groups = sorted(groups.dropna().unique(), key=lambda g: (order.get(g, len(order)), g))
    for measure in measures:
        column = f"{measure}_is_precursor"
        if column not in summary:
            continue
        for group in ordered_groups:
            sel = summary[(groups == group) & summary["acquisition_step"].notna() & summary[column].notna()]
            gaps = pd.to_numeric(sel[f"{measure}_gap_steps"], errors="coerce").dropna()
            n_pre = int(sel[column].astype(bool).sum())
            rows.append({"measure": measure, by: group, "runs": len(sel), "precursor": n_pre,
                         "rate": n_pre / len(sel) if len(sel) else np.nan,
                         "median_gap_steps": gaps.median() if len(gaps) else np.nan})
    return pd.DataFrame(rows)


def _final_layer_series(metrics: pd.DataFrame, run: str, measure: str) -> pd.Series:
    """One run's ``measure`` at its final layer, indexed by step."""
    m = metrics[(metrics["run"] == run) & (metrics["measure"] == measure)]
    m = m[m["layer"] == m["layer"].max()]
    return m.set_index("step")["value"].sort_index()


def proxy_pairs(runs: pd.DataFrame, small: str, large: str) -> pd.DataFrame:
    """Runs of the same task, level, seed and step count at both presets: one row per pair,
    with columns task, level, seed, steps, run_small, run_large."""
    keys = ["task", "level", "seed", "steps"]
    a = runs[runs["size"] == small][keys + ["run"]].rename(columns={"run": "run_small"})
    b = runs[runs["size"] == large][keys + ["run"]].rename(columns={"run": "run_large"})
    return a.merge(b, on=keys).sort_values(keys).reset_index(drop=True)


def trajectory_correlation(metrics: pd.DataFrame, runs: pd.DataFrame, small: str, large: str,
                           measure: str = "rankme") -> pd.DataFrame:
    """Claim C8: does the small preset's trajectory predict the large one's?

    For every pair of :func:`proxy_pairs` (same task, level, seed and steps, hence the same
    checkpoint schedule), the Spearman and Pearson correlations over checkpoints between the
    final layer's ``measure`` at the two presets. Spearman compares the shapes of the
    trajectories (the presets' widths differ, so their RankMe scales differ).
    """
    rows = []
    for pair in proxy_pairs(runs, small, large).itertuples():
        s = _final_layer_series(metrics, pair.run_small, measure)
        l = _final_layer_series(metrics, pair.run_large, measure)
        common = s.index.intersection(l.index)
        a, b = s[common].to_numpy(float), l[common].to_numpy(float)
        ok = np.isfinite(a) & np.isfinite(b)
        a, b = a[ok], b[ok]
        pearson = float(np.corrcoef(a, b)[0, 1]) if a.size > 1 and np.ptp(a) and np.ptp(b) else np.nan
        rows.append({"task": pair.task, "level": pair.level, "seed": pair.seed, "steps": pair.steps,
                     "checkpoints": int(a.size), "spearman": events.spearman(a, b), "pearson": pearson,
                     "run_small": pair.run_small, "run_large": pair.run_large})
    return pd.DataFrame(rows, columns=["task", "level", "seed", "steps", "checkpoints", "spearman",
                                       "pearson", "run_small", "run_large"])


def timing_concordance(summary: pd.DataFrame, small: str, large: str,
                       timing: str = "rankme_transition_step", by: str = "level") -> pd.DataFrame:
    """Claim C8's limit: does the small preset order tasks in time as the large one does?

    Within each group of ``by`` (the level: tasks of one class) and seed, every pair of
    tasks whose ``timing`` column (a step: the RankMe transition by default, or
    ``acquisition_step``) is known at both presets is *concordant* when the same task comes
    first at both presets, *discordant* when the order reverses, and *tied* when either
    preset puts both at the same step (left out of the rate). Rate = concordant /
    (concordant + discordant), NaN without comparable pairs.
    """
    from itertools import combinations

    keys = ["task", by, "seed", "steps"]
    t_small = summary[summary["size"] == small].set_index(keys)[timing]
    t_large = summary[summary["size"] == large].set_index(keys)[timing]
    both = pd.concat({"small": t_small, "large": t_large}, axis=1, join="inner")
    both = both.apply(pd.to_numeric, errors="coerce").dropna().reset_index()
    rows = []
    for group, sel in both.groupby(by, sort=False):
        counts = {"concordant": 0, "discordant": 0, "tied": 0}
        for _, per_seed in sel.groupby(["seed", "steps"]):
            for (_, i), (_, j) in combinations(per_seed.iterrows(), 2):
                product = np.sign(i["small"] - j["small"]) * np.sign(i["large"] - j["large"])
                counts["tied" if product == 0 else "concordant" if product > 0 else "discordant"] += 1
        compared = counts["concordant"] + counts["discordant"]
        rows.append({by: group, "tasks": sel["task"].nunique(), "pairs": compared + counts["tied"], **counts,
                     "rate": counts["concordant"] / compared if compared else np.nan})
    return pd.DataFrame(rows, columns=[by, "tasks", "pairs", "concordant", "discordant", "tied", "rate"])


# ---------------------------------------------------------------------------------------------
# Paper vs ours: one row per claim of the paper (C1-C8), used by every notebook's closing table
# and by the book's results page (the paper's figures are quoted, ours are computed).

PAPER = {
    "C1": ("RankMe collapses, recovers, then accuracy rises", "144/144 combinations"),
    "C2": ("MOD's collapse floor is ~2.0 at every size", "~2.0"),
    "C3": ("the collapse propagates top-down (task x size pairs)", "28/32 (v4), 32/32 (v1)"),
    "C4": ("a linear probe decodes the answer while the model is < 50%", "yes"),
    "C5": ("only RankMe precedes acquisition on hard tasks", "RankMe 100% (v4), 75-100% (v1); LLC 0/24"),
    "C6": ("a precursor gap only when the task is hard for the model", "gap on hard, none on easy"),
    "C7": ("Pythia-2.8B: RankMe precedes logical deduction", "~49K steps; none on easy benchmarks"),
    "C8": ("a small proxy's RankMe trajectory predicts a larger model's", "rho > 0.92; timing concordance 52-69%"),
}


def claim_row(claim: str, ours: str, value=np.nan) -> dict:
    """One line of a paper-vs-ours table: the claim, the paper's figure, ours (text) and our
    headline number (``value``, for the book's glue)."""
    statement, paper = PAPER[claim]
    return {"claim": claim, "statement": statement, "paper": paper, "ours": ours, "value": value}


def claim_c1(summary: pd.DataFrame) -> dict:
    acquired = int(summary["acquisition_step"].notna().sum())
    ordered = int(summary["ordered_collapse_recovery_acquisition"].fillna(False).astype(bool).sum())
    return claim_row("C1", f"{ordered}/{acquired} acquired runs ordered ({len(summary)} runs)",
                     ordered / acquired if acquired else np.nan)


def claim_c2(summary: pd.DataFrame) -> dict:
    floor = summary.loc[summary["task"] == "mod", "rankme_floor_value"].astype(float)
    if floor.empty:
        return claim_row("C2", "no MOD run selected")
    return claim_row("C2", f"mean floor {floor.mean():.2f} (range {floor.min():.2f}-{floor.max():.2f}, "
                           f"{len(floor)} runs)", float(floor.mean()))


def claim_c3(summary: pd.DataFrame) -> dict:
    pairs = top_down_table(summary)
    decided = pairs["top_down"].dropna() if len(pairs) else pd.Series(dtype=bool)
    if decided.empty:
        return claim_row("C3", f"undefined: no run with two informative layers ({len(summary)} runs)")
    return claim_row("C3", f"{int(decided.sum())}/{len(decided)} task x size pairs with a defined statistic "
                           f"({len(pairs)} pairs)", float(decided.mean()))


def claim_c4(probes: pd.DataFrame) -> dict:
    exact = probes["probe_above_model_share"].dropna()
    first = probes["probe_above_first_token_share"].dropna()
    if exact.empty:
        return claim_row("C4", "no run with a checkpoint below 50%")
    return claim_row("C4", f"probe above the model at {exact.mean():.0%} of sub-50% checkpoints "
                           f"({first.mean():.0%} against first-token accuracy; {len(exact)} runs)",
                     float(exact.mean()))


def claim_c5(summary: pd.DataFrame) -> dict:
    table = precursor_table(summary, by="difficulty", measures=[*PRECURSOR_MEASURES, RANKME_AFTER_FLOOR])
    hard = table[table["difficulty"] == "hard"].set_index("measure") if len(table) else table
    if hard.empty or "rankme" not in hard.index:
        return claim_row("C5", "no acquired hard run")
    parts = [f"{m} {int(hard.loc[m, 'precursor'])}/{int(hard.loc[m, 'runs'])}"
             for m in PRECURSOR_MEASURES if m in hard.index and hard.loc[m, "runs"]]
    text = "precursors among runs the data classes hard: " + ", ".join(parts)
    if RANKME_AFTER_FLOOR in hard.index and hard.loc[RANKME_AFTER_FLOOR, "runs"]:
        row = hard.loc[RANKME_AFTER_FLOOR]
        text += (f"; rankme from its floor onward {int(row['precursor'])}/{int(row['runs'])} "
                 f"(median gap {row['median_gap_steps']:.0f} steps)")
    return claim_row("C5", text, float(hard.loc["rankme", "rate"]))


def claim_c6(summary: pd.DataFrame, measure: str = "rankme") -> dict:
    table = precursor_table(summary, by="level", measures=[measure])
    if table.empty:
        return claim_row("C6", "no acquired run")
    parts = [f"{row.level} {row.precursor}/{row.runs}" for row in table.itertuples() if row.runs]
    rates = table.set_index("level")["rate"]
    gap = rates.get("hard", np.nan) - rates.get("easy", np.nan)
    text = f"{measure} precursor rate by level: " + ", ".join(parts)
    after = precursor_table(summary, by="level", measures=[f"{measure}_after_floor"])
    if len(after) and after["runs"].sum():
        text += "; from its floor onward: " + ", ".join(
            f"{row.level} {row.precursor}/{row.runs} (median gap {row.median_gap_steps:.0f} steps)"
            for row in after.itertuples() if row.runs)
    return claim_row("C6", text, float(gap))


def claim_c8(correlations: pd.DataFrame, concordance: pd.DataFrame | None = None) -> dict:
    rho = correlations["spearman"].dropna() if len(correlations) else pd.Series(dtype=float)
    if rho.empty:
        return claim_row("C8", "no task trained at both presets yet")
    text = f"median Spearman rho {rho.median():.2f} over {len(rho)} pairs ({(rho > 0.92).sum()} above 0.92)"
    if concordance is not None and len(concordance):
        for row in concordance.dropna(subset=["rate"]).itertuples():
            text += f"; timing concordance ({row.level}) {row.rate:.0%} of {row.concordant + row.discordant} pairs"
    return claim_row("C8", text, float(rho.median()))


def paper_vs_ours(rows, glue: bool = True) -> pd.DataFrame:
    """The rows of the ``claim_*`` functions as a table indexed by claim (statement, paper, ours).

    With ``glue`` each row's text and headline number are also stored with myst-nb's
    ``glue`` under ``<claim>_ours`` and ``<claim>_value`` (e.g. ``C1_value``), so that the
    book's prose quotes computed numbers; outside a notebook kernel that is a no-op.
    """
    rows = list(rows)
    if glue:
        from IPython import get_ipython

        if get_ipython() is not None:
            from myst_nb import glue as myst_glue

            for row in rows:
                myst_glue(f"{row['claim']}_ours", row["ours"], display=False)
                myst_glue(f"{row['claim']}_value", row["value"], display=False)
    table = pd.DataFrame(rows, columns=["claim", "statement", "paper", "ours", "value"])
    return table.drop(columns="value").set_index("claim")


def claims_from_store(root="", small: str = "405k", large: str = "1.3m") -> list[dict]:
    """Every algorithmic claim (C1-C6, C8) over all complete runs of a store ("" = the committed
    data/runs), each as a :func:`claim_row`: the book's results page."""
    runs = load_runs(Path(root) if root else data_root())
    summary = summary_table(runs)
    metrics = load_metrics(runs, measures=["accuracy", "first_token_accuracy", "probe_accuracy", "rankme"])
    probes = probe_table(metrics, runs)
    correlations = trajectory_correlation(metrics, runs, small, large)
    concordance = timing_concordance(summary, small, large)
    return [claim_c1(summary), claim_c2(summary), claim_c3(summary), claim_c4(probes), claim_c5(summary),
            claim_c6(summary), claim_c8(correlations, concordance)]


def book_table(table: pd.DataFrame, digits: int = 3, index: bool = False):
    """``table`` as the book shows it: every row and column, whole cells, fitting the text column.

    Whole-number columns print as integers (``200``, not ``200.0``), other numbers
    to ``digits`` significant digits (never in e-notation above 1), missing values (NaN, None, ``<NA>``) as
    "–"; headers and cells may wrap at any character, so a long name does not
    push the table past the column. Returns a pandas ``Styler`` (its HTML is
    the whole table: pandas' display options do not elide it).
    """
    formats = {}
    for column in table.columns:
        values = table[column]
        if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
            continue
        present = pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float)
        whole = len(present) and np.all(np.isfinite(present)) and np.all(present == np.round(present)) \
            and np.all(np.abs(present) < 1e15)
        formats[column] = "{:,.0f}" if whole else partial(_book_number, digits=digits)
    styler = table.style.format(formats, na_rep="–")
    styler = styler.format(lambda v: "–" if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) else v,
                           subset=[c for c in table.columns if c not in formats], na_rep="–")
    if not index:
        styler = styler.hide(axis="index")
    return styler.set_table_styles([
        {"selector": "", "props": "font-size: 0.8em; table-layout: auto; max-width: 100%;"},
        {"selector": "th, td", "props": "white-space: normal; overflow-wrap: anywhere; padding: 0.2em 0.4em;"},
    ])


def _book_number(value, digits: int = 3) -> str:
    if value is None or value is pd.NA or not np.isfinite(value):
        return "–"
    return f"{value:,.0f}" if abs(value) >= 10 ** digits else f"{value:.{digits}g}"
