"""C6: a precursor on hard runs and none on runs acquired during the collapse (the paper's reading)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from geomcap.analysis.difficulty import DIFFICULTY_CLASSES, difficulty_class
from geomcap.analysis.resolution import RANGE_DASH, run_checkpoints, step_range
from geomcap.claims.verdicts import MIN_RUNS, PARTLY, RATE_HIGH, RATE_LOW, claim_row
from geomcap.config import TrainConfig


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


def tied(summary: pd.DataFrame) -> pd.Series:
    """Per run: acquired during the collapse (:func:`acquired_during_collapse`) at the very step RankMe
    recovered, both read at one checkpoint, so which came first is not resolved."""
    acq = pd.to_numeric(summary["acquisition_step"], errors="coerce")
    return acquired_during_collapse(summary) & (acq == pd.to_numeric(summary["rankme_recovery_step"], errors="coerce"))


#: steps a rerun reads past a tie: the acquisition and the recovery rules each read three checkpoints from their
#: step on
RERUN_PAST_TIE = 10


def rerun_config(config: TrainConfig, tie_step: int) -> TrainConfig:
    """The rerun that reads a tie at ``tie_step`` at every step: ``config`` with a checkpoint at every step up
    to, and a stop at, the first multiple of 100 at least ``RERUN_PAST_TIE`` (10) steps past it. It trains the
    same steps (:data:`~geomcap.config.SCHEDULE_FIELDS`)."""
    until = -(-(int(tie_step) + RERUN_PAST_TIE) // 100) * 100
    if until > config.steps:
        raise ValueError(f"a tie at step {tie_step} needs a rerun to step {until}, past the run's {config.steps} steps")
    return dataclasses.replace(config, dense_steps=until, stop_at=until)


def resolve_ties(summary: pd.DataFrame, reruns: pd.DataFrame, rerun_of: dict, checkpoints: dict) -> pd.DataFrame:
    """``summary`` with each tie (:func:`tied`) that a rerun trained again with more checkpoints read at the
    rerun's checkpoints: its ``acquisition_step`` and ``rankme_recovery_step`` become the rerun's, where both
    fall inside the checkpoint interval the tie was read in (after the run's checkpoint before it, at or before
    the tie's step); ``resolved_by`` names the rerun. A rerun whose events fall outside it resolves nothing
    (``rerun_departs`` True). The tie's step may stay a tie at the rerun's checkpoints too.

    summary, reruns: :func:`~geomcap.results.summary_table` of the runs and of the reruns; ``rerun_of``: {run:
    rerun} (:func:`geomcap.results.reruns_of`); ``checkpoints``: {run: its checkpoint steps, sorted}
    for the tied runs."""
    out = summary.copy()
    out["resolved_by"] = None
    out["rerun_departs"] = False
    by_run = reruns.set_index("run") if len(reruns) else reruns
    for i in out.index[tied(out)]:
        run = out.at[i, "run"]
        rerun = rerun_of.get(run)
        if rerun is None or rerun not in by_run.index:
            continue
        step = int(out.at[i, "acquisition_step"])
        steps = np.asarray(checkpoints[run])
        before = steps[steps < step]
        low = int(before[-1]) if len(before) else -1
        events = pd.to_numeric(by_run.loc[rerun, ["acquisition_step", "rankme_recovery_step"]], errors="coerce")
        if events.isna().any() or not ((events > low) & (events <= step)).all():
            out.at[i, "rerun_departs"] = True
            continue
        out.at[i, "acquisition_step"], out.at[i, "rankme_recovery_step"] = (int(v) for v in events)
        out.at[i, "resolved_by"] = rerun
    return out


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
                  "acquisition_range", "recovery_range", "checkpoints_apart", "resolved_by"]


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
    resolved); ``resolved_by``: the rerun whose checkpoints a tie was read at (:func:`resolve_ties`; its
    checkpoints must then be in ``metrics``), else None. Columns :data:`~geomcap.claims.c6.MARGIN_COLUMNS`, in
    the summary's order."""
    during = summary[acquired_during_collapse(summary)]
    rows = []
    for r in during.itertuples():
        rerun = getattr(r, "resolved_by", None)  # a tie read again at a rerun's checkpoints (resolve_ties)
        steps = run_checkpoints(metrics, rerun if isinstance(rerun, str) else r.run)
        acq, rec = int(r.acquisition_step), int(r.rankme_recovery_step)
        apart = int(np.searchsorted(steps, rec, side="left") - np.searchsorted(steps, acq, side="left"))
        rows.append({"run": r.run, "task": r.task, "level": r.level, "size": r.size, "seed": r.seed,
                     "acquisition_step": acq, "rankme_recovery_step": rec,
                     "acquisition_range": step_range(steps, acq), "recovery_range": step_range(steps, rec),
                     "checkpoints_apart": apart, "resolved_by": rerun if isinstance(rerun, str) else None})
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
        if isinstance(r.resolved_by, str):
            order = ("both at that step" if r.checkpoints_apart == 0 else
                     f"RankMe recovered {r.rankme_recovery_step - r.acquisition_step} steps later")
            parts.append(f"{where}: a tie at its checkpoints, read again at a rerun's checkpoint at every step: "
                         f"acquired at step {r.acquisition_step}, {order}")
            continue
        if r.checkpoints_apart == 0:
            parts.append(f"{where}: acquisition and RankMe's recovery both read at one checkpoint "
                         f"({at(r.acquisition_range)}), so which came first is not resolved")
            continue
        later = "the next checkpoint" if r.checkpoints_apart == 1 else f"{r.checkpoints_apart} checkpoints later"
        parts.append(f"{where}: acquired {at(r.acquisition_range)}, RankMe recovered at {later} "
                     f"({at(r.recovery_range)})")
    n = len(margins)
    reread = margins["resolved_by"].notna()
    apart = margins["checkpoints_apart"][~reread]
    counts = [(int((apart == 0).sum()), "read at the recovery's own checkpoint (order not resolved)"),
              (int((apart == 1).sum()), "one checkpoint before it"),
              (int((apart > 1).sum()), "more than one checkpoint before it")]
    if reread.any():
        counts.append((int(reread.sum()), "read again at a rerun's checkpoint at every step"))
    text = ("; ".join(parts) + f". Of the {n} run{'' if n == 1 else 's'}: "
            + ", ".join(f"{k} {what}" for k, what in counts) + ".")
    resolved = n - counts[0][0]
    if resolved < MIN_RUNS <= n:  # the rule counts a tie as inside; say when the verdict rests on it
        text += (f" Without the unresolved, {resolved} remain, fewer than the {MIN_RUNS} runs C6's rule needs to "
                 "read a rate: whether C6 is testable here rests on a tie at the checkpoints' resolution.")
    return text

def reread_ties_text(summary: pd.DataFrame) -> str:
    """For prose: the ties of ``summary`` that a rerun read again (:func:`resolve_ties`) and put outside C6's
    regime, and the reruns that departed from their run's events; "" when there are none (a tie read again
    inside the regime is in :func:`regime_margins_text`)."""
    parts = []
    if "resolved_by" in summary:
        for r in summary[summary["resolved_by"].notna() & ~acquired_during_collapse(summary)].itertuples():
            parts.append(f"{r.task} {r.level} {r.size}, a tie at its checkpoints: RankMe recovered at step "
                         f"{int(r.rankme_recovery_step)} and accuracy was acquired at {int(r.acquisition_step)}, so "
                         "it was not acquired during the collapse")
    if "rerun_departs" in summary:
        for r in summary[summary["rerun_departs"].astype(bool)].itertuples():
            parts.append(f"{r.task} {r.level} {r.size}'s rerun departed from the run's events (trained on another "
                         "CPU: rounding), so its tie stands")
    return ("Read again at a rerun's checkpoint at every step: " + "; ".join(parts) + ".") if parts else ""


def claim_c6(summary: pd.DataFrame, measure: str = "rankme") -> dict:
    """C6: a precursor on hard runs and none on runs acquired during the collapse (the paper's easy). Read
    with the paper's reading (a) (the informative one starts after the collapse, so it cannot see a lead in
    a run acquired during it); not testable without at least :data:`~geomcap.claims.verdicts.MIN_RUNS` runs acquired during the
    collapse."""
    rule = RULE
    during = acquired_during_collapse(summary)
    classes = difficulty_class(summary)
    counts = classes.value_counts().to_dict()
    resolved = summary["resolved_by"].notna() if "resolved_by" in summary else pd.Series(False, index=summary.index)
    ties = tied(summary) & ~resolved  # one read at a checkpoint per step is as resolved as steps go
    n_tied = int(ties.sum())
    notes = ([f"{n_tied} at {'its' if n_tied == 1 else 'their'} recovery's own checkpoint: order not resolved"]
             if n_tied else [])
    if resolved.any():  # read again at the checkpoints of a rerun (resolve_ties)
        k, inside = int(resolved.sum()), int((resolved & during).sum())
        notes.append(f"{k} tie{'' if k == 1 else 's'} read again at a rerun's checkpoint at every step, "
                     f"{inside} of {k} then acquired during the collapse")
    departs = int(summary["rerun_departs"].sum()) if "rerun_departs" in summary else 0
    if departs:  # a rerun whose events left the tie's interval trained something else (another CPU's rounding)
        notes.append(f"{departs} rerun{'' if departs == 1 else 's'} departed from {'its' if departs == 1 else 'their'}"
                     f" run's events: not read")
    head = (f"acquired during the collapse {int(during.sum())} of {int(summary['acquisition_step'].notna().sum())}"
            f" acquired runs" + (f" ({'; '.join(notes)})" if notes else "")
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
    if n_tied:  # the rule counts a tie as inside the regime: what it reads without them, beside it
        without = claim_c6(summary[~ties], measure)
        others += (f"; without the {n_tied} whose order is not resolved: {without['verdict']}"
                   + (f" ({without['ours'].rsplit('; ', 1)[-1]})" if "leads in" in without["ours"] else ""))
    return claim_row("C6", f"{head}; the paper's reading leads in {e:.0%} of those and {h:.0%} of hard runs",
                     float(h - e), verdict, rule, others)
