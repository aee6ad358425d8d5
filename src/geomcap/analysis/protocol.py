"""The analysis protocol: every parameter of every rule, fixed before the data, defined once here.

The event rules (:mod:`geomcap.analysis.collapse`, :mod:`geomcap.analysis.transition`, ...) take these as
their defaults; :data:`~geomcap.analysis.protocol.PROTOCOL` collects them for the methods page and ``geomcap show --json``.
"""

from __future__ import annotations

from geomcap import measures


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

#: transition (:func:`geomcap.events.transition_step`): a series' reference is the robust straight line through
#: its first TRANSITION_BASELINE checkpoints read ...
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

#: acquisition: chance-corrected accuracy above this ...
ACQUISITION_THRESHOLD = 0.5
#: ... at this many consecutive checkpoints (:func:`geomcap.events.acquisition_step`)
ACQUISITION_PATIENCE = 3

#: the protocol in one mapping (what the methods page states; `geomcap show --json` prints it)
PROTOCOL = {
    "smooth": SMOOTH, "collapse_window": COLLAPSE_WINDOW, "onset_fraction": ONSET_FRACTION,
    "recovery_fraction": RECOVERY_FRACTION, "recovery_hold": RECOVERY_HOLD,
    "min_relative_drop": MIN_RELATIVE_DROP, "layer_fraction": LAYER_FRACTION,
    "min_top_down_layers": MIN_TOP_DOWN_LAYERS, "transition_baseline": TRANSITION_BASELINE,
    "transition_sigmas": TRANSITION_SIGMAS, "transition_min_change": TRANSITION_MIN_CHANGE,
    "transition_hold": TRANSITION_HOLD, "min_lead_checkpoints": MIN_LEAD_CHECKPOINTS,
    "reading_start": READING_START, "plateau_level": PLATEAU_LEVEL, "acquisition_threshold": ACQUISITION_THRESHOLD,
    "acquisition_patience": ACQUISITION_PATIENCE,
}

#: series whose transition is compared with acquisition, as (measure, layer): layer "final" means
#: the measure's last layer (after the final LayerNorm for ``rankme``; the last block's residual
#: stream, before it, for the ``*_residual`` measures). The same rule is applied to every one. The
#: precursor measures of :data:`geomcap.measures.MEASURES`, in its order.
PRECURSOR_MEASURES = tuple((m.name, "final" if m.per_layer else -1) for m in measures.MEASURES if m.precursor)

#: the behavioural baselines among them: they move with behaviour by construction
BEHAVIOURAL_BASELINES = measures.BEHAVIOURAL_BASELINES

#: the two readings of "precursor" (:func:`geomcap.events.summarize_run`): the informative one (b), read
#: where the collapse is over, and the paper's (a), read from the first checkpoint (column prefix ``"paper_"``)
READINGS = {"informative": "", "paper": "paper_"}

RUN_KEYS = ("task", "level", "size", "seed")

#: what a setting is: intervals resample these (seeds within them), never runs as if independent
SETTING_KEYS = ("task", "level", "size")
