"""Events in training curves: acquisition, collapse, transitions, precursors.

This module turns recorded series (one value per checkpoint) into the events
the paper's claims are about, under one analysis protocol whose parameters
are the module constants below (collected in :data:`PROTOCOL`):

* :func:`acquisition_step` -- when a capability is acquired (accuracy).
* :func:`collapse` -- the collapse / floor / recovery of a geometric measure
  such as hidden-state RankMe (claim C1), causal with a confirmation step;
  :func:`confirmed_events` -- the events known for certain on a prefix (for a
  streaming monitor).
* :func:`transition_step` -- one scale- and direction-free rule for "when did
  this series change", applied identically to every series and computed from
  that series alone, causally (claim C5).
* :func:`reading_start` -- where the informative reading starts: after the
  collapse has recovered.
* :func:`precursor` -- does a measure's transition precede acquisition (C5)?
* :func:`top_down`, :func:`layer_collapse_step` -- do layers nearer the
  output collapse earlier (claim C3)?
* :func:`plateau_fraction` -- how long behaviour sat at chance (difficulty).
* :func:`summarize_run` -- all of the above for one run's metrics table.
* :func:`tidy_series`, :func:`layer_matrix` -- pull arrays out of the tidy
  metrics table (columns ``step, layer, measure, value``).

Conventions
-----------
* ``steps`` are training steps: a 1-D array of strictly increasing integers.
  Checkpoints are spaced irregularly (dense early, log-spaced, then linear), so
  every function reports *steps*, never array positions, unless a name says
  ``checkpoints`` (then it is a count of positions in the series).
* Series are 1-D float arrays with one entry per checkpoint. NaN marks a
  missing measurement; each function says how it treats NaN.
* All functions are pure: numpy in, numbers / frozen dataclasses out. Steps
  come back as Python ``int`` and scalar values as Python ``float``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats

from geomcap import measures

if TYPE_CHECKING:  # pandas is only needed by the table helpers
    import pandas

__all__ = [
    "PROTOCOL",
    "SMOOTH",
    "COLLAPSE_WINDOW",
    "ONSET_FRACTION",
    "RECOVERY_FRACTION",
    "RECOVERY_HOLD",
    "MIN_RELATIVE_DROP",
    "LAYER_FRACTION",
    "MIN_TOP_DOWN_LAYERS",
    "TRANSITION_BASELINE",
    "TRANSITION_SIGMAS",
    "TRANSITION_MIN_CHANGE",
    "TRANSITION_HOLD",
    "MIN_LEAD_CHECKPOINTS",
    "READING_START",
    "PLATEAU_LEVEL",
    "acquisition_step",
    "Collapse",
    "collapse",
    "confirmed_events",
    "transition_step",
    "reading_start",
    "trailing_median",
    "layer_collapse_step",
    "plateau_fraction",
    "Precursor",
    "precursor",
    "TopDown",
    "top_down",
    "tidy_series",
    "layer_matrix",
    "final_layer",
    "final_layer_rows",
    "rolling_median",
    "chance_corrected",
    "spearman",
    "summarize_run",
    "format_summary",
    "PRECURSOR_MEASURES",
    "BEHAVIOURAL_BASELINES",
]


# ---------------------------------------------------------------------------
# the analysis protocol: every parameter of every rule, fixed before the data
# ---------------------------------------------------------------------------

#: rolling-median window (checkpoints) applied to every series before any event rule
SMOOTH = 3
#: the collapse floor is the minimum over the first COLLAPSE_WINDOW steps after the first checkpoint
COLLAPSE_WINDOW = 300
#: onset: the series stays below peak - ONSET_FRACTION * drop until the floor
ONSET_FRACTION = 0.1
#: recovery: the series regains RECOVERY_FRACTION of its drop ...
RECOVERY_FRACTION = 0.5
#: ... and holds it for RECOVERY_HOLD consecutive checkpoints (a brief spike is not a recovery)
RECOVERY_HOLD = 3
#: a drop of less than this share of the peak is no collapse
MIN_RELATIVE_DROP = 0.1
#: per-layer collapse time: the step a layer has lost this share of its own early drop
LAYER_FRACTION = 0.5
#: the top-down statistic needs at least this many informative layers
MIN_TOP_DOWN_LAYERS = 4
#: transition (:func:`transition_step`): a series' reference is the robust straight line through its first
#: TRANSITION_BASELINE checkpoints read ...
TRANSITION_BASELINE = 16
#: ... and its transition the first later checkpoint from which the (trailing-median smoothed) series stays
#: off that line's extrapolation by more than TRANSITION_SIGMAS robust standard deviations of the baseline's
#: residuals (widened as a prediction interval is, with the distance from the baseline) ...
TRANSITION_SIGMAS = 8.0
#: ... and by more than this share of the baseline's level ...
TRANSITION_MIN_CHANGE = 0.1
#: ... at TRANSITION_HOLD consecutive checkpoints, on the same side
TRANSITION_HOLD = 3
#: precursor (both readings): the transition precedes acquisition by >= this many checkpoints
MIN_LEAD_CHECKPOINTS = 2
#: the informative reading (b) reads every series from where the collapse is over: this step, or the run's
#: recovery (of the final layer's RankMe) if that is later; nothing if the collapse never recovers
READING_START = COLLAPSE_WINDOW
#: behavioural plateau: chance-corrected accuracy below this level
PLATEAU_LEVEL = 0.1

#: the protocol in one mapping (what the methods page states; `geomcap show --json` prints it)
PROTOCOL = {
    "smooth": SMOOTH, "collapse_window": COLLAPSE_WINDOW, "onset_fraction": ONSET_FRACTION,
    "recovery_fraction": RECOVERY_FRACTION, "recovery_hold": RECOVERY_HOLD,
    "min_relative_drop": MIN_RELATIVE_DROP, "layer_fraction": LAYER_FRACTION,
    "min_top_down_layers": MIN_TOP_DOWN_LAYERS, "transition_baseline": TRANSITION_BASELINE,
    "transition_sigmas": TRANSITION_SIGMAS, "transition_min_change": TRANSITION_MIN_CHANGE,
    "transition_hold": TRANSITION_HOLD, "min_lead_checkpoints": MIN_LEAD_CHECKPOINTS,
    "reading_start": READING_START, "plateau_level": PLATEAU_LEVEL, "acquisition_threshold": 0.5,
    "acquisition_patience": 3,
}


# ---------------------------------------------------------------------------
# input handling
# ---------------------------------------------------------------------------


def _check_steps(steps) -> np.ndarray:
    """Validate ``steps`` (1-D, finite, integer-valued, strictly increasing)."""
    s = np.asarray(steps)
    if s.ndim != 1:
        raise ValueError(f"steps must be 1-D, got shape {s.shape}")
    if s.size == 0:
        return s.astype(np.int64)
    if s.dtype.kind not in "iu":
        sf = s.astype(float)
        # Float steps are accepted when they are whole numbers (e.g. read from CSV).
        if not np.all(np.isfinite(sf)) or np.any(sf != np.round(sf)):
            raise ValueError("steps must be integer-valued training steps")
        s = sf
    s = s.astype(np.int64)
    if np.any(np.diff(s) <= 0):
        raise ValueError("steps must be strictly increasing")
    return s


def _check_series(steps, values, name: str = "values") -> tuple[np.ndarray, np.ndarray]:
    """Validate a (steps, values) pair; return (int64 steps, float64 values)."""
    s = _check_steps(steps)
    v = np.asarray(values, dtype=float)
    if v.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {v.shape}")
    if v.shape != s.shape:
        raise ValueError(
            f"steps and {name} must have the same length, got {s.size} and {v.size}"
        )
    return s, v


def _check_smooth(smooth) -> int:
    if isinstance(smooth, bool) or int(smooth) != smooth or smooth < 1 or smooth % 2 == 0:
        raise ValueError(f"smooth must be a positive odd integer (1 = no smoothing), got {smooth!r}")
    return int(smooth)


def _check_fraction(x, name: str, *, allow_zero: bool = True) -> float:
    lo_ok = x >= 0 if allow_zero else x > 0
    if not (np.isfinite(x) and lo_ok and x <= 1):
        bound = "[0, 1]" if allow_zero else "(0, 1]"
        raise ValueError(f"{name} must lie in {bound}, got {x!r}")
    return float(x)


def rolling_median(values, window: int = 1) -> np.ndarray:
    """Centred rolling median with a symmetrically shrinking window at the edges.

    Parameters
    ----------
    values : array, shape (n,)
        Finite values in checkpoint order (drop NaN first).
    window : int
        Odd window length in checkpoints; 1 returns a copy unchanged.

    Returns
    -------
    array, shape (n,)
        Element ``i`` is the median of ``values[i-h : i+h+1]`` with
        ``h = min(window // 2, i, n - 1 - i)``. The window shrinks
        *symmetrically* near the ends so the filter stays centred (it never
        shifts an event in time) and the first and last checkpoints keep their
        raw values (the initial value is the reference several rules measure
        from, so it must not be blended with later checkpoints).
    """
    window = _check_smooth(window)
    x = np.asarray(values, dtype=float)
    if window == 1 or x.size < 3:
        return x.copy()
    n, half = x.size, window // 2
    out = np.empty_like(x)
    if n >= window:  # the full windows at once; windows are odd, so each median is one of its values
        out[half : n - half] = np.median(np.lib.stride_tricks.sliding_window_view(x, window), axis=1)
    for i in [*range(min(half, n)), *range(max(n - half, half), n)]:
        h = min(half, i, n - 1 - i)
        out[i] = np.median(x[i - h : i + h + 1])
    return out


def trailing_median(values, window: int = 1) -> np.ndarray:
    """Causal rolling median: element ``i`` is the median of ``values[max(0, i - window + 1) : i + 1]``.

    Unlike :func:`rolling_median` it reads no later checkpoint, so a run cut at any checkpoint has the
    same smoothed values up to there as the full run. ``window`` odd, in checkpoints (1: a copy).
    """
    window = _check_smooth(window)
    x = np.asarray(values, dtype=float)
    if window == 1 or x.size < 2:
        return x.copy()
    out = np.empty_like(x)
    for i in range(min(window - 1, x.size)):
        out[i] = np.median(x[: i + 1])
    if x.size >= window:
        out[window - 1:] = np.median(np.lib.stride_tricks.sliding_window_view(x, window), axis=1)
    return out


def _finite_smoothed(steps, values, smooth: int, name: str = "values"):
    """Drop NaN (and inf) points, then smooth; return (steps, values) kept."""
    s, v = _check_series(steps, values, name)
    smooth = _check_smooth(smooth)
    keep = np.isfinite(v)
    return s[keep], rolling_median(v[keep], smooth)


# ---------------------------------------------------------------------------
# acquisition
# ---------------------------------------------------------------------------


def acquisition_step(steps, accuracy, threshold: float = 0.5, patience: int = 3) -> int | None:
    """Step at which a capability is acquired.

    Definition: the step of the first checkpoint of the first run of
    ``patience`` consecutive checkpoints whose accuracy is strictly greater
    than ``threshold``. Accuracy exactly equal to the threshold, and NaN
    accuracy, do not count as above it (NaN breaks a run).

    Parameters
    ----------
    steps : array of int, shape (n,)
        Training steps, strictly increasing.
    accuracy : array of float, shape (n,)
        Test accuracy at each checkpoint (fraction in [0, 1]).
    threshold : float
        Accuracy that must be exceeded (strictly).
    patience : int
        Number of consecutive checkpoints (not steps) that must exceed it; >= 1.
        Requiring a run guards against a single lucky checkpoint.

    Returns
    -------
    int or None
        The training step (not the index), or None if never acquired.

    Raises
    ------
    ValueError
        If shapes differ, steps are not strictly increasing integers, or
        ``patience < 1``.
    """
    s, acc = _check_series(steps, accuracy, "accuracy")
    if isinstance(patience, bool) or int(patience) != patience or patience < 1:
        raise ValueError(f"patience must be an integer >= 1, got {patience!r}")
    patience = int(patience)
    with np.errstate(invalid="ignore"):
        above = acc > threshold  # NaN > t is False, so NaN breaks a run
    run = 0
    for i, ok in enumerate(above):
        run = run + 1 if ok else 0
        if run == patience:
            return int(s[i - patience + 1])
    return None


# ---------------------------------------------------------------------------
# collapse
# ---------------------------------------------------------------------------


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


def _check_count(x, name: str) -> int:
    if isinstance(x, bool) or int(x) != x or x < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {x!r}")
    return int(x)


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
        :data:`COLLAPSE_WINDOW`); None = the whole series.
    hold : int >= 1, keyword-only
        Checkpoints the recovery level must be held (default
        :data:`RECOVERY_HOLD`).

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
    onset_fraction = _check_fraction(onset_fraction, "onset_fraction")
    recovery_fraction = _check_fraction(recovery_fraction, "recovery_fraction")
    window = _check_window(window)
    hold = _check_count(hold, "hold")
    s, x = _finite_smoothed(steps, values, smooth)
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


def confirmed_events(steps, values, accuracy=None, *, chance: float = 0.0, threshold: float = 0.5,
                     patience: int = 3, **collapse_kwargs) -> dict:
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
    s, v = _check_series(steps, values)
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
        _check_series(s, accuracy, "accuracy")
        acq = acquisition_step(s, chance_corrected(accuracy, chance), threshold, patience)
        out["acquisition_step"] = acq
        out["analysis_complete"] = bool(
            acq is not None and out["floor_certain_step"] is not None
            and (not out["collapsed"] or out["recovery_certain_step"] is not None))
    return out


# ---------------------------------------------------------------------------
# transitions and precursors
# ---------------------------------------------------------------------------


def transition_step(steps, values, smooth: int = SMOOTH, *, start: int | None = None,
                    baseline: int = TRANSITION_BASELINE, sigmas: float = TRANSITION_SIGMAS,
                    min_change: float = TRANSITION_MIN_CHANGE, hold: int = TRANSITION_HOLD) -> int | None:
    """Step at which a series leaves the course it was on where it was first read: computed from that
    series alone, causally.

    One rule, applied identically to every series (RankMe and its variants, probe accuracy, the costly
    measures, and the baselines test loss, train accuracy, first-token accuracy, parameter norm). It reads
    the checkpoints with ``step >= start`` (all when ``start`` is None), drops non-finite values, and:

    1. *course*: the Theil-Sen line (median of pairwise slopes, median intercept) through the first
       ``baseline`` raw values against their steps; *noise*: the robust standard deviation of the
       baseline's residuals about it (1.4826 x their MAD);
    2. *threshold* at step t: ``max(sigmas * noise * w(t), min_change * |baseline median|)``, where
       ``w(t) = sqrt(1 + 1/b + (t - mean)^2 / Sxx)`` widens the band with the distance from the
       baseline as an ordinary least-squares prediction interval does (the line's slope is uncertain);
       a vanishing floor keeps a perfectly flat baseline from firing on round-off;
    3. the series is smoothed by a trailing median of ``smooth`` checkpoints (:func:`trailing_median`:
       no later checkpoint is read), and the transition is the first checkpoint after the baseline from
       which it is off the extrapolated line by more than the threshold, on the same side, at ``hold``
       consecutive checkpoints.

    So a series that keeps its course -- flat, or a steady ramp -- has no transition, however far it
    drifts; one that turns, jumps or bends away has one. Nothing outside the series enters: not the
    acquisition step, not another measure, not where the run stopped. A checkpoint's verdict needs only
    the ``hold - 1`` checkpoints after it, so a run stopped at any later checkpoint gives the same
    transition as the full run (a run stopped earlier has none yet). Unchanged by ``a * x + b``
    (``a != 0``) except through ``min_change``, relative to the level; direction-free. Measured on
    150 checkpoints of white noise and of Student-t(3) noise it fires in under 1% of series
    (``test_transition_false_alarms_on_noise``).

    Parameters
    ----------
    steps : array of int, shape (n,)
        Training steps, strictly increasing.
    values : array of float, shape (n,)
        The measure at each checkpoint; NaN points are ignored.
    smooth : odd int
        Trailing-median window, in checkpoints (1 = none).
    start : int, optional, keyword-only
        First step read (inclusive), e.g. :func:`reading_start`.
    baseline, sigmas, min_change, hold : keyword-only
        The protocol's constants (:data:`TRANSITION_BASELINE`, :data:`TRANSITION_SIGMAS`,
        :data:`TRANSITION_MIN_CHANGE`, :data:`TRANSITION_HOLD`).

    Returns
    -------
    int or None
        The training step, or None when the series keeps its course (or has fewer than
        ``baseline + hold`` finite values from ``start``).
    """
    smooth = _check_smooth(smooth)
    baseline = _check_count(baseline, "baseline")
    hold = _check_count(hold, "hold")
    if baseline < 2:
        raise ValueError(f"baseline must be at least 2 checkpoints (a line), got {baseline}")
    if not (np.isfinite(sigmas) and sigmas > 0):
        raise ValueError(f"sigmas must be a positive number, got {sigmas!r}")
    if not (np.isfinite(min_change) and min_change >= 0):
        raise ValueError(f"min_change must be >= 0, got {min_change!r}")
    s, v = _check_series(steps, values)
    keep = np.isfinite(v) if start is None else np.isfinite(v) & (s >= start)
    x, raw = s[keep].astype(float), v[keep]
    if raw.size < baseline + hold:
        return None
    bx, by = x[:baseline], raw[:baseline]
    i, j = np.triu_indices(baseline, 1)
    slope = float(np.median((by[j] - by[i]) / (bx[j] - bx[i])))
    intercept = float(np.median(by - slope * bx))
    residuals = by - (intercept + slope * bx)
    noise = 1.4826 * float(np.median(np.abs(residuals - np.median(residuals))))
    centre = bx.mean()
    spread = float(((bx - centre) ** 2).sum())
    widen = np.sqrt(1 + 1 / baseline + (x - centre) ** 2 / spread)
    level = abs(float(np.median(by)))
    threshold = np.maximum(sigmas * noise * widen, min_change * level) + 1e-12 * max(1.0, level)
    deviation = trailing_median(raw, smooth) - (intercept + slope * x)
    beyond = np.sign(deviation) * (np.abs(deviation) > threshold)
    for t in range(baseline, raw.size - hold + 1):
        side = beyond[t]
        if side != 0 and np.all(beyond[t:t + hold] == side):
            return int(s[keep][t])
    return None


def reading_start(collapse_event: "Collapse | None", window: int = READING_START) -> int | None:
    """Where the informative reading starts: ``window`` (the end of the collapse window), or the
    collapse's recovery step if that is later; None when the series collapsed and never recovered
    (a transition there would be the collapse itself). Without a collapse event (no RankMe), ``window``."""
    if collapse_event is None or not collapse_event.collapsed:
        return int(window)
    if collapse_event.recovery_step is None:
        return None
    return int(max(window, collapse_event.recovery_step))


@dataclass(frozen=True)
class Precursor:
    """Does a measure's transition precede acquisition? (see :func:`precursor`)

    ``gap_share`` is ``gap_steps / acquisition_step`` (the lead as a share of
    the acquisition step; comparable across step budgets).
    """

    measure_step: int | None
    acquisition_step: int | None
    gap_steps: int | None
    gap_checkpoints: int | None
    is_precursor: bool
    gap_share: float | None = None


def _lead(grid, measure_step, acquisition, min_lead: int) -> Precursor:
    """Compare two steps; the gap in checkpoints is counted on ``grid`` (the accuracy's steps)."""
    if measure_step is None or acquisition is None:
        return Precursor(measure_step, acquisition, None, None, False, None)
    gap_ckpt = int(np.searchsorted(grid, acquisition) - np.searchsorted(grid, measure_step))
    share = (acquisition - measure_step) / acquisition if acquisition > 0 else None
    return Precursor(measure_step, acquisition, acquisition - measure_step, gap_ckpt, gap_ckpt >= min_lead,
                     None if share is None else float(share))


def precursor(
    steps,
    measure,
    accuracy,
    threshold: float = 0.5,
    patience: int = 3,
    smooth: int = SMOOTH,
    *,
    min_lead: int = MIN_LEAD_CHECKPOINTS,
    start: int | None = None,
    measure_steps=None,
) -> Precursor:
    """Compare a measure's transition with capability acquisition.

    ``acquisition_step = acquisition_step(steps, accuracy, threshold, patience)`` (accuracy is not
    smoothed: acquisition has its own patience rule) and ``measure_step = transition_step(steps,
    measure, smooth, start=start)``: the measure's transition is computed from the measure alone.

    Parameters
    ----------
    steps : array of int, shape (n,)
        Training steps shared by both series.
    measure, accuracy : array of float, shape (n,)
        The measure and test accuracy at each checkpoint.
    threshold, patience
        Passed to :func:`acquisition_step`.
    smooth
        Passed to :func:`transition_step`.
    min_lead : int, keyword-only
        Checkpoints by which the transition must precede acquisition.
    start : int, optional, keyword-only
        First step read by the transition rule (e.g. :func:`reading_start`).
    measure_steps : array of int, shape (m,), optional, keyword-only
        The measure's own checkpoints, when it was recorded on a subset of
        ``steps`` (the costly measures): ``measure`` then has shape (m,); its
        transition is read on them, acquisition on ``steps``, and the gap
        is counted in checkpoints of ``steps``.

    Returns
    -------
    Precursor
        ``gap_steps = acquisition_step - measure_step`` (positive = the
        measure leads), ``gap_checkpoints`` the same difference in checkpoint
        indices, ``gap_share = gap_steps / acquisition_step``; None unless
        both steps are defined. ``is_precursor`` is True iff both are defined
        and ``gap_checkpoints >= min_lead``.
    """
    s, _ = _check_series(steps, accuracy, "accuracy")
    m_steps, _ = _check_series(s if measure_steps is None else measure_steps, measure, "measure")
    min_lead = _check_count(min_lead, "min_lead")
    a = acquisition_step(s, accuracy, threshold=threshold, patience=patience)
    m = transition_step(m_steps, measure, smooth=smooth, start=start)
    return _lead(s, m, a, min_lead)


# ---------------------------------------------------------------------------
# top-down collapse across layers
# ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)  # eq=False: array fields make == ambiguous
class TopDown:
    """Order of the collapse across depth (see :func:`top_down`).

    Arrays have one entry per *informative* layer, in the order given.
    """

    layers: np.ndarray
    min_step: np.ndarray
    floor: np.ndarray
    relative_floor: np.ndarray
    rho_step: float
    rho_floor: float
    is_top_down: bool
    excluded: np.ndarray = field(default_factory=lambda: np.array([], dtype=np.int64))
    collapse_step: np.ndarray = field(default_factory=lambda: np.array([], dtype=float))
    defined: bool = False


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rho, NaN (without warnings) for < 2 points or constant input."""
    a, b = np.asarray(a), np.asarray(b)
    if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        rho = stats.spearmanr(a, b)[0]
    return float(rho) if np.isfinite(rho) else float("nan")


def layer_collapse_step(steps, values, fraction: float = LAYER_FRACTION, smooth: int = SMOOTH, *,
                        window: int | None = COLLAPSE_WINDOW) -> float | None:
    """Step at which a series has lost ``fraction`` of its own early drop (per-layer collapse time).

    With the peak, floor and drop of :func:`collapse` (same smoothing and
    window), the first crossing of ``peak_value - fraction * drop`` between
    the peak and the floor, linearly interpolated between the two checkpoints
    around it (a float step: two layers that fall within the same gap between
    checkpoints are still ordered by how far each fell). None when the series
    does not drop.
    """
    fraction = _check_fraction(fraction, "fraction", allow_zero=False)
    c = collapse(steps, values, smooth=smooth, window=window)
    if c.drop <= 0:
        return None
    s, x = _finite_smoothed(steps, values, smooth)
    i_peak, i_floor = int(np.searchsorted(s, c.peak_step)), int(np.searchsorted(s, c.floor_step))
    level = c.peak_value - fraction * c.drop
    i = i_peak + 1 + int(np.argmax(x[i_peak + 1 : i_floor + 1] <= level))
    x0, x1 = x[i - 1], x[i]
    return float(s[i - 1] + (x0 - level) / (x0 - x1) * (s[i] - s[i - 1]))


def top_down(steps, values_by_layer, layers=None, smooth: int = SMOOTH, *, rtol: float = 1e-6,
             fraction: float = LAYER_FRACTION, window: int | None = COLLAPSE_WINDOW,
             min_layers: int = MIN_TOP_DOWN_LAYERS, min_relative_drop: float = MIN_RELATIVE_DROP) -> TopDown:
    """Is the collapse top-down (layers nearer the output collapse earlier)?

    Per layer, the collapse of :func:`collapse` (NaN dropped, rolling median
    of length ``smooth``, floor within ``window``) and the *collapse step* of
    :func:`layer_collapse_step`: when the layer has lost ``fraction`` of its
    own early drop (not the step of its minimum, which ties when the collapse
    falls between two checkpoints).

    A layer is *informative* when it has at least 2 finite values, is not
    constant (``max - min > rtol * max|value|``; the embedding at the answer
    position is the same vector for every prompt, so its RankMe is exactly 1)
    and collapses (relative drop >= ``min_relative_drop``). Other layers are
    listed in ``excluded`` and left out of every array and correlation.

    Parameters
    ----------
    steps : array of int, shape (n_checkpoints,)
        Training steps, strictly increasing.
    values_by_layer : array of float, shape (n_layers, n_checkpoints)
        The measure (e.g. RankMe) per layer and checkpoint.
    layers : array of int, shape (n_layers,), optional
        Depth of each row (0 = embeddings); default ``0 .. n_layers-1``.
    smooth, window, fraction, min_relative_drop
        As above (defaults: the protocol's).
    rtol : float
        Relative tolerance for "constant".
    min_layers : int
        Informative layers needed for the statistic to be defined.

    Returns
    -------
    TopDown
        ``layers``, ``collapse_step`` (float step per layer), ``min_step``
        (step of each layer's floor), ``floor``, ``relative_floor`` (floor /
        initial value), ``rho_step`` = Spearman of depth vs ``collapse_step``
        (< 0: deeper layers collapse first, top-down), ``rho_floor`` =
        Spearman of depth vs ``relative_floor`` (< 0: deeper layers fall
        deeper), ``defined`` (at least ``min_layers`` informative layers and
        a finite rho_step), ``is_top_down = defined and rho_step < 0``. Both
        rhos are NaN when not defined.
    """
    s = _check_steps(steps)
    v = np.asarray(values_by_layer, dtype=float)
    if v.ndim != 2 or v.shape[1] != s.size:
        raise ValueError(
            f"values_by_layer must have shape (n_layers, {s.size}), got {v.shape}"
        )
    depth = np.arange(v.shape[0]) if layers is None else np.asarray(layers)
    if depth.shape != (v.shape[0],):
        raise ValueError(f"layers must have shape ({v.shape[0]},), got {depth.shape}")
    min_layers = _check_count(min_layers, "min_layers")

    used, excluded, when, min_step, floor, rel = [], [], [], [], [], []
    for d, row in zip(depth, v):
        finite = row[np.isfinite(row)]
        if finite.size < 2 or np.ptp(finite) <= rtol * np.max(np.abs(finite)):
            excluded.append(d)
            continue
        c = collapse(s, row, smooth=smooth, window=window, min_relative_drop=min_relative_drop)
        if not c.collapsed:
            excluded.append(d)
            continue
        used.append(d)
        when.append(layer_collapse_step(s, row, fraction=fraction, smooth=smooth, window=window))
        min_step.append(c.floor_step)
        floor.append(c.floor_value)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel.append(np.float64(c.floor_value) / c.initial_value)

    used_a = np.asarray(used, dtype=depth.dtype)
    when_a = np.asarray(when, dtype=float)
    rel_a = np.asarray(rel, dtype=float)
    enough = used_a.size >= min_layers
    rho_step = spearman(used_a, when_a) if enough else float("nan")
    # A zero initial value makes relative_floor non-finite; rank it nowhere.
    rho_floor = spearman(used_a, rel_a) if enough and np.all(np.isfinite(rel_a)) else float("nan")
    defined = bool(enough and np.isfinite(rho_step))
    return TopDown(
        layers=used_a,
        min_step=np.asarray(min_step, dtype=np.int64),
        floor=np.asarray(floor, dtype=float),
        relative_floor=rel_a,
        rho_step=rho_step,
        rho_floor=rho_floor,
        is_top_down=bool(defined and rho_step < 0),
        excluded=np.asarray(excluded, dtype=depth.dtype),
        collapse_step=when_a,
        defined=defined,
    )


# ---------------------------------------------------------------------------
# tidy metrics table helpers
# ---------------------------------------------------------------------------

_TIDY_COLUMNS = ("step", "layer", "measure", "value")


def _check_tidy(metrics) -> None:
    missing = [c for c in _TIDY_COLUMNS if c not in metrics.columns]
    if missing:
        raise KeyError(
            f"metrics table lacks columns {missing}; expected {list(_TIDY_COLUMNS)}, "
            f"got {list(metrics.columns)}"
        )


def _no_duplicate_steps(steps: np.ndarray, what: str) -> None:
    if np.any(np.diff(steps) == 0):
        dup = np.unique(steps[1:][np.diff(steps) == 0])
        raise ValueError(
            f"{what} has several rows at steps {dup[:5].tolist()}; filter the table "
            "to one run (e.g. one task and seed) first"
        )


def tidy_series(metrics: "pandas.DataFrame", measure: str, layer: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """One series from a tidy metrics table.

    Parameters
    ----------
    metrics : DataFrame
        Columns ``step, layer, measure, value``; ``layer`` is -1 for
        model-level measures (accuracy, loss) and the layer index (0 =
        embeddings) for per-layer measures (rankme).
    measure : str
        Name in the ``measure`` column.
    layer : int
        Layer to select; -1 for model-level measures. None is not allowed
        (select a layer explicitly, or use :func:`layer_matrix`).

    Returns
    -------
    steps : array of int64, shape (n,)
        Sorted training steps.
    values : array of float64, shape (n,)

    Raises
    ------
    KeyError
        If the measure, or the measure at that layer, is absent (the message
        lists what is available).
    ValueError
        If ``layer`` is None or a step occurs twice.
    """
    if layer is None:
        raise ValueError("layer=None is not allowed: pass -1 for model-level measures or a layer index")
    _check_tidy(metrics)
    rows = metrics[metrics["measure"] == measure]
    if rows.empty:
        available = sorted(map(str, metrics["measure"].unique()))
        raise KeyError(f"measure {measure!r} not in metrics; available measures: {available}")
    at_layer = rows[rows["layer"] == layer]
    if at_layer.empty:
        available = sorted(int(l) for l in rows["layer"].unique())
        raise KeyError(f"measure {measure!r} has no rows at layer {layer}; available layers: {available}")
    at_layer = at_layer.sort_values("step", kind="stable")
    steps = at_layer["step"].to_numpy(dtype=np.int64)
    _no_duplicate_steps(steps, f"measure {measure!r} at layer {layer}")
    return steps, at_layer["value"].to_numpy(dtype=float)


def layer_matrix(metrics: "pandas.DataFrame", measure: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All layers of one measure as a (layer x step) matrix.

    Parameters
    ----------
    metrics : DataFrame
        Tidy table with columns ``step, layer, measure, value``.
    measure : str
        Name in the ``measure`` column (normally a per-layer one, e.g. rankme).

    Returns
    -------
    layers : array of int64, shape (n_layers,)
        Sorted layer indices present for the measure.
    steps : array of int64, shape (n_steps,)
        Sorted union of the steps at which any layer was recorded.
    values : array of float64, shape (n_layers, n_steps)
        NaN where a layer was not recorded at a step. Suitable input for
        :func:`top_down` (``top_down(steps, values, layers)``).

    Raises
    ------
    KeyError
        If the measure is absent (the message lists available measures).
    ValueError
        If a (layer, step) pair occurs twice.
    """
    _check_tidy(metrics)
    rows = metrics[metrics["measure"] == measure]
    if rows.empty:
        available = sorted(map(str, metrics["measure"].unique()))
        raise KeyError(f"measure {measure!r} not in metrics; available measures: {available}")
    if rows.duplicated(["layer", "step"]).any():
        raise ValueError(
            f"measure {measure!r} has several rows for some (layer, step); filter the "
            "table to one run (e.g. one task and seed) first"
        )
    wide = rows.pivot(index="layer", columns="step", values="value").sort_index().sort_index(axis=1)
    return (
        wide.index.to_numpy(dtype=np.int64),
        wide.columns.to_numpy(dtype=np.int64),
        wide.to_numpy(dtype=float),
    )


def final_layer(metrics: "pandas.DataFrame", measure: str) -> int | None:
    """The final layer of ``measure`` in one run's tidy table: the largest layer index recorded for it
    (None when it is absent). For ``rankme`` the output after the final LayerNorm; for a ``*_residual``
    measure, recorded at the last layer only, the last block's residual stream."""
    layers = metrics.loc[metrics["measure"] == measure, "layer"]
    return int(layers.max()) if len(layers) else None


def final_layer_rows(metrics: "pandas.DataFrame", measure: str, by: str | None = "run") -> "pandas.DataFrame":
    """The rows of ``measure`` at its final layer (:func:`final_layer`), in a table of several runs: per
    group of the ``by`` column (None: the table is one run)."""
    rows = metrics[metrics["measure"] == measure]
    final = rows["layer"].max() if by is None else rows.groupby(by)["layer"].transform("max")
    return rows[rows["layer"] == final]


# ---------------------------------------------------------------------------
# one run's summary (what `geomcap show` prints and the notebooks tabulate)
# ---------------------------------------------------------------------------

#: series whose transition is compared with acquisition, as (measure, layer): layer "final" means
#: the measure's last layer (after the final LayerNorm for ``rankme``; the last block's residual
#: stream, before it, for the ``*_residual`` measures). The same rule is applied to every one. The
#: precursor measures of :data:`geomcap.measures.MEASURES`, in its order.
PRECURSOR_MEASURES = tuple((m.name, "final" if m.per_layer else -1) for m in measures.MEASURES if m.precursor)
#: the behavioural baselines among them: they move with behaviour by construction
BEHAVIOURAL_BASELINES = measures.BEHAVIOURAL_BASELINES
#: the two readings of a transition: from the first checkpoint, and from the collapse floor onward


def chance_corrected(accuracy, chance: float):
    """(accuracy - chance) / (1 - chance): 0 at the best constant answer, 1 at perfect."""
    if not 0 <= chance < 1:
        raise ValueError(f"chance must be in [0, 1), got {chance!r}")
    return (np.asarray(accuracy, dtype=np.float64) - chance) / (1 - chance)


def plateau_fraction(steps, accuracy, until: int | None = None, level: float = PLATEAU_LEVEL) -> float | None:
    """Share of the steps before ``until`` during which accuracy sits at chance (``< level``).

    Each checkpoint's accuracy is held until the next checkpoint, so the
    share is measured in training steps over ``[steps_0, until)``, not in
    checkpoints (checkpoints are denser early on). NaN accuracy counts as not
    at chance.

    Parameters
    ----------
    steps : array of int, shape (n,)
        Training steps, strictly increasing.
    accuracy : array of float, shape (n,)
        Chance-corrected accuracy (:func:`chance_corrected`).
    until : int, optional
        End of the span, normally the acquisition step; default the last step.
    level : float
        Accuracy below which a checkpoint is at chance.

    Returns
    -------
    float in [0, 1] or None
        None when the span is empty (``until <= steps_0``).
    """
    s, acc = _check_series(steps, accuracy, "accuracy")
    if s.size == 0:
        return None
    until = int(s[-1]) if until is None else int(until)
    if until <= s[0]:
        return None
    ends = np.minimum(np.append(s[1:], until), until)
    length = np.clip(ends - s, 0, None)
    with np.errstate(invalid="ignore"):
        at_chance = acc < level
    return float(length[at_chance].sum() / (until - s[0]))


def _value_at(metrics, measure: str, step: int | None, layer) -> float | None:
    if step is None or measure not in set(metrics["measure"].unique()):
        return None
    layer = final_layer(metrics, measure) if layer == "final" else layer
    s, v = tidy_series(metrics, measure, layer=layer)
    i = int(np.searchsorted(s, step))
    return float(v[i]) if i < s.size and s[i] == step and np.isfinite(v[i]) else None


def _top_down_dict(td: TopDown) -> dict:
    return {"rho_step": td.rho_step, "rho_floor": td.rho_floor, "defined": td.defined,
            # undefined (None) with fewer than the protocol's informative layers or tied collapse steps
            "is_top_down": td.is_top_down if td.defined else None,
            "layers": td.layers.tolist(), "collapse_step": td.collapse_step.tolist(),
            "min_step": td.min_step.tolist(), "floor": td.floor.tolist(), "excluded": td.excluded.tolist()}


def _precursor_reading(metrics, steps, accuracy, present, start, threshold, patience, smooth, min_lead,
                       reading: str) -> dict:
    """Every series of :data:`PRECURSOR_MEASURES` in the table, read from ``start``: its transition, its
    lead over acquisition and over the test loss's transition (see :func:`summarize_run`)."""
    found = {}
    for name, layer in PRECURSOR_MEASURES:
        if name not in present:
            continue
        layer = final_layer(metrics, name) if layer == "final" else layer
        m_steps, m_values = tidy_series(metrics, name, layer=layer)
        # costly measures exist on a subset of checkpoints: their transition comes from their own
        # series, acquisition from the full accuracy series, gaps counted on the full checkpoint grid
        p = (precursor(steps, m_values, accuracy, threshold, patience, smooth, min_lead=min_lead, start=start,
                       measure_steps=m_steps) if accuracy is not None else
             _lead(steps, transition_step(m_steps, m_values, smooth=smooth, start=start), None, min_lead))
        found[name] = (layer, p)
    loss = found.get("test_loss")
    loss_step = None if loss is None else loss[1].measure_step
    # the first step at which the rule can decide anything (the checkpoint after its baseline): a run acquired
    # by then leaves no room for a lead, so the reading is undefined there, not "no precursor"
    readable = steps[steps >= (start or 0)]
    room = int(readable[TRANSITION_BASELINE]) if readable.size > TRANSITION_BASELINE else None
    acq = next(iter(found.values()))[1].acquisition_step if found else None
    no_room = acq is not None and (room is None or acq <= room)
    out = {}
    for name, (layer, p) in found.items():
        t, leads = p.measure_step, None
        if name != "test_loss" and t is not None and "test_loss" in found:
            # a test loss with no transition in the record moves later than any transition in it
            leads = True if loss_step is None else _lead(steps, t, loss_step, min_lead).is_precursor
        entry = {**p.__dict__, "test_loss_step": loss_step, "leads_test_loss": leads,
                 "informative": bool(p.is_precursor and leads), "reading": reading, "start": start,
                 "room_step": room, "layer": layer}
        if no_room:
            entry.update(is_precursor=None, informative=None)
        out[name] = entry
    return out


def summarize_run(metrics: "pandas.DataFrame", threshold: float = 0.5, patience: int = 3,
                  smooth: int = SMOOTH, chance: float = 0.0, measure: str = "rankme", *,
                  window: int | None = COLLAPSE_WINDOW, hold: int = RECOVERY_HOLD,
                  min_lead: int = MIN_LEAD_CHECKPOINTS, plateau_level: float = PLATEAU_LEVEL) -> dict:
    """Every event of one run, under the analysis protocol, from its tidy metrics table.

    The defaults are the protocol (:data:`PROTOCOL`); the run may have stopped
    before its step budget (nothing here reads the budget or where the run
    stopped: every transition is computed causally from its own series).
    Rows whose value is not finite are dropped first and counted
    (``nonfinite_rows``). A table without ``accuracy`` (a monitor without
    labels, a checkpoints folder) gets everything that needs no behaviour:
    acquisition and the leads over it are None, with a note.

    Parameters
    ----------
    metrics : DataFrame
        One run's tidy table (``step, layer, measure, value``).
    threshold, patience
        Acquisition: chance-corrected accuracy ``(acc - chance) / (1 - chance)
        > threshold`` at ``patience`` consecutive checkpoints
        (:func:`acquisition_step`). ``chance`` is the best constant answer's
        accuracy (:func:`geomcap.tasks.chance_accuracy`; 0 when unknown).
    smooth, min_lead
        The smoothing of every rule and the lead (in checkpoints) a precursor needs.
    measure : str
        The per-layer geometric measure whose collapse and top-down statistic
        are reported (default the primary ``rankme``; a variant for the
        sensitivity analysis).
    window, hold
        The collapse window and the recovery hold (:func:`collapse`).
    plateau_level
        :func:`plateau_fraction`'s level.

    Returns
    -------
    dict
        ``acquisition_step`` (None when never acquired), ``final_accuracy``
        (raw, last checkpoint), ``last_step``, ``checkpoints``, ``chance``,
        ``measure``, ``final_layer``, ``plateau_fraction`` (of the steps
        before acquisition, or of the whole run when never acquired),
        ``nonfinite_rows``, ``notes`` (what could not be computed, and why);
        ``collapse``: the :class:`Collapse` fields of the final layer's
        ``measure`` (None without the measure);
        ``order_collapse_recovery_acquisition``: collapsed and floor <
        recovery <= acquisition (claim C1; None when never acquired);
        ``mean_energy``: the final layer's ``mean_energy_share`` at
        initialisation, at the floor and at the last checkpoint, and
        ``mean_energy_share_residual`` at the floor (None where not recorded);
        ``reading_start``: where the informative reading starts (:func:`reading_start`);
        ``precursors`` (the informative reading (b), from ``reading_start``) and
        ``paper_precursors`` (the paper's reading (a), from the first checkpoint):
        for every series of :data:`PRECURSOR_MEASURES` in the table, a dict with
        ``measure_step`` (its transition, :func:`transition_step`), ``acquisition_step``,
        ``gap_steps``, ``gap_checkpoints``, ``gap_share`` (gap / acquisition step),
        ``is_precursor`` (gap_checkpoints >= ``min_lead``; None when the run was acquired before the rule
        could decide anything, at ``room_step``, the checkpoint after its baseline), ``test_loss_step`` (the test
        loss's transition, same reading), ``leads_test_loss`` (the transition precedes the test
        loss's by >= ``min_lead`` checkpoints, or the test loss has none; None when the series has
        no transition, or for the test loss itself), ``informative`` (is_precursor and
        leads_test_loss; None where is_precursor is), ``reading``, ``start``, ``room_step`` and ``layer``;
        ``top_down``: :func:`top_down` on the pre-LayerNorm residual streams
        (layers ``0..L-1`` of ``measure`` and, at ``L``, ``<measure>_residual``
        when recorded; else the post-LayerNorm output, said in ``basis``),
        with the post-LayerNorm reading beside it under ``post_ln``;
        ``protocol``: the parameters used, which :func:`format_summary` states.
    """
    _check_tidy(metrics)
    finite = np.isfinite(np.asarray(metrics["value"], dtype=float))
    nonfinite = int((~finite).sum())
    notes = []
    if nonfinite:
        by_measure = metrics.loc[~finite, "measure"].value_counts()
        notes.append(f"{nonfinite} row(s) with a non-finite value dropped ("
                     + ", ".join(f"{name} {count}" for name, count in by_measure.items()) + ")")
        metrics = metrics[finite]
    present = set(metrics["measure"].unique())
    steps = np.unique(np.asarray(metrics["step"], dtype=np.int64))
    accuracy = raw_accuracy = None
    if "accuracy" in present:
        steps, raw_accuracy = tidy_series(metrics, "accuracy")
        accuracy = chance_corrected(raw_accuracy, chance)
    else:
        notes.append("no accuracy recorded: acquisition and the leads over it are undefined")
    acq = None if accuracy is None else acquisition_step(steps, accuracy, threshold=threshold, patience=patience)
    last = final_layer(metrics, measure)
    summary = {"acquisition_step": acq,
               "final_accuracy": None if raw_accuracy is None else float(raw_accuracy[-1]),
               "last_step": int(steps[-1]) if steps.size else None, "checkpoints": int(steps.size),
               "chance": chance, "measure": measure, "final_layer": last,
               "plateau_fraction": None if accuracy is None else plateau_fraction(steps, accuracy, until=acq,
                                                                                  level=plateau_level),
               "nonfinite_rows": nonfinite, "notes": notes, "collapse": None,
               "order_collapse_recovery_acquisition": None, "mean_energy": None, "reading_start": None,
               "precursors": {}, "paper_precursors": {}, "top_down": None,
               "protocol": {"threshold": threshold, "patience": patience, "smooth": smooth, "window": window,
                            "hold": hold, "min_lead": min_lead, "plateau_level": plateau_level,
                            "transition_baseline": TRANSITION_BASELINE, "transition_sigmas": TRANSITION_SIGMAS,
                            "transition_min_change": TRANSITION_MIN_CHANGE, "transition_hold": TRANSITION_HOLD,
                            "reading_start": READING_START}}

    c = None
    if last is not None:
        r_steps, r_values = tidy_series(metrics, measure, layer=last)
        if np.isfinite(r_values).sum() >= 2:
            c = collapse(r_steps, r_values, smooth=smooth, window=window, hold=hold)
            summary["collapse"] = c.__dict__.copy()
            if acq is not None:
                summary["order_collapse_recovery_acquisition"] = bool(
                    c.collapsed and c.recovery_step is not None and c.floor_step < c.recovery_step <= acq)
        else:
            notes.append(f"{measure} has fewer than 2 checkpoints: no collapse")
    if "mean_energy_share" in present:
        share_steps, share = tidy_series(metrics, "mean_energy_share", layer=final_layer(metrics, "mean_energy_share"))
        floor_step = None if c is None else c.floor_step
        summary["mean_energy"] = {
            "initial": float(share[0]), "last": float(share[-1]),
            "at_floor": _value_at(metrics, "mean_energy_share", floor_step, "final"),
            "residual_at_floor": _value_at(metrics, "mean_energy_share_residual", floor_step, "final")}

    start = reading_start(c, window if window is not None else READING_START)
    summary["reading_start"] = start
    common = (metrics, steps, accuracy, present)
    summary["paper_precursors"] = _precursor_reading(*common, None, threshold, patience, smooth, min_lead,
                                                     "from_start")
    if start is not None:
        summary["precursors"] = _precursor_reading(*common, start, threshold, patience, smooth, min_lead,
                                                   "after_collapse")
    else:
        notes.append("the collapse never recovered: no informative reading")

    if last is not None and c is not None:
        layers, l_steps, values = layer_matrix(metrics, measure)
        residual = f"{measure}_residual"
        td_post = top_down(l_steps, values, layers=layers, smooth=smooth, window=window)
        pre = values.copy()
        if residual in present:
            res_steps, res_values = tidy_series(metrics, residual, layer=final_layer(metrics, residual))
            row = np.full(l_steps.size, np.nan)
            idx = np.searchsorted(l_steps, res_steps)
            ok = (idx < l_steps.size) & (l_steps[np.minimum(idx, l_steps.size - 1)] == res_steps)
            row[idx[ok]] = res_values[ok]
            pre[list(layers).index(last)] = row
            basis = f"pre-LayerNorm residual streams (layer {last}: {residual})"
            td = top_down(l_steps, pre, layers=layers, smooth=smooth, window=window)
        else:
            basis = (f"layers 0..{last - 1} pre-LayerNorm, layer {last} post-LayerNorm "
                     f"({residual} not recorded)")
            td = td_post
        summary["top_down"] = {**_top_down_dict(td), "basis": basis,
                               "residual_measure": residual if residual in present else None,
                               "post_ln": _top_down_dict(td_post)}
    return summary


def _fmt(x, spec: str = ".2f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, spec)


def format_summary(summary: dict) -> str:
    """Human-readable lines for :func:`summarize_run`'s dict, stating the protocol's parameters it used
    (its ``protocol``; the defaults, :data:`PROTOCOL`, for a dict without one)."""
    used = {"threshold": PROTOCOL["acquisition_threshold"], "patience": PROTOCOL["acquisition_patience"],
            "min_lead": MIN_LEAD_CHECKPOINTS, **summary.get("protocol", {})}
    chance = f" (best constant answer {summary['chance']:.3f})" if summary.get("chance") else ""
    lines = []
    if summary.get("final_accuracy") is not None:
        acquired = (f"acquired at step {summary['acquisition_step']}" if summary["acquisition_step"] is not None
                    else f"never acquired (chance-corrected > {used['threshold']:g} for {used['patience']} "
                         "checkpoints)")
        lines.append(f"accuracy   final {summary['final_accuracy']:.3f}{chance}; {acquired}; last step "
                     f"{summary.get('last_step')}; at chance over {_fmt(summary.get('plateau_fraction'))} of the "
                     f"steps {'before acquisition' if summary['acquisition_step'] is not None else 'of the run'}")
    for note in summary.get("notes", []):
        lines.append(f"note       {note}")
    c = summary["collapse"]
    if c is not None:
        lines.append(f"{summary.get('measure', 'rankme'):<10} layer {summary['final_layer']} (final): initial {c['initial_value']:.2f}, "
                     f"peak {c['peak_value']:.2f} at step {c['peak_step']}, "
                     f"floor {c['floor_value']:.2f} at step {c['floor_step']} "
                     f"({'collapse' if c['collapsed'] else 'no collapse'}: drop {100 * c['relative_drop']:.0f}%; "
                     f"certain at step {c.get('floor_certain_step')}), "
                     f"recovery at step {c['recovery_step']} (certain at step {c.get('recovery_certain_step')})")
        lines.append(f"ordering   floor < recovery <= acquisition: {summary['order_collapse_recovery_acquisition']}")
    energy = summary.get("mean_energy")
    if energy:
        lines.append(f"mean share of energy (final layer): initial {_fmt(energy['initial'])}, at the floor "
                     f"{_fmt(energy['at_floor'])}, last {_fmt(energy['last'])}")
    for key, title in (("precursors", f"informative reading (b), from step {summary.get('reading_start')}, "
                                      "where the collapse is over"),
                       ("paper_precursors", "the paper's reading (a), from the first checkpoint")):
        if not summary.get(key):
            continue
        lines.append(f"{title}: transition = leaves the course of its first "
                     f"{used.get('transition_baseline', TRANSITION_BASELINE)} checkpoints; precursor = leads "
                     f"acquisition by >= {used['min_lead']} checkpoints")
        for measure, p in summary[key].items():
            gap = (f"gap {p['gap_steps']} steps, {p['gap_checkpoints']} checkpoints, "
                   f"{_fmt(p.get('gap_share'))} of acquisition" if p["gap_steps"] is not None else "gap undefined")
            lines.append(f"  {measure:<28} transition at {p['measure_step']}, {gap}, "
                         f"precursor: {p['is_precursor']}, leads test loss: {p.get('leads_test_loss')}")
    td = summary["top_down"]
    if td is not None:
        lines.append(f"top-down   rho(depth, collapse step) = {_fmt(td['rho_step'])}, "
                     f"rho(depth, relative floor) = {_fmt(td['rho_floor'])}; top-down: {td['is_top_down']} "
                     f"(layers {td['layers']}, excluded {td['excluded']}; {td.get('basis', '')}); "
                     f"post-LayerNorm output: rho {_fmt(td.get('post_ln', {}).get('rho_step'))}")
    return "\n".join(lines)
