"""Difficulty from behaviour alone, never from RankMe: the classes (claim C6's rule, stated once), the
per-level table, the grid's goals, and why a setting was not acquired."""

from __future__ import annotations

import numpy as np
import pandas as pd

from geomcap.analysis.protocol import COLLAPSE_WINDOW
from geomcap.tasks import LEVELS


#: difficulty from behaviour alone (:func:`~geomcap.results.difficulty_class`): hard = acquired after this step ...
HARD_MIN_STEP = 500

#: ... with chance-level accuracy over at least this share of the steps before acquisition
HARD_MIN_PLATEAU = 0.5

#: easy = acquired within the collapse window (the first :data:`~geomcap.analysis.protocol.COLLAPSE_WINDOW` steps)
EASY_MAX_STEP = COLLAPSE_WINDOW

#: the classes of :func:`~geomcap.results.difficulty_class`
DIFFICULTY_CLASSES = ("easy", "intermediate", "hard", "not acquired")


def difficulty_class(summary: pd.DataFrame, easy_max_step=EASY_MAX_STEP, hard_min_step=HARD_MIN_STEP) -> pd.Series:
    """Hard vs easy from behaviour alone, never from RankMe (claim C6's rule, stated here once).

    * ``easy``: acquired within the collapse window (acquisition step <=
      :data:`~geomcap.analysis.difficulty.EASY_MAX_STEP` = the first 300 steps): the paper's "acquisition
      during the initial collapse";
    * ``hard``: acquired after step :data:`~geomcap.analysis.difficulty.HARD_MIN_STEP` (500) *and* after a
      behavioural plateau: chance-corrected accuracy at chance (below
      :data:`~geomcap.analysis.protocol.PLATEAU_LEVEL`) over at least
      :data:`~geomcap.analysis.difficulty.HARD_MIN_PLATEAU` (half) of the steps before acquisition
      (``plateau_fraction``, :func:`geomcap.events.plateau_fraction`);
    * ``intermediate``: acquired, neither easy nor hard (including tables
      without a ``plateau_fraction`` column, whose runs can never be hard);
    * ``not acquired``: never acquired within the run.

    Parameters
    ----------
    summary : DataFrame
        Columns ``acquisition_step`` and ``plateau_fraction`` (e.g.
        :func:`summary_table`).
    easy_max_step, hard_min_step : number or Series (indexed like ``summary``)
        The step cut-offs, for runs whose steps are on another scale than
        the grid's (Pythia's revisions: :func:`geomcap.results.revision_cutoffs`).

    Returns
    -------
    Series of str, one of :data:`~geomcap.analysis.difficulty.DIFFICULTY_CLASSES`, indexed like ``summary``.
    """
    acq = pd.to_numeric(summary["acquisition_step"], errors="coerce")
    plateau = (pd.to_numeric(summary["plateau_fraction"], errors="coerce") if "plateau_fraction" in summary
               else pd.Series(np.nan, index=summary.index))
    cls = pd.Series("intermediate", index=summary.index)
    cls[acq <= easy_max_step] = "easy"
    cls[(acq > hard_min_step) & (plateau >= HARD_MIN_PLATEAU)] = "hard"
    cls[acq.isna()] = "not acquired"
    return cls


#: the grid's goal for every task x level: acquired in at least this share of its seeds (2 of 3)
ACQUIRED_SHARE_GOAL = 2 / 3

#: ... and at least this many tasks with a level classed hard (acquired late, after a plateau)
HARD_TASKS_GOAL = 3


