"""Memorisation before generalisation: does a measure move with the train accuracy rather than ahead of the
test accuracy (the first grid's finding, tested per task and level)?"""

from __future__ import annotations

import pandas as pd

from geomcap.analysis.protocol import MIN_LEAD_CHECKPOINTS, RUN_KEYS
from geomcap.tasks import LEVELS


def _level_order(level: str) -> tuple:
    return (LEVELS.index(level) if level in LEVELS else len(LEVELS), level)


def memorisation_table(summary: pd.DataFrame, measure: str = "rankme",
                       min_lead: int = MIN_LEAD_CHECKPOINTS) -> pd.DataFrame:
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
