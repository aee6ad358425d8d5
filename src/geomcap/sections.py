"""A notebook's runs: the training configs its selection asks for (:func:`geomcap.results.section_grid`, what
its recompute cell trains with :func:`geomcap.sweep.train_missing`) and the runs it reads
(:func:`geomcap.results.section_runs`). The training side of a selection: the analysis
(``geomcap.analysis.selection.select_runs``) is given the configs, and never builds them."""

from __future__ import annotations

import pandas as pd

from geomcap.analysis.runs import CONTROLS, SCALE_CONTROLS, is_shuffled_control, load_runs
from geomcap.analysis.selection import section_selection, select_runs
from geomcap.claims.verdicts import matched
from geomcap.config import DEFAULT_LEVEL_STEPS_TEXT, parse_steps
from geomcap.parameters import ParameterError, check_value
from geomcap.store import committed_data

#: the committed stores of negative controls (shuffled answers): data/controls (405k, 1.3m) and
#: data/scale-controls (the scale grid's)
CONTROL_STORES = (CONTROLS, SCALE_CONTROLS)


def section_grid(tasks="all", levels="all", sizes=("405k",), seeds=(0,), steps=None) -> list:
    """The runs a notebook's selection asks for, as :class:`geomcap.train.TrainConfig` s (what its recompute
    cell trains with :func:`geomcap.sweep.train_missing`).

    tasks, levels, sizes, seeds as in :func:`section_runs`, seeds explicit; ``steps``: an int, or per level
    as ``"easy:2000,medium:4000,hard:8000"`` (None: :data:`geomcap.train.DEFAULT_LEVEL_STEPS_TEXT`). Bad values
    raise ValueError naming the parameter, before anything is trained.
    """
    from geomcap.sweep import grid  # the sweep is imported by a recompute only: reading runs never needs it

    tasks, levels, sizes, seeds = section_selection(tasks, levels, sizes, seeds)
    if seeds == "all":
        raise ParameterError("parameter seeds: give explicit seeds with recompute=True")
    steps_by_level = parse_steps(check_value("steps", DEFAULT_LEVEL_STEPS_TEXT if steps is None else steps))
    return grid(tasks=tasks, levels=levels, sizes=sizes, seeds=seeds, steps=steps_by_level)


def section_runs(tasks="all", levels="all", sizes=("405k",), seeds="all", root="", recompute=False,
                 steps=None, committed=("runs",)):
    """A notebook's runs (one row per complete run; trains nothing): its selection's runs
    (``geomcap.analysis.selection.select_runs``); with ``recompute``, exactly the runs of
    :func:`section_grid` (its steps, its settings), which the notebook's recompute cell trains first
    (:func:`geomcap.sweep.train_missing`). ``committed``: the committed stores read when ``root`` is ""
    (default ``data/runs``; the scale section adds ``data/scale``). Bad values raise ValueError naming the
    parameter."""
    wanted = section_grid(tasks, levels, sizes, seeds, steps) if recompute is True else None
    return select_runs(tasks, levels, sizes, seeds, root, recompute, wanted, committed)


def section_controls(runs: pd.DataFrame, root="") -> pd.DataFrame:
    """The negative controls (shuffled answers) of a notebook's runs: those of the committed control stores
    (:data:`~geomcap.sections.CONTROL_STORES`) whose task x level x size setting the runs have (:func:`geomcap.results.matched`),
    when the runs are the committed ones (``root`` ""); none for another store. A :func:`load_runs` table."""
    if root:
        return runs.iloc[:0]
    stores = [load_runs(committed_data(name)) for name in CONTROL_STORES if committed_data(name).is_dir()]
    controls = [t[is_shuffled_control(t)] for t in stores if len(t)]
    return matched(pd.concat(controls, ignore_index=True), runs) if controls else runs.iloc[:0]
