"""The claims across sizes: each claim's statistic per preset, real runs beside the controls, with intervals over
settings (the scale grid's question: does what holds at 405k still hold at 4m, 14m, 48m?).

:func:`~geomcap.results.claims_by_size` reads one summary table (:func:`~geomcap.results.summary_table`) of runs of several presets,
and optionally the controls' and C4's selectivity table and, for C8, the runs and their metrics. The verdict
rules are the claims' own (:mod:`geomcap.claims.c1` .. :mod:`geomcap.claims.c8`); this table shows what each
rule reads, preset by preset.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from geomcap.analysis.difficulty import difficulty_class
from geomcap.analysis.forecast import VERDICT_HORIZON, forecast_runs, forecast_table
from geomcap.analysis.collapse import collapse
from geomcap.analysis.intervals import rate_interval, setting_bootstrap
from geomcap.analysis.protocol import MIN_TOP_DOWN_LAYERS, RECOVERY_FRACTION
from geomcap.analysis.runs import is_shuffled_control
from geomcap.analysis.series import final_layer_rows
from geomcap.claims.c1 import collapse_recovers
from geomcap.claims.c6 import acquired_during_collapse
from geomcap.claims.c8 import trajectory_correlation
from geomcap.presets import PRESETS
from geomcap.tasks import LEVELS

#: the statistics :func:`~geomcap.results.claims_by_size` reports: (claim, statistic) -> what it is, in words
SCALE_STATISTICS = {
    ("C1", "ordered"): "share of acquired runs whose RankMe collapsed, recovered, then acquisition came",
    ("C1", "collapse then recovery"): "share of runs whose RankMe collapsed then recovered (readable on controls)",
    ("C2", "MOD floor"): "median collapse floor of the final layer's RankMe on mod",
    ("C2", "MUL floor"): "median collapse floor on mul",
    ("C3", "top-down"): "share of runs with a defined top-down statistic that collapse top-down",
    ("C4", "selectivity"): "median over runs of the best layer's probe selectivity (probe minus control task)",
    ("C5", "recall"): f"RankMe's alarms: share of hard runs with acquisition within {VERDICT_HORIZON} steps",
    ("C6", "acquired during the collapse"): "share of acquired runs acquired by the collapse's recovery",
    ("C8", "trajectory rho"): "median Spearman rho of the final layer's RankMe against the reference preset's",
}
#: the columns of :func:`~geomcap.results.claims_by_size`
SCALE_COLUMNS = ("claim", "statistic", "size", "parameters", "arm", "value", "low", "high", "runs", "settings")
#: why a preset's runs can give a statistic of :data:`~geomcap.claims.scale.SCALE_STATISTICS` no value:
#: (claim, statistic) -> reason
SCALE_GAPS = {
    ("C1", "ordered"): "no run acquired its task",
    ("C1", "collapse then recovery"): "no run",
    ("C2", "MOD floor"): "no mod run",
    ("C2", "MUL floor"): "no mul run",
    ("C3", "top-down"): (f"no run with {MIN_TOP_DOWN_LAYERS} layers whose RankMe collapses, which the order needs: "
                         "a preset with fewer blocks never has them (the top-down section reads the deeper variants)"),
    ("C4", "selectivity"): "no run recorded the control-task probe (runs made before it was measured)",
    ("C5", "recall"): ("no run classed hard from its behaviour was acquired after RankMe could first raise an "
                       "alarm"),
    ("C6", "acquired during the collapse"): "no run acquired its task",
    ("C8", "trajectory rho"): "it is the reference preset, or none of its runs repeats a setting the reference ran",
}
#: the columns of :func:`~geomcap.results.missing_points`
GAP_COLUMNS = ("claim", "statistic", "sizes", "why")


def missing_points(table: pd.DataFrame, sizes) -> pd.DataFrame:
    """The presets of ``sizes`` that a statistic's panel has no real-run point for, with why
    (:data:`~geomcap.claims.scale.SCALE_GAPS`): one row per statistic of
    :data:`~geomcap.claims.scale.SCALE_STATISTICS` that lacks any, ``sizes`` a comma-separated list in the order
    given. ``table``: :func:`~geomcap.results.claims_by_size`'s. Columns :data:`~geomcap.claims.scale.GAP_COLUMNS`."""
    real = table[table["arm"] == "real"] if len(table) else table
    rows = []
    for key in SCALE_STATISTICS:
        at = real[(real["claim"] == key[0]) & (real["statistic"] == key[1])] if len(real) else real
        lacking = [size for size in sizes if size not in set(at["size"] if len(at) else ())]
        if lacking:
            rows.append({"claim": key[0], "statistic": key[1], "sizes": ", ".join(lacking), "why": SCALE_GAPS[key]})
    return pd.DataFrame(rows, columns=list(GAP_COLUMNS))


