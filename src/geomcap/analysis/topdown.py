"""Top-down collapse across layers (claim C3): does a layer nearer the output collapse earlier?"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from geomcap.analysis.collapse import collapse
from geomcap.analysis.protocol import COLLAPSE_WINDOW, LAYER_FRACTION, MIN_RELATIVE_DROP, MIN_TOP_DOWN_LAYERS, SMOOTH
from geomcap.analysis.series import check_count, check_fraction, check_steps, finite_smoothed, spearman


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
    fraction = check_fraction(fraction, "fraction", allow_zero=False)
    c = collapse(steps, values, smooth=smooth, window=window)
    if c.drop <= 0:
        return None
    s, x = finite_smoothed(steps, values, smooth)
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
    s = check_steps(steps)
    v = np.asarray(values_by_layer, dtype=float)
    if v.ndim != 2 or v.shape[1] != s.size:
        raise ValueError(
            f"values_by_layer must have shape (n_layers, {s.size}), got {v.shape}"
        )
    depth = np.arange(v.shape[0]) if layers is None else np.asarray(layers)
    if depth.shape != (v.shape[0],):
        raise ValueError(f"layers must have shape ({v.shape[0]},), got {depth.shape}")
    min_layers = check_count(min_layers, "min_layers")

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
