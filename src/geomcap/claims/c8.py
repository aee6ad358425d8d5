"""C8: does a small preset's RankMe trajectory predict a large one's, and does it order tasks in time as
the large one does?"""

from __future__ import annotations

import numpy as np
import pandas as pd

from geomcap import paper, store
from geomcap.analysis.series import final_layer_rows, spearman
from geomcap.claims.verdicts import claim_row


#: C8: a median rho above this but below the paper's 0.92 is partial
RHO_PARTLY = 0.7

#: C8 speaks of proxies much smaller than the model they predict: the presets compared must differ this much
#: in parameters (the paper: 405K vs 2.8B)
MIN_SIZE_RATIO = 10

#: the claim this module decides
CLAIM = "C8"
#: its verdict rule, in words, from the thresholds it uses (:data:`~geomcap.claims.table.RULES` collects every claim's)
RULE = (f"not testable: no task trained at both presets, or presets less than {MIN_SIZE_RATIO}x apart in "
        f"parameters; reproduced: median Spearman rho over task pairs > {paper.CLAIMS['C8']['values']['rho']}; partly: > {RHO_PARTLY}; "
        "not reproduced: otherwise")


def _final_layer_series(metrics: pd.DataFrame, run: str, measure: str) -> pd.Series:
    """One run's ``measure`` at its final layer (:func:`geomcap.events.final_layer_rows`), indexed by step."""
    m = final_layer_rows(metrics[metrics["run"] == run], measure, by=None)
    return m.set_index("step")["value"].sort_index()


def check_one_run_per_key(table: pd.DataFrame, keys: list) -> None:
    """Raise a ValueError naming the runs when two rows of ``table`` (runs, or a summary) of one
    preset share ``keys``: pairing presets by those keys would then be ambiguous (a store that
    holds two settings of one task and level, e.g. two ``task_params``; select one first)."""
    duplicated = table[table.duplicated(["size", *keys], keep=False)]
    if len(duplicated):
        first = duplicated.iloc[0]
        same = duplicated[(duplicated[["size", *keys]] == first[["size", *keys]]).all(axis=1)]
        raise ValueError(f"runs {', '.join(map(str, same['run']))} share {', '.join(keys)} at preset {first['size']} "
                         f"({', '.join(f'{k}={first[k]}' for k in keys)}): select one setting per task and level "
                         "before pairing presets")


def proxy_pairs(runs: pd.DataFrame, small: str, large: str) -> pd.DataFrame:
    """Runs of the same task, level, seed and step count at both presets: one row per pair,
    with columns task, level, seed, steps, run_small, run_large."""
    keys = ["task", "level", "seed", "steps"]
    check_one_run_per_key(runs[runs["size"].isin([small, large])], keys)
    a = runs[runs["size"] == small][keys + ["run"]].rename(columns={"run": "run_small"})
    b = runs[runs["size"] == large][keys + ["run"]].rename(columns={"run": "run_large"})
    return a.merge(b, on=keys).sort_values(keys).reset_index(drop=True)


def trajectory_correlation(metrics: pd.DataFrame, runs: pd.DataFrame, small: str, large: str,
                           measure: str = "rankme") -> pd.DataFrame:
    """Claim C8: does the small preset's trajectory predict the large one's?

    For every pair of :func:`proxy_pairs` (same task, level, seed and steps, hence the same
    checkpoint schedule), the Spearman and Pearson correlations over checkpoints between the
    final layer's ``measure`` at the two presets. Spearman compares the shapes of the
    trajectories (the presets' widths differ, so their RankMe scales differ).
    """
    rows = []
    for pair in proxy_pairs(runs, small, large).itertuples():
        s = _final_layer_series(metrics, pair.run_small, measure)
        l = _final_layer_series(metrics, pair.run_large, measure)
        common = s.index.intersection(l.index)
        a, b = s[common].to_numpy(float), l[common].to_numpy(float)
        ok = np.isfinite(a) & np.isfinite(b)
        a, b = a[ok], b[ok]
        pearson = float(np.corrcoef(a, b)[0, 1]) if a.size > 1 and np.ptp(a) and np.ptp(b) else np.nan
        rows.append({"task": pair.task, "level": pair.level, "seed": pair.seed, "steps": pair.steps,
                     "checkpoints": int(a.size), "spearman": spearman(a, b), "pearson": pearson,
                     "run_small": pair.run_small, "run_large": pair.run_large})
    return pd.DataFrame(rows, columns=["task", "level", "seed", "steps", "checkpoints", "spearman",
                                       "pearson", "run_small", "run_large"])


