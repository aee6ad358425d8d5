"""C5: a RankMe precursor on hard runs, read as a forecast (every alarm scored against random alarms, a clock and
the test loss, and against the controls), with both first-transition readings of "precursor" (the informative
one and the paper's) and their timing across runs beside it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from geomcap import measures
from geomcap.analysis.difficulty import DIFFICULTY_CLASSES, difficulty_class
from geomcap.analysis.forecast import (FORECAST_COLUMNS, VERDICT_HORIZON, false_alarm_table, forecast_runs,
                                       forecast_table)
from geomcap.analysis.intervals import rate_interval, setting_bootstrap
from geomcap.analysis.protocol import BEHAVIOURAL_BASELINES, READINGS, SETTING_KEYS
from geomcap.analysis.series import spearman
from geomcap.claims.verdicts import MIN_RUNS, claim_row
from geomcap.tasks import LEVELS


#: the five measures of the paper's precursor comparison (claim C5), in its order: RankMe, then the costly
#: measures (the series compared within one run are :data:`~geomcap.analysis.protocol.PRECURSOR_MEASURES`)
C5_MEASURES = ("rankme", *measures.COSTLY_MEASURES)

#: the baselines every precursor is compared with (behaviour, and the parameter norm)
BASELINES = BEHAVIOURAL_BASELINES

#: the claim this module decides
CLAIM = "C5"
#: its verdict rule, in words, from the thresholds it uses (:data:`~geomcap.claims.table.RULES` collects every claim's)
RULE = (f"read as a forecast (geomcap.analysis.forecast) at a horizon of {VERDICT_HORIZON} steps on the hard runs: "
        f"reproduced: on >= {MIN_RUNS} hard runs RankMe's alarms have skill (the setting-bootstrap interval of "
        "its recall above the recall of random alarms at its rate, and its precision above theirs), its recall "
        "and precision are at least the test loss's, its recall at least a clock's at its rate, and its "
        "alarms on the shuffled-answer controls come at most half as often as before acquisition on the real "
        "runs; partly: skill alone; not reproduced: otherwise; not testable: fewer than "
        f"{MIN_RUNS} hard runs acquired after the first step an alarm can be raised. The first-transition reading "
        "(informative: leads acquisition and the test loss) is given beside it")


def precursor_table(summary: pd.DataFrame, by: str = "difficulty", measures=C5_MEASURES,
                    reading: str = "informative") -> pd.DataFrame:
    """Per measure and group, one reading of "precursor" over the acquired runs where the measure's
    reading is defined (``reading``: "informative", the protocol's (b), or "paper", (a); see
    :data:`~geomcap.analysis.protocol.READINGS`).

    Columns: ``runs``; ``precursor`` (the transition leads acquisition by >= 2 checkpoints), ``rate``
    and its setting-bootstrap interval ``rate_low``, ``rate_high``; ``leads_test_loss`` (also leads the
    test loss's transition, counted among runs where it is defined: ``leads_defined``), ``leads_rate``;
    ``informative`` (leads both) and ``informative_rate`` with its interval; the median lead in
    checkpoints (``median_gap_checkpoints``) and as a share of the acquisition step
    (``median_gap_share``); ``settings``. ``by``: "difficulty" (:func:`~geomcap.results.difficulty_class`), "level" or
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


def timing_prediction(summary: pd.DataFrame, measure: str = "rankme", n_boot: int = 2000, seed: int = 0,
                      level: float = 0.95, reading: str = "informative") -> dict:
    """Does a measure's transition timing predict acquisition timing across runs? (reading (b) of C5)

    Spearman rank correlation, over the acquired runs of ``summary`` (one row per run, e.g.
    :func:`~geomcap.results.summary_table` or a subset such as one task's seeds) where the transition is defined, of the
    measure's transition step (``reading``: see :data:`~geomcap.analysis.protocol.READINGS`) against ``acquisition_step``, with a
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
    rho = lambda t: spearman(t["x"].to_numpy(float), t["y"].to_numpy(float)) if len(t) >= 3 else np.nan  # noqa: E731
    out["rho"] = rho(both)
    if np.isnan(out["rho"]):
        return out
    out["ci_low"], out["ci_high"] = setting_bootstrap(both, rho, n_boot, seed, level, keys=keys or ["x"])
    return out


def _reading_row(table: pd.DataFrame, measure: str, group: str, by: str) -> dict | None:
    rows = table[(table["measure"] == measure) & (table[by] == group)] if len(table) else table
    return None if rows.empty or not rows["runs"].iloc[0] else rows.iloc[0].to_dict()


def forecast_reading(summary: pd.DataFrame, control: pd.DataFrame | None = None,
                     horizon: int = VERDICT_HORIZON) -> dict:
    """C5 read as a forecast on the hard runs of ``summary`` at ``horizon``: {"table": the
    :func:`~geomcap.results.forecast_table` rows at ``horizon`` per signal (index ``signal``),
    "false_alarms": :func:`~geomcap.results.false_alarm_table` of ``control`` (None without controls)}."""
    hard = summary[difficulty_class(summary) == "hard"]
    per_run = forecast_runs(hard, horizons=(horizon,)) if len(hard) else pd.DataFrame()
    table = (forecast_table(per_run).set_index("signal") if len(per_run) else
             pd.DataFrame(columns=FORECAST_COLUMNS).set_index("signal"))
    false = (false_alarm_table(control).set_index("signal") if control is not None and len(control) else None)
    return {"table": table, "false_alarms": false}


def _recall_text(r) -> str:
    return f"recall {r['recall']:.2f} ({int(r['runs'])} runs)" if np.isfinite(r["recall"]) else "recall undefined"


def claim_c5(summary: pd.DataFrame, control: pd.DataFrame | None = None) -> dict:
    """C5 on the runs classed hard from behaviour (:func:`~geomcap.results.difficulty_class`), read as a forecast
    (:func:`~geomcap.results.forecast_reading`: every alarm of RankMe's final layer scored at :data:`~geomcap.analysis.forecast.VERDICT_HORIZON` against
    random alarms and a clock at its rate, the test loss read by the same rule, and its false alarms on the
    shuffled-answer controls, ``control``); the first-transition reading (b) and the paper's reading (a)
    beside it."""
    rule = RULE
    reading = forecast_reading(summary, control)
    table = reading["table"]
    if "rankme" not in table.index or table.loc["rankme", "runs"] < MIN_RUNS:
        n = 0 if "rankme" not in table.index else int(table.loc["rankme", "runs"])
        return claim_row("C5", f"{n} hard run(s) acquired after an alarm could be raised", rule=rule)
    r = table.loc["rankme"]
    text = (f"RankMe alarms at {VERDICT_HORIZON} steps: {_recall_text(r)}, random at its rate "
            f"{r['random_recall']:.2f}; {int(r['alarms'])} alarms before acquisition"
            + (f", precision {r['precision']:.2f} (random {r['random_precision']:.2f})" if r["alarms"] else ""))
    informative = _reading_row(precursor_table(summary, by="difficulty", measures=["rankme", "test_loss"]),
                               "rankme", "hard", "difficulty")
    paper_row = _reading_row(precursor_table(summary, by="difficulty", measures=["rankme", "test_loss"],
                                             reading="paper"), "rankme", "hard", "difficulty")
    if informative:
        text += f"; first transition informative {informative['informative']}/{informative['runs']}"
    if paper_row:
        text += f"; the paper's reading: {paper_row['precursor']}/{paper_row['runs']} lead acquisition"
    parts = []
    for name in ("test_loss", "train_accuracy", "rankme (any layer)"):
        if name in table.index:
            parts.append(f"{name} {_recall_text(table.loc[name])}")
    if np.isfinite(r["clock_recall"]):
        parts.append(f"a clock at RankMe's rate: recall {r['clock_recall']:.2f}")
    false = reading["false_alarms"]
    control_rate = np.nan
    if false is not None and "rankme" in false.index:
        f = false.loc["rankme"]
        control_rate = f["alarms_per_1000"]
        parts.append(f"controls: {int(f['alarms'])} RankMe alarm(s) in {f['steps'] / 1000:.1f}k steps "
                     f"({int(f['armed'])} of {int(f['runs'])} armed)")
    skill = (np.isfinite(r["recall_low"]) and r["recall_low"] > r["random_recall"] and r["alarms"] > 0
             and r["precision"] > r["random_precision"])
    loss = table.loc["test_loss"] if "test_loss" in table.index else None
    beats_loss = loss is None or ((r["recall"] >= loss["recall"]) and
                                  (not np.isfinite(loss["precision"]) or r["precision"] >= loss["precision"]))
    quiet_on_controls = np.isfinite(control_rate) and control_rate <= 0.5 * r["alarms_per_1000_pre"]
    beats_clock = not np.isfinite(r["clock_recall"]) or r["recall"] >= r["clock_recall"]
    verdict = ("reproduced" if skill and beats_loss and beats_clock and quiet_on_controls else
               "partly reproduced" if skill else "not reproduced")
    return claim_row("C5", text, float(r["recall"]), verdict, rule, "; ".join(parts))
