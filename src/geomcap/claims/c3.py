"""C3: top-down collapse (layers nearer the output collapse first), per task x size pair and per series,
against the negative controls."""

from __future__ import annotations

import numpy as np
import pandas as pd

from geomcap import paper
from geomcap.analysis.protocol import MIN_TOP_DOWN_LAYERS, RUN_KEYS
from geomcap.analysis.summary import summarize_run
from geomcap.claims.verdicts import CONTROL_MARGIN, PARTLY, claim_row, matched, specific


_C3 = paper.CLAIMS["C3"]["values"]

#: the claim this module decides
CLAIM = "C3"
#: its verdict rule, in words, from the thresholds it uses (:data:`~geomcap.claims.table.RULES` collects every claim's)
RULE = (f"reproduced: >= {_C3['top_down'] / _C3['pairs']:.1%} of the task x size pairs with a defined statistic are top-down "
        f"(the paper's {_C3['top_down']}/{_C3['pairs']}); partly: > {PARTLY:.0%}; not reproduced: <= "
        f"{PARTLY:.0%}; not specific to learning: the negative controls' runs are top-down in at least the "
        f"share of the same settings' real runs minus {CONTROL_MARGIN:.2f}; not testable: no pair with a run "
        f"of >= {MIN_TOP_DOWN_LAYERS} informative layers")


