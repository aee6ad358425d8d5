"""Events in training curves: acquisition, collapse, transitions, precursors.

This module turns recorded series (one value per checkpoint) into the events
the paper's claims are about:

* :func:`acquisition_step` -- when a capability is acquired (accuracy).
* :func:`collapse` -- the collapse / floor / recovery of a geometric measure
  such as hidden-state RankMe (claim C1).
* :func:`transition_step` -- one scale- and direction-free rule for "when did
  this measure change", applied identically to every measure (claim C5).
* :func:`precursor` -- does a measure's transition precede acquisition (C5)?
* :func:`top_down` -- do layers nearer the output reach their minimum earlier
  and deeper (claim C3)?
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

if TYPE_CHECKING:  # pandas is only needed by the table helpers
    import pandas

__all__ = [
    "acquisition_step",
    "Collapse",
    "collapse",
    "transition_step",
    "Precursor",
    "precursor",
    "TopDown",
    "top_down",
    "tidy_series",
    "layer_matrix",
    "rolling_median",
    "chance_corrected",
    "spearman",
    "summarize_run",
    "format_summary",
    "PRECURSOR_MEASURES",
]


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
    for i in range(n):
        h = min(half, i, n - 1 - i)
        out[i] = np.median(x[i - h : i + h + 1])
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


def collapse(
    steps,
    values,
    onset_fraction: float = 0.1,
    recovery_fraction: float = 0.5,
    min_relative_drop: float = 0.1,
    smooth: int = 1,
    *,
    floor: str = "min",
) -> Collapse:
    """Locate the collapse of a series to its floor and its recovery.

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
    floor
        The minimum over checkpoints *after initialisation*, i.e. over
        indices ``i >= 1`` (earliest one on ties). Initialisation is excluded
        so that a series that only rises still has a floor after training
        starts. (This is ``floor="min"``, the default; see the caveat below.)
    peak
        The maximum over checkpoints ``0 .. floor`` inclusive (earliest on
        ties): the reference the drop is measured from. It equals the initial
        checkpoint when the series falls from the start, and lies after it
        when the series first rises (expansion, then compression).
    drop
        ``peak_value - floor_value`` (>= 0).
    relative_drop
        ``drop / peak_value``; NaN when ``peak_value <= 0`` (a relative drop
        is only meaningful for positive measures such as RankMe).
    onset
        The first checkpoint after the peak from which the series stays
        strictly below ``peak_value - onset_fraction * drop`` at every
        checkpoint up to and including the floor. None when ``drop == 0``
        (or ``onset_fraction == 1``, since the floor itself is not below it).
    recovery
        The first checkpoint after the floor where the series is
        ``>= floor_value + recovery_fraction * drop``. None if that never
        happens -- e.g. when the minimum is the last checkpoint -- and None
        when ``drop == 0``.
    collapsed
        ``relative_drop >= min_relative_drop`` (False when relative_drop is NaN).

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
        How the floor is chosen. ``"min"`` (default) as defined above.
        ``"drawdown"``: the checkpoint ``i >= 1`` with the largest decline
        from the running maximum, ``max(x_0..x_i) - x_i`` (earliest on ties;
        falls back to ``"min"`` when the series never declines). The two agree
        whenever the overall minimum ends the largest decline, as in a
        collapse from initialisation.

    Caveat: if a series first rises *gradually* from a low initial value and
    then falls to a level above its early values (expansion, then partial
    compression), ``"min"`` puts the floor on the way up (at index 1) and
    reports ``drop == 0``; ``"drawdown"`` reports the rise-then-fall (peak
    after initialisation, floor at the bottom of the fall). Conversely, after
    a collapse and an overshooting recovery, a later, larger decline is the
    ``"drawdown"`` floor but not the ``"min"`` floor.

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
    s, x = _finite_smoothed(steps, values, smooth)
    if x.size < 2:
        raise ValueError(
            f"collapse needs at least 2 finite values, got {x.size} "
            f"(series of length {np.asarray(values).size} is all or mostly NaN)"
        )

    if floor not in ("min", "drawdown"):
        raise ValueError(f'floor must be "min" or "drawdown", got {floor!r}')
    i_floor = 1 + int(np.argmin(x[1:]))
    if floor == "drawdown":
        decline = np.maximum.accumulate(x)[1:] - x[1:]
        if decline.max() > 0:
            i_floor = 1 + int(np.argmax(decline))
    i_peak = int(np.argmax(x[: i_floor + 1]))
    floor_value, peak_value = float(x[i_floor]), float(x[i_peak])
    drop = peak_value - floor_value
    relative_drop = drop / peak_value if peak_value > 0 else float("nan")

    onset_step = recovery_step = None
    if drop > 0:
        # Onset: start of the final unbroken stretch below the onset level that
        # ends at the floor (a brief early dip that bounces back is not onset).
        below = x[i_peak + 1 : i_floor + 1] < peak_value - onset_fraction * drop
        if below[-1]:
            not_below = np.flatnonzero(~below)
            first = 0 if not_below.size == 0 else int(not_below[-1]) + 1
            onset_step = int(s[i_peak + 1 + first])
        recovered = np.flatnonzero(x[i_floor + 1 :] >= floor_value + recovery_fraction * drop)
        if recovered.size:
            recovery_step = int(s[i_floor + 1 + recovered[0]])

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
    )