def level_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per task x level x size: how its runs behaved, from behaviour alone.

    Rows by preset (in ``summary``'s order), task, then level (easy, medium, hard). Columns: ``runs``, ``acquired`` (runs acquired), ``median_acquisition_step``,
    ``median_plateau_fraction`` (over acquired runs), ``hard`` / ``easy`` (runs of
    that :func:`difficulty_class`), ``class`` (the class most of its runs got;
    ties: the later of :data:`~geomcap.analysis.difficulty.DIFFICULTY_CLASSES`' order easy, intermediate, hard,
    not acquired) and ``goal_met`` (acquired in at least
    :data:`~geomcap.analysis.difficulty.ACQUIRED_SHARE_GOAL` of its runs).
    """
    table = summary.assign(difficulty=difficulty_class(summary),
                           acquisition_step=pd.to_numeric(summary["acquisition_step"], errors="coerce"),
                           plateau_fraction=pd.to_numeric(summary.get("plateau_fraction"), errors="coerce"))
    rows = []
    for (task, level, size), group in table.groupby(["task", "level", "size"], sort=False):
        acquired = group[group["acquisition_step"].notna()]
        counts = group["difficulty"].value_counts()
        most = max(DIFFICULTY_CLASSES, key=lambda c: (counts.get(c, 0), DIFFICULTY_CLASSES.index(c)))
        rows.append({"task": task, "level": level, "size": size, "runs": len(group), "acquired": len(acquired),
                     "median_acquisition_step": acquired["acquisition_step"].median(),
                     "median_plateau_fraction": acquired["plateau_fraction"].median(),
                     "hard": int(counts.get("hard", 0)), "easy": int(counts.get("easy", 0)), "class": most,
                     "goal_met": len(acquired) >= ACQUIRED_SHARE_GOAL * len(group)})
    columns = ["task", "level", "size", "runs", "acquired", "median_acquisition_step", "median_plateau_fraction",
               "hard", "easy", "class", "goal_met"]
    table = pd.DataFrame(rows, columns=columns)
    order = {"size": list(dict.fromkeys(summary["size"])), "level": list(LEVELS)}  # presets as given, levels by name
    return table.sort_values(["size", "task", "level"], key=lambda c: c.map(
        {v: i for i, v in enumerate(order[c.name])}) if c.name in order else c, kind="stable").reset_index(drop=True)


def grid_goals(levels: pd.DataFrame, size: str) -> dict:
    """The grid's stated goals on one preset, from :func:`level_table`: ``pairs`` task x levels run,
    ``pairs_acquired`` (acquired in >= :data:`~geomcap.analysis.difficulty.ACQUIRED_SHARE_GOAL` of their seeds), ``min_seeds``
    (fewest seeds of a pair), ``hard_pairs`` (pairs whose class is hard), ``hard_tasks`` (their tasks)
    and ``met``: every pair acquired and >= :data:`~geomcap.analysis.difficulty.HARD_TASKS_GOAL` tasks with a hard level."""
    on = levels[levels["size"] == size]
    hard = on[on["class"] == "hard"]
    tasks = sorted(hard["task"].unique())
    met = bool(len(on)) and bool(on["goal_met"].all()) and len(tasks) >= HARD_TASKS_GOAL
    return {"size": size, "pairs": len(on), "pairs_acquired": int(on["goal_met"].sum()),
            "min_seeds": int(on["runs"].min()) if len(on) else 0, "hard_pairs": len(hard),
            "hard_tasks": tasks, "met": met}


def not_acquired_table(summary: pd.DataFrame, metrics: pd.DataFrame, memorised: float = 0.9) -> pd.DataFrame:
    """The task x level x size groups with runs that never acquired the task, and why.

    Per group: runs never acquired (of all runs), the step budget, and the means over those runs
    of the final test accuracy, the final train accuracy (``train_accuracy`` in ``metrics``, on
    ``train_eval_size`` training prompts) and the best constant answer's accuracy (``chance``).
    ``diagnosis``: "memorised" when the mean train accuracy is >= ``memorised`` (the training set
    is fitted, the test set is not: generalisation needs more steps or more data, as in grokking),
    "underfit" otherwise (the training set itself is not fitted: more steps or a larger model).
    """
    missed = summary[summary["acquisition_step"].isna()]
    columns = ["task", "level", "size", "not_acquired", "runs", "steps", "test_accuracy", "train_accuracy",
               "chance", "diagnosis"]
    if missed.empty:
        return pd.DataFrame(columns=columns)
    train = metrics[(metrics["measure"] == "train_accuracy") & metrics["run"].isin(missed["run"])]
    final_train = train.sort_values("step").groupby("run")["value"].last()
    missed = missed.assign(train_accuracy=missed["run"].map(final_train))
    keys = ["task", "level", "size"]
    totals = summary.groupby(keys).size().rename("runs")
    table = missed.groupby(keys).agg(not_acquired=("run", "count"), steps=("steps", "max"),
                                     test_accuracy=("final_accuracy", "mean"),
                                     train_accuracy=("train_accuracy", "mean"), chance=("chance", "mean"))
    table = table.join(totals).reset_index()
    table["diagnosis"] = np.where(table["train_accuracy"] >= memorised, "memorised", "underfit")
    table.loc[table["train_accuracy"].isna(), "diagnosis"] = "no train accuracy"
    return table[columns]
