"""Twins: runs that differ only by a perturbation of the initial weights far below any setting
(``TrainConfig.perturb``): within a seed they share everything but the accident of rounding, so their
spread is the noise floor of every per-run timing."""

from __future__ import annotations

import numpy as np
import pandas as pd

from geomcap.analysis.protocol import RUN_KEYS
from geomcap.analysis.series import spearman


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
                           level: float = 0.95, column: str | None = None) -> dict:
    """Does a measure's transition move when acquisition moves, between twins? Within each setting and seed,
    each twin's shift from the seed's mean (transition step, acquisition step); the Spearman correlation of
    the two shifts pooled over seeds, with a percentile interval from resampling the seeds (their twins kept
    together). Only twins where both steps are defined count, and seeds with at least two of them.

    ``column``: the step column read (default ``<measure>_transition_step``; e.g. a signal's last alarm before
    acquisition, :func:`~geomcap.results.twin_alarm_table`).

    Returns ``measure``, ``twins``, ``seeds``, ``rho``, ``ci_low``, ``ci_high`` (NaN when undefined)."""
    column = column or f"{measure}_transition_step"
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
    rho = lambda rows: spearman(rows[:, 0], rows[:, 1]) if len(rows) >= 3 else np.nan  # noqa: E731
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


def twins_text(table: pd.DataFrame, measures=("rankme", "test_loss", "train_accuracy")) -> str:
    """What the twins (:func:`twin_table`) say, for the book: per setting the acquisition step's spread
    between twins of one seed beside its spread between seeds (:func:`twin_spread`), then, per measure,
    whether its transition moves with acquisition between twins (:func:`twin_shift_correlation`)."""
    twins = table[table["twin"] > 0] if len(table) else table
    if twins.empty:
        return "No twin run is in this selection yet."
    parts = []
    for row in twin_spread(table).itertuples():
        setting = f"{row.task}/{row.level} {row.size}"
        if not np.isfinite(row.within_seed_sd):
            parts.append(f"{setting}: fewer than two acquired runs per seed, no spread yet")
            continue
        across = (f", against {row.across_seed_sd:.0f} between the means of its {row.seeds} seeds"
                  if np.isfinite(row.across_seed_sd) else "")
        parts.append(f"{setting}: between the runs of one seed (the unperturbed run and its twins, "
                     f"{row.twins_per_seed:.0f} per seed) acquisition moved by a median range of "
                     f"{row.within_seed_range:.0f} steps (standard deviation {row.within_seed_sd:.0f}){across}")
    text = "; ".join(parts) + "."
    shifts = []
    for m in measures:
        c = twin_shift_correlation(table, m)
        if np.isfinite(c["rho"]):
            interval = f" (95% CI {c['ci_low']:.2f} to {c['ci_high']:.2f})" if np.isfinite(c["ci_low"]) else ""
            shifts.append(f"{m} rho = {c['rho']:.2f}{interval} over {c['twins']} runs of {c['seeds']} seeds")
        else:
            shifts.append(f"{m}: no shift to correlate ({c['twins']} runs with both steps)")
    return text + " Does a transition move with acquisition between twins? " + "; ".join(shifts) + "."
