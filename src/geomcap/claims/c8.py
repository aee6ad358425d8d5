"""C8: does a small preset's RankMe trajectory predict a large one's, and does it order tasks in time as
the large one does?"""

from __future__ import annotations

import numpy as np
import pandas as pd

from geomcap import paper, store
from geomcap.analysis.series import final_layer_rows, spearman
from geomcap.claims.verdicts import CONTROL_MARGIN, MIN_RUNS, claim_row, specific
from geomcap.presets import PRESETS


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
        "not reproduced: otherwise; not specific to learning: the large preset's shuffled-answer runs correlate "
        f"with the proxy at least as well, less {CONTROL_MARGIN:.2f}")


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


def _pair_rho(metrics: pd.DataFrame, run_small: str, run_large: str, measure: str) -> dict:
    """Spearman and Pearson correlations of two runs' final-layer ``measure`` over their common checkpoints."""
    s = _final_layer_series(metrics, run_small, measure)
    l = _final_layer_series(metrics, run_large, measure)
    common = s.index.intersection(l.index)
    a, b = s[common].to_numpy(float), l[common].to_numpy(float)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    pearson = float(np.corrcoef(a, b)[0, 1]) if a.size > 1 and np.ptp(a) and np.ptp(b) else np.nan
    return {"checkpoints": int(a.size), "spearman": spearman(a, b), "pearson": pearson}


def trajectory_correlation(metrics: pd.DataFrame, runs: pd.DataFrame, small: str, large: str,
                           measure: str = "rankme") -> pd.DataFrame:
    """Claim C8: does the small preset's trajectory predict the large one's?

    For every pair of :func:`proxy_pairs` (same task, level, seed and steps, hence the same
    checkpoint schedule), the Spearman and Pearson correlations over checkpoints between the
    final layer's ``measure`` at the two presets. Spearman compares the shapes of the
    trajectories (the presets' widths differ, so their RankMe scales differ).
    """
    rows = [{"task": pair.task, "level": pair.level, "seed": pair.seed, "steps": pair.steps,
             **_pair_rho(metrics, pair.run_small, pair.run_large, measure),
             "run_small": pair.run_small, "run_large": pair.run_large}
            for pair in proxy_pairs(runs, small, large).itertuples()]
    return pd.DataFrame(rows, columns=["task", "level", "seed", "steps", "checkpoints", "spearman",
                                       "pearson", "run_small", "run_large"])


#: the columns of :func:`~geomcap.results.cross_task_correlation`
CROSS_TASK_COLUMNS = ["level", "seed", "steps", "task_small", "task_large", "same_task", "checkpoints", "spearman",
                      "run_small", "run_large"]


def cross_task_correlation(metrics: pd.DataFrame, runs: pd.DataFrame, small: str, large: str,
                           measure: str = "rankme") -> pd.DataFrame:
    """C8's question asked of the wrong proxy: the small preset's run of *every* task against the large
    preset's run of every task, within one level, seed and step count (one checkpoint schedule).

    A proxy predicts *its* task only where the pairs of the same task (``same_task``, the pairs of
    :func:`trajectory_correlation`) correlate more than the pairs of different tasks; where they do not, the
    correlation is the shape every run's trajectory shares (collapse, then recovery), not a prediction. One
    row per (small run, large run), columns :data:`~geomcap.claims.c8.CROSS_TASK_COLUMNS`.
    """
    keys = ["level", "seed", "steps"]
    check_one_run_per_key(runs[runs["size"].isin([small, large])], ["task", *keys])
    a = runs[runs["size"] == small][["task", *keys, "run"]].rename(columns={"task": "task_small", "run": "run_small"})
    b = runs[runs["size"] == large][["task", *keys, "run"]].rename(columns={"task": "task_large", "run": "run_large"})
    rows = []
    for pair in a.merge(b, on=keys).sort_values([*keys, "task_small", "task_large"]).itertuples():
        rho = _pair_rho(metrics, pair.run_small, pair.run_large, measure)
        rows.append({"level": pair.level, "seed": pair.seed, "steps": pair.steps, "task_small": pair.task_small,
                     "task_large": pair.task_large, "same_task": pair.task_small == pair.task_large,
                     "checkpoints": rho["checkpoints"], "spearman": rho["spearman"], "run_small": pair.run_small,
                     "run_large": pair.run_large})
    return pd.DataFrame(rows, columns=CROSS_TASK_COLUMNS)


