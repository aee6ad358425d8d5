"""Figures. One style for the whole project; notebooks call these functions.

Every function takes data (a tidy metrics table or arrays), draws on a given
or new matplotlib Axes, and returns the Figure. Training steps go on a
symlog axis: the collapse lives in the first few percent of training.

One module per kind of figure: ``style`` (colours, the step axis, panels, legends), ``runs``,
``claims``, ``forecast``, ``pythia``, ``bench``; every figure is importable
from ``geomcap.plots``.
"""

from geomcap.plots.style import (  # noqa: F401
    PAPER_COLOR,
    LEVEL_COLORS,
    CLASS_COLORS,
    SIZE_COLORS,
    ARM_COLORS,
    set_style,
    step_axis,
    panels,
    paper_line,
    legend_entries,
    mark_empty,
    mark_alarms,
)
from geomcap.plots.runs import (  # noqa: F401
    run_curves,
    collapse_grid,
    layer_heatmaps,
    probe_curves,
    setting_curves,
    layer_collapse_steps,
    arm_curves,
    top_down_arms,
    selectivity_layers,
)
from geomcap.plots.claims import (  # noqa: F401
    lead_strips,
    aligned_measures,
    proxy_trajectories,
    cross_task_matrix,
    claim_effects_figure,
    acquisition_regime,
    twin_acquisition,
    grokking_curves,
)
from geomcap.plots.pythia import (  # noqa: F401
    SHORTCUT_COLORS,
    pythia_curves,
    pythia_gaps,
    shortcut_curves,
)
from geomcap.plots.forecast import (  # noqa: F401
    SIGNAL_COLORS,
    alarm_curves,
    c1_recovery_figure,
    c2_floor_figure,
    claims_by_size_figure,
    forecast_figure,
)
from geomcap.plots.bench import (  # noqa: F401
    BENCH_MODEL_LABELS,
    llc_calibration_figure,
    geometry_share_figure,
    bench_figure,
)

__all__ = [
    "SIGNAL_COLORS",
    "alarm_curves",
    "c1_recovery_figure",
    "c2_floor_figure",
    "claims_by_size_figure",
    "forecast_figure",
    "mark_alarms",
    "PAPER_COLOR",
    "set_style",
    "paper_line",
    "step_axis",
    "panels",
    "legend_entries",
    "mark_empty",
    "run_curves",
    "LEVEL_COLORS",
    "collapse_grid",
    "layer_heatmaps",
    "probe_curves",
    "CLASS_COLORS",
    "lead_strips",
    "aligned_measures",
    "SIZE_COLORS",
    "proxy_trajectories",
    "cross_task_matrix",
    "setting_curves",
    "pythia_curves",
    "pythia_gaps",
    "BENCH_MODEL_LABELS",
    "llc_calibration_figure",
    "geometry_share_figure",
    "bench_figure",
    "layer_collapse_steps",
    "ARM_COLORS",
    "claim_effects_figure",
    "twin_acquisition",
    "arm_curves",
    "top_down_arms",
    "selectivity_layers",
    "acquisition_regime",
    "grokking_curves",
]
