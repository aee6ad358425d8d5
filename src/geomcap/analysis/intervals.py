"""Intervals over settings: seeds of one task x level x size are not independent draws of a claim, so every
interval resamples settings first (:func:`geomcap.results.setting_bootstrap`); and how the book's prose quotes them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from geomcap.analysis.protocol import SETTING_KEYS


def setting_bootstrap(table: pd.DataFrame, statistic, n_boot: int = 2000, seed: int = 0, level: float = 0.95,
                      keys=SETTING_KEYS) -> tuple[float, float]:
    """Percentile interval of ``statistic(table)`` over two-stage resamples: the settings (rows sharing
    ``keys``: task x level x size) drawn with replacement, then within each drawn setting its rows (seeds)
    drawn with replacement. Seeds of one setting are not independent draws of a claim, so the interval
    is over settings first. Resamples whose statistic is not finite are dropped; (NaN, NaN) when none is
    left or the table is empty.

    ``statistic``: a function of a DataFrame with ``table``'s columns, returning a float.
    """
    if table.empty:
        return float("nan"), float("nan")
    groups = list(table.groupby(list(keys), sort=True).indices.values())
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n_boot):
        drawn = (groups[k] for k in rng.integers(0, len(groups), len(groups)))
        rows = np.concatenate([g[rng.integers(0, g.size, g.size)] for g in drawn])
        value = statistic(table.iloc[rows])
        if np.isfinite(value):
            values.append(value)
    if not values:
        return float("nan"), float("nan")
    return tuple(float(np.quantile(values, q)) for q in ((1 - level) / 2, (1 + level) / 2))


def rate_interval(table: pd.DataFrame, column: str, n_boot: int = 2000, seed: int = 0) -> dict:
    """A rate over the rows of ``table`` where the boolean ``column`` is defined: ``k``, ``n``, ``rate``,
    its :func:`setting_bootstrap` interval ``low``, ``high``, and ``settings`` (how many task x level x
    size settings the rows span)."""
    rows = table[table[column].notna()] if column in table else table.iloc[:0]
    n = len(rows)
    k = int(rows[column].astype(bool).sum()) if n else 0
    out = {"k": k, "n": n, "rate": k / n if n else float("nan"), "low": float("nan"), "high": float("nan"),
           "settings": 0}
    if not n:
        return out
    per_setting = rows.assign(_hit=rows[column].astype(bool)).groupby(list(SETTING_KEYS))["_hit"].agg(["sum", "size"])
    hits, sizes = per_setting["sum"].to_numpy(), per_setting["size"].to_numpy()
    # the two-stage bootstrap of setting_bootstrap for a share, drawn in one go: settings with replacement,
    # then a setting's resampled seeds hold Binomial(its seeds, its share) hits
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, len(sizes), size=(n_boot, len(sizes)))
    shares = rng.binomial(sizes[drawn], hits[drawn] / sizes[drawn]).sum(axis=1) / sizes[drawn].sum(axis=1)
    out.update(low=float(np.quantile(shares, 0.025)), high=float(np.quantile(shares, 0.975)), settings=len(sizes))
    return out


def rate_text(r: dict) -> str:
    """A :func:`rate_interval` as the book's prose quotes it: ``"k/n (95% CI low-high over s settings)"``,
    or ``"none of 0 runs"`` when there is nothing to count."""
    if not r["n"]:
        return "none of 0 runs"
    ci = f"95% CI {r['low']:.2f}-{r['high']:.2f}" if np.isfinite(r["low"]) else "no interval"
    return f"{r['k']}/{r['n']} ({ci} over {r['settings']} settings)"


def timing_text(timing: dict) -> str:
    """A :func:`timing_prediction` as the book's prose quotes it: ``"rho (95% CI low to high, n runs)"``,
    or why it is undefined."""
    if not np.isfinite(timing["rho"]):
        return (f"undefined ({timing['runs']} runs with a defined transition: at least 3 that differ are needed)")
    ci = (f"95% CI {timing['ci_low']:.2f} to {timing['ci_high']:.2f}" if np.isfinite(timing["ci_low"])
          else "no interval")
    return f"{timing['rho']:.2f} ({ci}, {timing['runs']} runs in {timing['settings']} settings)"