# ---------------------------------------------------------------------------
# transitions and precursors
# ---------------------------------------------------------------------------


def transition_step(steps, values, fraction: float = 0.5, smooth: int = 1) -> int | None:
    """Step at which a series has made ``fraction`` of its largest excursion.

    One rule, applied identically to every measure (accuracy, RankMe, gradient
    effective rank, Hessian top eigenvalue, LLC). After dropping non-finite
    values and applying the rolling median of length ``smooth`` (see
    :func:`rolling_median`), let ``x_0`` be the initial value and::

        E = max_t |x_t - x_0|

    the largest excursion from it. The transition is the first checkpoint
    with ``|x_t - x_0| >= fraction * E``. The rule is scale-free (unchanged
    by ``a * x + b``, ``a != 0``) and direction-free (a rising and a falling
    measure are treated alike). For a sigmoid-like change from one level to
    another and ``fraction = 0.5`` it returns the midpoint.

    Parameters
    ----------
    steps : array of int, shape (n,)
        Training steps, strictly increasing.
    values : array of float, shape (n,)
        The measure at each checkpoint; NaN points are ignored.
    fraction : float in (0, 1]
        Fraction of the largest excursion that marks the transition.
    smooth : odd int
        Rolling-median window, in checkpoints (1 = none).

    Returns
    -------
    int or None
        The training step, or None if ``E == 0`` (constant series) or there
        are no finite values.
    """
    fraction = _check_fraction(fraction, "fraction", allow_zero=False)
    s, x = _finite_smoothed(steps, values, smooth)
    if x.size == 0:
        return None
    excursion = np.abs(x - x[0])
    e_max = float(excursion.max())
    if e_max == 0:
        return None
    return int(s[np.argmax(excursion >= fraction * e_max)])


@dataclass(frozen=True)
class Precursor:
    """Does a measure's transition precede acquisition? (see :func:`precursor`)"""

    measure_step: int | None
    acquisition_step: int | None
    gap_steps: int | None
    gap_checkpoints: int | None
    is_precursor: bool


def precursor(
    steps,
    measure,
    accuracy,
    threshold: float = 0.5,
    patience: int = 3,
    fraction: float = 0.5,
    smooth: int = 1,
) -> Precursor:
    """Compare a measure's transition with capability acquisition.

    ``measure_step = transition_step(steps, measure, fraction, smooth)`` and
    ``acquisition_step = acquisition_step(steps, accuracy, threshold,
    patience)`` (accuracy is not smoothed: acquisition has its own patience
    rule).

    Parameters
    ----------
    steps : array of int, shape (n,)
        Training steps shared by both series.
    measure, accuracy : array of float, shape (n,)
        The geometric measure and test accuracy at each checkpoint.
    threshold, patience
        Passed to :func:`acquisition_step`.
    fraction, smooth
        Passed to :func:`transition_step`.

    Returns
    -------
    Precursor
        ``gap_steps = acquisition_step - measure_step`` (positive = the
        measure leads) and ``gap_checkpoints`` the same difference in
        checkpoint indices; both None unless both steps are defined.
        ``is_precursor`` is True iff both are defined and
        ``measure_step < acquisition_step`` strictly.
    """
    s, _ = _check_series(steps, measure, "measure")
    _check_series(s, accuracy, "accuracy")
    m = transition_step(s, measure, fraction=fraction, smooth=smooth)
    a = acquisition_step(s, accuracy, threshold=threshold, patience=patience)
    if m is None or a is None:
        return Precursor(m, a, None, None, False)
    # Both are steps from `s`, so searchsorted recovers their indices exactly.
    gap_ckpt = int(np.searchsorted(s, a) - np.searchsorted(s, m))
    return Precursor(m, a, a - m, gap_ckpt, m < a)


