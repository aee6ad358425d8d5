"""Across runs: load a run store into tables, one row per run, for the notebooks.

    from geomcap import results
    runs = results.load_runs()                            # the committed runs, one row per complete run
    table = results.summary_table(runs)                   # events of every run (acquisition, floor, ...)
    metrics = results.load_metrics(runs, measures=["accuracy", "rankme"])   # tidy, with run columns
    results.verdict_table(results.task_claims_from_store())    # claim | paper | ours | control | verdict | rule

The analysis protocol's rules across runs live here: difficulty from behaviour
(:func:`difficulty_class`), both readings of "precursor" (:func:`precursor_table`,
:func:`timing_prediction`), intervals over settings (:func:`setting_bootstrap`),
C4's baselines and control task (:func:`probe_table`, :func:`selectivity_table`),
the negative controls (:func:`load_arms`), and one verdict per claim
(``claim_c1`` .. ``claim_c8``), each with the rule that chose it. The paper's
figures come from :mod:`geomcap.paper`.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import pickle
from dataclasses import asdict
from functools import lru_cache, partial
from pathlib import Path

import numpy as np
import pandas as pd

from geomcap import events, measures, paper, store
from geomcap.parameters import ParameterError, check_value
from geomcap.tasks import LEVELS, chance_accuracy, make_task
from geomcap.train import DEFAULT_LEVEL_STEPS_TEXT, MEASUREMENT_ONLY_FIELDS

RUN_KEYS = ("task", "level", "size", "seed")


def load_runs(root=None, complete_only: bool = True, one_per_setting: bool = True, **filters) -> pd.DataFrame:
    """One row per run directory under ``root``: its config and path. ``root`` None: the committed
    runs (:func:`geomcap.store.committed_data` ``("runs")``).

    ``one_per_setting``: runs that trained the same model and differ only in what they measured
    (:data:`geomcap.train.MEASUREMENT_ONLY_FIELDS`, e.g. the grid's plain run of a seed and its
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
    runs whose configs agree on every field but :data:`geomcap.train.MEASUREMENT_ONLY_FIELDS`, the
    one with the most measures is kept; among those, one with a ``costly_window`` (it records the
    costly measures at more checkpoints), then the smallest ``costly_every``, then the first run id.
    Their shared metrics are equal by construction, so dropping the others loses nothing, and a seed
    is not counted twice."""
    if runs.empty:
        return runs
    setting_columns = [c for c in runs.columns if c not in ("run", "path", "complete", *MEASUREMENT_ONLY_FIELDS)]
    # dicts (task_params) and lists are not hashable; their JSON text is, and absent fields (NaN) read as null
    setting = runs[setting_columns].apply(
        lambda row: json.dumps([None if _is_missing(v) else v for v in row], sort_keys=True, default=str), axis=1)
    n_measures = runs.get("measures", pd.Series(0, index=runs.index)).apply(
        lambda m: len(m) if isinstance(m, (list, tuple)) else 0)
    windowed = runs.get("costly_window", pd.Series(None, index=runs.index)).apply(lambda w: not _is_missing(w))
    every = pd.to_numeric(runs.get("costly_every", pd.Series(np.nan, index=runs.index)), errors="coerce")
    order = pd.DataFrame({"setting": setting, "n_measures": n_measures, "windowed": windowed,
                          "every": every.fillna(np.inf), "run": runs["run"]})
    order = order.sort_values(["setting", "n_measures", "windowed", "every", "run"],
                              ascending=[True, False, False, True, True])
    return runs.loc[sorted(order.drop_duplicates("setting").index)]


def _is_missing(value) -> bool:
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


def run_index(root=None) -> pd.DataFrame:
    """One row per complete run (every one that trained, so a setting run twice is listed twice):
    task, level, size, seed, steps, measures, wall time and throughput; ``trained_steps`` (the step a run
    stopped at after acquisition, else ``steps``), its number of checkpoints, and ``geometry_share``
    (per-checkpoint geometry seconds / training seconds)."""
    runs = load_runs(root, one_per_setting=False)
    rows = []
    for row in runs.itertuples():
        status = store.read_status(row.path) or {}
        wall = sum(status.get(k, 0.0) for k in ("train_s", "eval_s", "costly_s"))
        rows.append({"run": row.run, **{k: getattr(row, k) for k in (*RUN_KEYS, "steps")},
                     "measures": ",".join(row.measures), "wall_s": round(wall, 1),
                     "ms_per_step": status.get("ms_per_step"),
                     "trained_steps": status.get("stopped_at") or row.steps,
                     "checkpoints": status.get("checkpoints"), "geometry_share": status.get("geometry_share")})
    return pd.DataFrame(rows)


def geometry_share_text(index: pd.DataFrame, limit: float, dense_steps: int) -> str:
    """What :func:`run_index`'s ``geometry_share`` says against ``limit`` (e.g. 0.10): median and range
    over the runs, how many exceed the limit and how long those trained, and the same over the rest
    (``dense_steps``: the runs' checkpoint at every step up to there, ``TrainConfig.dense_steps``)."""
    index = index.dropna(subset=["geometry_share"])
    if index.empty:
        return "No committed run records its geometry share."
    share = index["geometry_share"]
    over = index[share > limit]
    text = (f"On the {len(index)} committed runs the per-checkpoint geometry took {share.median():.1%} of "
            f"the training time (median; {share.min():.1%} to {share.max():.1%}). ")
    if over.empty:
        return text + f"None exceeds the target of {limit:.0%}."
    longer = index[index["trained_steps"] > over["trained_steps"].max()]
    stopped = "all stopped after acquisition" if (over["trained_steps"] < over["steps"]).all() else "not all stopped"
    text += (f"{len(over)} runs exceed the target of {limit:.0%}; each of them trained at most "
             f"{int(over['trained_steps'].max())} steps ({stopped}), where the checkpoint at every one of the "
             f"first {dense_steps} steps weighs more against the short training. ")
    if len(longer):
        text += (f"The {len(longer)} runs that trained longer stay at or below "
                 f"{longer['geometry_share'].max():.1%} (median {longer['geometry_share'].median():.1%}).")
    return text


#: the columns of :func:`costly_health_table`
COSTLY_HEALTH_COLUMNS = [*RUN_KEYS, "run", "window", "estimates", "llc_not_flat", "llc_median_drift", "hessian_max_residual",
                         "hessian_median_matvecs", "train_s", "costly_s", "cost_ratio"]


def costly_health_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per run of ``runs`` that recorded the costly measures: how many estimates, how healthy, at what cost.

    Columns :data:`COSTLY_HEALTH_COLUMNS`: ``estimates`` (checkpoints with an LLC estimate);
    ``llc_not_flat`` (estimates whose chains had not levelled off: ``|llc_trace_drift|`` above
    :data:`geomcap.dynamics.LLC_DRIFT_TOLERANCE`) and ``llc_median_drift`` (of ``|drift|``);
    ``hessian_max_residual`` (the worst relative Lanczos residual ``||Hv - lambda v|| / lambda``)
    and ``hessian_median_matvecs`` (Hessian-vector products per estimate); ``train_s`` and
    ``costly_s`` (seconds, from status.json) and ``cost_ratio = costly_s / train_s``; ``window``: the
    run's ``costly_window`` as "first-last" (steps), "" without one.
    """
    from geomcap.dynamics import LLC_DRIFT_TOLERANCE

    rows = []
    for row in runs.itertuples():
        if not getattr(row, "measures", None) or not isinstance(row.measures, (list, tuple)):
            continue
        m = store.read_metrics(row.path)
        value = lambda name: m.loc[m["measure"] == name, "value"].astype(float)  # noqa: E731
        drift = value("llc_trace_drift").abs()
        status = store.read_status(row.path) or {}
        train_s, costly_s = status.get("train_s", np.nan), status.get("costly_s", np.nan)
        rows.append({**{k: getattr(row, k) for k in RUN_KEYS}, "run": row.run, "window": _window_text(row),
                     "estimates": int(value("llc").notna().sum()),
                     "llc_not_flat": int((drift > LLC_DRIFT_TOLERANCE).sum()),
                     "llc_median_drift": drift.median(), "hessian_max_residual": value("hessian_residual").max(),
                     "hessian_median_matvecs": value("hessian_matvecs").median(), "train_s": train_s,
                     "costly_s": costly_s, "cost_ratio": costly_s / train_s if train_s else np.nan})
    return pd.DataFrame(rows, columns=COSTLY_HEALTH_COLUMNS)


def _window_text(row) -> str:
    window = getattr(row, "costly_window", None)
    return "" if _is_missing(window) else f"{int(window[0])}-{int(window[1])}"


def costly_resolution_text(summary: pd.DataFrame, runs: pd.DataFrame, measures, costly_every: int,
                           dense_steps: int) -> str:
    """What the costly measures' recording resolution lets one tell, and what the windowed runs say.

    ``summary``: :func:`summary_table` rows (``run``, ``{m}_transition_step``,
    ``{m}_gap_checkpoints``, ``test_loss_gap_checkpoints``: the informative reading); ``runs``: :func:`load_runs`
    rows (``run``, ``costly_window``). A run with a ``costly_window`` records the costly measures at
    every checkpoint of that step range, so a transition read inside it is resolved to one checkpoint.
    For each measure the sentence gives, over the windowed runs (read where the collapse is over),
    how many transitions fall inside the window, and the leads over acquisition and over the test
    loss's transition, in checkpoints (positive = the measure comes first).
    """
    coarse = (f"past step {dense_steps}, the costly measures are taken at every {costly_every}th checkpoint, "
              f"so a lead or lag of fewer than {costly_every} checkpoints cannot be told from synchrony")
    windows = runs.set_index("run").get("costly_window", pd.Series(dtype=object))
    windowed = [r for r in summary["run"] if r in windows.index and not _is_missing(windows[r])]
    if not windowed:
        return f"A measure can lead only at the resolution it was recorded: {coarse}."
    rows = summary.set_index("run").loc[windowed]
    spans = [f"{first}-{last}" for first, last in sorted({(int(windows[r][0]), int(windows[r][1])) for r in windowed})]
    parts = []
    for m in measures:
        if f"{m}_transition_step" not in rows:
            continue
        step = pd.to_numeric(rows[f"{m}_transition_step"], errors="coerce")
        if step.isna().all():
            continue
        inside = sum(windows[r][0] <= step[r] <= windows[r][1] for r in windowed if pd.notna(step[r]))
        lead = pd.to_numeric(rows[f"{m}_gap_checkpoints"], errors="coerce")
        over_loss = lead - pd.to_numeric(rows["test_loss_gap_checkpoints"], errors="coerce")
        listed = lambda x: ", ".join(f"{v:.0f}" for v in x.dropna()) + f" (median {x.median():.0f})"  # noqa: E731
        parts.append(f"{m}'s transition falls inside the window in {inside} of {int(step.notna().sum())} and leads "
                     f"acquisition by {listed(lead)} checkpoints and the test loss by {listed(over_loss)}")
    if not parts:
        return (f"A measure can lead only at the resolution it was recorded: {coarse}; {len(windowed)} run(s) also "
                "record them at every checkpoint of a window around acquisition, but none records these measures.")
    return (f"A measure can lead only at the resolution it was recorded: {coarse}, except inside a window around "
            f"acquisition, where {len(windowed)} run(s) record them at every checkpoint (`costly_window`, steps "
            f"{', '.join(spans)}). On those runs, read where the collapse is over (positive = the measure comes "
            "first): " + "; ".join(parts) + ".")


def summary_row(metrics: pd.DataFrame, **kwargs) -> dict:
    """A flat dict of :func:`geomcap.events.summarize_run` for one run's metrics.

    The ``rankme_*`` and ``top_down_*`` columns describe the collapse of the
    measure selected with ``measure=`` (default: the primary ``rankme``).
    ``reading_start``: where the informative reading starts. Per series ``<m>`` of
    :data:`geomcap.events.PRECURSOR_MEASURES` present, the informative reading (b):
    ``<m>_transition_step``, ``<m>_gap_steps``, ``<m>_gap_checkpoints``, ``<m>_gap_share``,
    ``<m>_is_precursor`` (leads acquisition), ``<m>_leads_test_loss`` and ``<m>_informative``
    (both); and the paper's reading (a), from the first checkpoint, as ``paper_<m>_transition_step``,
    ``paper_<m>_gap_checkpoints``, ``paper_<m>_gap_share``, ``paper_<m>_is_precursor``,
    ``paper_<m>_leads_test_loss``.
    """
    s = events.summarize_run(metrics, **kwargs)
    row = {"acquisition_step": s["acquisition_step"], "final_accuracy": s["final_accuracy"],
           "last_step": s["last_step"], "checkpoints": s["checkpoints"], "final_layer": s["final_layer"],
           "plateau_fraction": s["plateau_fraction"], "reading_start": s["reading_start"],
           "ordered_collapse_recovery_acquisition": s["order_collapse_recovery_acquisition"]}
    c = s["collapse"] or {}
    for key in ("initial_value", "peak_value", "peak_step", "onset_step", "floor_value", "floor_step",
                "recovery_step", "relative_drop", "collapsed", "floor_certain_step", "recovery_certain_step"):
        row[f"rankme_{key}"] = c.get(key)
    energy = s["mean_energy"] or {}
    for key in ("initial", "at_floor", "last", "residual_at_floor"):
        row[f"mean_energy_share_{key}"] = energy.get(key)
    for prefix, reading in (("", "precursors"), ("paper_", "paper_precursors")):
        # every series the run recorded gets its columns, empty where the reading is undefined (a collapse
        # that never recovered has no informative reading)
        for measure in s["paper_precursors"]:
            p = s[reading].get(measure) or dict.fromkeys(("measure_step", "gap_steps", "gap_checkpoints",
                                                           "gap_share", "is_precursor", "leads_test_loss",
                                                           "informative"))
            row[f"{prefix}{measure}_transition_step"] = p["measure_step"]
            row[f"{prefix}{measure}_gap_checkpoints"] = p["gap_checkpoints"]
            row[f"{prefix}{measure}_gap_share"] = p["gap_share"]
            row[f"{prefix}{measure}_is_precursor"] = p["is_precursor"]
            row[f"{prefix}{measure}_leads_test_loss"] = p["leads_test_loss"]
            if not prefix:
                row[f"{measure}_gap_steps"] = p["gap_steps"]
                row[f"{measure}_informative"] = p["informative"]
    td = s["top_down"] or {}
    row["top_down_rho_step"] = td.get("rho_step")
    row["top_down_rho_floor"] = td.get("rho_floor")
    row["is_top_down"] = td.get("is_top_down")
    row["top_down_layers"] = len(td.get("layers", []))
    row["top_down_residual"] = td.get("residual_measure") is not None if td else None
    row["top_down_rho_step_post_ln"] = (td.get("post_ln") or {}).get("rho_step")
    steps = np.asarray(td.get("collapse_step", []), dtype=float)
    row["top_down_half_drop_median"] = float(np.median(steps)) if steps.size else None
    return row


@lru_cache(maxsize=None)
def chance_for(task: str, level: str, seed: int, n_train: int, n_test: int, params: tuple | None = None) -> float:
    """Accuracy of the best constant answer on a run's test set (:func:`geomcap.tasks.chance_accuracy`).

    ``params``: the run's level parameters as sorted (key, value) pairs (None: ``LEVEL_TABLE``'s row).
    """
    data = make_task(task, level, seed=seed, n_train=n_train, n_test=n_test, params=_params(params))
    return chance_accuracy(data.test_answers)


@lru_cache(maxsize=None)
def majority_first_token_for(task: str, level: str, seed: int, n_train: int, n_test: int,
                             params: tuple | None = None) -> float:
    """Share of the test answers whose first token is the most common first token (the majority-class
    rate a probe of the first answer token must beat); ``params`` as in :func:`chance_for`."""
    first = make_task(task, level, seed=seed, n_train=n_train, n_test=n_test, params=_params(params)).test_answers[:, 0]
    return float(np.bincount(np.asarray(first)).max() / len(first))


def _params(items: tuple | None) -> dict | None:
    return None if items is None else dict(items)


def _task_args(config: dict) -> tuple:
    """(task, level, seed, n_train, n_test, level parameters as sorted pairs) of a run's config. A
    config without ``task_params`` (or NaN there, in a table of runs) is a first-grid run: its levels
    are ``LEGACY_LEVEL_TABLE``'s, as :meth:`geomcap.train.TrainConfig.from_dict` reads it."""
    from geomcap.tasks import level_params

    params = config.get("task_params")
    if not isinstance(params, dict):
        params = level_params(config["task"], config["level"], legacy=True)
    return (config["task"], config["level"], int(config["seed"]), *_task_sizes(config),
            tuple(sorted(params.items())))


def _task_sizes(config: dict) -> tuple[int, int]:
    """n_train, n_test of a run's config; :class:`geomcap.train.TrainConfig`'s defaults when the config
    holds only task, level, size, seed and steps."""
    from dataclasses import fields

    from geomcap.train import TrainConfig

    defaults = {f.name: f.default for f in fields(TrainConfig)}

    def get(key):
        value = config.get(key)
        return int(defaults[key] if value is None or (isinstance(value, float) and np.isnan(value)) else value)

    return get("n_train"), get("n_test")


def run_chance(config: dict) -> float:
    """The best constant answer's accuracy for a run's config (any mapping with task, level, seed;
    n_train and n_test default to :class:`geomcap.train.TrainConfig`'s)."""
    # the answer order does not enter: reversing every answer's digits is a bijection on answers,
    # so the most common answer is as common either way
    return chance_for(*_task_args(config))


def run_majority_rate(config: dict) -> float:
    """The majority-class rate of the first answer token on a run's test set (C4's baseline)."""
    return majority_first_token_for(*_task_args(config))


@lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    """SHA-1 of every module of the package and of numpy's and pandas' versions: a cached summary is reused
    only by the code that made it."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha1(f"numpy {np.__version__} pandas {pd.__version__}".encode())
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _run_summary(run, kwargs: dict, cache: Path | None) -> dict:
    """One run's row of :func:`summary_table`, from ``cache`` when this code already summarised these exact
    files with these arguments (the key hashes the package's code, the run's config, metrics and status)."""
    path = Path(run.path)
    key = None
    if cache is not None:
        digest = hashlib.sha1(_code_fingerprint().encode())
        digest.update(repr(sorted(kwargs.items())).encode())
        for name in ("config.json", store.METRICS_FILE, "status.json"):
            digest.update(name.encode() + b"\0" + ((path / name).read_bytes() if (path / name).exists() else b""))
        key = cache / f"{digest.hexdigest()}.pkl"
        if key.exists():
            try:
                return pickle.loads(key.read_bytes())
            except Exception:  # a truncated or foreign file: recompute and overwrite it
                pass
    status = store.read_status(path) or {}
    chance = status["chance_accuracy"] if "chance_accuracy" in status else run_chance(run._asdict())
    row = {**{k: getattr(run, k) for k in (*RUN_KEYS, "steps", "run")}, "chance": chance,
           "stopped_at": status.get("stopped_at"),
           **summary_row(store.read_metrics(path), chance=chance, **kwargs)}
    if key is not None:
        try:
            key.parent.mkdir(parents=True, exist_ok=True)
            store.atomic_write_bytes(key, pickle.dumps(row))
        except OSError:  # a read-only cache only costs the recomputation
            pass
    return row


def summary_cache() -> Path | None:
    """Where :func:`summary_table` keeps the rows it computed: ``$GEOMCAP_SUMMARY_CACHE``, else
    ``<user cache>/geomcap/summaries`` (:func:`geomcap.store.user_root`); ``GEOMCAP_SUMMARY_CACHE=off``
    turns it off. Every notebook reads the same runs, so the book's build summarises each run once."""
    setting = os.environ.get("GEOMCAP_SUMMARY_CACHE", "")
    if setting.lower() == "off":
        return None
    return Path(setting) if setting else store.user_root("summaries")


def summary_table(runs: pd.DataFrame, **kwargs) -> pd.DataFrame:
    """One row per run: its task, level, size, seed, steps (the budget), ``stopped_at`` (when the run
    stopped early, else missing) and the events of :func:`summary_row` (acquisition on chance-corrected
    accuracy, see :func:`geomcap.events.summarize_run`), with its difficulty class
    (:func:`difficulty_class`). Rows already computed by the same code from the same files are read
    from :func:`summary_cache`."""
    cache = summary_cache()
    rows = [_run_summary(run, kwargs, cache) for run in runs.itertuples()]
    table = pd.DataFrame(rows)
    if not table.empty:
        step_columns = [c for c in table.columns
                        if (c.endswith("_step") or c.endswith("_steps") or c == "stopped_at")
                        and not c.startswith("top_down_rho")]
        for column in step_columns:
            table[column] = pd.to_numeric(table[column], errors="coerce").astype("Int64")
        table["difficulty"] = difficulty_class(table)
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


RANKME_VARIANTS = measures.RANKME_VARIANTS


def _section_selection(tasks, levels, sizes, seeds) -> tuple[list, list, list, list | str]:
    """A notebook's tasks, levels, sizes and seeds, validated (ParameterError naming the parameter)."""
    from geomcap.models import ALL_PRESETS
    from geomcap.tasks import TASKS

    tasks = check_choices("tasks", tasks, TASKS)
    levels = check_choices("levels", levels, LEVELS)
    sizes = check_choices("sizes", sizes, tuple(ALL_PRESETS))
    if isinstance(seeds, str) and seeds != "all":
        raise ParameterError(f"parameter seeds: expected an int, a list of ints or 'all', got {seeds!r}")
    if not isinstance(seeds, str):
        seeds = [seeds] if isinstance(seeds, (int, np.integer)) else list(seeds)
        for seed in seeds:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
                raise ParameterError(f"parameter seeds: {seed!r} is not a non-negative integer")
    return tasks, levels, sizes, seeds


def section_grid(tasks="all", levels="all", sizes=("405k",), seeds=(0,), steps=None) -> list:
    """The runs a notebook's selection asks for, as :class:`geomcap.train.TrainConfig` s (what its recompute
    cell trains with :func:`geomcap.sweep.train_missing`).

    tasks, levels, sizes, seeds as in :func:`section_runs`, seeds explicit; ``steps``: an int, or per level
    as ``"easy:2000,medium:4000,hard:8000"`` (None: :data:`geomcap.train.DEFAULT_LEVEL_STEPS_TEXT`). Bad values
    raise ValueError naming the parameter, before anything is trained.
    """
    from geomcap.sweep import grid, parse_steps

    tasks, levels, sizes, seeds = _section_selection(tasks, levels, sizes, seeds)
    if seeds == "all":
        raise ParameterError("parameter seeds: give explicit seeds with recompute=True")
    steps_by_level = parse_steps(check_value("steps", DEFAULT_LEVEL_STEPS_TEXT if steps is None else steps, "steps"))
    return grid(tasks=tasks, levels=levels, sizes=sizes, seeds=seeds, steps=steps_by_level)


def section_stores(root="", recompute: bool = False) -> list[Path]:
    """The run stores a notebook reads: ``root``, or ("") the committed runs
    (:func:`geomcap.store.committed_data` ``("runs")``) followed, with ``recompute``, by the user store
    (:func:`geomcap.store.user_root`: ``$GEOMCAP_RUNS``, else ``~/.cache/geomcap/runs``), where the recompute
    cell trains: never into the committed ``data/``. The last store is the one runs are trained into."""
    if not isinstance(recompute, bool):
        raise ParameterError(f"parameter recompute: must be True or False, got {recompute!r}")
    if root:
        return [Path(root)]
    return [store.committed_data("runs")] + ([store.user_root()] if recompute else [])


def section_runs(tasks="all", levels="all", sizes=("405k",), seeds="all", root="", recompute=False,
                 steps=None) -> pd.DataFrame:
    """Validate a notebook's parameters and return its runs (one row per complete run). Trains nothing.

    tasks, levels, sizes: a name, a list of names, or "all"; seeds: an int, a list of ints, or "all"
    (every seed in the store). The runs are read from :func:`section_stores` (``root`` "" = the committed
    store). With ``recompute`` the runs returned are exactly those of :func:`section_grid` (its steps, its
    settings), from either store; the notebook's recompute cell trains the missing ones first
    (:func:`geomcap.sweep.train_missing`). Bad values raise ValueError naming the parameter.
    """
    tasks, levels, sizes, seeds = _section_selection(tasks, levels, sizes, seeds)
    roots = section_stores(root, recompute)
    if not roots[0].exists():
        raise ParameterError(f"parameter root: {roots[0]} does not exist")
    selected = [load_runs(r, task=tasks, level=levels, size=sizes, seed=None if seeds == "all" else seeds)
                for r in roots if r.exists()]
    runs = pd.concat([r for r in selected if not r.empty] or [selected[0]], ignore_index=True)
    where = " and ".join(str(r) for r in roots)
    if recompute:  # exactly the grid's runs (its steps, its settings)
        wanted = {store.config_hash(c.to_dict()) for c in section_grid(tasks, levels, sizes, seeds, steps)}
        runs = runs[runs["run"].isin(wanted)] if not runs.empty else runs
        missing = len(wanted) - runs["run"].nunique() if not runs.empty else len(wanted)
        if missing:
            raise ValueError(f"{missing} of the {len(wanted)} runs asked for are not in {where}: train them first "
                             "(the notebook's recompute cell: geomcap.sweep.train_missing)")
    if len(selected) > 1 and not runs.empty:  # a run in both stores: the committed one
        runs = runs.drop_duplicates("run").sort_values(list(RUN_KEYS)).reset_index(drop=True)
    if runs.empty:
        raise ValueError(f"no complete run in {where} for tasks={tasks}, levels={levels}, sizes={sizes}, "
                         f"seeds={seeds}: pass recompute=True to train them (see data/README.md)")
    return runs


def sensitivity_table(runs: pd.DataFrame, measures=RANKME_VARIANTS) -> pd.DataFrame:
    """Claims C1/C3 under each RankMe variant: per variant, runs, collapsed runs, runs ordered
    floor < recovery <= acquisition (of the acquired runs), mean floor and relative drop, runs
    with a defined and negative top-down statistic, and the median share of the mean direction in the
    final layer's energy at the variant's floor (NaN for runs that did not record it)."""
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
                     "top_down_defined": int(rho.notna().sum()), "top_down": int((rho < 0).sum()),
                     "median_mean_energy_share_at_floor": pd.to_numeric(
                         table.get("mean_energy_share_at_floor", pd.Series(dtype=float)), errors="coerce").median()})
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
    baselines: the runs of ``baseline_root`` ("" = the committed first grid, data/runs-v1, made under
    the protocol and levels of the committed sensitivity runs, all at the default settings) with the
    same task, level, size, seed and steps. A ``setting`` column says which settings each run changed
    from the defaults (:func:`training_setting`)."""
    changed = load_runs(root)
    if changed.empty:
        raise ValueError(f"no complete run in {root}: run scripts/sensitivity_grid.sh")
    baseline = load_runs(Path(baseline_root) if baseline_root else store.committed_data("runs-v1"))
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
    """Per task x size: runs, the median Spearman rho of depth vs each layer's collapse step (on the
    pre-LayerNorm residual streams; :func:`geomcap.events.top_down`) and vs its relative floor, the
    same median with the post-LayerNorm output as the last layer (``median_rho_step_post_ln``), and
    whether the pair is top-down: median rho_step < 0.

    Runs whose rho is undefined (fewer than four informative layers, tied collapse steps) are left out
    of the medians and counted in ``undefined``.
    """
    rows = []
    for (task, size), group in summary.groupby(["task", "size"], sort=False):
        rho_step = pd.to_numeric(group["top_down_rho_step"], errors="coerce")
        rho_floor = pd.to_numeric(group["top_down_rho_floor"], errors="coerce")
        median = rho_step.median()
        rows.append({"task": task, "size": size, "runs": len(group), "undefined": int(rho_step.isna().sum()),
                     "runs_top_down": int((rho_step < 0).sum()),
                     "median_rho_step": median, "median_rho_floor": rho_floor.median(),
                     "median_rho_step_post_ln": pd.to_numeric(group.get("top_down_rho_step_post_ln", pd.Series(dtype=float)),
                                                              errors="coerce").median(),
                     "top_down": bool(median < 0) if pd.notna(median) else None})
    return pd.DataFrame(rows)


#: C3's statistic on RankMe and on two baselines: centred RankMe (the mean direction taken out) and the share
#: of the energy outside the mean direction, ``1 - mean_energy_share`` (it falls as the mean takes over)
TOP_DOWN_SERIES = ("rankme", "rankme_centred", "mean_energy_outside")
_OUTSIDE = "mean_energy_outside"


def top_down_by_series(metrics: pd.DataFrame, runs: pd.DataFrame, series=TOP_DOWN_SERIES) -> pd.DataFrame:
    """C3's statistic (:func:`geomcap.events.top_down`, as :func:`geomcap.events.summarize_run` reads it:
    pre-LayerNorm residual streams, post-LayerNorm beside) on each of ``series`` of each run.

    ``series``: per-layer measures with a ``<measure>_residual`` beside them, and ``"mean_energy_outside"``:
    ``1 - mean_energy_share`` (and ``1 - mean_energy_share_residual``), without layer 0, the embedding at
    the answer position, which is the mean direction itself (its share is 1 up to rounding).

    Parameters
    ----------
    metrics : DataFrame
        Tidy metrics with a ``run`` column (:func:`load_metrics`) holding ``accuracy`` and the series
        (and their ``_residual``).
    runs : DataFrame
        One row per run: task, level, size, seed, run.

    Returns
    -------
    DataFrame
        One row per run and series present: the run's keys, ``series``, ``layers`` (informative layers),
        ``rho_step`` (Spearman of depth vs each layer's half-drop step; < 0: top-down), ``rho_floor``,
        ``rho_step_post_ln``, ``is_top_down`` (None when undefined), ``collapse_layers`` (the informative
        layers' depths, 0 = embeddings) and ``collapse_steps`` (their half-drop steps; float steps), ``first_step`` and ``last_step`` (the
        earliest and latest of them), ``spread_steps`` (last - first) and ``median_gap_steps`` (median
        distance between adjacent informative layers' steps).
    """
    rows = []
    for run in runs.itertuples():
        m = metrics[metrics["run"] == run.run][["step", "layer", "measure", "value"]]
        for name in series:
            if name == _OUTSIDE:
                share = m[m["measure"].isin(["mean_energy_share", "mean_energy_share_residual"]) & (m["layer"] != 0)]
                own = share.assign(value=1.0 - share["value"],
                                   measure=share["measure"].str.replace("mean_energy_share", _OUTSIDE))
            else:
                own = m[m["measure"].isin([name, f"{name}_residual"])]
            if not (own["measure"] == name).any():
                continue
            s = events.summarize_run(pd.concat([m[m["measure"] == "accuracy"], own]), measure=name)
            td = s["top_down"]
            when = np.asarray(td["collapse_step"], dtype=float)
            rows.append({**{k: getattr(run, k) for k in RUN_KEYS}, "run": run.run, "series": name,
                         "layers": len(td["layers"]), "rho_step": td["rho_step"], "rho_floor": td["rho_floor"],
                         "rho_step_post_ln": td["post_ln"]["rho_step"], "is_top_down": td["is_top_down"],
                         "collapse_layers": list(td["layers"]), "collapse_steps": when.round(2).tolist(),
                         "first_step": float(when.min()) if when.size else np.nan,
                         "last_step": float(when.max()) if when.size else np.nan,
                         "spread_steps": float(np.ptp(when)) if when.size else np.nan,
                         "median_gap_steps": float(np.median(np.abs(np.diff(when)))) if when.size > 1 else np.nan})
    return pd.DataFrame(rows, columns=[*RUN_KEYS, "run", "series", "layers", "rho_step", "rho_floor",
                                       "rho_step_post_ln", "is_top_down", "collapse_layers", "collapse_steps", "first_step",
                                       "last_step", "spread_steps", "median_gap_steps"])


#: C4: a probe "decodes the answer" when it beats both baselines by this margin (about 1.5 standard
#: errors of a probe scored on 256 prompts near 0.5)
PROBE_MARGIN = 0.05


def probe_table(metrics: pd.DataFrame, runs: pd.DataFrame, threshold: float = 0.5, patience: int = 3,
                margin: float = PROBE_MARGIN) -> pd.DataFrame:
    """Per run: does a linear probe decode the answer before the model outputs it (claim C4)?

    Columns: ``probe_step0`` (best layer's probe accuracy at initialisation: what
    random features already allow), ``probe_acquisition_step`` (the acquisition
    rule applied to the best layer's probe accuracy at each checkpoint),
    ``first_token_acquisition_step`` and ``acquisition_step`` (the model's own,
    first answer token and exact match), the leads in steps
    (model's step - probe's step; positive = the probe is first),
    ``majority_rate`` (share of the test answers whose first token is the most
    common one: what a constant guess of the first token scores), and, among
    the checkpoints where the model's exact-match accuracy is < 0.5
    (``checkpoints_below``): ``probe_above_model_share`` (probe > exact match,
    the paper's comparison), ``probe_above_first_token_share`` (probe > the
    model's first-token accuracy) and ``probe_above_baselines_share`` (probe >
    max(first-token accuracy, majority rate) + ``margin``: the protocol's
    comparison); ``c4_holds``: that share is at least one half (None without
    such checkpoints).
    """
    rows = []
    for run in runs.itertuples():
        m = metrics[metrics["run"] == run.run]
        steps, acc = events.tidy_series(m, "accuracy")
        _, first = events.tidy_series(m, "first_token_accuracy")
        _, _, probe = events.layer_matrix(m, "probe_accuracy")
        best = np.nanmax(probe, axis=0)
        below = acc < 0.5
        majority = run_majority_rate(run._asdict())
        baseline = np.maximum(first, majority) + margin
        p_acq = events.acquisition_step(steps, best, threshold, patience)
        f_acq = events.acquisition_step(steps, first, threshold, patience)
        m_acq = events.acquisition_step(steps, events.chance_corrected(acc, run_chance(run._asdict())),
                                        threshold, patience)
        share = lambda other: float(np.mean(best[below] > other[below])) if below.any() else np.nan  # noqa: E731
        above = share(baseline)
        rows.append({**{k: getattr(run, k) for k in RUN_KEYS}, "run": run.run,
                     "probe_step0": float(best[0]), "probe_final": float(best[-1]),
                     "probe_acquisition_step": p_acq, "first_token_acquisition_step": f_acq,
                     "acquisition_step": m_acq,
                     "lead_vs_exact_match": None if p_acq is None or m_acq is None else m_acq - p_acq,
                     "lead_vs_first_token": None if p_acq is None or f_acq is None else f_acq - p_acq,
                     "majority_rate": majority, "checkpoints_below": int(below.sum()),
                     "probe_above_model_share": share(acc), "probe_above_first_token_share": share(first),
                     "probe_above_baselines_share": above,
                     "c4_holds": None if np.isnan(above) else bool(above >= 0.5)})
    table = pd.DataFrame(rows)
    for column in ("probe_acquisition_step", "first_token_acquisition_step", "acquisition_step",
                   "lead_vs_exact_match", "lead_vs_first_token"):
        if column in table:
            table[column] = table[column].astype("Int64")
    return table


def probe_by_task(probes: pd.DataFrame) -> pd.DataFrame:
    """Claim C4 per task from :func:`probe_table`: runs with checkpoints below 50%, runs where C4 holds
    against both baselines, and the mean shares of sub-50% checkpoints where the probe beats the model's
    exact match, its first-token accuracy, and both baselines; the mean majority rate."""
    rows = []
    for task, group in probes.groupby("task", sort=False):
        holds = group["c4_holds"].dropna().astype(bool)
        rows.append({"task": task, "runs": len(holds), "c4_holds": int(holds.sum()),
                     "rate": float(holds.mean()) if len(holds) else np.nan,
                     "above_exact_match": group["probe_above_model_share"].mean(),
                     "above_first_token": group["probe_above_first_token_share"].mean(),
                     "above_baselines": group["probe_above_baselines_share"].mean(),
                     "majority_rate": group["majority_rate"].mean()})
    return pd.DataFrame(rows, columns=["task", "runs", "c4_holds", "rate", "above_exact_match",
                                       "above_first_token", "above_baselines", "majority_rate"])



#: the five measures of the paper's precursor comparison (claim C5), in its order: RankMe, then the costly
#: measures (the series compared within one run are :data:`geomcap.events.PRECURSOR_MEASURES`)
C5_MEASURES = ("rankme", *measures.COSTLY_MEASURES)
#: the baselines every precursor is compared with (behaviour, and the parameter norm)
BASELINES = events.BEHAVIOURAL_BASELINES
#: the two readings of "precursor" (:func:`geomcap.events.summarize_run`): the informative one (b), read
#: where the collapse is over, and the paper's (a), read from the first checkpoint (column prefix ``"paper_"``)
READINGS = {"informative": "", "paper": "paper_"}
#: what a setting is: intervals resample these (seeds within them), never runs as if independent
SETTING_KEYS = ("task", "level", "size")

#: difficulty from behaviour alone (:func:`difficulty_class`): hard = acquired after this step ...
HARD_MIN_STEP = 500
#: ... with chance-level accuracy over at least this share of the steps before acquisition
HARD_MIN_PLATEAU = 0.5
#: easy = acquired within the collapse window (the first :data:`geomcap.events.COLLAPSE_WINDOW` steps)
EASY_MAX_STEP = events.COLLAPSE_WINDOW
#: the classes of :func:`difficulty_class`
DIFFICULTY_CLASSES = ("easy", "intermediate", "hard", "not acquired")


def difficulty_class(summary: pd.DataFrame) -> pd.Series:
    """Hard vs easy from behaviour alone, never from RankMe (claim C6's rule, stated here once).

    * ``easy``: acquired within the collapse window (acquisition step <=
      :data:`EASY_MAX_STEP` = the first 300 steps): the paper's "acquisition
      during the initial collapse";
    * ``hard``: acquired after step :data:`HARD_MIN_STEP` (500) *and* after a
      behavioural plateau: chance-corrected accuracy at chance (below
      :data:`geomcap.events.PLATEAU_LEVEL`) over at least
      :data:`HARD_MIN_PLATEAU` (half) of the steps before acquisition
      (``plateau_fraction``, :func:`geomcap.events.plateau_fraction`);
    * ``intermediate``: acquired, neither easy nor hard (including tables
      without a ``plateau_fraction`` column, whose runs can never be hard);
    * ``not acquired``: never acquired within the run.

    Parameters
    ----------
    summary : DataFrame
        Columns ``acquisition_step`` and ``plateau_fraction`` (e.g.
        :func:`summary_table`).

    Returns
    -------
    Series of str, one of :data:`DIFFICULTY_CLASSES`, indexed like ``summary``.
    """
    acq = pd.to_numeric(summary["acquisition_step"], errors="coerce")
    plateau = (pd.to_numeric(summary["plateau_fraction"], errors="coerce") if "plateau_fraction" in summary
               else pd.Series(np.nan, index=summary.index))
    cls = pd.Series("intermediate", index=summary.index)
    cls[acq <= EASY_MAX_STEP] = "easy"
    cls[(acq > HARD_MIN_STEP) & (plateau >= HARD_MIN_PLATEAU)] = "hard"
    cls[acq.isna()] = "not acquired"
    return cls


#: the grid's goal for every task x level: acquired in at least this share of its seeds (2 of 3)
ACQUIRED_SHARE_GOAL = 2 / 3
#: ... and at least this many tasks with a level classed hard (acquired late, after a plateau)
HARD_TASKS_GOAL = 3


def level_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per task x level x size: how its runs behaved, from behaviour alone.

    Rows by preset (in ``summary``'s order), task, then level (easy, medium, hard). Columns: ``runs``, ``acquired`` (runs acquired), ``median_acquisition_step``,
    ``median_plateau_fraction`` (over acquired runs), ``hard`` / ``easy`` (runs of
    that :func:`difficulty_class`), ``class`` (the class most of its runs got;
    ties: the later of :data:`DIFFICULTY_CLASSES`' order easy, intermediate, hard,
    not acquired) and ``goal_met`` (acquired in at least
    :data:`ACQUIRED_SHARE_GOAL` of its runs).
    """
    table = summary.assign(difficulty=difficulty_class(summary),
                           acquisition_step=pd.to_numeric(summary["acquisition_step"], errors="coerce"),
                           plateau_fraction=pd.to_numeric(summary.get("plateau_fraction"), errors="coerce"))
    rows = []
    for (task, level, size), group in table.groupby(["task", "level", "size"], sort=False):
        acquired = group[group["acquisition_step"].notna()]
        counts = group["difficulty"].value_counts()
        most = max(DIFFICULTY_CLASSES, key=lambda c: (counts.get(c, 0), DIFFICULTY_CLASSES.index(c)))
        rows.append({"task": task, "level": level, "size": size, "runs": len(group), "acquired": len(acquired),
                     "median_acquisition_step": acquired["acquisition_step"].median(),
                     "median_plateau_fraction": acquired["plateau_fraction"].median(),
                     "hard": int(counts.get("hard", 0)), "easy": int(counts.get("easy", 0)), "class": most,
                     "goal_met": len(acquired) >= ACQUIRED_SHARE_GOAL * len(group)})
    columns = ["task", "level", "size", "runs", "acquired", "median_acquisition_step", "median_plateau_fraction",
               "hard", "easy", "class", "goal_met"]
    table = pd.DataFrame(rows, columns=columns)
    order = {"size": list(dict.fromkeys(summary["size"])), "level": list(LEVELS)}  # presets as given, levels by name
    return table.sort_values(["size", "task", "level"], key=lambda c: c.map(
        {v: i for i, v in enumerate(order[c.name])}) if c.name in order else c, kind="stable").reset_index(drop=True)


def grid_goals(levels: pd.DataFrame, size: str) -> dict:
    """The grid's stated goals on one preset, from :func:`level_table`: ``pairs`` task x levels run,
    ``pairs_acquired`` (acquired in >= :data:`ACQUIRED_SHARE_GOAL` of their seeds), ``min_seeds``
    (fewest seeds of a pair), ``hard_pairs`` (pairs whose class is hard), ``hard_tasks`` (their tasks)
    and ``met``: every pair acquired and >= :data:`HARD_TASKS_GOAL` tasks with a hard level."""
    on = levels[levels["size"] == size]
    hard = on[on["class"] == "hard"]
    tasks = sorted(hard["task"].unique())
    met = bool(len(on)) and bool(on["goal_met"].all()) and len(tasks) >= HARD_TASKS_GOAL
    return {"size": size, "pairs": len(on), "pairs_acquired": int(on["goal_met"].sum()),
            "min_seeds": int(on["runs"].min()) if len(on) else 0, "hard_pairs": len(hard),
            "hard_tasks": tasks, "met": met}


def setting_bootstrap(table: pd.DataFrame, statistic, n_boot: int = 2000, seed: int = 0, level: float = 0.95,
                      keys=SETTING_KEYS) -> tuple[float, float]:
    """Percentile interval of ``statistic(table)`` over two-stage resamples: the settings (rows sharing
    ``keys``: task x level x size) drawn with replacement, then within each drawn setting its rows (seeds)
    drawn with replacement. Seeds of one setting are not independent draws of a claim, so the interval
    is over settings first. Resamples whose statistic is not finite are dropped; (NaN, NaN) when none is
    left or the table is empty.

    ``statistic``: a function of a DataFrame with ``table``'s columns, returning a float.
    """
    if table.empty:
        return float("nan"), float("nan")
    groups = list(table.groupby(list(keys), sort=True).indices.values())
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n_boot):
        drawn = (groups[k] for k in rng.integers(0, len(groups), len(groups)))
        rows = np.concatenate([g[rng.integers(0, g.size, g.size)] for g in drawn])
        value = statistic(table.iloc[rows])
        if np.isfinite(value):
            values.append(value)
    if not values:
        return float("nan"), float("nan")
    return tuple(float(np.quantile(values, q)) for q in ((1 - level) / 2, (1 + level) / 2))


def rate_interval(table: pd.DataFrame, column: str, n_boot: int = 2000, seed: int = 0) -> dict:
    """A rate over the rows of ``table`` where the boolean ``column`` is defined: ``k``, ``n``, ``rate``,
    its :func:`setting_bootstrap` interval ``low``, ``high``, and ``settings`` (how many task x level x
    size settings the rows span)."""
    rows = table[table[column].notna()] if column in table else table.iloc[:0]
    n = len(rows)
    k = int(rows[column].astype(bool).sum()) if n else 0
    out = {"k": k, "n": n, "rate": k / n if n else float("nan"), "low": float("nan"), "high": float("nan"),
           "settings": 0}
    if not n:
        return out
    per_setting = rows.assign(_hit=rows[column].astype(bool)).groupby(list(SETTING_KEYS))["_hit"].agg(["sum", "size"])
    hits, sizes = per_setting["sum"].to_numpy(), per_setting["size"].to_numpy()
    # the two-stage bootstrap of setting_bootstrap for a share, drawn in one go: settings with replacement,
    # then a setting's resampled seeds hold Binomial(its seeds, its share) hits
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, len(sizes), size=(n_boot, len(sizes)))
    shares = rng.binomial(sizes[drawn], hits[drawn] / sizes[drawn]).sum(axis=1) / sizes[drawn].sum(axis=1)
    out.update(low=float(np.quantile(shares, 0.025)), high=float(np.quantile(shares, 0.975)), settings=len(sizes))
    return out


def rate_text(r: dict) -> str:
    """A :func:`rate_interval` as the book's prose quotes it: ``"k/n (95% CI low-high over s settings)"``,
    or ``"none of 0 runs"`` when there is nothing to count."""
    if not r["n"]:
        return "none of 0 runs"
    ci = f"95% CI {r['low']:.2f}-{r['high']:.2f}" if np.isfinite(r["low"]) else "no interval"
    return f"{r['k']}/{r['n']} ({ci} over {r['settings']} settings)"


def timing_text(timing: dict) -> str:
    """A :func:`timing_prediction` as the book's prose quotes it: ``"rho (95% CI low to high, n runs)"``,
    or why it is undefined."""
    if not np.isfinite(timing["rho"]):
        return (f"undefined ({timing['runs']} runs with a defined transition: at least 3 that differ are needed)")
    ci = (f"95% CI {timing['ci_low']:.2f} to {timing['ci_high']:.2f}" if np.isfinite(timing["ci_low"])
          else "no interval")
    return f"{timing['rho']:.2f} ({ci}, {timing['runs']} runs in {timing['settings']} settings)"


def precursor_table(summary: pd.DataFrame, by: str = "difficulty", measures=C5_MEASURES,
                    reading: str = "informative") -> pd.DataFrame:
    """Per measure and group, one reading of "precursor" over the acquired runs where the measure's
    reading is defined (``reading``: "informative", the protocol's (b), or "paper", (a); see
    :data:`READINGS`).

    Columns: ``runs``; ``precursor`` (the transition leads acquisition by >= 2 checkpoints), ``rate``
    and its setting-bootstrap interval ``rate_low``, ``rate_high``; ``leads_test_loss`` (also leads the
    test loss's transition, counted among runs where it is defined: ``leads_defined``), ``leads_rate``;
    ``informative`` (leads both) and ``informative_rate`` with its interval; the median lead in
    checkpoints (``median_gap_checkpoints``) and as a share of the acquisition step
    (``median_gap_share``); ``settings``. ``by``: "difficulty" (:func:`difficulty_class`), "level" or
    any column.
    """
    if reading not in READINGS:
        raise ValueError(f"reading must be one of {', '.join(READINGS)}, got {reading!r}")
    prefix = READINGS[reading]
    groups = difficulty_class(summary) if by == "difficulty" else summary[by]
    rows = []
    # easy -> hard (the classes' order, or the levels'), others by name; "easy" and "hard" name both
    order = {name: i for i, name in enumerate(DIFFICULTY_CLASSES if by == "difficulty" else LEVELS)}
    ordered_groups = sorted(groups.dropna().unique(), key=lambda g: (order.get(g, len(order)), g))
    for measure in measures:
        column = f"{prefix}{measure}_is_precursor"
        if column not in summary:
            continue
        for group in ordered_groups:
            sel = summary[(groups == group) & summary["acquisition_step"].notna() & summary[column].notna()]
            sel = sel.assign(_informative=sel[column].astype(bool)
                             & sel.get(f"{prefix}{measure}_leads_test_loss", pd.Series(False, index=sel.index))
                             .eq(True))
            lead = rate_interval(sel, column)
            informative = rate_interval(sel, "_informative")
            leads = sel.get(f"{prefix}{measure}_leads_test_loss", pd.Series(dtype=object)).dropna()
            median = lambda col: pd.to_numeric(sel.get(col, pd.Series(dtype=float)), errors="coerce").median()  # noqa: E731
            rows.append({"measure": measure, by: group, "runs": len(sel), "precursor": lead["k"],
                         "rate": lead["rate"], "rate_low": lead["low"], "rate_high": lead["high"],
                         "leads_defined": len(leads), "leads_test_loss": int(leads.astype(bool).sum()),
                         "leads_rate": float(leads.astype(bool).mean()) if len(leads) else np.nan,
                         "informative": informative["k"], "informative_rate": informative["rate"],
                         "informative_low": informative["low"], "informative_high": informative["high"],
                         "settings": lead["settings"],
                         "median_gap_checkpoints": median(f"{prefix}{measure}_gap_checkpoints"),
                         "median_gap_share": median(f"{prefix}{measure}_gap_share")})
    return pd.DataFrame(rows)


def group_count(table: pd.DataFrame, measure: str, group: str, k: str = "precursor", n: str = "runs",
                by: str = "difficulty") -> tuple[int, int]:
    """``(k, n)`` of one measure in one group of a :func:`precursor_table`: by default (runs whose
    transition leads acquisition, acquired runs); ``k="leads_test_loss", n="leads_defined"`` for the
    informative reading. ``(0, 0)`` when the table has no such row."""
    if table.empty:
        return 0, 0
    row = table[(table["measure"] == measure) & (table[by] == group)]
    return (0, 0) if row.empty else (int(row[k].iloc[0]), int(row[n].iloc[0]))


def _level_order(level: str) -> tuple:
    return (LEVELS.index(level) if level in LEVELS else len(LEVELS), level)


def _share(count: tuple[int, int]) -> float:
    return count[0] / count[1] if count[1] else np.nan


def timing_prediction(summary: pd.DataFrame, measure: str = "rankme", n_boot: int = 2000, seed: int = 0,
                      level: float = 0.95, reading: str = "informative") -> dict:
    """Does a measure's transition timing predict acquisition timing across runs? (reading (b) of C5)

    Spearman rank correlation, over the acquired runs of ``summary`` (one row per run, e.g.
    :func:`summary_table` or a subset such as one task's seeds) where the transition is defined, of the
    measure's transition step (``reading``: see :data:`READINGS`) against ``acquisition_step``, with a
    :func:`setting_bootstrap` percentile interval (settings resampled, then seeds within them).

    Returns
    -------
    dict
        ``measure``, ``runs``, ``settings``, ``rho`` (NaN with fewer than 3 runs or constant input),
        ``ci_low``, ``ci_high`` (NaN when rho is, or when no resample has a defined rho).
    """
    column = f"{READINGS[reading]}{measure}_transition_step"
    out = {"measure": measure, "runs": 0, "settings": 0, "rho": np.nan, "ci_low": np.nan, "ci_high": np.nan}
    if column not in summary:
        return out
    keys = [k for k in SETTING_KEYS if k in summary]
    both = summary[keys].assign(x=pd.to_numeric(summary[column], errors="coerce"),
                                y=pd.to_numeric(summary["acquisition_step"], errors="coerce")).dropna(subset=["x", "y"])
    out["runs"] = len(both)
    out["settings"] = len(both.groupby(keys)) if len(both) and keys else len(both)
    if len(both) < 3:
        return out
    rho = lambda t: events.spearman(t["x"].to_numpy(float), t["y"].to_numpy(float)) if len(t) >= 3 else np.nan  # noqa: E731
    out["rho"] = rho(both)
    if np.isnan(out["rho"]):
        return out
    out["ci_low"], out["ci_high"] = setting_bootstrap(both, rho, n_boot, seed, level, keys=keys or ["x"])
    return out


def memorisation_table(summary: pd.DataFrame, measure: str = "rankme",
                       min_lead: int = events.MIN_LEAD_CHECKPOINTS) -> pd.DataFrame:
    """Does a measure move with memorisation (train accuracy) rather than ahead of generalisation?

    Per acquired run of ``summary`` (:func:`summary_table`) where both transitions are defined:
    the train accuracy's transition and ``measure``'s, each with its lead over acquisition in
    checkpoints (``<m>_gap_checkpoints``, counted on the run's checkpoint grid), and their
    difference. All counts are checkpoints; shares are of the acquisition step.

    Returns
    -------
    DataFrame
        task, level, size, seed, ``acquisition_step``, ``train_step``, ``measure_step`` (transition steps),
        ``train_lead`` and ``measure_lead`` (checkpoints before acquisition), ``train_lead_share``
        (share of the acquisition step), ``measure_minus_train`` (checkpoints from the train
        accuracy's transition to the measure's; negative: the measure first),
        ``memorises_first`` (train accuracy leads acquisition by >= ``min_lead`` checkpoints: the
        grokking-like order), ``with_train_accuracy`` (``abs(measure_minus_train) < min_lead``),
        ``leads_train_accuracy`` (``measure_minus_train <= -min_lead``).
    """
    columns = [*RUN_KEYS, "acquisition_step", "train_step", "measure_step", "train_lead", "measure_lead",
               "train_lead_share", "measure_minus_train", "memorises_first", "with_train_accuracy",
               "leads_train_accuracy"]
    needed = ["acquisition_step", "train_accuracy_gap_checkpoints", f"{measure}_gap_checkpoints"]
    if summary.empty or any(c not in summary for c in needed):
        return pd.DataFrame(columns=columns)
    num = lambda c: pd.to_numeric(summary[c], errors="coerce").astype(float)  # noqa: E731
    table = summary[list(RUN_KEYS)].assign(
        acquisition_step=num("acquisition_step"), train_step=num("train_accuracy_transition_step"),
        measure_step=num(f"{measure}_transition_step"), train_lead=num("train_accuracy_gap_checkpoints"),
        measure_lead=num(f"{measure}_gap_checkpoints"), train_lead_share=num("train_accuracy_gap_share"))
    table = table.dropna(subset=["acquisition_step", "train_lead", "measure_lead"])
    table["measure_minus_train"] = table["train_lead"] - table["measure_lead"]
    table["memorises_first"] = table["train_lead"] >= min_lead
    table["with_train_accuracy"] = table["measure_minus_train"].abs() < min_lead
    table["leads_train_accuracy"] = table["measure_minus_train"] <= -min_lead
    for column in ("acquisition_step", "train_step", "measure_step", "train_lead", "measure_lead",
                   "measure_minus_train"):
        table[column] = table[column].astype("Int64")
    return table[columns].reset_index(drop=True)


def memorisation_texts(summary: pd.DataFrame, task: str = "mod", level: str = "medium") -> tuple[str, str]:
    """The first grid's finding (in grokking-like ``task``/``level`` runs RankMe rose with the train
    accuracy, before the test accuracy) tested on ``summary``: ``(text, verdict)``, the per-level
    counts of :func:`memorisation_table` on ``task`` and over every acquired run, and a one-sentence
    verdict on ``task``/``level`` (the text itself when there is nothing to compare)."""
    memo = memorisation_table(summary[summary["task"] == task])
    if memo.empty:
        text = f"No acquired {task} run with both transitions in this selection: the comparison cannot be made."
        return text, text
    parts = []
    for name, group in sorted(memo.groupby("level", sort=False), key=lambda item: _level_order(item[0])):
        parts.append(f"{task}/{name}: {int(group['memorises_first'].sum())} of {len(group)} runs memorise first "
                     f"(train accuracy's median lead {group['train_lead'].median():.0f} checkpoints, "
                     f"{group['train_lead_share'].median():.2f} of the acquisition step); RankMe's rise comes "
                     f"with the train accuracy in {int(group['with_train_accuracy'].sum())}, before it in "
                     f"{int(group['leads_train_accuracy'].sum())} (RankMe's transition minus the train accuracy's: "
                     f"median {group['measure_minus_train'].median():+.0f} checkpoints; negative: RankMe first)")
    everywhere = memorisation_table(summary)
    first = everywhere[everywhere["memorises_first"]]
    text = ("; ".join(parts) + f". Over every acquired run, {len(first)} of {len(everywhere)} memorise first; in "
            f"{int(first['with_train_accuracy'].sum())} of those RankMe's rise comes with the train accuracy. ")
    chosen = memo[memo["level"] == level]
    if chosen.empty or not chosen["memorises_first"].any():
        verdict = (f"The {task}/{level} runs here do not behave like grokking: their train accuracy does not lead "
                   "their test accuracy by the protocol's margin, so the first grid's finding (RankMe moves with "
                   "memorisation) has nothing to be tested on here.")
    elif chosen.loc[chosen["memorises_first"], "with_train_accuracy"].all():
        verdict = (f"In the {task}/{level} runs that memorise first, RankMe rises with the train accuracy "
                   "(memorisation), not ahead of the test accuracy on its own: the first grid's finding holds.")
    else:
        verdict = (f"In the {task}/{level} runs that memorise first, RankMe's rise does not always come with the "
                   "train accuracy: the first grid's finding holds only in part.")
    return text + verdict, verdict


def _final_layer_series(metrics: pd.DataFrame, run: str, measure: str) -> pd.Series:
    """One run's ``measure`` at its final layer (:func:`geomcap.events.final_layer_rows`), indexed by step."""
    m = events.final_layer_rows(metrics[metrics["run"] == run], measure, by=None)
    return m.set_index("step")["value"].sort_index()


def check_one_run_per_key(table: pd.DataFrame, keys: list) -> None:
    """Raise a ValueError naming the runs when two rows of ``table`` (runs, or a summary) of one
    preset share ``keys``: pairing presets by those keys would then be ambiguous (a store that
    holds two settings of one task and level, e.g. two ``task_params``; select one first)."""
    duplicated = table[table.duplicated(["size", *keys], keep=False)]
    if len(duplicated):
        first = duplicated.iloc[0]
        same = duplicated[(duplicated[["size", *keys]] == first[["size", *keys]]).all(axis=1)]
        raise ValueError(f"runs {', '.join(map(str, same['run']))} share {', '.join(keys)} at preset {first['size']} "
                         f"({', '.join(f'{k}={first[k]}' for k in keys)}): select one setting per task and level "
                         "before pairing presets")


def proxy_pairs(runs: pd.DataFrame, small: str, large: str) -> pd.DataFrame:
    """Runs of the same task, level, seed and step count at both presets: one row per pair,
    with columns task, level, seed, steps, run_small, run_large."""
    keys = ["task", "level", "seed", "steps"]
    check_one_run_per_key(runs[runs["size"].isin([small, large])], keys)
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
    check_one_run_per_key(summary[summary["size"].isin([small, large])], keys)
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
# Twins: runs that differ only by a perturbation of the initial weights far below any setting
# (``TrainConfig.perturb``): within a seed they share everything but the accident of rounding.

def twin_table(summary: pd.DataFrame, runs: pd.DataFrame, measures=("rankme", "test_loss", "train_accuracy",
                                                                    "param_norm")) -> pd.DataFrame:
    """One row per run: its setting (task, level, size, seed), ``twin`` (its ``perturb_seed``; 0 for the
    unperturbed run), ``acquisition_step`` and each measure's informative-reading transition step
    (``<m>_transition_step``). ``summary``: :func:`summary_table` of ``runs`` (:func:`load_runs` rows, which
    carry ``perturb`` and ``perturb_seed`` when the configs have them)."""
    extra = runs.set_index("run")
    perturbed = pd.to_numeric(extra.get("perturb", pd.Series(0.0, index=extra.index)), errors="coerce").fillna(0)
    twin = pd.to_numeric(extra.get("perturb_seed", pd.Series(0, index=extra.index)), errors="coerce").fillna(0)
    twin = twin.where(perturbed > 0, 0).astype(int)
    table = summary[[*RUN_KEYS, "run", "acquisition_step"]].copy()
    table["twin"] = table["run"].map(twin).fillna(0).astype(int)
    for m in measures:
        column = f"{m}_transition_step"
        table[column] = pd.to_numeric(summary.get(column, pd.Series(index=summary.index, dtype=float)),
                                      errors="coerce")
    return table.sort_values([*RUN_KEYS, "twin"]).reset_index(drop=True)


def twin_spread(table: pd.DataFrame) -> pd.DataFrame:
    """Per task x level x size: the acquisition step's spread across twins within a seed (median over seeds
    of the within-seed standard deviation and range) beside its spread across seeds (the standard deviation
    of the seeds' mean acquisition step): the noise floor of every per-run timing. Runs never acquired are
    left out."""
    rows = []
    for (task, level, size), group in table.groupby(["task", "level", "size"], sort=False):
        acq = group.assign(acq=pd.to_numeric(group["acquisition_step"], errors="coerce")).dropna(subset=["acq"])
        per_seed = acq.groupby("seed")["acq"]
        rows.append({"task": task, "level": level, "size": size, "seeds": per_seed.ngroups,
                     "twins_per_seed": float(per_seed.size().median()) if len(acq) else np.nan,
                     "within_seed_sd": float(per_seed.std().median()) if len(acq) else np.nan,
                     "within_seed_range": float((per_seed.max() - per_seed.min()).median()) if len(acq) else np.nan,
                     "across_seed_sd": float(per_seed.mean().std()) if per_seed.ngroups > 1 else np.nan})
    return pd.DataFrame(rows, columns=["task", "level", "size", "seeds", "twins_per_seed", "within_seed_sd",
                                       "within_seed_range", "across_seed_sd"])


def twin_shift_correlation(table: pd.DataFrame, measure: str, n_boot: int = 2000, seed: int = 0,
                           level: float = 0.95) -> dict:
    """Does a measure's transition move when acquisition moves, between twins? Within each setting and seed,
    each twin's shift from the seed's mean (transition step, acquisition step); the Spearman correlation of
    the two shifts pooled over seeds, with a percentile interval from resampling the seeds (their twins kept
    together). Only twins where both steps are defined count, and seeds with at least two of them.

    Returns ``measure``, ``twins``, ``seeds``, ``rho``, ``ci_low``, ``ci_high`` (NaN when undefined)."""
    column = f"{measure}_transition_step"
    out = {"measure": measure, "twins": 0, "seeds": 0, "rho": np.nan, "ci_low": np.nan, "ci_high": np.nan}
    if column not in table:
        return out
    both = table.assign(x=pd.to_numeric(table[column], errors="coerce"),
                        y=pd.to_numeric(table["acquisition_step"], errors="coerce")).dropna(subset=["x", "y"])
    keys = ["task", "level", "size", "seed"]
    both = both[both.groupby(keys)["x"].transform("size") >= 2]
    if both.empty:
        return out
    shifts = both.assign(dx=both["x"] - both.groupby(keys)["x"].transform("mean"),
                         dy=both["y"] - both.groupby(keys)["y"].transform("mean"))
    groups = [g[["dx", "dy"]].to_numpy() for _, g in shifts.groupby(keys)]
    out.update(twins=len(shifts), seeds=len(groups))
    rho = lambda rows: events.spearman(rows[:, 0], rows[:, 1]) if len(rows) >= 3 else np.nan  # noqa: E731
    out["rho"] = rho(np.concatenate(groups))
    if not np.isfinite(out["rho"]):
        return out
    rng = np.random.default_rng(seed)
    boots = [rho(np.concatenate([groups[i] for i in rng.integers(0, len(groups), len(groups))]))
             for _ in range(n_boot)]
    boots = np.asarray([b for b in boots if np.isfinite(b)])
    if boots.size:
        out["ci_low"], out["ci_high"] = (float(np.quantile(boots, q)) for q in ((1 - level) / 2, (1 + level) / 2))
    return out


# ---------------------------------------------------------------------------------------------
# Paper vs ours: one row per claim, used by every notebook's closing table and by the book's
# results page. The paper's figures come from geomcap.paper; ours are computed; each row carries a
# verdict chosen by a stated rule from the numbers, in the real runs and in the controls.

#: the five verdicts a claim can get
VERDICTS = ("reproduced", "reproduced, not specific to learning", "partly reproduced", "not reproduced",
            "not testable")
#: a share at or above this "holds" (C1, C4)
HOLDS = 0.9
PARTLY = 0.5
#: C5: RankMe's rate must reach the lower end of the paper's (v1: 75-100%; later versions 100%) ...
RATE_HIGH = paper.CLAIMS["C5"]["values"]["rankme_rate_v1_low"]
#: ... and the LLC's stay at or below this (the paper: 0/24)
RATE_LOW = 0.25
#: C2: MOD's floor within this relative distance of the paper's ~2.0
FLOOR_TOLERANCE = 0.25
#: C5/C6: fewest runs in a class for a rate to be read
MIN_RUNS = 3
#: C8: a median rho above this but below the paper's 0.92 is partial
RHO_PARTLY = 0.7
#: a claim's effect is specific to learning only where the negative controls (nothing learnable) show it
#: weaker by at least this much (a share, or C2's relative distance); else "reproduced, not specific to learning"
CONTROL_MARGIN = 0.25
#: C8 speaks of proxies much smaller than the model they predict: the presets compared must differ this much
#: in parameters (the paper: 405K vs 2.8B)
MIN_SIZE_RATIO = 10
#: C4 with Hewitt & Liang's control task: a probe reads the answer, not the input, only if its accuracy beats
#: its control-task accuracy by this much
SELECTIVITY_MARGIN = PROBE_MARGIN


#: each claim's verdict rule, in words, from the constants above (the claims' functions and the methods page
#: read it here)
_FLOOR_BAND = (paper.CLAIMS["C2"]["values"]["mod_floor"] * (1 - FLOOR_TOLERANCE),
               paper.CLAIMS["C2"]["values"]["mod_floor"] * (1 + FLOOR_TOLERANCE))
_C3 = paper.CLAIMS["C3"]["values"]
RULES = {
    "C1": (f"reproduced: ordered in >= {HOLDS:.0%} of acquired runs for uncentred and centred RankMe; "
            f"partly: >= {HOLDS:.0%} for one, or >= {PARTLY:.0%} for both; not reproduced: otherwise; "
            f"not specific to learning: the negative controls collapse and recover in at least the share of "
            f"the same settings' real runs minus {CONTROL_MARGIN:.2f}; not testable: no acquired run"),
    "C2": (f"reproduced: MOD's mean floor within [{_FLOOR_BAND[0]:.2f}, {_FLOOR_BAND[1]:.2f}] at every size, >= 2 sizes; partly: within "
            "it at some sizes (or at the only size run: size-independence untested); not reproduced: at no size; "
            "not specific to learning: the negative controls' MOD floor is within the same band; not testable: "
            "no MOD run"),
    "C3": (f"reproduced: >= {_C3['top_down'] / _C3['pairs']:.1%} of the task x size pairs with a defined statistic are top-down "
            f"(the paper's {_C3['top_down']}/{_C3['pairs']}); partly: > {PARTLY:.0%}; not reproduced: <= "
            f"{PARTLY:.0%}; not specific to learning: the negative controls' runs are top-down in at least the "
            f"share of the same settings' real runs minus {CONTROL_MARGIN:.2f}; not testable: no pair with a run "
            f"of >= {events.MIN_TOP_DOWN_LAYERS} informative layers"),
    "C4": (f"reproduced: holds in >= {HOLDS:.0%} of runs with checkpoints below 50% (probe > max(first-token "
            f"accuracy, majority rate) + {PROBE_MARGIN} at >= half of them); partly: >= {PARTLY:.0%}; not "
            f"reproduced: otherwise; not specific to learning: the probe's best layer beats its control task by "
            f"< {SELECTIVITY_MARGIN} (median over runs), or it holds as often in the negative controls; not "
            "testable: no such run"),
    "C5": (f"reproduced: on >= {MIN_RUNS} hard runs RankMe is informative (leads acquisition and the test "
            f"loss) in >= {RATE_HIGH:.0%}, its timing predicts acquisition (setting-bootstrap CI of rho above 0) "
            "better than every baseline's, and the LLC, recorded on >= "
            f"{MIN_RUNS} hard runs, is informative in <= {RATE_LOW:.0%}; partly: RankMe is informative in >= "
            f"{RATE_HIGH:.0%}, or its timing CI is above 0; not reproduced: otherwise; not testable: fewer than "
            f"{MIN_RUNS} hard runs with the reading defined"),
    "C6": (f"not testable: fewer than {MIN_RUNS} runs acquired during the collapse (by RankMe's recovery) or "
            f"{MIN_RUNS} hard runs; reproduced: the paper's reading leads acquisition in <= {RATE_LOW:.0%} of the "
            f"runs acquired during the collapse and >= {RATE_HIGH:.0%} of the hard runs; partly: the hard rate "
            f"exceeds the other by >= {PARTLY:.0%}; not reproduced: otherwise"),
    "C7": ("reproduced: the hard benchmark is acquired with a precursor (final layer) and no easy benchmark "
            "has one; partly: the hard one has a precursor but some easy ones do too; not reproduced: the hard "
            "one is acquired without a precursor; not testable: no Pythia run, or the hard benchmark is never "
            "acquired"),
    "C8": (f"not testable: no task trained at both presets, or presets less than {MIN_SIZE_RATIO}x apart in "
            f"parameters; reproduced: median Spearman rho over task pairs > {paper.CLAIMS['C8']['values']['rho']}; partly: > {RHO_PARTLY}; "
            "not reproduced: otherwise"),
}


def claim_row(claim: str, ours: str, value=np.nan, verdict: str = "not testable", rule: str = "",
              control: str = "") -> dict:
    """One line of a paper-vs-ours table: the claim, the paper's figure (:data:`geomcap.paper.CLAIMS`),
    ours (text: the deciding numbers), our headline number (``value``, for the book's glue), what the
    controls show (``control``), the verdict and its rule."""
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}, got {verdict!r}")
    entry = paper.CLAIMS[claim]
    return {"claim": claim, "statement": entry["statement"], "paper": paper.figure_text(claim), "ours": ours,
            "value": value, "control": control, "verdict": verdict, "rule": rule}


def _bool_share(values) -> tuple[int, int]:
    values = pd.Series(values).dropna().astype(bool)
    return int(values.sum()), len(values)


def _specific(real: float, control: float | None, verdict: str) -> str:
    """The verdict once the controls are read: an effect present in the real runs (``verdict`` reproduced or
    partly) that the controls show as strongly (within :data:`CONTROL_MARGIN`) is not specific to learning."""
    if verdict in ("reproduced", "partly reproduced") and control is not None and np.isfinite(control) \
            and control >= real - CONTROL_MARGIN:
        return "reproduced, not specific to learning"
    return verdict


def matched(real: pd.DataFrame, control: pd.DataFrame | None) -> pd.DataFrame:
    """The rows of ``real`` whose task x level x size setting the controls also have."""
    if control is None or control.empty or real.empty:
        return real.iloc[:0]
    keys = list(SETTING_KEYS)
    settings = set(map(tuple, control[keys].to_numpy()))
    return real[[tuple(r) in settings for r in real[keys].to_numpy()]]


def collapse_recovers(summary: pd.DataFrame) -> pd.Series:
    """Per run: the final layer's RankMe collapsed and recovered (C1's geometric half, which needs no
    acquisition and so can be read on the controls)."""
    collapsed = summary["rankme_collapsed"].fillna(False).astype(bool)
    return collapsed & pd.to_numeric(summary["rankme_recovery_step"], errors="coerce").notna()


def claim_c1(summary: pd.DataFrame, centred: pd.DataFrame | None = None, control: pd.DataFrame | None = None) -> dict:
    """C1 (collapse -> recovery -> acquisition) for uncentred RankMe (``summary``) and, when given, centred
    RankMe (``centred``: :func:`summary_table` with ``measure="rankme_centred"``), with the median share of
    the mean direction in the final layer's energy at the floor; against the controls (``control``: the
    negative controls' summary), in which nothing is acquired, on its geometric half: collapse, then
    recovery."""
    rule = RULES["C1"]
    acquired = summary["acquisition_step"].notna()
    if not acquired.any():
        return claim_row("C1", f"no acquired run ({len(summary)} runs)", rule=rule)
    k, n = _bool_share(summary.loc[acquired, "ordered_collapse_recovery_acquisition"])
    u = k / n
    text = f"uncentred {k}/{n} ordered"
    if centred is None or not centred["acquisition_step"].notna().any():
        return claim_row("C1", text + "; centred RankMe not computed", u, "not testable", rule)
    kc, nc = _bool_share(centred.loc[centred["acquisition_step"].notna(), "ordered_collapse_recovery_acquisition"])
    c = kc / nc
    text = f"{text}; centred {kc}/{nc}"
    verdict = ("reproduced" if min(u, c) >= HOLDS else
               "partly reproduced" if max(u, c) >= HOLDS or min(u, c) >= PARTLY else "not reproduced")
    control_text, control_share, real_share = "no negative control", None, None
    if control is not None and len(control):
        same = matched(summary, control)
        real_share, control_share = float(collapse_recovers(same).mean()), float(collapse_recovers(control).mean())
        control_text = (f"collapse then recovery: controls {int(collapse_recovers(control).sum())}/{len(control)}, "
                        f"same settings real {int(collapse_recovers(same).sum())}/{len(same)}")
    return claim_row("C1", text, u, _specific(real_share or 0.0, control_share, verdict), rule, control_text)


def claim_c2(summary: pd.DataFrame, centred: pd.DataFrame | None = None, control: pd.DataFrame | None = None) -> dict:
    """C2: MOD's collapse floor (final layer) per size, against the paper's ~2.0, uncentred (and centred); in
    the controls, MOD's floor where nothing is learnt."""
    lo, hi = _FLOOR_BAND
    rule = RULES["C2"]
    mod = summary[summary["task"] == "mod"]
    if mod.empty:
        return claim_row("C2", "no MOD run selected", rule=rule)
    floors = mod.groupby("size", sort=False)["rankme_floor_value"].apply(lambda v: pd.to_numeric(v).mean())
    within = (floors >= lo) & (floors <= hi)
    text = "MOD floor " + ", ".join(f"{size} {value:.2f}" for size, value in floors.items())
    if centred is not None:
        cm = pd.to_numeric(centred.loc[centred["task"] == "mod", "rankme_floor_value"], errors="coerce")
        if len(cm.dropna()):
            text += f"; centred {cm.mean():.2f}"
    verdict = ("reproduced" if within.all() and len(floors) >= 2 else
               "partly reproduced" if within.any() else "not reproduced")
    control_text = "no negative control"
    if control is not None and (control["task"] == "mod").any():
        cf = pd.to_numeric(control.loc[control["task"] == "mod", "rankme_floor_value"], errors="coerce").mean()
        control_text = f"MOD floor in the controls {cf:.2f}"
        if lo <= cf <= hi and verdict != "not reproduced":
            verdict = "reproduced, not specific to learning"
    return claim_row("C2", text, float(floors.mean()), verdict, rule, control_text)


def top_down_share(summary: pd.DataFrame) -> tuple[int, int]:
    """Runs whose top-down statistic is defined and negative, of the runs where it is defined."""
    rho = pd.to_numeric(summary.get("top_down_rho_step", pd.Series(dtype=float)), errors="coerce").dropna()
    return int((rho < 0).sum()), len(rho)


def claim_c3(summary: pd.DataFrame, control: pd.DataFrame | None = None) -> dict:
    """C3: task x size pairs whose median top-down statistic (defined runs only) is negative; against the
    controls, the share of runs top-down where nothing is learnt."""
    share = _C3["top_down"] / _C3["pairs"]
    rule = RULES["C3"]
    pairs = top_down_table(summary)
    decided = pairs["top_down"].dropna() if len(pairs) else pd.Series(dtype=bool)
    if decided.empty:
        return claim_row("C3", f"undefined: no run with {events.MIN_TOP_DOWN_LAYERS} informative layers "
                               f"({len(summary)} runs)", rule=rule)
    s = float(decided.astype(bool).mean())
    verdict = "reproduced" if s >= share else "partly reproduced" if s > PARTLY else "not reproduced"
    text = f"{int(decided.astype(bool).sum())}/{len(decided)} task x size pairs"
    control_text, real_share, control_share = "no negative control", 0.0, None
    if control is not None and len(control):
        kc, nc = top_down_share(control)
        kr, nr = top_down_share(matched(summary, control))
        real_share = kr / nr if nr else 0.0
        control_share = kc / nc if nc else None
        control_text = f"runs top-down: controls {kc}/{nc}, same settings real {kr}/{nr}"
    return claim_row("C3", text, s, _specific(real_share, control_share, verdict), rule, control_text)


def selectivity_table(metrics: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """C4's control task (Hewitt & Liang 2019): per run that recorded ``probe_control_accuracy`` and per layer,
    the probe's mean accuracy on the true labels and on the control task's, over the checkpoints where the
    model's exact-match accuracy is below 0.5, and ``selectivity`` (their difference). ``metrics``: tidy, with a
    ``run`` column (:func:`load_metrics`)."""
    rows = []
    for run in runs.itertuples():
        m = metrics[metrics["run"] == run.run]
        if not (m["measure"] == "probe_control_accuracy").any():
            continue
        steps, acc = events.tidy_series(m, "accuracy")
        below = set(steps[acc < 0.5].tolist())
        wide = m[m["measure"].isin(["probe_accuracy", "probe_control_accuracy"]) & m["step"].isin(below)]
        means = wide.groupby(["layer", "measure"])["value"].mean().unstack()
        for layer, row in means.iterrows():
            rows.append({**{k: getattr(run, k) for k in RUN_KEYS}, "run": run.run, "layer": int(layer),
                         "checkpoints_below": len(below), "probe": row.get("probe_accuracy", np.nan),
                         "control": row.get("probe_control_accuracy", np.nan),
                         "selectivity": row.get("probe_accuracy", np.nan) - row.get("probe_control_accuracy", np.nan)})
    return pd.DataFrame(rows, columns=[*RUN_KEYS, "run", "layer", "checkpoints_below", "probe", "control",
                                       "selectivity"])


def claim_c4(probes: pd.DataFrame, selectivity: pd.DataFrame | None = None,
             control_probes: pd.DataFrame | None = None) -> dict:
    """C4 from :func:`probe_table`: runs where the probe beats the model's first-token accuracy and the
    majority rate (plus :data:`PROBE_MARGIN`) at most checkpoints with exact match < 50%; with Hewitt &
    Liang's control task (``selectivity``: :func:`selectivity_table`) and the negative controls' probes
    (``control_probes``: :func:`probe_table` of the controls)."""
    rule = RULES["C4"]
    if probes.empty or probes["c4_holds"].dropna().empty:
        return claim_row("C4", "no run with a checkpoint below 50%", rule=rule)
    k, n = _bool_share(probes["c4_holds"])
    per_task = probe_by_task(probes)
    text = f"{k}/{n} runs (" + ", ".join(f"{r.task} {r.c4_holds}/{r.runs}" for r in per_task.itertuples()) + ")"
    verdict = "reproduced" if k / n >= HOLDS else "partly reproduced" if k / n >= PARTLY else "not reproduced"
    parts = []
    if selectivity is not None and len(selectivity):
        best = selectivity.sort_values("probe").groupby("run").tail(1)
        median = float(best["selectivity"].median())
        parts.append(f"selectivity at the best layer median {median:+.2f} ({len(best)} runs)")
        if median < SELECTIVITY_MARGIN and verdict != "not reproduced":
            verdict = "reproduced, not specific to learning"
    if control_probes is not None and len(control_probes) and control_probes["c4_holds"].notna().any():
        kc, nc = _bool_share(control_probes["c4_holds"])
        parts.append(f"holds in {kc}/{nc} controls")
        verdict = _specific(k / n, kc / nc, verdict)
    return claim_row("C4", text, k / n, verdict, rule, "; ".join(parts) or "selectivity not recorded")


def _reading_row(table: pd.DataFrame, measure: str, group: str, by: str) -> dict | None:
    rows = table[(table["measure"] == measure) & (table[by] == group)] if len(table) else table
    return None if rows.empty or not rows["runs"].iloc[0] else rows.iloc[0].to_dict()


def claim_c5(summary: pd.DataFrame) -> dict:
    """C5 on the runs classed hard from behaviour (:func:`difficulty_class`), the informative reading (b):
    RankMe's transition, read where the collapse is over, leads acquisition and the test loss's
    transition, and its timing predicts acquisition across runs (:func:`timing_prediction`); against the
    baselines read by the same rule from the same point (train accuracy, first-token accuracy, parameter
    norm), and the LLC. The paper's reading (a) is given beside it."""
    rule = RULES["C5"]
    measures = [*C5_MEASURES, *BASELINES]
    table = precursor_table(summary, by="difficulty", measures=measures)
    r = _reading_row(table, "rankme", "hard", "difficulty")
    if r is None or r["runs"] < MIN_RUNS:
        n = 0 if r is None else r["runs"]
        return claim_row("C5", f"{n} hard run(s) with the informative reading defined", rule=rule)
    hard = summary[difficulty_class(summary) == "hard"]
    timing = timing_prediction(hard, "rankme")
    text = (f"RankMe informative {r['informative']}/{r['runs']}, timing rho {timing['rho']:.2f} "
            f"(CI {timing['ci_low']:.2f} to {timing['ci_high']:.2f})" if np.isfinite(timing["rho"]) else
            f"RankMe informative {r['informative']}/{r['runs']}, timing rho undefined")
    baseline_rhos, parts = [], []
    for m in BASELINES[1:]:  # the test loss is what "informative" is read against
        b = _reading_row(table, m, "hard", "difficulty")
        t = timing_prediction(hard, m)
        if b is None:
            continue
        baseline_rhos.append(t["rho"])
        parts.append(f"{m} {b['informative']}/{b['runs']}" + (f", rho {t['rho']:.2f}" if np.isfinite(t["rho"]) else ""))
    paper_row = _reading_row(precursor_table(summary, by="difficulty", measures=["rankme", "test_loss"],
                                             reading="paper"), "rankme", "hard", "difficulty")
    llc = _reading_row(table, "llc", "hard", "difficulty")
    llc_tested = llc is not None and llc["runs"] >= MIN_RUNS
    control = "; ".join(parts) + (f"; LLC informative {llc['informative']}/{llc['runs']}" if llc else "; no LLC")
    if paper_row:
        text += f"; the paper's reading: {paper_row['precursor']}/{paper_row['runs']} lead acquisition"
    rate_ok = r["informative_rate"] >= RATE_HIGH
    timing_ok = np.isfinite(timing["ci_low"]) and timing["ci_low"] > 0
    beats = all(np.isfinite(timing["rho"]) and (not np.isfinite(b) or timing["rho"] > b) for b in baseline_rhos)
    llc_ok = llc_tested and llc["informative_rate"] <= RATE_LOW
    verdict = ("reproduced" if rate_ok and timing_ok and beats and llc_ok else
               "partly reproduced" if rate_ok or timing_ok else "not reproduced")
    return claim_row("C5", text, float(r["informative_rate"]), verdict, rule, control)


def acquired_during_collapse(summary: pd.DataFrame) -> pd.Series:
    """Per run: acquired by the time the final layer's RankMe recovered (the paper's "easy": acquisition
    during the initial collapse). False for runs never acquired or whose collapse never recovered."""
    acq = pd.to_numeric(summary["acquisition_step"], errors="coerce")
    recovery = pd.to_numeric(summary["rankme_recovery_step"], errors="coerce")
    return (acq <= recovery).fillna(False).astype(bool)


def claim_c6(summary: pd.DataFrame, measure: str = "rankme") -> dict:
    """C6: a precursor on hard runs and none on runs acquired during the collapse (the paper's easy). Read
    with the paper's reading (a) (the informative one starts after the collapse, so it cannot see a lead in
    a run acquired during it); not testable without at least :data:`MIN_RUNS` runs acquired during the
    collapse."""
    rule = RULES["C6"]
    during = acquired_during_collapse(summary)
    classes = difficulty_class(summary)
    counts = classes.value_counts().to_dict()
    head = (f"acquired during the collapse {int(during.sum())} of {int(summary['acquisition_step'].notna().sum())}"
            f" acquired runs; classes from behaviour: " + ", ".join(f"{c} {counts.get(c, 0)}" for c in DIFFICULTY_CLASSES))
    column = f"paper_{measure}_is_precursor"
    hard = summary[(classes == "hard") & summary.get(column, pd.Series(index=summary.index)).notna()]
    easy = summary[during & summary.get(column, pd.Series(index=summary.index)).notna()]
    if len(easy) < MIN_RUNS or len(hard) < MIN_RUNS:
        return claim_row("C6", head, rule=rule, control="the regime C6 speaks of is absent")
    e, h = easy[column].astype(bool).mean(), hard[column].astype(bool).mean()
    verdict = ("reproduced" if e <= RATE_LOW and h >= RATE_HIGH else
               "partly reproduced" if h - e >= PARTLY else "not reproduced")
    return claim_row("C6", f"{head}; the paper's reading leads in {e:.0%} of those and {h:.0%} of hard runs",
                     float(h - e), verdict, rule)


def claim_c7(pythia_summary: pd.DataFrame | None = None) -> dict:
    """C7 from a Pythia summary table (:func:`geomcap.pythia.gap_table`: one row per benchmark and
    layer, with ``level``, ``final_layer``, ``acquisition_step``, ``is_precursor``, ``gap_checkpoints``)."""
    rule = RULES["C7"]
    if pythia_summary is None or pythia_summary.empty:
        return claim_row("C7", "no Pythia run", rule=rule)
    final = pythia_summary[pythia_summary["final_layer"].astype(bool)]
    hard, easy = final[final["level"] == "hard"], final[final["level"] != "hard"]
    acquired = hard[hard["acquisition_step"].notna()]
    easy_k, easy_n = _bool_share(easy.loc[easy["acquisition_step"].notna(), "is_precursor"])
    if acquired.empty:
        return claim_row("C7", f"hard benchmark never acquired; easy precursors {easy_k}/{easy_n}", rule=rule)
    k, n = _bool_share(acquired["is_precursor"])
    gap = pd.to_numeric(acquired["gap_checkpoints"], errors="coerce").median()
    text = f"hard: precursor {k}/{n} (median gap {gap:.0f} checkpoints); easy precursors {easy_k}/{easy_n}"
    verdict = ("reproduced" if k == n and easy_k == 0 else "partly reproduced" if k > 0 else "not reproduced")
    return claim_row("C7", text, float(k / n), verdict, rule)


def claim_c8(correlations: pd.DataFrame, concordance: pd.DataFrame | None = None,
             size_ratio: float | None = None) -> dict:
    """C8: the small preset's RankMe trajectory against the large one's (:func:`trajectory_correlation`), with
    the timing concordance; not testable while the presets compared differ by less than
    :data:`MIN_SIZE_RATIO` in parameters (``size_ratio``)."""
    rho_paper = paper.CLAIMS["C8"]["values"]["rho"]
    rule = RULES["C8"]
    rho = correlations["spearman"].dropna() if len(correlations) else pd.Series(dtype=float)
    if rho.empty:
        return claim_row("C8", "no task trained at both presets yet", rule=rule)
    text = f"median rho {rho.median():.2f} over {len(rho)} pairs"
    if concordance is not None and len(concordance):
        for row in concordance.dropna(subset=["rate"]).itertuples():
            text += f"; concordance ({row.level}) {row.rate:.0%}"
    m = float(rho.median())
    ratio = f"presets {size_ratio:.1f}x apart" if size_ratio else "size ratio unknown"
    if size_ratio is None or size_ratio < MIN_SIZE_RATIO:
        return claim_row("C8", f"{text}; {ratio}", m, "not testable", rule, f"outside the claim's regime ({ratio})")
    verdict = "reproduced" if m > rho_paper else "partly reproduced" if m > RHO_PARTLY else "not reproduced"
    return claim_row("C8", f"{text}; {ratio}", m, verdict, rule)


def paper_vs_ours(rows) -> pd.DataFrame:
    """The rows of the ``claim_*`` functions as a table indexed by claim (statement, paper, ours, control,
    verdict, rule). The notebooks glue :func:`glue_values` of the same rows for the book's prose."""
    table = pd.DataFrame(list(rows), columns=["claim", "statement", "paper", "ours", "value", "control", "verdict",
                                              "rule"])
    return table.drop(columns="value").set_index("claim")


def glue_values(rows) -> dict:
    """What the book's prose quotes of the ``claim_*`` rows: ``<claim>_ours`` (text), ``<claim>_value``
    (the headline number), ``<claim>_control`` and ``<claim>_verdict`` for each row (e.g. ``C1_value``); a
    notebook stores each with myst-nb's ``glue``."""
    values = {}
    for row in rows:
        values.update({f"{row['claim']}_ours": row["ours"], f"{row['claim']}_value": row["value"],
                       f"{row['claim']}_control": row.get("control", ""), f"{row['claim']}_verdict": row["verdict"]})
    return values


def verdict_table(rows) -> pd.DataFrame:
    """The verdict table the results page leads with: claim | paper | ours | control | verdict | rule."""
    return paper_vs_ours(rows)[["paper", "ours", "control", "verdict", "rule"]]


def findings_markdown(rows) -> str:
    """The README's "What it finds" list, from the claims table: one line per claim with its statement, the
    verdict, our deciding numbers and what the controls show (``tests/test_golden_claims.py`` keeps the README
    equal to this for the published table)."""
    lines = []
    for row in rows:
        control = f" Controls: {row['control']}." if row.get("control") else ""
        lines.append(f"- **{row['claim']}**, {row['statement']}: **{row['verdict']}**. Ours: {row['ours']}.{control}")
    return "\n".join(lines)


def size_ratio(runs: pd.DataFrame, small: str, large: str) -> float | None:
    """Parameters of the ``large`` preset over the ``small`` one's, read from the runs' status.json (None
    when either has no complete run)."""
    counts = {}
    for size in (small, large):
        rows = runs[runs["size"] == size]
        if rows.empty:
            return None
        counts[size] = (store.read_status(rows["path"].iloc[0]) or {}).get("parameters")
    return counts[large] / counts[small] if all(counts.values()) else None


#: the negative controls' store, beside the committed runs
CONTROLS = "controls"


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
    control = others.get("control", pd.Series(None, index=others.index))
    is_control = control.apply(lambda c: c == "shuffled_answers")
    warmup0 = (~is_control) & (pd.to_numeric(others["warmup_steps"], errors="coerce") == 0)
    return {"real": real, "control": others[is_control], "warmup0": others[warmup0]}


def analyse_claims(root="", small: str = "405k", large: str = "1.3m", controls_root=None) -> dict:
    """Everything the claims table reads, computed once from a store ("" = the committed data/runs, with the
    negative controls and the warmup-0 arm of data/controls): ``arms`` (:func:`load_arms`), ``summary``,
    ``centred``, ``control`` and ``warmup0`` (:func:`summary_table` of each; None when absent), ``probes``,
    ``selectivity``, ``control_probes``, ``correlations``, ``concordance`` and ``size_ratio``."""
    arms = load_arms(root, controls_root)
    runs = arms["real"]
    probe_measures = ["accuracy", "first_token_accuracy", "probe_accuracy", "probe_control_accuracy", "rankme"]
    metrics = load_metrics(runs, measures=probe_measures)
    summary = summary_table(runs)
    out = {"arms": arms, "summary": summary, "centred": summary_table(runs, measure="rankme_centred"),
           "control": summary_table(arms["control"]) if len(arms["control"]) else None,
           "warmup0": summary_table(arms["warmup0"]) if len(arms["warmup0"]) else None,
           "probes": probe_table(metrics, runs), "selectivity": selectivity_table(metrics, runs),
           "control_probes": (probe_table(load_metrics(arms["control"], measures=probe_measures), arms["control"])
                              if len(arms["control"]) else None),
           "correlations": trajectory_correlation(metrics, runs, small, large),
           "concordance": timing_concordance(summary, small, large), "size_ratio": size_ratio(runs, small, large)}
    return out


def claims_from_analysis(a: dict, pythia_summary: pd.DataFrame | None = None) -> list[dict]:
    """The claim rows (C1-C6, C8; C7 between C6 and C8 with ``pythia_summary``) of an :func:`analyse_claims`."""
    rows = [claim_c1(a["summary"], a["centred"], a["control"]), claim_c2(a["summary"], a["centred"], a["control"]),
            claim_c3(a["summary"], a["control"]), claim_c4(a["probes"], a["selectivity"], a["control_probes"]),
            claim_c5(a["summary"]), claim_c6(a["summary"]),
            claim_c8(a["correlations"], a["concordance"], a["size_ratio"])]
    if pythia_summary is not None:
        rows.insert(6, claim_c7(pythia_summary))
    return rows


def task_claims_from_store(root="", small: str = "405k", large: str = "1.3m",
                           pythia_summary: pd.DataFrame | None = None, controls_root=None) -> list[dict]:
    """The claims on the algorithmic tasks (C1-C6, C8) over all complete runs of a store ("" = the committed
    data/runs, with the negative controls of data/controls), each as a :func:`claim_row` with its verdict:
    the book's results page. With ``pythia_summary`` (:func:`geomcap.pythia.gap_table`) C7 is included
    between C6 and C8; without it the caller adds C7 (:func:`geomcap.pythia.c7_claim_from_store`)."""
    return claims_from_analysis(analyse_claims(root, small, large, controls_root), pythia_summary)


EFFECT_COLUMNS = ["claim", "statistic", "arm", "value", "low", "high", "runs"]


def _effect(claim, statistic, arm, table, column=None, value_of=None) -> dict:
    """One row of :func:`claim_effects`: a share of the boolean ``column`` (or a statistic ``value_of(table)``)
    over ``table``'s runs, with its :func:`setting_bootstrap` interval."""
    if table is None or table.empty:
        return {"claim": claim, "statistic": statistic, "arm": arm, "value": np.nan, "low": np.nan, "high": np.nan,
                "runs": 0}
    if column is not None:
        r = rate_interval(table, column)
        return {"claim": claim, "statistic": statistic, "arm": arm, "value": r["rate"], "low": r["low"],
                "high": r["high"], "runs": r["n"]}
    low, high = setting_bootstrap(table, value_of)
    return {"claim": claim, "statistic": statistic, "arm": arm, "value": value_of(table), "low": low, "high": high,
            "runs": len(table)}


def claim_effects(a: dict) -> pd.DataFrame:
    """Per claim, the effect in the real runs beside the negative controls (and, for C3, the warmup-0 arm),
    each with a 95% interval over settings: the results page's opening figure. From an
    :func:`analyse_claims`. Statistics: C1 runs that collapse then recover; C2 MOD's mean floor; C3 runs
    top-down; C4 runs whose probe beats the model's baselines; C5 hard runs where a series is informative
    (RankMe against the baselines read the same way). Real runs are those of the controls' settings
    (:func:`matched`) where a control exists, all of them for C4-C5."""
    summary, control, warm = a["summary"], a["control"], a["warmup0"]
    same = matched(summary, control)
    rows = []

    def flag(table, series):
        return None if table is None else table.assign(_flag=series(table))

    recovers = collapse_recovers
    rows += [_effect("C1", "runs that collapse then recover", arm, flag(t, recovers), "_flag")
             for arm, t in (("real", same), ("control", control))]
    mod_floor = lambda t: float(pd.to_numeric(t["rankme_floor_value"], errors="coerce").mean())  # noqa: E731
    rows += [_effect("C2", "MOD's mean RankMe floor", arm, None if t is None else t[t["task"] == "mod"],
                     value_of=mod_floor) for arm, t in (("real", same), ("control", control))]
    top = lambda t: pd.to_numeric(t["top_down_rho_step"], errors="coerce").lt(0).where(  # noqa: E731
        pd.to_numeric(t["top_down_rho_step"], errors="coerce").notna())
    rows += [_effect("C3", "runs top-down", arm, flag(t, top), "_flag")
             for arm, t in (("real", same), ("control", control), ("warmup 0", warm))]
    probes = a["probes"]
    rows += [_effect("C4", "runs whose probe beats the model", arm, t, "c4_holds")
             for arm, t in (("real", probes), ("control", a["control_probes"]))]
    hard = summary[difficulty_class(summary) == "hard"]
    for measure in ("rankme", *BASELINES[1:]):
        column = f"{measure}_is_precursor"
        if column in hard:
            t = hard[hard[column].notna()]
            t = t.assign(_flag=t[column].astype(bool) & t[f"{measure}_leads_test_loss"].eq(True))
            rows.append(_effect("C5", "hard runs where it is informative", measure, t, "_flag"))
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


def book_table(table: pd.DataFrame, digits: int = 3, index: bool = False):
    """``table`` as the book shows it: every row and column, whole cells, fitting the text column.

    Whole-number columns print as integers (``200``, not ``200.0``), other numbers
    to ``digits`` significant digits (never in e-notation above 1), missing values (NaN, None, ``<NA>``) as
    "–"; headers and text cells wrap at spaces and after underscores (``rankme_floor_step``),
    never inside a word, so a table of many columns may still be wider than the
    text column: show fewer. Text is HTML-escaped. Returns a pandas ``Styler`` (its
    HTML is the whole table: pandas' display options do not elide it).
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
    styler = styler.format(lambda v: "–" if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v))
                           else _breakable(v), subset=[c for c in table.columns if c not in formats], na_rep="–")
    if not index:
        styler = styler.hide(axis="index")
    styler = styler.format_index(_breakable, axis="columns")
    return styler.set_table_styles([
        # no max-width: a table wider than the column overflows it (and the book's browser test fails),
        # rather than being squeezed until its words break letter by letter
        {"selector": "", "props": "font-size: 0.8em; table-layout: auto;"},
        {"selector": "th, td", "props": "white-space: normal; overflow-wrap: break-word; padding: 0.2em 0.3em;"},
    ])


def _breakable(text) -> str:
    """``text`` as HTML that may break after an underscore: ``rankme_<wbr>floor_<wbr>step``."""
    return html.escape(str(text)).replace("_", "_<wbr>")


def _book_number(value, digits: int = 3) -> str:
    if value is None or value is pd.NA or not np.isfinite(value):
        return "–"
    return f"{value:,.0f}" if abs(value) >= 10 ** digits else f"{value:.{digits}g}"
