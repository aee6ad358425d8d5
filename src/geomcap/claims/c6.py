"""C6: a precursor on hard runs and none on runs acquired during the collapse (the paper's reading)."""

from __future__ import annotations

import pandas as pd

from geomcap.analysis.difficulty import DIFFICULTY_CLASSES, difficulty_class
from geomcap.claims.verdicts import MIN_RUNS, PARTLY, RATE_HIGH, RATE_LOW, claim_row


#: the claim this module decides
CLAIM = "C6"
#: its verdict rule, in words, from the thresholds it uses (:data:`~geomcap.claims.table.RULES` collects every claim's)
RULE = (f"not testable: fewer than {MIN_RUNS} runs acquired during the collapse (by RankMe's recovery) or "
        f"{MIN_RUNS} hard runs; reproduced: the paper's reading leads acquisition in <= {RATE_LOW:.0%} of the "
        f"runs acquired during the collapse and >= {RATE_HIGH:.0%} of the hard runs; partly: the hard rate "
        f"exceeds the other by >= {PARTLY:.0%}; not reproduced: otherwise")


def acquired_during_collapse(summary: pd.DataFrame) -> pd.Series:
    """Per run: acquired by the time the final layer's RankMe recovered (the paper's "easy": acquisition
    during the initial collapse). False for runs never acquired or whose collapse never recovered."""
    acq = pd.to_numeric(summary["acquisition_step"], errors="coerce")
    recovery = pd.to_numeric(summary["rankme_recovery_step"], errors="coerce")
    return (acq <= recovery).fillna(False).astype(bool)


#: readings of "acquired during the collapse", the rule's first: name -> what it counts
COLLAPSE_READINGS = {
    "by the recovery": "acquired by the step the final layer's RankMe recovered (the rule's reading; a collapse "
                       "that never recovered counts no run)",
    "before the floor": "acquired by the step RankMe reached its floor, while it was still falling",
    "or never recovered": "acquired by the recovery, or in a run whose collapse never recovered (RankMe still "
                          "at its floor when the run stopped)",
}


def collapse_readings(summary: pd.DataFrame) -> pd.DataFrame:
    """Per run, whether it was acquired during the collapse under each reading of
    :data:`~geomcap.claims.c6.COLLAPSE_READINGS` (one boolean column each; False for runs never acquired or
    that never collapsed). The rule reads the first; the others say how much C6's regime depends on it."""
    acq = pd.to_numeric(summary["acquisition_step"], errors="coerce")
    floor = pd.to_numeric(summary.get("rankme_floor_step", pd.Series(None, index=summary.index, dtype=float)),
                          errors="coerce")  # a table without floor steps counts no run "before the floor"
    recovery = pd.to_numeric(summary["rankme_recovery_step"], errors="coerce")
    collapsed = summary.get("rankme_collapsed", pd.Series(True, index=summary.index)).fillna(False).astype(bool)
    acquired = acq.notna() & collapsed
    by_recovery = acquired_during_collapse(summary) & collapsed
    return pd.DataFrame({"by the recovery": by_recovery,
                         "before the floor": acquired & (acq <= floor).fillna(False).astype(bool),
                         "or never recovered": by_recovery | (acquired & recovery.isna())}, index=summary.index)


def claim_c6(summary: pd.DataFrame, measure: str = "rankme") -> dict:
    """C6: a precursor on hard runs and none on runs acquired during the collapse (the paper's easy). Read
    with the paper's reading (a) (the informative one starts after the collapse, so it cannot see a lead in
    a run acquired during it); not testable without at least :data:`~geomcap.claims.verdicts.MIN_RUNS` runs acquired during the
    collapse."""
    rule = RULE
    during = acquired_during_collapse(summary)
    classes = difficulty_class(summary)
    counts = classes.value_counts().to_dict()
    head = (f"acquired during the collapse {int(during.sum())} of {int(summary['acquisition_step'].notna().sum())}"
            f" acquired runs; classes from behaviour: " + ", ".join(f"{c} {counts.get(c, 0)}" for c in DIFFICULTY_CLASSES))
    column = f"paper_{measure}_is_precursor"
    read = summary.get(column, pd.Series(index=summary.index)).notna()
    hard = summary[(classes == "hard") & read]
    easy = summary[during & read]
    readings = collapse_readings(summary)
    others = "other readings of acquired during the collapse: " + "; ".join(
        f"{name}, {int((readings[name] & read).sum())} run{'' if (readings[name] & read).sum() == 1 else 's'}"
        + (f" (the paper's reading leads in {summary.loc[readings[name] & read, column].astype(bool).mean():.0%})"
           if (readings[name] & read).any() else "") for name in list(COLLAPSE_READINGS)[1:])
    if len(easy) < MIN_RUNS or len(hard) < MIN_RUNS:
        return claim_row("C6", head, rule=rule, control=f"the regime C6 speaks of is absent; {others}")
    e, h = easy[column].astype(bool).mean(), hard[column].astype(bool).mean()
    verdict = ("reproduced" if e <= RATE_LOW and h >= RATE_HIGH else
               "partly reproduced" if h - e >= PARTLY else "not reproduced")
    loss = "paper_test_loss_is_precursor"  # behaviour read the same way: a contrast it shares is not geometry's
    if measure != "test_loss" and loss in summary and summary.loc[easy.index.union(hard.index), loss].notna().all():
        others = (f"the test loss, read the same way, leads in {easy[loss].astype(bool).mean():.0%} of those and "
                  f"{hard[loss].astype(bool).mean():.0%} of hard runs; {others}")
    return claim_row("C6", f"{head}; the paper's reading leads in {e:.0%} of those and {h:.0%} of hard runs",
                     float(h - e), verdict, rule, others)
