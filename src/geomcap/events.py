"""Events in training curves: acquisition, collapse, transitions, precursors (the names of
:mod:`geomcap.analysis`, importable from here as before).

This module turns recorded series (one value per checkpoint) into the events
the paper's claims are about, under one analysis protocol whose parameters
are the constants of :mod:`geomcap.analysis.protocol` (collected in :data:`~geomcap.analysis.protocol.PROTOCOL`):

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

Each lives in one module of :mod:`geomcap.analysis` (protocol, series, acquisition, collapse, transition,
topdown, summary), none of which imports torch; the conventions every function follows are stated in
:mod:`geomcap.analysis.series`.
"""

from __future__ import annotations

from geomcap.analysis.protocol import (
    ACQUISITION_PATIENCE, ACQUISITION_THRESHOLD, BEHAVIOURAL_BASELINES, COLLAPSE_WINDOW, LAYER_FRACTION,
    MIN_LEAD_CHECKPOINTS, MIN_RELATIVE_DROP, MIN_TOP_DOWN_LAYERS, ONSET_FRACTION, PLATEAU_LEVEL,
    PRECURSOR_MEASURES, PROTOCOL, READING_START, RECOVERY_FRACTION, RECOVERY_HOLD, SMOOTH,
    TRANSITION_BASELINE, TRANSITION_HOLD, TRANSITION_MIN_CHANGE, TRANSITION_SIGMAS)
from geomcap.analysis.series import (
    acquisition_accuracy, chance_corrected, final_layer, final_layer_rows, layer_matrix, rolling_median, spearman,
    tidy_series, trailing_median)
from geomcap.analysis.acquisition import (
    acquisition_step, plateau_fraction)
from geomcap.analysis.collapse import (
    Collapse, collapse, confirmed_events, reading_start)
from geomcap.analysis.transition import (
    Precursor, departure, precursor, transition_step)
from geomcap.analysis.alarms import (
    ALARM_RULE, Alarm, alarms, first_alarm_step, run_alarms)
from geomcap.analysis.topdown import (
    TopDown, layer_collapse_step, top_down)
from geomcap.analysis.summary import (
    format_summary, summarize_run)

__all__ = [
    "PROTOCOL", "SMOOTH", "COLLAPSE_WINDOW", "ONSET_FRACTION", "RECOVERY_FRACTION", "RECOVERY_HOLD",
    "MIN_RELATIVE_DROP", "LAYER_FRACTION", "MIN_TOP_DOWN_LAYERS", "TRANSITION_BASELINE", "TRANSITION_SIGMAS",
    "TRANSITION_MIN_CHANGE", "TRANSITION_HOLD", "MIN_LEAD_CHECKPOINTS", "READING_START", "PLATEAU_LEVEL",
    "acquisition_step", "Collapse", "collapse", "confirmed_events", "transition_step", "reading_start",
    "departure", "ALARM_RULE", "Alarm", "alarms", "first_alarm_step", "run_alarms",
    "trailing_median", "layer_collapse_step", "plateau_fraction", "Precursor", "precursor", "TopDown",
    "top_down", "tidy_series", "layer_matrix", "final_layer", "final_layer_rows", "rolling_median",
    "chance_corrected", "acquisition_accuracy", "spearman", "summarize_run", "format_summary", "PRECURSOR_MEASURES",
    "BEHAVIOURAL_BASELINES", "ACQUISITION_THRESHOLD", "ACQUISITION_PATIENCE",
]