def _rate_row(claim, statistic, size, parameters, arm, table, flags) -> dict:
    r = rate_interval(table.assign(_flag=flags), "_flag")
    return {"claim": claim, "statistic": statistic, "size": size, "parameters": parameters, "arm": arm,
            "value": r["rate"], "low": r["low"], "high": r["high"], "runs": r["n"], "settings": r["settings"]}


def _median_row(claim, statistic, size, parameters, arm, table, column) -> dict:
    values = table.assign(_v=pd.to_numeric(table[column], errors="coerce")).dropna(subset=["_v"])
    median = lambda t: float(t["_v"].median()) if len(t) else np.nan  # noqa: E731
    low, high = setting_bootstrap(values, median, n_boot=1000) if len(values) else (np.nan, np.nan)
    settings = len(values.groupby(["task", "level", "size"])) if len(values) else 0
    return {"claim": claim, "statistic": statistic, "size": size, "parameters": parameters, "arm": arm,
            "value": median(values), "low": low, "high": high, "runs": len(values), "settings": settings}


def _parameters(summary: pd.DataFrame, size: str) -> float:
    values = pd.to_numeric(summary.loc[summary["size"] == size, "parameters"], errors="coerce").dropna()
    return float(values.median()) if len(values) else np.nan


def claims_by_size(summary: pd.DataFrame, control: pd.DataFrame | None = None,
                   selectivity: pd.DataFrame | None = None, runs: pd.DataFrame | None = None,
                   metrics: pd.DataFrame | None = None, reference: str = "405k") -> pd.DataFrame:
    """One row per claim statistic (:data:`~geomcap.claims.scale.SCALE_STATISTICS`), preset and arm ("real", "control"): ``value``
    with its 95% interval over settings (``low``, ``high``), ``runs`` and ``settings`` counted, and the
    preset's ``parameters`` (status.json's count, for a log axis). ``selectivity``: C4's table
    (:func:`~geomcap.results.selectivity_table`); ``runs`` and ``metrics`` (tidy, with ``run``): C8's trajectories
    against the ``reference`` preset's real runs, for every other preset of the same task, level and seed (the
    size ratio in ``parameters``; a pair less than :data:`~geomcap.claims.c8.MIN_SIZE_RATIO` apart is outside
    C8's regime, kept and marked by the ratio), the ``control`` arm from the larger preset's negative controls
    where ``runs`` has them (:func:`~geomcap.results.is_shuffled_control`). Columns :data:`~geomcap.claims.scale.SCALE_COLUMNS`."""
    rows = []
    arms = [("real", summary)] + ([("control", control)] if control is not None and len(control) else [])
    sizes = list(dict.fromkeys(summary["size"]))
    for arm, table in arms:
        for size in sizes:
            at = table[table["size"] == size]
            if at.empty:
                continue
            n = _parameters(summary, size)
            acquired = at[at["acquisition_step"].notna()]
            if arm == "real" and len(acquired):
                rows.append(_rate_row("C1", "ordered", size, n, arm, acquired,
                                      acquired["ordered_collapse_recovery_acquisition"].fillna(False).astype(bool)))
                rows.append(_rate_row("C6", "acquired during the collapse", size, n, arm, acquired,
                                      acquired_during_collapse(acquired)))
            rows.append(_rate_row("C1", "collapse then recovery", size, n, arm, at, collapse_recovers(at)))
            for task, statistic in (("mod", "MOD floor"), ("mul", "MUL floor")):
                if (at["task"] == task).any():
                    rows.append(_median_row("C2", statistic, size, n, arm, at[at["task"] == task],
                                            "rankme_floor_value"))
            defined = at[at["is_top_down"].notna()]
            if len(defined):
                rows.append(_rate_row("C3", "top-down", size, n, arm, defined, defined["is_top_down"].astype(bool)))
            hard = at[difficulty_class(at) == "hard"] if arm == "real" else at.iloc[:0]
            if len(hard):
                f = forecast_table(forecast_runs(hard, [("rankme", "final")], (VERDICT_HORIZON,)), n_boot=500)
                if len(f) and f["runs"].iloc[0]:
                    r = f.iloc[0]
                    rows.append({"claim": "C5", "statistic": "recall", "size": size, "parameters": n, "arm": arm,
                                 "value": r["recall"], "low": r["recall_low"], "high": r["recall_high"],
                                 "runs": int(r["runs"]), "settings": int(r["settings"])})
    if selectivity is not None and len(selectivity):
        best = selectivity.groupby("run").agg(selectivity=("selectivity", "max"), task=("task", "first"),
                                              level=("level", "first"), size=("size", "first"))
        control_runs = set(control["run"]) if control is not None and len(control) else set()
        for arm in ("real", "control"):
            chosen = best[best.index.isin(control_runs) == (arm == "control")]
            for size, at in chosen.groupby("size", sort=False):
                rows.append(_median_row("C4", "selectivity", size, _parameters(summary, size), arm, at,
                                        "selectivity"))
    if runs is not None and metrics is not None:
        shuffled = is_shuffled_control(runs)
        proxies = runs[~shuffled & (runs["size"] == reference)]
        for size in sizes:
            if size == reference:
                continue
            for arm, large in (("real", runs[~shuffled]), ("control", runs[shuffled])):
                pairs = trajectory_correlation(metrics, pd.concat([proxies, large[large["size"] == size]]), reference,
                                               size)
                if len(pairs):
                    rows.append(_median_row("C8", "trajectory rho", size, _parameters(summary, size), arm,
                                            pairs.assign(size=size), "spearman"))
    return pd.DataFrame(rows, columns=list(SCALE_COLUMNS))