def top_down_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Per task x size: runs, the median Spearman rho of depth vs each layer's collapse step (on the
    pre-LayerNorm residual streams; :func:`geomcap.events.top_down`) and vs its relative floor, the
    same median with the post-LayerNorm output as the last layer (``median_rho_step_post_ln``), and
    whether the pair is top-down: median rho_step < 0.

    Runs whose rho is undefined (fewer than four informative layers, tied collapse steps) are left out
    of the medians and counted in ``undefined``.
    """
    rows = []
    for (task, size), group in summary.groupby(["task", "size"], sort=False):
        rho_step = pd.to_numeric(group["top_down_rho_step"], errors="coerce")
        rho_floor = pd.to_numeric(group["top_down_rho_floor"], errors="coerce")
        median = rho_step.median()
        rows.append({"task": task, "size": size, "runs": len(group), "undefined": int(rho_step.isna().sum()),
                     "runs_top_down": int((rho_step < 0).sum()),
                     "median_rho_step": median, "median_rho_floor": rho_floor.median(),
                     "median_rho_step_post_ln": pd.to_numeric(group.get("top_down_rho_step_post_ln", pd.Series(dtype=float)),
                                                              errors="coerce").median(),
                     "top_down": bool(median < 0) if pd.notna(median) else None})
    return pd.DataFrame(rows)


#: C3's statistic on RankMe and on two baselines: centred RankMe (the mean direction taken out) and the share
#: of the energy outside the mean direction, ``1 - mean_energy_share`` (it falls as the mean takes over)
TOP_DOWN_SERIES = ("rankme", "rankme_centred", "mean_energy_outside")

_OUTSIDE = "mean_energy_outside"


def top_down_by_series(metrics: pd.DataFrame, runs: pd.DataFrame, series=TOP_DOWN_SERIES) -> pd.DataFrame:
    """C3's statistic (:func:`geomcap.events.top_down`, as :func:`geomcap.events.summarize_run` reads it:
    pre-LayerNorm residual streams, post-LayerNorm beside) on each of ``series`` of each run.

    ``series``: per-layer measures with a ``<measure>_residual`` beside them, and ``"mean_energy_outside"``:
    ``1 - mean_energy_share`` (and ``1 - mean_energy_share_residual``), without layer 0, the embedding at
    the answer position, which is the mean direction itself (its share is 1 up to rounding).

    Parameters
    ----------
    metrics : DataFrame
        Tidy metrics with a ``run`` column (:func:`load_metrics`) holding ``accuracy`` and the series
        (and their ``_residual``).
    runs : DataFrame
        One row per run: task, level, size, seed, run.

    Returns
    -------
    DataFrame
        One row per run and series present: the run's keys, ``series``, ``layers`` (informative layers),
        ``rho_step`` (Spearman of depth vs each layer's half-drop step; < 0: top-down), ``rho_floor``,
        ``rho_step_post_ln``, ``is_top_down`` (None when undefined), ``collapse_layers`` (the informative
        layers' depths, 0 = embeddings) and ``collapse_steps`` (their half-drop steps; float steps), ``first_step`` and ``last_step`` (the
        earliest and latest of them), ``spread_steps`` (last - first) and ``median_gap_steps`` (median
        distance between adjacent informative layers' steps).
    """
    rows = []
    for run in runs.itertuples():
        m = metrics[metrics["run"] == run.run][["step", "layer", "measure", "value"]]
        for name in series:
            if name == _OUTSIDE:
                share = m[m["measure"].isin(["mean_energy_share", "mean_energy_share_residual"]) & (m["layer"] != 0)]
                own = share.assign(value=1.0 - share["value"],
                                   measure=share["measure"].str.replace("mean_energy_share", _OUTSIDE))
            else:
                own = m[m["measure"].isin([name, f"{name}_residual"])]
            if not (own["measure"] == name).any():
                continue
            s = summarize_run(pd.concat([m[m["measure"] == "accuracy"], own]), measure=name)
            td = s["top_down"]
            when = np.asarray(td["collapse_step"], dtype=float)
            rows.append({**{k: getattr(run, k) for k in RUN_KEYS}, "run": run.run, "series": name,
                         "layers": len(td["layers"]), "rho_step": td["rho_step"], "rho_floor": td["rho_floor"],
                         "rho_step_post_ln": td["post_ln"]["rho_step"], "is_top_down": td["is_top_down"],
                         "collapse_layers": list(td["layers"]), "collapse_steps": when.round(2).tolist(),
                         "first_step": float(when.min()) if when.size else np.nan,
                         "last_step": float(when.max()) if when.size else np.nan,
                         "spread_steps": float(np.ptp(when)) if when.size else np.nan,
                         "median_gap_steps": float(np.median(np.abs(np.diff(when)))) if when.size > 1 else np.nan})
    return pd.DataFrame(rows, columns=[*RUN_KEYS, "run", "series", "layers", "rho_step", "rho_floor",
                                       "rho_step_post_ln", "is_top_down", "collapse_layers", "collapse_steps", "first_step",
                                       "last_step", "spread_steps", "median_gap_steps"])


def top_down_share(summary: pd.DataFrame) -> tuple[int, int]:
    """Runs whose top-down statistic is defined and negative, of the runs where it is defined."""
    rho = pd.to_numeric(summary.get("top_down_rho_step", pd.Series(dtype=float)), errors="coerce").dropna()
    return int((rho < 0).sum()), len(rho)


def claim_c3(summary: pd.DataFrame, control: pd.DataFrame | None = None) -> dict:
    """C3: task x size pairs whose median top-down statistic (defined runs only) is negative; against the
    controls, the share of runs top-down where nothing is learnt."""
    share = _C3["top_down"] / _C3["pairs"]
    rule = RULE
    pairs = top_down_table(summary)
    decided = pairs["top_down"].dropna() if len(pairs) else pd.Series(dtype=bool)
    if decided.empty:
        return claim_row("C3", f"undefined: no run with {MIN_TOP_DOWN_LAYERS} informative layers "
                               f"({len(summary)} runs)", rule=rule)
    s = float(decided.astype(bool).mean())
    verdict = "reproduced" if s >= share else "partly reproduced" if s > PARTLY else "not reproduced"
    text = f"{int(decided.astype(bool).sum())}/{len(decided)} task x size pairs"
    control_text, real_share, control_share = "no negative control", 0.0, None
    if control is not None and len(control):
        kc, nc = top_down_share(control)
        kr, nr = top_down_share(matched(summary, control))
        real_share = kr / nr if nr else 0.0
        control_share = kc / nc if nc else None
        control_text = f"runs top-down: controls {kc}/{nc}, same settings real {kr}/{nr}"
    return claim_row("C3", text, s, specific(real_share, control_share, verdict), rule, control_text)
