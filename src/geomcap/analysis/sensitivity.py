"""The sensitivity grid: claims C1/C3 under each RankMe variant, and runs of changed training settings
beside their baselines (which setting each changed, and what the claims' events did)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from geomcap import measures, store
from geomcap.analysis.protocol import RUN_KEYS
from geomcap.analysis.runs import load_runs
from geomcap.analysis.table import summary_table
from geomcap.config import SWEEP_SETTABLE, TrainConfig


RANKME_VARIANTS = measures.RANKME_VARIANTS


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
    Only the fields a sweep may set (:data:`geomcap.config.SWEEP_SETTABLE`) are compared."""
    # a namedtuple from itertuples(), or a dict / Series (whose .size is not the preset)
    get = (lambda key: getattr(run, key)) if hasattr(run, "_fields") else run.__getitem__
    default = asdict(TrainConfig(task=get("task"), level=get("level"), size=get("size"), seed=int(get("seed")),
                                 steps=int(get("steps"))))
    changed = []
    for key in sorted(SWEEP_SETTABLE):
        try:
            value = get(key)
        except (AttributeError, KeyError):  # a field added after this store's runs were made
            continue
        if SWEEP_SETTABLE[key] is str:
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