#: the columns of :func:`~geomcap.results.c2_floors_by_level`
FLOOR_COLUMNS = ("task", "level", "size", "parameters", "value", "low", "high", "runs", "settings")


def c2_floors_by_level(summary: pd.DataFrame, tasks=("mod", "mul")) -> pd.DataFrame:
    """C2's collapse floors level by level: per task, level and preset, the median over real runs of the final
    layer's RankMe at its collapse floor (``rankme_floor_value``), with its 95% interval over seeds. The floors
    of :func:`~geomcap.results.claims_by_size` pool the levels a preset has, so a preset trained on fewer
    levels than another moves for its levels, not its size; here each line keeps one level. Rows by task,
    level (easy to hard) and parameters; columns :data:`~geomcap.claims.scale.FLOOR_COLUMNS`."""
    real = summary[~is_shuffled_control(summary).astype(bool)]
    rows = []
    for task in tasks:
        for (level, size), at in real[real["task"] == task].groupby(["level", "size"], sort=False):
            row = _median_row("C2", "", size, _parameters(summary, size), "real", at, "rankme_floor_value")
            if row["runs"]:
                rows.append({"task": task, "level": level, **{k: row[k] for k in FLOOR_COLUMNS[2:]}})
    floors = pd.DataFrame(rows, columns=list(FLOOR_COLUMNS))
    order = {level: i for i, level in enumerate(LEVELS)}
    return floors.sort_values(["task", "level", "parameters"], key=lambda c: c.map(order) if c.name == "level" else c,
                              kind="stable").reset_index(drop=True)


#: the columns of :func:`~geomcap.results.c1_recovery_thresholds`
RECOVERY_COLUMNS = ("size", "parameters", "recovery_fraction", "initial", "floor", "collapsed", "recovered",
                    "acquired", "ordered")


