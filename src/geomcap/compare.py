"""How a rerun's metrics agree with a recorded run's: what ``geomcap train --from`` reports.

Runs are byte-identical only on the same kind of CPU at the same thread count
(``provenance.cpu_model``, ``cpu_capability`` and ``threads`` in config.json),
and reliably only at one thread: at two, a rerun on the same machine may differ
by round-off (one CI machine's differed by 2.4e-5 within 10 steps).
Elsewhere the first checkpoints agree to round-off and the trajectories then
drift apart, so the report is not only "identical or not" but where they part::

    from geomcap import compare, store
    result = compare.compare_metrics(store.read_metrics(recorded_run), store.read_metrics(rerun_dir))
    print(compare.format_comparison(result))

Only the (step, layer, measure) rows both tables hold are compared: runs
trained by a newer geomcap record measures an older run lacks (and a run that
stopped early has fewer steps); the rows only one side holds are counted.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: the relative difference beyond which a value departs from the recorded one
DEFAULT_RTOL = 1e-4
KEYS = ["step", "layer", "measure"]

__all__ = ["DEFAULT_RTOL", "HEADLINE_MEASURES", "compare_metrics", "format_comparison", "relative_difference",
           "rerun_report"]


def relative_difference(a, b) -> np.ndarray:
    """``|a - b| / max(|a|, |b|)`` elementwise: 0 where the values are equal (both 0, both NaN, the same
    infinity), inf where exactly one of them is NaN."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.abs(a - b) / np.maximum(np.abs(a), np.abs(b))
    diff = np.where((a == b) | (np.isnan(a) & np.isnan(b)), 0.0, diff)
    return np.where(np.isnan(diff), np.inf, diff)  # one NaN, or opposite infinities


def _where(row) -> dict:
    return {"step": int(row["step"]), "layer": int(row["layer"]), "measure": str(row["measure"])}


def compare_metrics(recorded: pd.DataFrame, rerun: pd.DataFrame, rtol: float = DEFAULT_RTOL) -> dict:
    """Compare two tidy metrics tables (``step, layer, measure, value``) on the rows both hold.

    Returns a dict:

    * ``shared_rows``; ``only_recorded`` and ``only_rerun`` (rows one side lacks) with the measures
      of those rows (``only_recorded_measures``, ``only_rerun_measures``, sorted);
    * ``identical``: every shared value equal (NaN equal to NaN);
    * ``max_rel_diff`` (0.0 when identical; inf where one value is NaN) and ``max_rel_diff_at``
      (``{step, layer, measure}``, None when identical);
    * ``rtol``; ``first_departure_step``: the first step at which a shared value differs by more than
      ``rtol`` relative (None if none does), ``first_departure`` (``{step, layer, measure, recorded,
      rerun}`` of the first such row, by step, layer, measure) and ``first_departure_by_measure``
      ({measure: its first such step}, for the measures that depart, by step).
    """
    if not (isinstance(rtol, (int, float)) and not isinstance(rtol, bool) and rtol >= 0):
        raise ValueError(f"rtol must be a number >= 0, got {rtol!r}")
    for name, table in (("recorded", recorded), ("rerun", rerun)):
        missing = [c for c in KEYS + ["value"] if c not in table.columns]
        if missing:
            raise ValueError(f"{name}: no column {missing[0]!r}; expected step, layer, measure, value")
    both = pd.merge(recorded[KEYS + ["value"]], rerun[KEYS + ["value"]], on=KEYS, how="outer",
                    suffixes=("_recorded", "_rerun"), indicator=True)
    one_side = {side: both[both["_merge"] == flag] for side, flag in (("recorded", "left_only"), ("rerun", "right_only"))}
    shared = both[both["_merge"] == "both"].sort_values(KEYS, kind="stable").reset_index(drop=True)
    diff = relative_difference(shared["value_recorded"], shared["value_rerun"])
    result = {
        "shared_rows": len(shared),
        "only_recorded": len(one_side["recorded"]),
        "only_rerun": len(one_side["rerun"]),
        "only_recorded_measures": sorted(one_side["recorded"]["measure"].unique().tolist()),
        "only_rerun_measures": sorted(one_side["rerun"]["measure"].unique().tolist()),
        "identical": bool((diff == 0).all()),
        "max_rel_diff": float(diff.max()) if len(diff) else 0.0,
        "max_rel_diff_at": None,
        "rtol": float(rtol),
        "first_departure_step": None,
        "first_departure": None,
        "first_departure_by_measure": {},
    }
    if not result["identical"]:
        result["max_rel_diff_at"] = _where(shared.iloc[int(np.argmax(diff))])
    departed = shared[diff > rtol]
    if len(departed):
        first = departed.iloc[0]
        result["first_departure_step"] = int(first["step"])
        result["first_departure"] = {**_where(first), "recorded": float(first["value_recorded"]),
                                     "rerun": float(first["value_rerun"])}
        by_measure = departed.groupby("measure", sort=False)["step"].min().sort_values(kind="stable")
        result["first_departure_by_measure"] = {str(m): int(s) for m, s in by_measure.items()}
    return result


#: the measures whose first departure :func:`format_comparison` names (the result has every measure's)
HEADLINE_MEASURES = ("rankme", "test_loss", "accuracy", "probe_accuracy")


def _place(where: dict, step: bool = True) -> str:
    layer = "" if where["layer"] < 0 else f" layer {where['layer']}"
    return f"{where['measure']}{layer}" + (f", step {where['step']}" if step else "")


def format_comparison(result: dict) -> str:
    """:func:`compare_metrics`' result in one line, and when values depart a second one: the first
    departure of each of :data:`HEADLINE_MEASURES` recorded."""
    if result["identical"]:
        line = f"the {result['shared_rows']:,} shared rows are identical"
    else:
        line = (f"{result['shared_rows']:,} shared rows; largest relative difference {result['max_rel_diff']:.1e} "
                f"({_place(result['max_rel_diff_at'])}); ")
        line += (f"first departure beyond {result['rtol']:g} at step {result['first_departure_step']} "
                 f"({_place(result['first_departure'], step=False)})" if result["first_departure"] else
                 f"none beyond {result['rtol']:g}")
    for side, name in (("recorded", "the recorded run"), ("rerun", "the rerun")):
        if result[f"only_{side}"]:
            line += (f"; {result[f'only_{side}']:,} rows only in {name} "
                     f"({', '.join(result[f'only_{side}_measures'])})")
    by_measure = result["first_departure_by_measure"]
    headline = [f"{m} at step {by_measure[m]}" for m in HEADLINE_MEASURES if m in by_measure]
    if headline:
        line += "\nfirst departures: " + ", ".join(headline)
    return line


def rerun_report(recorded_dir, rerun_dir) -> str:
    """One report of how a rerun's metrics.csv agrees with the recorded run's (``geomcap train --from``):
    byte-identical, or :func:`format_comparison` of the rows both hold."""
    from geomcap import store

    recorded = recorded_dir / store.METRICS_FILE
    if recorded.read_bytes() == (rerun_dir / store.METRICS_FILE).read_bytes():
        return f"metrics.csv byte-identical to {recorded}"
    result = compare_metrics(store.read_metrics(recorded_dir), store.read_metrics(rerun_dir))
    return f"metrics.csv against {recorded}: {format_comparison(result)}"