def own_task_rank(cross_task: pd.DataFrame) -> pd.DataFrame:
    """Per large-preset run of a :func:`cross_task_correlation`, where the proxy of its own task ranks among
    the small preset's runs of every task (same level and seed): ``rank`` (1: the highest rho), ``proxies``
    (how many were ranked) and ``best`` (rank 1). Ties share the better rank; runs whose own task has no
    defined rho are left out."""
    rows = []
    for (level, seed, steps, task), group in cross_task.groupby(["level", "seed", "steps", "task_large"], sort=True):
        rho = group.set_index("task_small")["spearman"].dropna()
        if task not in rho.index:
            continue
        rank = int((rho > rho[task]).sum()) + 1
        rows.append({"level": level, "seed": seed, "steps": steps, "task": task, "rank": rank,
                     "proxies": len(rho), "best": rank == 1})
    return pd.DataFrame(rows, columns=["level", "seed", "steps", "task", "rank", "proxies", "best"])


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


def proxy_preset(runs: pd.DataFrame, small: str, min_pairs: int = MIN_RUNS) -> str | None:
    """The preset C8 reads against the proxy ``small``: the largest model preset (in
    ``geomcap.presets.PRESETS``' order) with at least ``min_pairs`` :func:`proxy_pairs` in ``runs``, as
    the paper sets its smallest model against its largest; None when no preset has that many. The choice
    reads sizes and pair counts only, never a correlation."""
    larger = [p for p in PRESETS if p in set(runs["size"]) and p != small]
    paired = [p for p in larger if len(proxy_pairs(runs, small, p)) >= min_pairs]
    return paired[-1] if paired else None


def _median_text(correlations: pd.DataFrame | None, what: str) -> tuple[float, str]:
    rho = correlations["spearman"].dropna() if correlations is not None and len(correlations) else []
    if not len(rho):
        return np.nan, ""
    return float(rho.median()), f"{what}: median rho {rho.median():.2f} over {len(rho)} pairs"


def claim_c8(correlations: pd.DataFrame, concordance: pd.DataFrame | None = None,
             size_ratio: float | None = None, control: pd.DataFrame | None = None,
             cross_task: pd.DataFrame | None = None) -> dict:
    """C8: the small preset's RankMe trajectory against the large one's (:func:`trajectory_correlation`), with
    the timing concordance; not testable while the presets compared differ by less than
    :data:`~geomcap.claims.c8.MIN_SIZE_RATIO` in parameters (``size_ratio``).

    ``control``: the same correlations with the large preset's shuffled-answer runs (nothing learnable) in
    place of its real runs (:func:`trajectory_correlation` of the proxy's real runs and the controls); a
    reproduced or partly reproduced verdict they match within :data:`~geomcap.claims.verdicts.CONTROL_MARGIN` is
    "not specific to learning". ``cross_task`` (:func:`cross_task_correlation`): the pairs of different tasks,
    whose median is reported beside (what a proxy of the wrong task predicts), and how often the proxy of the
    run's own task is the best one (:func:`own_task_rank`)."""
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
    control_rho, control_text = _median_text(control, "the large preset's shuffled-answer runs")
    other = cross_task[~cross_task["same_task"].astype(bool)] if cross_task is not None and len(cross_task) else None
    other_text = _median_text(other, "the proxy of another task")[1]
    ranks = own_task_rank(cross_task) if other_text else None
    if ranks is not None and len(ranks):
        other_text += (f"; its own task's proxy is the best of {ranks['proxies'].max()} in {int(ranks['best'].sum())} "
                       f"of {len(ranks)} large runs")
    controls = "; ".join(t for t in (control_text, other_text) if t)
    if size_ratio is None or size_ratio < MIN_SIZE_RATIO:
        outside = f"outside the claim's regime ({ratio})"
        return claim_row("C8", f"{text}; {ratio}", m, "not testable", rule,
                         f"{outside}; {controls}" if controls else outside)
    verdict = "reproduced" if m > rho_paper else "partly reproduced" if m > RHO_PARTLY else "not reproduced"
    return claim_row("C8", f"{text}; {ratio}", m, specific(m, control_rho, verdict), rule, controls)