def c1_recovery_thresholds(summary: pd.DataFrame, metrics: pd.DataFrame,
                           fractions=(0.25, RECOVERY_FRACTION, 0.75)) -> pd.DataFrame:
    """C1 against the protocol's recovery threshold, preset by preset. A collapse recovers when the final
    layer's RankMe regains ``recovery_fraction`` of its drop (:data:`~geomcap.analysis.protocol.RECOVERY_FRACTION`
    by default), and the drop runs from the RankMe at initialisation, which grows with width: the same
    learned representation that recovers a 405k run's collapse may not recover a 14m run's. Per preset
    (real runs of ``summary``, final-layer ``rankme`` series of ``metrics``, tidy with ``run``) and
    fraction: the median ``initial`` and ``floor`` RankMe, the runs that ``collapsed``, the share of them
    ``recovered``, and the share of the ``acquired`` ones ``ordered`` (floor < recovery <= acquisition, C1's
    statistic), every collapse located again by :func:`geomcap.events.collapse` with that fraction alone
    changed. Columns :data:`~geomcap.claims.scale.RECOVERY_COLUMNS`."""
    real = summary[~is_shuffled_control(summary).astype(bool)]
    series = final_layer_rows(metrics, "rankme")
    found = []
    for run in real.itertuples():
        steps, values = (series.loc[series["run"] == run.run].sort_values("step")[c].to_numpy(float)
                         for c in ("step", "value"))
        if np.isfinite(values).sum() < 2:
            continue
        acq = pd.to_numeric(pd.Series([run.acquisition_step]), errors="coerce").iloc[0]
        for fraction in fractions:
            c = collapse(steps, values, recovery_fraction=fraction)
            recovered = c.collapsed and c.recovery_step is not None
            found.append({"size": run.size, "recovery_fraction": fraction, "initial": c.initial_value,
                          "floor": c.floor_value, "collapsed": c.collapsed, "recovered": recovered,
                          "acquired": bool(np.isfinite(acq)),
                          "ordered": bool(recovered and np.isfinite(acq) and c.floor_step < c.recovery_step <= acq)})
    if not found:
        return pd.DataFrame(columns=list(RECOVERY_COLUMNS))
    found = pd.DataFrame(found)
    rows = []
    for (size, fraction), at in found.groupby(["size", "recovery_fraction"], sort=False):
        collapsed, acquired = at[at["collapsed"]], at[at["acquired"] & at["collapsed"]]
        rows.append({"size": size, "parameters": _parameters(summary, size), "recovery_fraction": fraction,
                     "initial": float(at["initial"].median()), "floor": float(at["floor"].median()),
                     "collapsed": len(collapsed),
                     "recovered": float(collapsed["recovered"].mean()) if len(collapsed) else np.nan,
                     "acquired": len(acquired),
                     "ordered": float(acquired["ordered"].mean()) if len(acquired) else np.nan})
    return pd.DataFrame(rows, columns=list(RECOVERY_COLUMNS)).sort_values(
        ["parameters", "recovery_fraction"], kind="stable").reset_index(drop=True)


#: the columns of :func:`~geomcap.results.against_controls`
CONTRAST_COLUMNS = ("claim", "statistic", "size", "real", "real_low", "real_high", "settings", "control",
                    "control_runs", "control_inside")


def _interval_read(row) -> bool:
    """Whether a row's 95% interval is over settings (at least two), not one setting's spread."""
    return row["settings"] >= 2 and np.isfinite(row["low"]) and np.isfinite(row["high"])


