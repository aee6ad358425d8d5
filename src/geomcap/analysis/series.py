"""Series and tidy tables: checked inputs, the medians every rule smooths with, and the arrays pulled out of
a tidy metrics table (columns ``step, layer, measure, value``).

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
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats

from geomcap.analysis.protocol import ACQUISITION_THRESHOLD

if TYPE_CHECKING:  # pandas is only needed by the table helpers
    import pandas


def check_steps(steps) -> np.ndarray:
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


def check_series(steps, values, name: str = "values") -> tuple[np.ndarray, np.ndarray]:
    """Validate a (steps, values) pair; return (int64 steps, float64 values)."""
    s = check_steps(steps)
    v = np.asarray(values, dtype=float)
    if v.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {v.shape}")
    if v.shape != s.shape:
        raise ValueError(
            f"steps and {name} must have the same length, got {s.size} and {v.size}"
        )
    return s, v


def check_smooth(smooth) -> int:
    """``smooth`` as an int: a positive odd window in checkpoints (1 = no smoothing), else ValueError."""
    if isinstance(smooth, bool) or int(smooth) != smooth or smooth < 1 or smooth % 2 == 0:
        raise ValueError(f"smooth must be a positive odd integer (1 = no smoothing), got {smooth!r}")
    return int(smooth)


def check_fraction(x, name: str, *, allow_zero: bool = True) -> float:
    """``x`` as a float in [0, 1] (``(0, 1]`` without ``allow_zero``), else ValueError naming ``name``."""
    lo_ok = x >= 0 if allow_zero else x > 0
    if not (np.isfinite(x) and lo_ok and x <= 1):
        bound = "[0, 1]" if allow_zero else "(0, 1]"
        raise ValueError(f"{name} must lie in {bound}, got {x!r}")
    return float(x)


def check_count(x, name: str) -> int:
    """``x`` as an int >= 1 (a count of checkpoints), else ValueError naming ``name``."""
    if isinstance(x, bool) or int(x) != x or x < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {x!r}")
    return int(x)


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
    window = check_smooth(window)
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
    window = check_smooth(window)
    x = np.asarray(values, dtype=float)
    if window == 1 or x.size < 2:
        return x.copy()
    out = np.empty_like(x)
    for i in range(min(window - 1, x.size)):
        out[i] = np.median(x[: i + 1])
    if x.size >= window:
        out[window - 1:] = np.median(np.lib.stride_tricks.sliding_window_view(x, window), axis=1)
    return out


def finite_smoothed(steps, values, smooth: int, name: str = "values"):
    """Drop NaN (and inf) points, then smooth; return (steps, values) kept."""
    s, v = check_series(steps, values, name)
    smooth = check_smooth(smooth)
    keep = np.isfinite(v)
    return s[keep], rolling_median(v[keep], smooth)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rho, NaN (without warnings) for < 2 points or constant input."""
    a, b = np.asarray(a), np.asarray(b)
    if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        rho = stats.spearmanr(a, b)[0]
    return float(rho) if np.isfinite(rho) else float("nan")


def chance_corrected(accuracy, chance: float):
    """(accuracy - chance) / (1 - chance): 0 at the best constant answer, 1 at perfect."""
    if not 0 <= chance < 1:
        raise ValueError(f"chance must be in [0, 1), got {chance!r}")
    return (np.asarray(accuracy, dtype=np.float64) - chance) / (1 - chance)


def acquisition_accuracy(chance: float, threshold: float | None = None) -> float:
    """The raw accuracy above which :func:`chance_corrected` accuracy passes ``threshold`` (default the
    protocol's ``ACQUISITION_THRESHOLD``): ``chance + threshold * (1 - chance)``, the level a figure draws."""
    if not 0 <= chance < 1:
        raise ValueError(f"chance must be in [0, 1), got {chance!r}")
    return float(chance + (ACQUISITION_THRESHOLD if threshold is None else threshold) * (1 - chance))


_TIDY_COLUMNS = ("step", "layer", "measure", "value")


def check_tidy(metrics) -> None:
    """ValueError when ``metrics`` lacks a column of a tidy metrics table (``step, layer, measure, value``)."""
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
    check_tidy(metrics)
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
    check_tidy(metrics)
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
