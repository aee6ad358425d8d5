"""C6: a precursor on hard runs and none on runs acquired during the collapse (the paper's reading)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from geomcap.analysis.difficulty import DIFFICULTY_CLASSES, difficulty_class
from geomcap.analysis.resolution import RANGE_DASH, run_checkpoints, step_range
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


#: columns of :func:`~geomcap.results.regime_margins`
MARGIN_COLUMNS = ["run", "task", "level", "size", "seed", "acquisition_step", "rankme_recovery_step",
                  "acquisition_range", "recovery_range", "checkpoints_apart"]


def regime_margins(summary: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """The runs acquired during the collapse (:func:`acquired_during_collapse`), each with how far inside C6's
    regime it is at the resolution of its checkpoints: acquisition read at the checkpoint where RankMe
    recovered may have come before or after the recovery, and one read a checkpoint earlier is inside by at
    most the spacing of two checkpoints.

    summary: one row per run (``run``, ``task``, ``level``, ``size``, ``seed``, ``acquisition_step``,
    ``rankme_recovery_step``); metrics: tidy, with ``run`` and ``step`` (any measure recorded at every
    checkpoint). ``acquisition_range``, ``recovery_range``: the steps each event can have happened in
    (:func:`~geomcap.analysis.resolution.step_range`); ``checkpoints_apart``: how many checkpoints of the run
    the recovery comes after acquisition (0: both read at one checkpoint, so which came first is not
    resolved). Columns :data:`~geomcap.claims.c6.MARGIN_COLUMNS`, in the summary's order."""
    during = summary[acquired_during_collapse(summary)]
    rows = []
    for r in during.itertuples():
        steps = run_checkpoints(metrics, r.run)
        acq, rec = int(r.acquisition_step), int(r.rankme_recovery_step)
        apart = int(np.searchsorted(steps, rec, side="left") - np.searchsorted(steps, acq, side="left"))
        rows.append({"run": r.run, "task": r.task, "level": r.level, "size": r.size, "seed": r.seed,
                     "acquisition_step": acq, "rankme_recovery_step": rec,
                     "acquisition_range": step_range(steps, acq), "recovery_range": step_range(steps, rec),
                     "checkpoints_apart": apart})
    return pd.DataFrame(rows, columns=MARGIN_COLUMNS)


def regime_margins_text(margins: pd.DataFrame) -> str:
    """:func:`regime_margins` for prose: each run's two events with their step ranges, then how many runs
    are read at the recovery's own checkpoint, one checkpoint before it, and further inside the regime; and
    when the runs whose order is resolved are fewer than :data:`~geomcap.claims.verdicts.MIN_RUNS` while all
    of them are not, that the regime's testability rests on those ties."""
    if margins.empty:
        return "No run was acquired during the collapse."

    def at(steps: str) -> str:  # a step range, or an exact step where checkpoints are one step apart
        return f"in steps {steps}" if RANGE_DASH in steps else f"at step {steps}"

    parts = []
    for r in margins.itertuples():
        where = f"{r.task} {r.level} {r.size}"
        if r.checkpoints_apart == 0:
            parts.append(f"{where}: acquisition and RankMe's recovery both read at one checkpoint "
                         f"({at(r.acquisition_range)}), so which came first is not resolved")
            continue
        later = "the next checkpoint" if r.checkpoints_apart == 1 else f"{r.checkpoints_apart} checkpoints later"
        parts.append(f"{where}: acquired {at(r.acquisition_range)}, RankMe recovered at {later} "
                     f"({at(r.recovery_range)})")
    n = len(margins)
    apart = margins["checkpoints_apart"]
    counts = [(int((apart == 0).sum()), "read at the recovery's own checkpoint (order not resolved)"),
              (int((apart == 1).sum()), "one checkpoint before it"),
              (int((apart > 1).sum()), "more than one checkpoint before it")]
    text = ("; ".join(parts) + f". Of the {n} run{'' if n == 1 else 's'}: "
            + ", ".join(f"{k} {what}" for k, what in counts) + ".")
    resolved = n - counts[0][0]
    if resolved < MIN_RUNS <= n:  # the rule counts a tie as inside; say when the verdict rests on it
        text += (f" Without the unresolved, {resolved} remain, fewer than the {MIN_RUNS} runs C6's rule needs to "
                 "read a rate: whether C6 is testable here rests on a tie at the checkpoints' resolution.")
    return text

def claim_c6(summary: pd.DataFrame, measure: str = "rankme") -> dict:
    """C6: a precursor on hard runs and none on runs acquired during the collapse (the paper's easy). Read
    with the paper's reading (a) (the informative one starts after the collapse, so it cannot see a lead in
    a run acquired during it); not testable without at least :data:`~geomcap.claims.verdicts.MIN_RUNS` runs acquired during the
    collapse."""
    rule = RULE
    during = acquired_during_collapse(summary)
    classes = difficulty_class(summary)
    counts = classes.value_counts().to_dict()
    # acquired at the very step RankMe recovered: both read at one checkpoint, so their order is not resolved
    ties = during & (pd.to_numeric(summary["acquisition_step"], errors="coerce")
                     == pd.to_numeric(summary["rankme_recovery_step"], errors="coerce"))
    tied = int(ties.sum())
    head = (f"acquired during the collapse {int(during.sum())} of {int(summary['acquisition_step'].notna().sum())}"
            f" acquired runs" + (f" ({tied} at {'its' if tied == 1 else 'their'} recovery's own checkpoint: order not resolved)" if tied else "")
            + "; classes from behaviour: " + ", ".join(f"{c} {counts.get(c, 0)}" for c in DIFFICULTY_CLASSES))
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
    if tied:  # the rule counts a tie as inside the regime: what it reads without them, beside it
        without = claim_c6(summary[~ties], measure)
        others += (f"; without the {tied} whose order is not resolved: {without['verdict']}"
                   + (f" ({without['ours'].rsplit('; ', 1)[-1]})" if "leads in" in without["ours"] else ""))
    return claim_row("C6", f"{head}; the paper's reading leads in {e:.0%} of those and {h:.0%} of hard runs",
                     float(h - e), verdict, rule, others)
