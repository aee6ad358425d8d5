"""A notebook's recompute: the runs its selection asks for, as the training configs its recompute cell trains
(:func:`geomcap.sweep.train_missing`). The training side of a selection: reading the runs is
:func:`geomcap.results.section_runs`'s, which needs no sweep."""

from __future__ import annotations

from geomcap.analysis.selection import section_selection
from geomcap.config import DEFAULT_LEVEL_STEPS_TEXT
from geomcap.parameters import ParameterError, check_value
from geomcap.sweep import grid, parse_steps


def section_grid(tasks="all", levels="all", sizes=("405k",), seeds=(0,), steps=None) -> list:
    """The runs a notebook's selection asks for, as :class:`geomcap.train.TrainConfig` s (what its recompute
    cell trains with :func:`geomcap.sweep.train_missing`).

    tasks, levels, sizes, seeds as in :func:`section_runs`, seeds explicit; ``steps``: an int, or per level
    as ``"easy:2000,medium:4000,hard:8000"`` (None: :data:`geomcap.train.DEFAULT_LEVEL_STEPS_TEXT`). Bad values
    raise ValueError naming the parameter, before anything is trained.
    """
    tasks, levels, sizes, seeds = section_selection(tasks, levels, sizes, seeds)
    if seeds == "all":
        raise ParameterError("parameter seeds: give explicit seeds with recompute=True")
    steps_by_level = parse_steps(check_value("steps", DEFAULT_LEVEL_STEPS_TEXT if steps is None else steps, "steps"))
    return grid(tasks=tasks, levels=levels, sizes=sizes, seeds=seeds, steps=steps_by_level)
