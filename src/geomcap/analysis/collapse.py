"""The collapse of a geometric measure (claim C1): floor and recovery, causal with a confirmation step, the
events known for certain on a prefix (a streaming monitor), and where the informative reading starts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geomcap.analysis.acquisition import acquisition_step
from geomcap.analysis.protocol import (ACQUISITION_PATIENCE, ACQUISITION_THRESHOLD, COLLAPSE_WINDOW,
                                       MIN_RELATIVE_DROP, ONSET_FRACTION, READING_START, RECOVERY_FRACTION,
                                       RECOVERY_HOLD, SMOOTH)
from geomcap.analysis.series import (chance_corrected, check_count, check_fraction, check_series,
                                     finite_smoothed)


@dataclass(frozen=True)
class Collapse:
    """Collapse, floor and recovery of one series (see :func:`collapse`).

    Steps are training steps; values are in the units of the measure.
    ``floor_certain_step`` / ``recovery_certain_step``: the step from which the
    floor (with peak, onset, drop) / the recovery is certain -- :func:`collapse`
    on any prefix of the series that ends at or after it returns the same
    event; None while it is not yet certain (e.g. the series ends inside the
    collapse window, or inside the recovery's hold).
    """

    initial_step: int
    initial_value: float
    peak_step: int
    peak_value: float
    onset_step: int | None
    floor_step: int
    floor_value: float
    recovery_step: int | None
    drop: float
    relative_drop: float
    collapsed: bool
    floor_certain_step: int | None = None
    recovery_certain_step: int | None = None


def _check_window(window) -> int | None:
    if window is None:
        return None
    if isinstance(window, bool) or int(window) != window or window < 1:
        raise ValueError(f"window must be a positive number of steps or None (whole series), got {window!r}")
    return int(window)


def collapse(
    steps,
    values,
    onset_fraction: float = ONSET_FRACTION,
    recovery_fraction: float = RECOVERY_FRACTION,
    min_relative_drop: float = MIN_RELATIVE_DROP,
    smooth: int = SMOOTH,
    *,
    floor: str = "min",
    window: int | None = COLLAPSE_WINDOW,
    hold: int = RECOVERY_HOLD,
) -> Collapse:
    """Locate the collapse of a series to its floor and its recovery (causal, with confirmation).

    Preprocessing: non-finite values are dropped (their checkpoints simply do
    not exist for this analysis; reported steps are taken from the original
    ``steps``), then a centred rolling median of odd length ``smooth`` is
    applied to the remaining points in checkpoint order (see
    :func:`rolling_median`; 1 = no smoothing). Below, ``x_0 .. x_{n-1}`` is
    that processed series and "checkpoint" means a kept checkpoint.

    Definitions
    -----------
    initial
        The first checkpoint, ``x_0`` (the value at initialisation, or the
        first finite one if initialisation is missing).
    window
        The checkpoints ``i >= 1`` whose step is ``<= steps_0 + window``
        (the collapse window; ``window=None``: every checkpoint). The
        collapse is an early event: a later, deeper minimum is not its floor.
    floor
        The minimum over the window (earliest one on ties). Initialisation is
        excluded so that a series that only rises still has a floor after
        training starts. (This is ``floor="min"``, the default; see the caveat
        below.)
    peak
        The maximum over checkpoints ``0 .. floor`` inclusive (earliest on
        ties): the reference the drop is measured from.
    drop
        ``peak_value - floor_value`` (>= 0).
    relative_drop
        ``drop / peak_value``; NaN when ``peak_value <= 0``.
    onset
        The first checkpoint after the peak from which the series stays
        strictly below ``peak_value - onset_fraction * drop`` at every
        checkpoint up to and including the floor. None when ``drop == 0``.
    recovery
        The first checkpoint ``k`` after the floor such that the series is
        ``>= floor_value + recovery_fraction * drop`` at ``k`` and at each of
        the next ``hold - 1`` checkpoints (a brief spike is not a recovery;
        the hold must lie inside the series). None if that never happens and
        when ``drop == 0``. The recovery is searched after the window too.
    collapsed
        ``relative_drop >= min_relative_drop`` (False when relative_drop is NaN).

    Certainty (no look-ahead)
    -------------------------
    A smoothed value is final once the series holds ``smooth // 2`` more
    checkpoints after it. The floor (and peak, onset, drop) is certain at the
    first checkpoint that closes the window (step >= ``steps_0 + window``)
    and at which every smoothed value in the window is final:
    ``floor_certain_step``. The recovery is certain once the floor is and the
    last checkpoint of its hold is final: ``recovery_certain_step``. Calling
    :func:`collapse` on any prefix of the series that ends at or after a
    certain step returns the same event. Both are None when not (yet)
    certain, and ``floor_certain_step`` is always None with ``window=None``.

    Parameters
    ----------
    steps : array of int, shape (n,)
        Training steps, strictly increasing.
    values : array of float, shape (n,)
        The measure at each checkpoint (e.g. RankMe of one layer).
    onset_fraction, recovery_fraction : float in [0, 1]
        Fractions of ``drop`` defining onset and recovery, as above.
    min_relative_drop : float
        Smallest relative drop that counts as a collapse.
    smooth : odd int
        Rolling-median window, in checkpoints.
    floor : {"min", "drawdown"}, keyword-only
        How the floor is chosen within the window. ``"min"`` (default) as
        defined above. ``"drawdown"``: the checkpoint with the largest decline
        from the running maximum, ``max(x_0..x_i) - x_i`` (earliest on ties;
        falls back to ``"min"`` when the series never declines).
    window : int or None, keyword-only
        Length of the collapse window in steps (default
        :data:`~geomcap.analysis.protocol.COLLAPSE_WINDOW`); None = the whole series.
    hold : int >= 1, keyword-only
        Checkpoints the recovery level must be held (default
        :data:`~geomcap.analysis.protocol.RECOVERY_HOLD`).

    Caveat: if a series first rises *gradually* from a low initial value and
    then falls to a level above its early values (expansion, then partial
    compression), ``"min"`` puts the floor on the way up (at index 1) and
    reports ``drop == 0``; ``"drawdown"`` reports the rise-then-fall.

    Returns
    -------
    Collapse

    Raises
    ------
    ValueError
        If fewer than 2 finite values remain (e.g. all NaN), or on invalid
        arguments.
    """
    onset_fraction = check_fraction(onset_fraction, "onset_fraction")
    recovery_fraction = check_fraction(recovery_fraction, "recovery_fraction")
    window = _check_window(window)
    hold = check_count(hold, "hold")
    s, x = finite_smoothed(steps, values, smooth)
    if x.size < 2:
        raise ValueError(
            f"collapse needs at least 2 finite values, got {x.size} "
            f"(series of length {np.asarray(values).size} is all or mostly NaN)"
        )
    if floor not in ("min", "drawdown"):
        raise ValueError(f'floor must be "min" or "drawdown", got {floor!r}')
    n, half = x.size, int(smooth) // 2

    # window: indices 1 .. j (at least index 1, so a series that starts late still has a floor)
    if window is None:
        j = n - 1
    else:
        j = max(1, int(np.searchsorted(s, s[0] + window, side="right")) - 1)
    i_floor = 1 + int(np.argmin(x[1 : j + 1]))
    if floor == "drawdown":
        decline = np.maximum.accumulate(x[: j + 1])[1:] - x[1 : j + 1]
        if decline.max() > 0:
            i_floor = 1 + int(np.argmax(decline))
    i_peak = int(np.argmax(x[: i_floor + 1]))
    floor_value, peak_value = float(x[i_floor]), float(x[i_peak])
    drop = peak_value - floor_value
    relative_drop = drop / peak_value if peak_value > 0 else float("nan")

    # certainty: the window is closed and its smoothed values are final
    floor_certain = None
    if window is not None:
        closed = int(np.searchsorted(s, s[0] + window, side="left"))  # first index with step >= s0 + window
        i_certain = max(closed, j + half)
        if i_certain <= n - 1:
            floor_certain = i_certain

    onset_step = recovery_step = recovery_certain = None
    if drop > 0:
        # Onset: start of the final unbroken stretch below the onset level that
        # ends at the floor (a brief early dip that bounces back is not onset).
        below = x[i_peak + 1 : i_floor + 1] < peak_value - onset_fraction * drop
        if below[-1]:
            not_below = np.flatnonzero(~below)
            first = 0 if not_below.size == 0 else int(not_below[-1]) + 1
            onset_step = int(s[i_peak + 1 + first])
        above = x >= floor_value + recovery_fraction * drop
        for k in range(i_floor + 1, n - hold + 1):
            if above[k : k + hold].all():
                recovery_step = int(s[k])
                if floor_certain is not None and k + hold - 1 + half <= n - 1:
                    recovery_certain = max(floor_certain, k + hold - 1 + half)
                break

    return Collapse(
        initial_step=int(s[0]),
        initial_value=float(x[0]),
        peak_step=int(s[i_peak]),
        peak_value=peak_value,
        onset_step=onset_step,
        floor_step=int(s[i_floor]),
        floor_value=floor_value,
        recovery_step=recovery_step,
        drop=float(drop),
        relative_drop=float(relative_drop),
        collapsed=bool(relative_drop >= min_relative_drop),  # NaN -> False
        floor_certain_step=None if floor_certain is None else int(s[floor_certain]),
        recovery_certain_step=None if recovery_certain is None else int(s[recovery_certain]),
    )


def confirmed_events(steps, values, accuracy=None, *, chance: float = 0.0, threshold: float = ACQUISITION_THRESHOLD,
                     patience: int = ACQUISITION_PATIENCE, **collapse_kwargs) -> dict:
    """The events of a series known for certain so far: for a streaming monitor.

    Call it with every checkpoint seen so far (a prefix of the run). It runs
    :func:`collapse` on that prefix and keeps only what no later checkpoint can
    change: the floor (with its peak, onset, drop) once ``floor_certain_step``
    is reached, the recovery once ``recovery_certain_step`` is reached; and,
    when ``accuracy`` is given, the acquisition step once it has happened (the
    ``patience``-th checkpoint above the threshold confirms it).

    Parameters
    ----------
    steps : array of int, shape (n,)
        Steps seen so far, strictly increasing.
    values : array of float, shape (n,)
        The measure (e.g. the final layer's RankMe) at those steps.
    accuracy : array of float, shape (n,), optional
        Test accuracy at those steps (raw; corrected with ``chance``).
    chance, threshold, patience
        As in :func:`summarize_run` / :func:`acquisition_step`.
    **collapse_kwargs
        Passed to :func:`collapse` (``smooth``, ``window``, ``hold``, ...).

    Returns
    -------
    dict
        ``as_of_step`` (last step seen; None for an empty prefix), and
        ``floor_step, floor_value, peak_step, peak_value, onset_step, drop,
        relative_drop, collapsed, floor_certain_step`` (all None until the
        floor is certain), ``recovery_step, recovery_certain_step`` (None
        until the recovery is certain), ``acquisition_step`` (None until
        confirmed, or without ``accuracy``), ``analysis_complete``: True once
        the acquisition is confirmed, the floor is certain and, when the
        series collapsed, so is its recovery -- every transition that could
        lead acquisition is then decided (:func:`transition_step` is causal),
        so a run may stop there without changing which measures
        :func:`summarize_run` calls precursors (always False without
        ``accuracy``).
    """
    s, v = check_series(steps, values)
    out = {"as_of_step": int(s[-1]) if s.size else None}
    keys = ("floor_step", "floor_value", "peak_step", "peak_value", "onset_step", "drop", "relative_drop",
            "collapsed", "floor_certain_step", "recovery_step", "recovery_certain_step")
    out.update(dict.fromkeys(keys))
    if np.isfinite(v).sum() >= 2:
        c = collapse(s, v, **collapse_kwargs)
        if c.floor_certain_step is not None:
            out.update({k: getattr(c, k) for k in keys[:9]})
            if c.recovery_certain_step is not None:
                out.update(recovery_step=c.recovery_step, recovery_certain_step=c.recovery_certain_step)
    out["acquisition_step"] = None
    out["analysis_complete"] = False
    if accuracy is not None and s.size:
        check_series(s, accuracy, "accuracy")
        acq = acquisition_step(s, chance_corrected(accuracy, chance), threshold, patience)
        out["acquisition_step"] = acq
        out["analysis_complete"] = bool(
            acq is not None and out["floor_certain_step"] is not None
            and (not out["collapsed"] or out["recovery_certain_step"] is not None))
    return out


def reading_start(collapse_event: "Collapse | None", window: int = READING_START) -> int | None:
    """Where the informative reading starts: ``window`` (the end of the collapse window), or the
    collapse's recovery step if that is later; None when the series collapsed and never recovered
    (a transition there would be the collapse itself). Without a collapse event (no RankMe), ``window``."""
    if collapse_event is None or not collapse_event.collapsed:
        return int(window)
    if collapse_event.recovery_step is None:
        return None
    return int(max(window, collapse_event.recovery_step))
