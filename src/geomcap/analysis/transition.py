"""Transitions and precursors (claim C5): one scale- and direction-free rule for "when did this series
change", computed causally from that series alone, and whether it precedes acquisition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geomcap.analysis.acquisition import acquisition_step
from geomcap.analysis.protocol import (ACQUISITION_PATIENCE, ACQUISITION_THRESHOLD, MIN_LEAD_CHECKPOINTS, SMOOTH,
                                       TRANSITION_BASELINE, TRANSITION_HOLD, TRANSITION_MIN_CHANGE,
                                       TRANSITION_SIGMAS)
from geomcap.analysis.series import check_count, check_series, check_smooth, trailing_median


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
        The protocol's constants (:data:`~geomcap.analysis.protocol.TRANSITION_BASELINE`, :data:`~geomcap.analysis.protocol.TRANSITION_SIGMAS`,
        :data:`~geomcap.analysis.protocol.TRANSITION_MIN_CHANGE`, :data:`~geomcap.analysis.protocol.TRANSITION_HOLD`).

    Returns
    -------
    int or None
        The training step, or None when the series keeps its course (or has fewer than
        ``baseline + hold`` finite values from ``start``).
    """
    s, v = check_series(steps, values)
    keep = np.isfinite(v) if start is None else np.isfinite(v) & (s >= start)
    found = departure(s[keep], v[keep], smooth, baseline=baseline, sigmas=sigmas, min_change=min_change, hold=hold)
    return None if found is None else int(s[keep][found[0]])


def departure(steps, values, smooth: int = SMOOTH, *, baseline: int = TRANSITION_BASELINE,
              sigmas: float = TRANSITION_SIGMAS, min_change: float = TRANSITION_MIN_CHANGE,
              hold: int = TRANSITION_HOLD) -> tuple[int, int, int] | None:
    """The core of :func:`transition_step` on finite values read from their first checkpoint: ``(onset,
    confirmed, side)`` -- the index of the first checkpoint of the departure, the index at which it is
    certain (``onset + hold - 1``: the last checkpoint it reads) and its side (+1 above the course, -1 below)
    -- or None. ``steps`` (n,) increasing, ``values`` (n,) finite; the same rule and constants (the
    one place the rule is written; :func:`geomcap.events.alarms` applies it again after each alarm)."""
    smooth = check_smooth(smooth)
    baseline = check_count(baseline, "baseline")
    hold = check_count(hold, "hold")
    if baseline < 2:
        raise ValueError(f"baseline must be at least 2 checkpoints (a line), got {baseline}")
    if not (np.isfinite(sigmas) and sigmas > 0):
        raise ValueError(f"sigmas must be a positive number, got {sigmas!r}")
    if not (np.isfinite(min_change) and min_change >= 0):
        raise ValueError(f"min_change must be >= 0, got {min_change!r}")
    x, raw = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
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
            return t, t + hold - 1, int(side)
    return None


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


def lead(grid, measure_step, acquisition, min_lead: int) -> Precursor:
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
    threshold: float = ACQUISITION_THRESHOLD,
    patience: int = ACQUISITION_PATIENCE,
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
    s, _ = check_series(steps, accuracy, "accuracy")
    m_steps, _ = check_series(s if measure_steps is None else measure_steps, measure, "measure")
    min_lead = check_count(min_lead, "min_lead")
    a = acquisition_step(s, accuracy, threshold=threshold, patience=patience)
    m = transition_step(m_steps, measure, smooth=smooth, start=start)
    return lead(s, m, a, min_lead)
