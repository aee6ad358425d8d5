"""The resolution of a step read at a checkpoint: how far apart a run's checkpoints are around it.

An event read from a recorded series (acquisition, a floor, a transition, memorisation) is placed at a
checkpoint: it happened after the checkpoint before and by that one. Where checkpoints are one step apart
(the dense start of a run) the step is exact; further on they are tens or hundreds of steps apart, and
three seeds "memorised at step 178" all crossed somewhere in steps 129-178. :func:`checkpoint_spacing` is
the one place this spacing is computed; :func:`step_range` writes a step with it, :func:`with_step_ranges`
does so for a table's step columns and :func:`steps_text` for prose.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: the dash between the two ends of a step range
RANGE_DASH = "\u2013"


def _checkpoints(checkpoints) -> np.ndarray:
    steps = np.unique(pd.to_numeric(pd.Series(np.asarray(checkpoints).ravel()), errors="coerce").dropna()
                      .astype(np.int64).to_numpy())
    return steps


def _missing(step) -> bool:
    return step is None or step is pd.NA or (isinstance(step, (float, np.floating)) and not np.isfinite(step))


def checkpoint_spacing(checkpoints, step) -> int | None:
    """The spacing of the checkpoints around ``step``, in steps.

    checkpoints: the steps at which the series the step was read from is recorded (any order, repeats
    allowed: e.g. a run's tidy ``step`` column). For a ``step`` that is a checkpoint: ``step`` minus the
    checkpoint before it, so the event read there happened in ``(step - spacing, step]``; 1 in the dense
    part of a run, where the step is exact; 0 for the first checkpoint. For a ``step`` between checkpoints (an
    interpolated or a median step): the distance between the two checkpoints around it. None when ``step``
    is missing (None, NaN) or outside the checkpoints.
    """
    if _missing(step):
        return None
    steps = _checkpoints(checkpoints)
    if steps.size == 0:
        return None
    value = float(step)
    if value < steps[0] or value > steps[-1]:
        return None
    i = int(np.searchsorted(steps, value, side="left"))
    if steps[i] == value:
        return int(steps[i] - steps[i - 1]) if i > 0 else 0
    return int(steps[i] - steps[i - 1])


def step_range(checkpoints, step) -> str:
    """``step`` written with its resolution: ``"57"`` where checkpoints are one step apart, ``"129–178"``
    (the steps the event can have happened in: after the checkpoint before, by this one) where they are
    further apart, "–" for a missing step. A step that is not a checkpoint is written as it is."""
    if _missing(step):
        return RANGE_DASH
    spacing = checkpoint_spacing(checkpoints, step)
    value = float(step)
    text = f"{value:,.0f}" if value == round(value) else f"{value:,.1f}"
    if not spacing or spacing <= 1 or value not in set(_checkpoints(checkpoints).tolist()):
        return text
    return f"{int(value) - spacing + 1:,}{RANGE_DASH}{int(value):,}"


def run_checkpoints(metrics: pd.DataFrame, run=None, measure: str | None = None) -> np.ndarray:
    """The steps at which ``measure`` (None: any measure) is recorded in a tidy metrics table, for one
    ``run`` (a ``run`` column's value; None: the table is one run's)."""
    rows = metrics
    if run is not None:
        rows = rows[rows["run"] == run]
    if measure is not None:
        rows = rows[rows["measure"] == measure]
    return _checkpoints(rows["step"])


def with_step_ranges(table: pd.DataFrame, metrics: pd.DataFrame, columns, by: str | None = None) -> pd.DataFrame:
    """``table`` (one row per run, a ``run`` column) with each of ``columns`` written as :func:`step_range`
    over the run's checkpoints in ``metrics`` (tidy, with a ``run`` column).

    columns: column names (the checkpoints of any measure: every one recorded at every checkpoint), or
    {column: measure} for a step read from a series recorded more sparsely; ``by``: a column of ``table``
    naming each row's measure instead (a table of several series). The columns become text; the rest of the
    table is unchanged."""
    columns = dict.fromkeys(columns) if not isinstance(columns, dict) else dict(columns)
    out = table.copy()
    cache: dict = {}
    for column, measure in columns.items():
        if column not in out:
            continue
        measures = out[by] if by is not None else [measure] * len(out)
        texts = []
        for run, step, m in zip(out["run"], out[column], measures):
            if (run, m) not in cache:
                cache[run, m] = run_checkpoints(metrics, run, m)
            texts.append(step_range(cache[run, m], step))
        out[column] = texts
    return out


def steps_text(checkpoints_per_step, steps) -> str:
    """Steps for prose, each with its resolution: ``"178, 178 and 178 (each in steps 129–178: checkpoints are
    50 steps apart there)"``; ``"9,836 and 6,799 (each to within the 50 steps since the checkpoint before)"``;
    ``"12 and 40 (checkpoints one step apart there: exact)"``. ``checkpoints_per_step``: one checkpoint
    array per step (the run each was read from), or one array for all."""
    steps = list(steps)
    if not steps:
        return "no step"
    if isinstance(checkpoints_per_step, (np.ndarray, pd.Series)) or (
            len(checkpoints_per_step) and np.ndim(checkpoints_per_step[0]) == 0):
        checkpoints_per_step = [checkpoints_per_step] * len(steps)
    shown = [(f"{float(s):,.0f}" if not _missing(s) else RANGE_DASH) for s in steps]
    listed = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
    ranges = [step_range(c, s) for c, s in zip(checkpoints_per_step, steps)]
    spacings = [checkpoint_spacing(c, s) for c, s in zip(checkpoints_per_step, steps)]
    coarse = [sp for sp in spacings if sp and sp > 1]
    if not coarse:
        return listed + (" (checkpoints one step apart there: exact)" if any(spacings) else "")
    gaps = sorted(set(coarse))
    apart = f"{gaps[0]:,}" if len(gaps) == 1 else f"{gaps[0]:,} to {gaps[-1]:,}"
    each = "each " if len(steps) > 1 else ""
    if len(coarse) < len(steps):  # some exact, some not: each step's range
        return f"{listed} (in steps {', '.join(ranges)}: checkpoints are {apart} steps apart there)"
    if len(set(ranges)) == 1:
        return f"{listed} ({each}in steps {ranges[0]}: checkpoints are {apart} steps apart there)"
    return f"{listed} ({each}to within the {apart} steps since the checkpoint before)"


def column_steps_text(table: pd.DataFrame, metrics: pd.DataFrame, column: str, measure: str | None = None) -> str:
    """:func:`steps_text` of a table's step column (its rows with a step), each over its run's checkpoints of
    ``measure`` in ``metrics`` (tidy, with a ``run`` column)."""
    rows = table[pd.to_numeric(table[column], errors="coerce").notna()]
    return steps_text([run_checkpoints(metrics, run, measure) for run in rows["run"]], rows[column])
