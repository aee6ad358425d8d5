"""What the measures cost and how well they resolve: the geometry's share of training time, the costly
measures' health (LLC chains, Lanczos residuals) and recording resolution, and what scoring accuracy on a
smaller test subset would change."""

from __future__ import annotations

import numpy as np
import pandas as pd

from geomcap import store
from geomcap.measures import LLC_DRIFT_TOLERANCE
from geomcap.analysis.acquisition import acquisition_step, run_chance, run_test_size, subsampled_acquisition
from geomcap.analysis.protocol import RUN_KEYS
from geomcap.analysis.series import chance_corrected, tidy_series
from geomcap.analysis.runs import is_missing


def cpu_hours_table(index: pd.DataFrame, rows: str = "size", columns: str = "part", row_order=None,
                    column_order=None) -> pd.DataFrame:
    """What a grid cost: runs and CPU-hours (``wall_s`` / 3600) of a :func:`run_index` (with a ``columns``
    column added by the caller, e.g. each run's level or "controls"), one row per ``rows`` value and one
    column pair per ``columns`` value (in ``row_order`` / ``column_order``, default order of appearance;
    values absent from the index are left out), with totals (the ``all`` columns and row). Cells with no
    run are 0 runs and 0.0 hours. Hours are the runs' own timers on whatever cores they shared: read them as
    what this grid took, not as a benchmark."""
    for name in (rows, columns, "wall_s"):  # wall_s: training, evaluation (the geometry inside it), costly
        if name not in index:
            raise KeyError(f"the run index has no {name!r} column (columns: {', '.join(map(str, index.columns))})")
    present = lambda values, order: [v for v in (order or []) if v in set(values)] + [  # noqa: E731
        v for v in dict.fromkeys(values) if v not in (order or [])]
    row_values, parts = present(index[rows], row_order), present(index[columns], column_order)
    hours = index.assign(hours=pd.to_numeric(index["wall_s"], errors="coerce") / 3600)
    grouped = hours.groupby([rows, columns], sort=False).agg(runs=("hours", "size"), hours=("hours", "sum"))
    wide = grouped.unstack(columns, fill_value=0).reindex(row_values)
    table = pd.DataFrame(index=pd.Index(row_values, name=rows))
    for part in [*parts, "all"]:
        table[f"{part} runs"] = wide["runs"].sum(axis=1) if part == "all" else wide[("runs", part)]
        table[f"{part} CPU-hours"] = wide["hours"].sum(axis=1) if part == "all" else wide[("hours", part)]
    table.loc["all"] = table.sum()
    counts = [c for c in table.columns if c.endswith(" runs")]
    return table.astype({c: int for c in counts}).astype({c: float for c in table.columns if c not in counts}
                                                         ).reset_index()


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


def measuring_cost_table(index: pd.DataFrame, by: str = "size") -> pd.DataFrame:
    """What measuring cost the runs of :func:`~geomcap.results.run_index`, per preset (or another run column)
    and code: median and worst over the runs.

    ``code`` is ``before`` for runs whose status.json has no ``write_s`` (trained before checkpoints
    appended their rows and saved state at most once a minute), ``after`` for the others. Per run,
    each part of a checkpoint in training steps of that run (``eval_s`` without the geometry,
    ``geometry_s``, ``write_s``: seconds per checkpoint / seconds per training step) and the whole
    measuring (evaluation, geometry and writing; the costly measures apart) as a share of the training
    time; ``costly / training`` over the runs that took the costly measures.
    ``by``: the run column the rows are per (the preset by default; ``"task"`` shows what a task's test set
    costs).
    Columns: ``by``, code, runs, then ``<part> median`` and ``<part> worst`` for each part.
    """
    cols = ["train_s", "eval_s", "geometry_s", "write_s", "checkpoints", "trained_steps"]
    need = index.dropna(subset=["train_s", "eval_s", "checkpoints"])
    need = need[(need["train_s"] > 0) & (need["checkpoints"] > 0)]
    if need.empty:
        return pd.DataFrame(columns=[by, "code", "runs"])
    t = need[list(dict.fromkeys([by, "costly_s", "measures", *cols]))].copy()
    t["code"] = np.where(t["write_s"].isna(), "before", "after")
    step_s = t["train_s"] / t["trained_steps"]
    per_ckpt = lambda seconds: seconds / t["checkpoints"] / step_s  # noqa: E731
    t["evaluation (steps)"] = per_ckpt(t["eval_s"] - t["geometry_s"].fillna(0))
    t["geometry (steps)"] = per_ckpt(t["geometry_s"])
    t["writing (steps)"] = per_ckpt(t["write_s"])
    t["measuring / training"] = (t["eval_s"] + t["write_s"].fillna(0)) / t["train_s"]
    t["costly / training"] = np.where(t["measures"].astype(bool), t["costly_s"] / t["train_s"], np.nan)
    parts = ["evaluation (steps)", "geometry (steps)", "writing (steps)", "measuring / training", "costly / training"]
    rows = []
    for (key, code), g in t.groupby([by, "code"], sort=False):
        row = {by: key, "code": code, "runs": len(g)}
        for part in parts:
            row[f"{part} median"], row[f"{part} worst"] = g[part].median(), g[part].max()
        rows.append(row)
    return pd.DataFrame(rows)


#: the columns of :func:`~geomcap.results.subset_scoring_table`
SUBSET_SCORING_COLUMNS = [*RUN_KEYS, "run", "n_scored", "subset_size", "acquisition_step", "unchanged", "flipped",
                          "shift_p95"]