# ---------------------------------------------------------------------------
# top-down collapse across layers
# ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)  # eq=False: array fields make == ambiguous
class TopDown:
    """Order of the collapse across depth (see :func:`top_down`).

    Arrays have one entry per *usable* layer, in the order given.
    """

    layers: np.ndarray
    min_step: np.ndarray
    floor: np.ndarray
    relative_floor: np.ndarray
    rho_step: float
    rho_floor: float
    is_top_down: bool
    excluded: np.ndarray = field(default_factory=lambda: np.array([], dtype=np.int64))


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rho, NaN (without warnings) for < 2 points or constant input."""
    if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        rho = stats.spearmanr(a, b)[0]
    return float(rho) if np.isfinite(rho) else float("nan")


def top_down(steps, values_by_layer, layers=None, smooth: int = 1, *, rtol: float = 1e-6) -> TopDown:
    """Is the collapse top-down (layers nearer the output reach their minimum earlier)?

    For each layer, the minimum after initialisation is taken exactly as the
    floor of :func:`collapse` (NaN dropped, rolling median of length
    ``smooth``, minimum over checkpoints with index >= 1, earliest on ties).

    Layers that carry no information are excluded from every output array
    and from the correlations, and listed in ``excluded``: a layer is
    excluded when it has fewer than 2 finite values or is constant, i.e.
    ``max - min <= rtol * max|value|`` over its finite values. (The embedding
    layer at the answer position is the same vector for every prompt, so its
    RankMe is exactly 1 at every checkpoint.)

    Parameters
    ----------
    steps : array of int, shape (n_checkpoints,)
        Training steps, strictly increasing.
    values_by_layer : array of float, shape (n_layers, n_checkpoints)
        The measure (e.g. RankMe) per layer and checkpoint.
    layers : array of int, shape (n_layers,), optional
        Depth of each row (0 = embeddings); default ``0 .. n_layers-1``.
    smooth : odd int
        Rolling-median window, in checkpoints.
    rtol : float
        Relative tolerance for "constant", as above.

    Returns
    -------
    TopDown
        ``layers``, ``min_step`` (training step of each layer's minimum),
        ``floor`` (its minimum value), ``relative_floor`` (floor / that
        layer's initial value), ``rho_step`` = Spearman rank correlation of
        depth vs ``min_step``, ``rho_floor`` = Spearman of depth vs
        ``relative_floor``, ``is_top_down = rho_step < 0``. A rho is NaN when
        fewer than 2 layers are usable or either input is constant (e.g. all
        minima at the same step); then ``is_top_down`` is False. With exactly
        2 usable layers a rho can only be +1 or -1.
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

    used, excluded, min_step, floor, rel = [], [], [], [], []
    for d, row in zip(depth, v):
        finite = row[np.isfinite(row)]
        if finite.size < 2 or np.ptp(finite) <= rtol * np.max(np.abs(finite)):
            excluded.append(d)
            continue
        c = collapse(s, row, smooth=smooth)
        used.append(d)
        min_step.append(c.floor_step)
        floor.append(c.floor_value)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel.append(np.float64(c.floor_value) / c.initial_value)

    used_a = np.asarray(used, dtype=depth.dtype)
    min_step_a = np.asarray(min_step, dtype=np.int64)
    rel_a = np.asarray(rel, dtype=float)
    rho_step = spearman(used_a, min_step_a)
    # A zero initial value makes relative_floor non-finite; rank it nowhere.
    rho_floor = spearman(used_a, rel_a) if np.all(np.isfinite(rel_a)) else float("nan")
    return TopDown(
        layers=used_a,
        min_step=min_step_a,
        floor=np.asarray(floor, dtype=float),
        relative_floor=rel_a,
        rho_step=rho_step,
        rho_floor=rho_floor,
        is_top_down=bool(rho_step < 0),  # NaN -> False
        excluded=np.asarray(excluded, dtype=depth.dtype),
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


# ---------------------------------------------------------------------------
# one run's summary (what `geomcap show` prints and the notebooks tabulate)
# ---------------------------------------------------------------------------

#: measures whose transition is compared with acquisition, (measure, layer):
#: layer "final" means the last layer (after the final LayerNorm)
PRECURSOR_MEASURES = (
    ("rankme", "final"),
    ("rankme_centred", "final"),
    ("rankme_all_positions", "final"),
    ("rankme_mean_pooled", "final"),
    ("probe_accuracy", "final"),
    ("grad_rank", -1),
    ("grad_cov_rank", -1),
    ("hessian_top", -1),
    ("llc", -1),
)


def chance_corrected(accuracy, chance: float):
    """(accuracy - chance) / (1 - chance): 0 at the best constant answer, 1 at perfect."""
    if not 0 <= chance < 1:
        raise ValueError(f"chance must be in [0, 1), got {chance!r}")
    return (np.asarray(accuracy, dtype=np.float64) - chance) / (1 - chance)


def summarize_run(metrics: "pandas.DataFrame", threshold: float = 0.5, patience: int = 3,
                  fraction: float = 0.5, smooth: int = 1, chance: float = 0.0,
                  measure: str = "rankme") -> dict:
    """Events of one run from its tidy metrics table.

    ``measure`` is the per-layer geometric measure whose collapse and top-down
    statistics are reported (default the primary ``rankme``; the other RankMe
    variants for the sensitivity analysis).

    ``chance`` is the accuracy of the best constant answer
    (:func:`geomcap.tasks.chance_accuracy`). Acquisition is decided on the
    chance-corrected accuracy ``(acc - chance) / (1 - chance) > threshold``:
    the paper's "accuracy > 50%" for tasks whose answers are long (chance ~0),
    and a real criterion for parity, where a constant guess already scores ~50%.

    Returns a dict with ``acquisition_step``, ``final_accuracy``, ``final_layer``,
    ``collapse`` (of the final layer's RankMe, as a dict of :class:`Collapse`
    fields), ``order_collapse_recovery_acquisition`` (floor < recovery <=
    acquisition, the paper's C1 ordering; None when an event is missing),
    ``precursors`` ({measure: dict of :class:`Precursor` fields} for the
    measures of :data:`PRECURSOR_MEASURES` present in the table, plus
    ``<measure>_after_floor``: the same rule applied to the final layer's series
    from its collapse floor onward, when it collapsed) and
    ``top_down`` (rho_step, rho_floor, is_top_down, layers, min_step, floor of
    :func:`top_down` on the per-layer RankMe).
    """
    _check_tidy(metrics)
    steps, raw_accuracy = tidy_series(metrics, "accuracy")
    accuracy = chance_corrected(raw_accuracy, chance)
    acq = acquisition_step(steps, accuracy, threshold=threshold, patience=patience)
    rank_layers = sorted(metrics.loc[metrics["measure"] == measure, "layer"].unique())
    final_layer = int(rank_layers[-1]) if rank_layers else None
    summary = {"acquisition_step": acq, "final_accuracy": float(raw_accuracy[-1]), "chance": chance,
               "measure": measure,
               "final_layer": final_layer, "collapse": None,
               "order_collapse_recovery_acquisition": None, "precursors": {}, "top_down": None}
    if final_layer is None:
        return summary

    r_steps, r_values = tidy_series(metrics, measure, layer=final_layer)
    c = collapse(r_steps, r_values, smooth=smooth)
    summary["collapse"] = c.__dict__.copy()
    if c.collapsed and c.recovery_step is not None and acq is not None:
        summary["order_collapse_recovery_acquisition"] = bool(c.floor_step < c.recovery_step <= acq)
    elif acq is not None:
        summary["order_collapse_recovery_acquisition"] = False

    def compare(t):
        both = t is not None and acq is not None
        return {"measure_step": t, "acquisition_step": acq,
                "gap_steps": acq - t if both else None,
                "gap_checkpoints": int(np.searchsorted(steps, acq) - np.searchsorted(steps, t)) if both else None,
                "is_precursor": bool(both and t < acq)}

    present = set(metrics["measure"].unique())
    for name, layer in PRECURSOR_MEASURES:
        if name not in present:
            continue
        layer = final_layer if layer == "final" else layer
        m_steps, m_values = tidy_series(metrics, name, layer=layer)
        # costly measures exist on a subset of checkpoints: their transition comes from their own
        # series, acquisition from the full accuracy series, gaps counted on the full checkpoint grid
        summary["precursors"][name] = compare(transition_step(m_steps, m_values, fraction=fraction, smooth=smooth))
    if c.collapsed:
        # the early collapse is RankMe's largest excursion, so its transition is (nearly) always the
        # collapse itself; the same rule from the floor onward asks whether RankMe moves again
        # (recovery, re-expansion) before behaviour does
        after = r_steps >= c.floor_step
        summary["precursors"][f"{measure}_after_floor"] = compare(
            transition_step(r_steps[after], r_values[after], fraction=fraction, smooth=smooth))

    layers, l_steps, values = layer_matrix(metrics, measure)
    td = top_down(l_steps, values, layers=layers, smooth=smooth)
    summary["top_down"] = {"rho_step": td.rho_step, "rho_floor": td.rho_floor,
                           # undefined (None) when rho is: fewer than 2 informative layers, tied minima
                           "is_top_down": None if np.isnan(td.rho_step) else td.is_top_down,
                           "layers": td.layers.tolist(),
                           "min_step": td.min_step.tolist(), "floor": td.floor.tolist(),
                           "excluded": td.excluded.tolist()}
    return summary


def format_summary(summary: dict) -> str:
    """Human-readable lines for :func:`summarize_run`'s dict."""
    chance = f" (best constant answer {summary['chance']:.3f})" if summary.get("chance") else ""
    lines = [f"accuracy   final {summary['final_accuracy']:.3f}{chance}; acquired at step {summary['acquisition_step']}"
             if summary["acquisition_step"] is not None else
             f"accuracy   final {summary['final_accuracy']:.3f}{chance}; never acquired "
             f"(chance-corrected > 0.5 for 3 checkpoints)"]
    c = summary["collapse"]
    if c is not None:
        lines.append(f"{summary.get('measure', 'rankme'):<10} layer {summary['final_layer']} (final): initial {c['initial_value']:.2f}, "
                     f"peak {c['peak_value']:.2f} at step {c['peak_step']}, "
                     f"floor {c['floor_value']:.2f} at step {c['floor_step']} "
                     f"({'collapse' if c['collapsed'] else 'no collapse'}: drop {100 * c['relative_drop']:.0f}%), "
                     f"recovery at step {c['recovery_step']}")
        lines.append(f"ordering   floor < recovery <= acquisition: {summary['order_collapse_recovery_acquisition']}")
    if summary["precursors"]:
        lines.append("precursors (transition = half of the largest excursion from the initial value)")
        for measure, p in summary["precursors"].items():
            gap = (f"gap {p['gap_steps']} steps ({p['gap_checkpoints']} checkpoints)"
                   if p["gap_steps"] is not None else "gap undefined")
            lines.append(f"  {measure:<22} transition at {p['measure_step']}, {gap}, "
                         f"precursor: {p['is_precursor']}")
    td = summary["top_down"]
    if td is not None:
        lines.append(f"top-down   rho(depth, step of minimum) = {td['rho_step']:.2f}, "
                     f"rho(depth, relative floor) = {td['rho_floor']:.2f}; top-down: {td['is_top_down']} "
                     f"(layers {td['layers']}, excluded {td['excluded']})")
    return "\n".join(lines)
