"""C5: a RankMe precursor on hard runs, both readings of "precursor" (the informative one and the paper's),
its timing across runs, against the behavioural baselines and the LLC."""

from __future__ import annotations

import numpy as np
import pandas as pd

from geomcap import measures
from geomcap.analysis.difficulty import DIFFICULTY_CLASSES, difficulty_class
from geomcap.analysis.intervals import rate_interval, setting_bootstrap
from geomcap.analysis.protocol import BEHAVIOURAL_BASELINES, READINGS, SETTING_KEYS
from geomcap.analysis.series import spearman
from geomcap.claims.verdicts import MIN_RUNS, RATE_HIGH, RATE_LOW, claim_row
from geomcap.tasks import LEVELS


#: the five measures of the paper's precursor comparison (claim C5), in its order: RankMe, then the costly
#: measures (the series compared within one run are :data:`~geomcap.analysis.protocol.PRECURSOR_MEASURES`)
C5_MEASURES = ("rankme", *measures.COSTLY_MEASURES)

#: the baselines every precursor is compared with (behaviour, and the parameter norm)
BASELINES = BEHAVIOURAL_BASELINES

#: the claim this module decides
CLAIM = "C5"
#: its verdict rule, in words, from the thresholds it uses (:data:`~geomcap.claims.table.RULES` collects every claim's)
RULE = (f"reproduced: on >= {MIN_RUNS} hard runs RankMe is informative (leads acquisition and the test "
        f"loss) in >= {RATE_HIGH:.0%}, its timing predicts acquisition (setting-bootstrap CI of rho above 0) "
        "better than every baseline's, and the LLC, recorded on >= "
        f"{MIN_RUNS} hard runs, is informative in <= {RATE_LOW:.0%}; partly: RankMe is informative in >= "
        f"{RATE_HIGH:.0%}, or its timing CI is above 0; not reproduced: otherwise; not testable: fewer than "
        f"{MIN_RUNS} hard runs with the reading defined")


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


def _share(count: tuple[int, int]) -> float:
    return count[0] / count[1] if count[1] else np.nan


def timing_prediction(summary: pd.DataFrame, measure: str = "rankme", n_boot: int = 2000, seed: int = 0,
                      level: float = 0.95, reading: str = "informative") -> dict:
    """Does a measure's transition timing predict acquisition timing across runs? (reading (b) of C5)

    Spearman rank correlation, over the acquired runs of ``summary`` (one row per run, e.g.
    :func:`summary_table` or a subset such as one task's seeds) where the transition is defined, of the
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


def claim_c5(summary: pd.DataFrame) -> dict:
    """C5 on the runs classed hard from behaviour (:func:`difficulty_class`), the informative reading (b):
    RankMe's transition, read where the collapse is over, leads acquisition and the test loss's
    transition, and its timing predicts acquisition across runs (:func:`timing_prediction`); against the
    baselines read by the same rule from the same point (train accuracy, first-token accuracy, parameter
    norm), and the LLC. The paper's reading (a) is given beside it."""
    rule = RULE
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
