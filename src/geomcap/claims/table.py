"""The claims table: every claim's row from one analysis of a store, the paper-vs-ours and verdict tables,
the book's glue, the README's findings, and each claim's effect beside the controls."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from geomcap.analysis.difficulty import difficulty_class
from geomcap.analysis.intervals import rate_interval, setting_bootstrap
from geomcap.analysis.resolution import run_checkpoints
from geomcap.analysis.runs import SCALE_CONTROLS, load_arms, load_metrics, load_runs, reruns_of
from geomcap.analysis.table import summary_table
from geomcap.claims import c1, c2, c3, c4, c5, c6, c7, c8
from geomcap.claims.c1 import claim_c1, collapse_recovers
from geomcap.claims.c2 import claim_c2
from geomcap.claims.c3 import claim_c3
from geomcap.claims.c4 import claim_c4, probe_table, selectivity_table
from geomcap.claims.c5 import BASELINES, claim_c5
from geomcap.claims.c6 import acquired_during_collapse, claim_c6, resolve_ties, tied
from geomcap.claims.c7 import c7_from_store
from geomcap.claims.c8 import (claim_c8, cross_task_correlation, proxy_preset, size_ratio, timing_concordance,
                               trajectory_correlation)
from geomcap.claims.verdicts import matched
from geomcap.store import committed_data


#: each claim's verdict rule, in words (each stated in its claim's module, ``RULE``; the methods page reads it
#: here)
RULES = {module.CLAIM: module.RULE for module in (c1, c2, c3, c4, c5, c6, c7, c8)}


#: the committed stores of the scale grid (real runs, controls): C8 pairs the 405k proxy of data/runs with their
#: larger presets
SCALE_STORES = ("scale", SCALE_CONTROLS)
#: the committed store of reruns: runs trained again, the same steps, with a checkpoint at every step up to an
#: event their checkpoints left unresolved (C6's ties: :func:`~geomcap.results.resolve_ties`)
RERUN_STORE = "reruns"


def _rerun_store(rerun_root) -> Path | None:
    """``rerun_root``, or the committed data/reruns (None where there is no committed data)."""
    if rerun_root is not None:
        return Path(rerun_root)
    try:
        return committed_data(RERUN_STORE)
    except FileNotFoundError:
        return None


def read_ties_again(summary: pd.DataFrame, runs: pd.DataFrame, rerun_root=None, measure: str = "rankme") -> pd.DataFrame:
    """``summary`` (:func:`summary_table` of ``runs``, rows of :func:`geomcap.store.list_runs`, its events read
    on ``measure``) with its C6 ties read at the checkpoints of their reruns in ``rerun_root`` (default the
    committed data/reruns; :func:`~geomcap.results.resolve_ties`); as it is where no rerun of a tie exists."""
    rerun_root = _rerun_store(rerun_root)
    reruns = load_runs(rerun_root) if rerun_root is not None and rerun_root.is_dir() else pd.DataFrame()
    ties = summary.loc[tied(summary), "run"]
    rerun_of = reruns_of(runs[runs["run"].isin(ties)], reruns) if len(ties) and len(reruns) else {}
    if not rerun_of:
        return summary
    metrics = load_metrics(runs[runs["run"].isin(list(rerun_of))], measures=["accuracy"])
    checkpoints = {run: run_checkpoints(metrics, run) for run in rerun_of}
    return resolve_ties(summary, summary_table(reruns[reruns["run"].isin(list(rerun_of.values()))], measure=measure),
                        rerun_of, checkpoints)


def proxy_arms(arms: dict, proxy_root=None, proxy_controls_root=None) -> dict:
    """C8's runs: the ``real`` and ``control`` arms of a :func:`load_arms`, each with the runs of a second
    store appended (``proxy_root``, its controls in ``proxy_controls_root``; C8 pairs presets across stores)."""
    if proxy_root is None or not Path(proxy_root).exists():
        return {"real": arms["real"], "control": arms["control"]}
    more = load_arms(proxy_root, proxy_controls_root)
    return {arm: pd.concat([arms[arm], more[arm]], ignore_index=True) for arm in ("real", "control")}


def proxy_analysis(arms: dict, summary: pd.DataFrame, small: str = "405k", large: str | None = None,
                   timing: str = "rankme_transition_step") -> dict:
    """What C8 reads, from the ``real`` and ``control`` arms of runs (:func:`proxy_arms`) and the
    :func:`summary_table` of the real ones (its missing runs are summarised here): ``large`` (default
    :func:`~geomcap.results.proxy_preset`, the largest preset with enough pairs; None when nothing pairs),
    ``metrics`` (the RankMe of every run compared, every layer, tidy), ``correlations``
    (:func:`~geomcap.results.trajectory_correlation`), ``control_correlations`` (the proxy's real runs
    against the large preset's controls), ``cross_task`` (:func:`~geomcap.results.cross_task_correlation`),
    ``concordance`` (of ``timing``) and ``size_ratio``; :func:`proxy_claim` reads it."""
    real, control = arms["real"], arms["control"]
    large = large or proxy_preset(real, small) or proxy_preset(real, small, min_pairs=1)
    if large is None:
        empty = trajectory_correlation(real.iloc[:0], real.iloc[:0], small, small)
        return {"large": None, "metrics": None, "correlations": empty, "control_correlations": empty,
                "cross_task": None, "concordance": None, "size_ratio": None}
    at = lambda t, sizes: t[t["size"].isin(sizes)]  # noqa: E731
    paired = pd.concat([at(real, [small, large]), at(control, [large])], ignore_index=True)
    metrics = load_metrics(paired, measures=["rankme"])
    unread = at(real, [large])
    unread = unread[~unread["run"].isin(summary["run"])]  # the large preset's runs of the second store
    both = pd.concat([summary, summary_table(unread)], ignore_index=True) if len(unread) else summary
    proxy_control = pd.concat([at(real, [small]), at(control, [large])], ignore_index=True)
    return {"large": large, "metrics": metrics, "correlations": trajectory_correlation(metrics, real, small, large),
            "control_correlations": trajectory_correlation(metrics, proxy_control, small, large),
            "cross_task": cross_task_correlation(metrics, real, small, large),
            "concordance": timing_concordance(both, small, large, timing=timing),
            "size_ratio": size_ratio(real, small, large)}


def proxy_claim(c8: dict) -> dict:
    """C8's row (:func:`~geomcap.results.claim_c8`) from a :func:`proxy_analysis`."""
    return claim_c8(c8["correlations"], c8["concordance"], c8["size_ratio"], c8["control_correlations"],
                    c8["cross_task"])


def regime_metrics(summary: pd.DataFrame, runs: pd.DataFrame, rerun_root=None) -> pd.DataFrame:
    """The test accuracy of the runs of ``summary`` acquired during the collapse and of the reruns that read
    their ties again (``resolved_by``, from ``rerun_root``; default the committed data/reruns): the checkpoints
    :func:`~geomcap.results.regime_margins` reads each run's events at."""
    during = summary.loc[acquired_during_collapse(summary)]
    chosen = runs[runs["run"].isin(during["run"])]
    reread = during["resolved_by"].dropna() if "resolved_by" in during else pd.Series(dtype=object)
    if len(reread):
        reruns = load_runs(_rerun_store(rerun_root))
        chosen = pd.concat([chosen, reruns[reruns["run"].isin(reread)]], ignore_index=True)
    return load_metrics(chosen, measures=["accuracy"])


def analyse_claims(root="", small: str = "405k", large: str | None = None, controls_root=None,
                   proxy_root=None, proxy_controls_root=None, rerun_root=None) -> dict:
    """Everything the claims table reads, computed once from a store ("" = the committed data/runs, with the
    negative controls and the warmup-0 arm of data/controls): ``arms`` (:func:`load_arms`), ``summary``,
    ``centred``, ``control`` and ``warmup0`` (:func:`summary_table` of each; None when absent), ``probes``,
    ``selectivity``, ``control_probes``, ``all_sizes``, ``all_centred`` and ``all_controls`` (the
    :func:`summary_table` of the store's runs and of ``proxy_root``'s, real, centred and controls: the claims
    about size, C2, C6 and C8, read every preset trained), and C8's ``c8``:
    the proxy ``small`` against ``large`` (default :func:`~geomcap.results.proxy_preset`, the largest preset
    with enough pairs), over the runs of the store and of ``proxy_root`` (default for the committed data:
    data/scale, its controls data/scale-controls), as a dict of ``large``, ``correlations``,
    ``control_correlations``, ``cross_task``, ``concordance`` and ``size_ratio``. In ``all_sizes``, C6's ties
    are read at the checkpoints of their reruns in ``rerun_root`` (default for the committed data:
    data/reruns; :func:`read_ties_again`)."""
    arms = load_arms(root, controls_root)
    runs = arms["real"]
    probe_measures = ["accuracy", "first_token_accuracy", "probe_accuracy", "probe_control_accuracy", "rankme"]
    metrics = load_metrics(runs, measures=probe_measures)
    summary = summary_table(runs)
    if proxy_root is None and not root:
        proxy_root, proxy_controls_root = (committed_data(name) for name in SCALE_STORES)
    proxy = proxy_arms(arms, proxy_root, proxy_controls_root)
    centred = summary_table(runs, measure="rankme_centred")
    control = summary_table(arms["control"]) if len(arms["control"]) else None
    more = proxy["real"][~proxy["real"]["run"].isin(runs["run"])]
    all_sizes, all_centred = summary, centred
    if len(more):
        all_sizes = pd.concat([summary, summary_table(more)], ignore_index=True)
        all_centred = pd.concat([centred, summary_table(more, measure="rankme_centred")], ignore_index=True)
    if rerun_root is not None or not root:  # a store of your own reads no committed rerun unless given one
        all_sizes = read_ties_again(all_sizes, pd.concat([runs, more], ignore_index=True), rerun_root)
    more_controls = proxy["control"][~proxy["control"]["run"].isin(arms["control"]["run"])]
    all_controls = (control if not len(more_controls) else
                    pd.concat([control, summary_table(more_controls)], ignore_index=True))
    out = {"arms": arms, "summary": summary, "centred": centred, "control": control,
           "warmup0": summary_table(arms["warmup0"]) if len(arms["warmup0"]) else None,
           "probes": probe_table(metrics, runs), "selectivity": selectivity_table(metrics, runs),
           "control_probes": (probe_table(load_metrics(arms["control"], measures=probe_measures), arms["control"])
                              if len(arms["control"]) else None),
           "all_sizes": all_sizes, "all_centred": all_centred, "all_controls": all_controls,
           "c8": proxy_analysis(proxy, all_sizes, small, large)}
    return out


def claims_from_analysis(a: dict) -> list[dict]:
    """The claim rows on the algorithmic tasks (C1-C6, C8) of an :func:`analyse_claims`; :func:`claim_rows`
    adds C7."""
    return [claim_c1(a["summary"], a["centred"], a["control"]),
            claim_c2(a["all_sizes"], a["all_centred"], a["all_controls"]),
            claim_c3(a["summary"], a["control"]), claim_c4(a["probes"], a["selectivity"], a["control_probes"]),
            claim_c5(a["summary"], a["control"]), claim_c6(a["all_sizes"]),
            proxy_claim(a["c8"])]


def claim_rows(a: dict, c7: dict | None = None) -> list[dict]:
    """The claims table's rows, C1 to C8 in order: :func:`claims_from_analysis` of an :func:`analyse_claims`
    with C7 between C6 and C8 (``c7``: a C7 row; default the committed Pythia stand-in's,
    :func:`geomcap.results.c7_from_store`)."""
    rows = claims_from_analysis(a)
    rows.insert(6, c7_from_store() if c7 is None else c7)
    return rows


def task_claims_from_store(root="", small: str = "405k", large: str | None = None, controls_root=None) -> list[dict]:
    """The claims on the algorithmic tasks (C1-C6, C8) over all complete runs of a store ("" = the committed
    data/runs, with the negative controls of data/controls), each as a :func:`claim_row` with its verdict;
    :func:`claims_from_store` is the whole table, C7 included."""
    return claims_from_analysis(analyse_claims(root, small, large, controls_root))


def claims_from_store(root="", small: str = "405k", large: str | None = None, controls_root=None,
                      c7: dict | None = None) -> list[dict]:
    """The claims table of a store, C1 to C8 (:func:`claim_rows` of :func:`analyse_claims`): the book's
    results page; ``c7`` as in :func:`claim_rows`."""
    return claim_rows(analyse_claims(root, small, large, controls_root), c7)


def paper_vs_ours(rows) -> pd.DataFrame:
    """The rows of the ``claim_*`` functions as a table indexed by claim (statement, paper, ours, control,
    verdict, rule). The notebooks glue :func:`glue_values` of the same rows for the book's prose."""
    table = pd.DataFrame(list(rows), columns=["claim", "statement", "paper", "ours", "value", "control", "verdict",
                                              "rule"])
    return table.drop(columns="value").set_index("claim")


def glue_values(rows) -> dict:
    """What the book's prose quotes of the ``claim_*`` rows: ``<claim>_ours`` (text), ``<claim>_value``
    (the headline number), ``<claim>_control`` and ``<claim>_verdict`` for each row (e.g. ``C1_value``); a
    notebook stores each with myst-nb's ``glue``."""
    values = {}
    for row in rows:
        values.update({f"{row['claim']}_ours": row["ours"], f"{row['claim']}_value": row["value"],
                       f"{row['claim']}_control": row.get("control", ""), f"{row['claim']}_verdict": row["verdict"]})
    return values


def verdict_table(rows) -> pd.DataFrame:
    """The verdict table the results page leads with: claim | paper | ours | control | verdict | rule."""
    return paper_vs_ours(rows)[["paper", "ours", "control", "verdict", "rule"]]


def findings_markdown(rows) -> str:
    """The README's "What it finds" list, from the claims table: one line per claim with its statement, the
    verdict, our deciding numbers and what the controls show (``tests/test_golden_claims.py`` keeps the README
    equal to this for the published table)."""
    lines = []
    for row in rows:
        control = f" Controls: {row['control']}." if row.get("control") else ""
        lines.append(f"- **{row['claim']}**, {row['statement']}: **{row['verdict']}**. Ours: {row['ours']}.{control}")
    return "\n".join(lines)


EFFECT_COLUMNS = ["claim", "statistic", "arm", "value", "low", "high", "runs"]


def _effect(claim, statistic, arm, table, column=None, value_of=None) -> dict:
    """One row of :func:`claim_effects`: a share of the boolean ``column`` (or a statistic ``value_of(table)``)
    over ``table``'s runs, with its :func:`setting_bootstrap` interval."""
    if table is None or table.empty:
        return {"claim": claim, "statistic": statistic, "arm": arm, "value": np.nan, "low": np.nan, "high": np.nan,
                "runs": 0}
    if column is not None:
        r = rate_interval(table, column)
        return {"claim": claim, "statistic": statistic, "arm": arm, "value": r["rate"], "low": r["low"],
                "high": r["high"], "runs": r["n"]}
    low, high = setting_bootstrap(table, value_of)
    return {"claim": claim, "statistic": statistic, "arm": arm, "value": value_of(table), "low": low, "high": high,
            "runs": len(table)}


def claim_effects(a: dict) -> pd.DataFrame:
    """Per claim, the effect in the real runs beside the negative controls (and, for C3, the warmup-0 arm),
    each with a 95% interval over settings: the results page's opening figure. From an
    :func:`analyse_claims`. Statistics: C1 runs that collapse then recover; C2 MOD's mean floor; C3 runs
    top-down; C4 runs whose probe beats the model's baselines; C5 hard runs where a series is informative
    (RankMe against the baselines read the same way). Real runs are those of the controls' settings
    (:func:`matched`) where a control exists, all of them for C4-C5; C2 reads every preset trained, as its
    verdict does."""
    summary, control, warm = a["summary"], a["control"], a["warmup0"]
    same = matched(summary, control)
    rows = []

    def flag(table, series):
        return None if table is None else table.assign(_flag=series(table))

    recovers = collapse_recovers
    rows += [_effect("C1", "runs that collapse then recover", arm, flag(t, recovers), "_flag")
             for arm, t in (("real", same), ("control", control))]
    mod_floor = lambda t: float(pd.to_numeric(t["rankme_floor_value"], errors="coerce").mean())  # noqa: E731
    every_control = a["all_controls"]  # C2 speaks of every size: the scale grid's controls too
    rows += [_effect("C2", "MOD's mean RankMe floor", arm, None if t is None else t[t["task"] == "mod"],
                     value_of=mod_floor)
             for arm, t in (("real", matched(a["all_sizes"], every_control)), ("control", every_control))]
    top = lambda t: pd.to_numeric(t["top_down_rho_step"], errors="coerce").lt(0).where(  # noqa: E731
        pd.to_numeric(t["top_down_rho_step"], errors="coerce").notna())
    rows += [_effect("C3", "runs top-down", arm, flag(t, top), "_flag")
             for arm, t in (("real", same), ("control", control), ("warmup 0", warm))]
    probes = a["probes"]
    rows += [_effect("C4", "runs whose probe beats the model", arm, t, "c4_holds")
             for arm, t in (("real", probes), ("control", a["control_probes"]))]
    hard = summary[difficulty_class(summary) == "hard"]
    for measure in ("rankme", *BASELINES[1:]):
        column = f"{measure}_is_precursor"
        if column in hard:
            t = hard[hard[column].notna()]
            t = t.assign(_flag=t[column].astype(bool) & t[f"{measure}_leads_test_loss"].eq(True))
            rows.append(_effect("C5", "hard runs where it is informative", measure, t, "_flag"))
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)