def against_controls(table: pd.DataFrame) -> pd.DataFrame:
    """Each statistic of a :func:`~geomcap.results.claims_by_size` table beside its negative controls, preset by
    preset where both arms exist: the real arm's ``real`` value and 95% interval over settings, its
    ``settings``, the control arm's ``control`` value and ``control_runs``, and ``control_inside``: whether the
    control's value lies inside the real arm's interval (True: runs where nothing can be learnt give a value
    the real runs cannot be told from, so at that preset the statistic does not speak of learning; None where
    the real arm rests on fewer than two settings, whose interval is one setting's spread). Read it on a table
    whose real arm covers the controls' tasks and levels only, so that both arms see the same settings.
    Columns :data:`~geomcap.claims.scale.CONTRAST_COLUMNS`."""
    keys = ["claim", "statistic", "size"]
    real = table[table["arm"] == "real"].set_index(keys)
    control = table[table["arm"] == "control"].set_index(keys)
    rows = []
    for key, c in control.iterrows():
        if key not in real.index:
            continue
        r = real.loc[key]
        inside = None
        if _interval_read(r) and np.isfinite(c["value"]):
            inside = bool(r["low"] <= c["value"] <= r["high"])
        rows.append({**dict(zip(keys, key)), "real": r["value"], "real_low": r["low"], "real_high": r["high"],
                     "settings": int(r["settings"]), "control": c["value"], "control_runs": int(c["runs"]),
                     "control_inside": inside})
    return pd.DataFrame(rows, columns=list(CONTRAST_COLUMNS))


#: the columns of :func:`~geomcap.results.size_trends`
TREND_COLUMNS = ("claim", "statistic", "smallest", "largest", "presets", "first", "first_low", "first_high",
                 "last", "last_low", "last_high", "change")


def size_trends(table: pd.DataFrame) -> pd.DataFrame:
    """Each statistic of a :func:`~geomcap.results.claims_by_size` table (real runs), from its smallest preset
    to its largest, in the order of :data:`~geomcap.claims.scale.SCALE_STATISTICS`: ``first`` and ``last``
    with their 95% intervals over settings, ``presets`` (how many have a value), and ``change``: "rises" or
    "falls" where the two intervals do not overlap, "within the intervals" where they do, "one preset" where
    only one has a value, and "not compared" where either value rests on fewer than two settings (its
    interval is one setting's spread, not the settings'). Columns :data:`~geomcap.claims.scale.TREND_COLUMNS`."""
    real = table[(table["arm"] == "real") & np.isfinite(pd.to_numeric(table["value"], errors="coerce"))]
    rows = []
    for key in SCALE_STATISTICS:
        at = real[(real["claim"] == key[0]) & (real["statistic"] == key[1])].sort_values("parameters")
        if at.empty:
            continue
        first, last = at.iloc[0], at.iloc[-1]
        if len(at) == 1:
            change = "one preset"
        elif not (_interval_read(first) and _interval_read(last)):
            change = "not compared"
        elif last["low"] > first["high"]:
            change = "rises"
        elif last["high"] < first["low"]:
            change = "falls"
        else:
            change = "within the intervals"
        rows.append({"claim": key[0], "statistic": key[1], "smallest": first["size"], "largest": last["size"],
                     "presets": len(at), "first": first["value"], "first_low": first["low"],
                     "first_high": first["high"], "last": last["value"], "last_low": last["low"],
                     "last_high": last["high"], "change": change})
    return pd.DataFrame(rows, columns=list(TREND_COLUMNS))


def size_trends_text(trends: pd.DataFrame) -> str:
    """One clause per row of :func:`~geomcap.results.size_trends`, e.g. "C1 (ordered) falls: 0.99 [0.94, 1.00]
    at 405k, 0.42 [0.17, 0.67] at 14m"."""
    def value(v, low, high):
        return f"{v:.2f}" + (f" [{low:.2f}, {high:.2f}]" if np.isfinite(low) and np.isfinite(high) else "")

    clauses = []
    for r in trends.itertuples():
        name = f"{r.claim} ({r.statistic})"
        if r.change == "one preset":
            clauses.append(f"{name} only at {r.smallest}: {value(r.first, r.first_low, r.first_high)}")
            continue
        verb = {"rises": "rises", "falls": "falls", "within the intervals": "stays within its intervals",
                "not compared": "is not compared (a preset rests on one setting)"}[r.change]
        clauses.append(f"{name} {verb}: {value(r.first, r.first_low, r.first_high)} at {r.smallest}, "
                       f"{value(r.last, r.last_low, r.last_high)} at {r.largest}")
    return "; ".join(clauses) + "." if clauses else "No statistic has a value yet."


def size_ratios(table: pd.DataFrame, reference: str = "405k") -> pd.Series:
    """Per preset of a :func:`~geomcap.results.claims_by_size` table, its parameters over the ``reference`` preset's: C8 is in
    its regime where this is at least :data:`~geomcap.claims.c8.MIN_SIZE_RATIO`."""
    params = table.groupby("size")["parameters"].first()
    return params / params.get(reference, np.nan)