def subset_scoring_table(runs: pd.DataFrame, subset_sizes=(128, 256), draws: int = 200,
                         seed: int = 0) -> pd.DataFrame:
    """Would scoring test accuracy on a subset have changed a run's acquisition? Per run of ``runs`` (rows of
    :func:`~geomcap.results.load_runs`) and subset size: :func:`~geomcap.results.subsampled_acquisition`
    over ``draws`` simulated subsets of its recorded accuracy.

    Columns :data:`~geomcap.analysis.costs.SUBSET_SCORING_COLUMNS`: ``n_scored`` (the run's test set,
    :func:`~geomcap.results.run_test_size`); ``acquisition_step`` on the whole set (NaN: never);
    ``unchanged`` (share of subsets giving that same step, or also never acquiring); ``flipped`` (share
    acquiring where the whole set does not, or the reverse); ``shift_p95`` (95th percentile of the shift in
    checkpoints, over the subsets that acquire where the whole set does; 0 when none). A subset size at or
    above a run's test set is the whole set: that row is left out.
    """
    rows = []
    for run in runs.itertuples():
        config = run._asdict()
        steps, accuracy = tidy_series(store.read_metrics(run.path), "accuracy")
        keep = np.isfinite(accuracy)  # as the run's summary reads it: a non-finite row is dropped
        steps, accuracy = steps[keep], accuracy[keep]
        n_scored, chance = run_test_size(config), run_chance(config)
        full = acquisition_step(steps, chance_corrected(accuracy, chance))
        for k in subset_sizes:
            if k >= n_scored:
                continue
            sim = subsampled_acquisition(steps, accuracy, n_scored, k, chance=chance, draws=draws, seed=seed)
            acquired = ~np.isnan(sim)
            same = ~acquired if full is None else (sim == full)
            both = acquired if full is not None else np.zeros_like(acquired)
            shift = np.abs(np.searchsorted(steps, sim[both]) - np.searchsorted(steps, full)) if both.any() else [0]
            rows.append({**{key: config[key] for key in RUN_KEYS}, "run": run.run, "n_scored": n_scored,
                         "subset_size": int(k), "acquisition_step": np.nan if full is None else full,
                         "unchanged": float(same.mean()), "flipped": float((acquired != (full is not None)).mean()),
                         "shift_p95": float(np.percentile(shift, 95))})
    return pd.DataFrame(rows, columns=SUBSET_SCORING_COLUMNS)


def subset_scoring_summary(table: pd.DataFrame, unchanged_at_least: float = 0.95) -> pd.DataFrame:
    """:func:`~geomcap.results.subset_scoring_table` per subset size: ``runs``, ``acquired`` (on the whole set),
    ``median unchanged`` and ``worst unchanged`` (share of subsets keeping a run's acquisition step), ``runs moved``
    (runs whose step is kept by fewer than ``unchanged_at_least`` of the subsets), ``worst flipped`` and
    ``worst shift p95`` (checkpoints)."""
    rows = []
    for k, g in table.groupby("subset_size"):
        rows.append({"subset_size": int(k), "runs": len(g), "acquired": int(g["acquisition_step"].notna().sum()),
                     "median unchanged": g["unchanged"].median(), "worst unchanged": g["unchanged"].min(),
                     "runs moved": int((g["unchanged"] < unchanged_at_least).sum()),
                     "worst flipped": g["flipped"].max(), "worst shift p95": g["shift_p95"].max()})
    return pd.DataFrame(rows, columns=["subset_size", "runs", "acquired", "median unchanged", "worst unchanged",
                                       "runs moved", "worst flipped", "worst shift p95"])


#: the columns of :func:`~geomcap.results.costly_health_table`
COSTLY_HEALTH_COLUMNS = [*RUN_KEYS, "run", "window", "estimates", "llc_not_flat", "llc_median_drift", "hessian_max_residual",
                         "hessian_median_matvecs", "train_s", "costly_s", "cost_ratio"]


def costly_health_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per run of ``runs`` that recorded the costly measures: how many estimates, how healthy, at what cost.

    Columns :data:`~geomcap.analysis.costs.COSTLY_HEALTH_COLUMNS`: ``estimates`` (checkpoints with an LLC estimate);
    ``llc_not_flat`` (estimates whose chains had not levelled off: ``|llc_trace_drift|`` above
    :data:`geomcap.measures.LLC_DRIFT_TOLERANCE`) and ``llc_median_drift`` (of ``|drift|``);
    ``hessian_max_residual`` (the worst relative Lanczos residual ``||Hv - lambda v|| / lambda``)
    and ``hessian_median_matvecs`` (Hessian-vector products per estimate); ``train_s`` and
    ``costly_s`` (seconds, from status.json) and ``cost_ratio = costly_s / train_s``; ``window``: the
    run's ``costly_window`` as "first-last" (steps), "" without one.
    """
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
    return "" if is_missing(window) else f"{int(window[0])}-{int(window[1])}"


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
    windowed = [r for r in summary["run"] if r in windows.index and not is_missing(windows[r])]
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
            f"acquisition, where {len(windowed)} run(s) record them at every checkpoint (costly_window, steps "
            f"{', '.join(spans)}). On those runs, read where the collapse is over (positive = the measure comes "
            "first): " + "; ".join(parts) + ".")
