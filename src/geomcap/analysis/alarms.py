"""Online alarms: when does a series leave its course, as a monitor watching it live would say, as many times
as it does?

The first-transition reading (:func:`geomcap.events.transition_step`) reads one event per series.
A forecaster must be judged on every event it would have raised, so the alarm rule applies the same
departure rule again and again: armed where the informative reading starts
(:func:`geomcap.events.reading_start`: the collapse window is over and the collapse has
recovered), it takes the first :data:`~geomcap.analysis.protocol.TRANSITION_BASELINE` checkpoints as the
series' course and raises an alarm at the checkpoint where a departure from that course becomes certain
(:func:`geomcap.events.departure`: :data:`~geomcap.analysis.protocol.TRANSITION_HOLD`
consecutive checkpoints beyond the band, on one side); the next course starts at the checkpoint after the
alarm. An alarm's ``step`` is where it is raised (the last checkpoint it reads), ``onset_step`` where the
departure began. At checkpoint t the rule reads only checkpoints <= t, so alarms raised on a prefix of a
series are the alarms of the whole series up to its end (:func:`geomcap.events.alarms` on either gives the same list up to
there): a live monitor (:class:`geomcap.monitor.GeometryMonitor`) raises exactly these alarms.

The constants are the transition rule's (:data:`geomcap.analysis.alarms.ALARM_RULE`), fixed before any alarm was scored
(:mod:`geomcap.analysis.forecast` scores them). A limit of re-arming at once: a departure that goes on
through more than about half of the next course's baseline checkpoints widens that course's noise band, and
can hide an event that follows soon after.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from geomcap.analysis.protocol import (PRECURSOR_MEASURES, SMOOTH, TRANSITION_BASELINE, TRANSITION_HOLD,
                                       TRANSITION_MIN_CHANGE, TRANSITION_SIGMAS)
from geomcap.analysis.series import check_series, tidy_series
from geomcap.analysis.transition import departure

#: the alarm rule's constants (the methods page renders them): the departure rule's, and where it is armed
ALARM_RULE = {"smooth": SMOOTH, "baseline": TRANSITION_BASELINE, "sigmas": TRANSITION_SIGMAS,
              "min_change": TRANSITION_MIN_CHANGE, "hold": TRANSITION_HOLD,
              "armed": "where the informative reading starts (the collapse window is over and the collapse has "
                       "recovered)",
              "rearmed": "at the checkpoint after each alarm, with a new course from the next baseline checkpoints"}


@dataclass(frozen=True)
class Alarm:
    """One alarm: raised at ``step`` (where the departure became certain), the departure began at
    ``onset_step``, ``side`` +1 above the course, -1 below; ``layer`` the series' layer (-1: model-level)."""
    step: int
    onset_step: int
    side: int
    layer: int = -1

    def to_dict(self) -> dict:
        return asdict(self)


def alarms(steps, values, start: int | None = None, smooth: int = SMOOTH, *, layer: int = -1,
           baseline: int = TRANSITION_BASELINE, sigmas: float = TRANSITION_SIGMAS,
           min_change: float = TRANSITION_MIN_CHANGE, hold: int = TRANSITION_HOLD) -> list[Alarm]:
    """Every alarm of one series read from ``start`` (None: its first checkpoint; non-finite values dropped).

    steps (n,) strictly increasing training steps; values (n,) the measure. Returns the alarms in order of
    ``step``; none when fewer than ``baseline + hold`` finite checkpoints are read. See the module docstring."""
    s, v = check_series(steps, values)
    keep = np.isfinite(v) if start is None else np.isfinite(v) & (s >= start)
    x, y = s[keep], v[keep]
    found, i0 = [], 0
    while True:
        d = departure(x[i0:], y[i0:], smooth, baseline=baseline, sigmas=sigmas, min_change=min_change, hold=hold)
        if d is None:
            return found
        onset, confirmed, side = d
        found.append(Alarm(int(x[i0 + confirmed]), int(x[i0 + onset]), side, int(layer)))
        i0 += confirmed + 1


def first_alarm_step(steps, start: int | None, baseline: int = TRANSITION_BASELINE,
                     hold: int = TRANSITION_HOLD) -> int | None:
    """The first step at which an alarm can be raised on a run checkpointed at ``steps`` and read from
    ``start``: the ``baseline + hold``-th checkpoint read (None when there are fewer, or when ``start`` is
    None: never armed)."""
    if start is None:
        return None
    s = np.asarray(steps)
    read = s[s >= start]
    return int(read[baseline + hold - 1]) if read.size >= baseline + hold else None


def run_alarms(metrics, start: int | None, measures=None, scale: float = 1.0) -> dict:
    """Every alarm of one run's tidy metrics table read from ``start`` (None: not armed, no alarms), for each
    series of :data:`~geomcap.analysis.protocol.PRECURSOR_MEASURES` present (or ``measures``), at every layer
    it was recorded at: {measure: [alarm dict (step, onset_step, side, layer)], ...} sorted by step then layer.
    ``scale`` multiplies the band (``sigmas`` and ``min_change``): below 1 a more sensitive rule, for the
    forecast's sensitivity curve; the protocol's rule is 1."""
    names = [m for m, _ in PRECURSOR_MEASURES] if measures is None else list(measures)
    present = set(metrics["measure"].unique())
    out = {}
    for name in names:
        if name not in present:
            continue
        found = []
        if start is not None:
            for layer in sorted(metrics.loc[metrics["measure"] == name, "layer"].unique()):
                found += alarms(*tidy_series(metrics, name, layer=int(layer)), start=start, layer=int(layer),
                                sigmas=TRANSITION_SIGMAS * scale, min_change=TRANSITION_MIN_CHANGE * scale)
        out[name] = [a.to_dict() for a in sorted(found, key=lambda a: (a.step, a.layer))]
    return out