#: the columns of :func:`~geomcap.results.c6_regime_trend`
C6_TREND_COLUMNS = ("level", "size", "parameters", "value", "low", "high", "runs", "settings")
#: the largest preset the paper trains, where :func:`~geomcap.results.c6_regime_trend` reads its lines
PAPER_LARGEST = "151m"


def block_parameters(preset: str) -> float:
    """A preset's parameters in its blocks' matrices, 12 x layers x width^2 (attention 4 d^2, MLP 8 d^2): from
    1.3m up, the count its name rounds; the embeddings and vectors add the rest (under 0.2% at 151m on these
    tasks' vocabularies)."""
    cfg = PRESETS[preset]
    return float(12 * cfg.n_layer * cfg.d_model ** 2)


def c6_regime_trend(summary: pd.DataFrame, largest: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """How far each preset is from C6's regime (acquisition during the collapse), level by level.

    Per level and preset, ``value``: the median over acquired runs whose collapse recovered of the acquisition
    step over the final layer's RankMe recovery step (at most 1: acquired during the collapse, the runs
    :func:`~geomcap.results.acquired_during_collapse` counts), with its 95% interval over settings. Then per
    level with at least two presets, a least-squares line of log10(value) against log10(parameters) through
    the presets' medians: ``slope`` (decades of the ratio per decade of parameters) and ``reaches_one_at``,
    the parameters where the line reaches 1 (NaN where the slope is not negative: the ratio does not come
    down with size), and ``at_largest``, the line's ratio at ``largest`` parameters (default: the blocks of
    :data:`~geomcap.claims.scale.PAPER_LARGEST`, :func:`~geomcap.results.block_parameters`), so that a line
    reaching 1 far beyond any size anyone trains reads as what it is. Returns (per preset:
    :data:`~geomcap.claims.scale.C6_TREND_COLUMNS`; per level: level, presets, slope, reaches_one_at,
    at_largest), levels easy to hard and presets by parameters within each. A line through three or four
    medians is a direction, not a forecast."""
    largest = block_parameters(PAPER_LARGEST) if largest is None else float(largest)
    acq = pd.to_numeric(summary["acquisition_step"], errors="coerce")
    recovery = pd.to_numeric(summary["rankme_recovery_step"], errors="coerce")
    ratio = summary.assign(acquisition_over_recovery=acq / recovery)
    rows = []
    for level, at_level in ratio.groupby("level", sort=False):
        for size in dict.fromkeys(at_level["size"]):
            at = at_level[at_level["size"] == size]
            row = _median_row("C6", "", size, _parameters(summary, size), "real", at, "acquisition_over_recovery")
            if row["runs"]:
                rows.append({"level": level, **{k: row[k] for k in C6_TREND_COLUMNS if k != "level"}})
    per_size = pd.DataFrame(rows, columns=list(C6_TREND_COLUMNS))
    levels = {level: LEVELS.index(level) if level in LEVELS else len(LEVELS) for level in per_size["level"]}
    per_size = per_size.sort_values(["level", "parameters"], key=lambda c: c.map(levels) if c.name == "level" else c,
                                    kind="stable").reset_index(drop=True)  # presets by size within each level
    fits = []
    for level, at in per_size.groupby("level", sort=False):
        at = at.dropna(subset=["parameters", "value"])
        at = at[at["value"] > 0]
        if at["parameters"].nunique() < 2:
            continue
        x, y = np.log10(at["parameters"].astype(float)), np.log10(at["value"].astype(float))
        slope, intercept = np.polyfit(x, y, 1)
        fits.append({"level": level, "presets": ", ".join(at["size"]), "slope": float(slope),
                     "reaches_one_at": float(10 ** (-intercept / slope)) if slope < 0 else np.nan,
                     "at_largest": float(10 ** (intercept + slope * np.log10(largest)))})
    return per_size, pd.DataFrame(fits, columns=["level", "presets", "slope", "reaches_one_at", "at_largest"])