def timing_concordance(summary: pd.DataFrame, small: str, large: str,
                       timing: str = "rankme_transition_step", by: str = "level") -> pd.DataFrame:
    """Claim C8's limit: does the small preset order tasks in time as the large one does?

    Within each group of ``by`` (the level: tasks of one class) and seed, every pair of
    tasks whose ``timing`` column (a step: the RankMe transition by default, or
    ``acquisition_step``) is known at both presets is *concordant* when the same task comes
    first at both presets, *discordant* when the order reverses, and *tied* when either
    preset puts both at the same step (left out of the rate). Rate = concordant /
    (concordant + discordant), NaN without comparable pairs.
    """
    from itertools import combinations

    keys = ["task", by, "seed", "steps"]
    check_one_run_per_key(summary[summary["size"].isin([small, large])], keys)
    t_small = summary[summary["size"] == small].set_index(keys)[timing]
    t_large = summary[summary["size"] == large].set_index(keys)[timing]
    both = pd.concat({"small": t_small, "large": t_large}, axis=1, join="inner")
    both = both.apply(pd.to_numeric, errors="coerce").dropna().reset_index()
    rows = []
    for group, sel in both.groupby(by, sort=False):
        counts = {"concordant": 0, "discordant": 0, "tied": 0}
        for _, per_seed in sel.groupby(["seed", "steps"]):
            for (_, i), (_, j) in combinations(per_seed.iterrows(), 2):
                product = np.sign(i["small"] - j["small"]) * np.sign(i["large"] - j["large"])
                counts["tied" if product == 0 else "concordant" if product > 0 else "discordant"] += 1
        compared = counts["concordant"] + counts["discordant"]
        rows.append({by: group, "tasks": sel["task"].nunique(), "pairs": compared + counts["tied"], **counts,
                     "rate": counts["concordant"] / compared if compared else np.nan})
    return pd.DataFrame(rows, columns=[by, "tasks", "pairs", "concordant", "discordant", "tied", "rate"])


def size_ratio(runs: pd.DataFrame, small: str, large: str) -> float | None:
    """Parameters of the ``large`` preset over the ``small`` one's, read from the runs' status.json (None
    when either has no complete run)."""
    counts = {}
    for size in (small, large):
        rows = runs[runs["size"] == size]
        if rows.empty:
            return None
        counts[size] = (store.read_status(rows["path"].iloc[0]) or {}).get("parameters")
    return counts[large] / counts[small] if all(counts.values()) else None


def claim_c8(correlations: pd.DataFrame, concordance: pd.DataFrame | None = None,
             size_ratio: float | None = None) -> dict:
    """C8: the small preset's RankMe trajectory against the large one's (:func:`trajectory_correlation`), with
    the timing concordance; not testable while the presets compared differ by less than
    :data:`~geomcap.claims.c8.MIN_SIZE_RATIO` in parameters (``size_ratio``)."""
    rho_paper = paper.CLAIMS["C8"]["values"]["rho"]
    rule = RULE
    rho = correlations["spearman"].dropna() if len(correlations) else pd.Series(dtype=float)
    if rho.empty:
        return claim_row("C8", "no task trained at both presets yet", rule=rule)
    text = f"median rho {rho.median():.2f} over {len(rho)} pairs"
    if concordance is not None and len(concordance):
        for row in concordance.dropna(subset=["rate"]).itertuples():
            text += f"; concordance ({row.level}) {row.rate:.0%}"
    m = float(rho.median())
    ratio = f"presets {size_ratio:.1f}x apart" if size_ratio else "size ratio unknown"
    if size_ratio is None or size_ratio < MIN_SIZE_RATIO:
        return claim_row("C8", f"{text}; {ratio}", m, "not testable", rule, f"outside the claim's regime ({ratio})")
    verdict = "reproduced" if m > rho_paper else "partly reproduced" if m > RHO_PARTLY else "not reproduced"
    return claim_row("C8", f"{text}; {ratio}", m, verdict, rule)
