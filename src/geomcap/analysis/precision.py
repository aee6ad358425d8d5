"""Is a run trained in bf16 autocast the same run as in float32, as far as the book reads it?

The rule (fixed before the runs were trained): for one setting (task, level, size, seed), the float32 run and
its float32 twins (``TrainConfig.perturb``: the same run but for the accident of rounding) span, for each
statistic of :data:`~geomcap.analysis.precision.PRECISION_STATISTICS`, a range [min, max]; the bf16 run of the same setting is accepted
only if every statistic lies within its range. A statistic missing from any run (never acquired, no
collapse) is undecided, and an undecided setting is not accepted.

The rule is strict by construction: a fourth run exchangeable with three float32 runs falls inside their
range with probability 1/2 for one continuous statistic (:func:`~geomcap.results.exchangeable_inside_probability`), so
even a bf16 run that changed nothing would often be refused. Held-out float32 twins read by the same rule
(``role`` "held-out twin") measure how often.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from geomcap.analysis.protocol import RUN_KEYS

#: the statistics the book reads of one run: column of :func:`~geomcap.results.summary_table` -> name
PRECISION_STATISTICS = {"acquisition_step": "acquisition step", "rankme_floor_value": "collapse floor",
                        "rankme_floor_step": "collapse step", "top_down_rho_step": "top-down rho"}
#: twins (``perturb_seed``) that form the float32 range; higher ones are held out and read like the bf16 run
RANGE_TWINS = (0, 1, 2)


def exchangeable_inside_probability(n_reference: int) -> float:
    """The probability that one more draw of a continuous statistic, exchangeable with ``n_reference``
    draws, falls strictly inside their range: (n - 1) / (n + 1)."""
    if n_reference < 2:
        return 0.0
    return (n_reference - 1) / (n_reference + 1)


def precision_runs(summary: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """``summary`` (:func:`~geomcap.results.summary_table`) rows with ``precision`` (fp32 where the
    config has none), ``twin`` (``perturb_seed`` of a perturbed run, else 0) and ``role``: "range" (a float32
    run of :data:`~geomcap.analysis.precision.RANGE_TWINS`), "bf16" (an unperturbed bf16 run) or "held-out twin" (a float32 twin beyond
    them). ``runs``: the :func:`~geomcap.results.load_runs` rows the summary was made from."""
    extra = runs.set_index("run")
    precision = extra.get("precision", pd.Series("fp32", index=extra.index)).fillna("fp32")
    perturbed = pd.to_numeric(extra.get("perturb", pd.Series(0.0, index=extra.index)), errors="coerce").fillna(0)
    twin = pd.to_numeric(extra.get("perturb_seed", pd.Series(0, index=extra.index)), errors="coerce").fillna(0)
    twin = twin.where(perturbed > 0, 0).astype(int)
    table = summary[[*RUN_KEYS, "run", *PRECISION_STATISTICS]].copy()
    table["precision"] = table["run"].map(precision)
    table["twin"] = table["run"].map(twin).fillna(0).astype(int)
    fp32 = table["precision"] == "fp32"
    table["role"] = np.where(fp32 & table["twin"].isin(RANGE_TWINS), "range",
                             np.where(fp32, "held-out twin", np.where(table["twin"] == 0, "bf16", "other")))
    return table[table["role"] != "other"].sort_values([*RUN_KEYS, "role", "twin"]).reset_index(drop=True)


def precision_check(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, candidate run): each candidate (the bf16 run, or a held-out float32 twin) read
    against the float32 range of its setting (:func:`~geomcap.results.precision_runs`' rows). Columns: the setting, ``role``,
    ``twin``, ``range_runs``; per statistic ``<stat>_low``, ``<stat>_high``, ``<stat>_value`` and
    ``<stat>_inside`` (True, False, or None when a value is missing); ``accepted``: every statistic
    inside (False when any is outside, None when none is outside but one is undecided)."""
    rows = []
    for setting, group in table.groupby(list(RUN_KEYS), sort=False):
        reference = group[group["role"] == "range"]
        for candidate in group[group["role"] != "range"].itertuples():
            row = dict(zip(RUN_KEYS, setting))
            row.update(role=candidate.role, twin=candidate.twin, run=candidate.run, range_runs=len(reference))
            verdicts = []
            for stat in PRECISION_STATISTICS:
                values = pd.to_numeric(reference[stat], errors="coerce")
                value = pd.to_numeric(pd.Series([getattr(candidate, stat)]), errors="coerce").iloc[0]
                low, high = values.min(), values.max()
                inside = (None if len(reference) < 2 or values.isna().any() or pd.isna(value)
                          else bool(low <= value <= high))
                row.update({f"{stat}_low": low, f"{stat}_high": high, f"{stat}_value": value,
                            f"{stat}_inside": inside})
                verdicts.append(inside)
            row["accepted"] = False if False in verdicts else (None if None in verdicts else True)
            rows.append(row)
    return pd.DataFrame(rows)
