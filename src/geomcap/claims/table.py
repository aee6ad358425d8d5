"""The claims table: every claim's row from one analysis of a store, the paper-vs-ours and verdict tables,
the book's glue, the README's findings, and each claim's effect beside the controls."""

from __future__ import annotations

import numpy as np
import pandas as pd

from geomcap.analysis.difficulty import difficulty_class
from geomcap.analysis.intervals import rate_interval, setting_bootstrap
from geomcap.analysis.runs import load_arms, load_metrics
from geomcap.analysis.table import summary_table
from geomcap.claims import c1, c2, c3, c4, c5, c6, c7, c8
from geomcap.claims.c1 import claim_c1, collapse_recovers
from geomcap.claims.c2 import claim_c2
from geomcap.claims.c3 import claim_c3
from geomcap.claims.c4 import claim_c4, probe_table, selectivity_table
from geomcap.claims.c5 import BASELINES, claim_c5
from geomcap.claims.c6 import claim_c6
from geomcap.claims.c7 import c7_from_store
from geomcap.claims.c8 import claim_c8, size_ratio, timing_concordance, trajectory_correlation
from geomcap.claims.verdicts import matched


#: each claim's verdict rule, in words (each stated in its claim's module, ``RULE``; the methods page reads it
#: here)
RULES = {module.CLAIM: module.RULE for module in (c1, c2, c3, c4, c5, c6, c7, c8)}


def analyse_claims(root="", small: str = "405k", large: str = "1.3m", controls_root=None) -> dict:
    """Everything the claims table reads, computed once from a store ("" = the committed data/runs, with the
    negative controls and the warmup-0 arm of data/controls): ``arms`` (:func:`load_arms`), ``summary``,
    ``centred``, ``control`` and ``warmup0`` (:func:`summary_table` of each; None when absent), ``probes``,
    ``selectivity``, ``control_probes``, ``correlations``, ``concordance`` and ``size_ratio``."""
    arms = load_arms(root, controls_root)
    runs = arms["real"]
    probe_measures = ["accuracy", "first_token_accuracy", "probe_accuracy", "probe_control_accuracy", "rankme"]
    metrics = load_metrics(runs, measures=probe_measures)
    summary = summary_table(runs)
    out = {"arms": arms, "summary": summary, "centred": summary_table(runs, measure="rankme_centred"),
           "control": summary_table(arms["control"]) if len(arms["control"]) else None,
           "warmup0": summary_table(arms["warmup0"]) if len(arms["warmup0"]) else None,
           "probes": probe_table(metrics, runs), "selectivity": selectivity_table(metrics, runs),
           "control_probes": (probe_table(load_metrics(arms["control"], measures=probe_measures), arms["control"])
                              if len(arms["control"]) else None),
           "correlations": trajectory_correlation(metrics, runs, small, large),
           "concordance": timing_concordance(summary, small, large), "size_ratio": size_ratio(runs, small, large)}
    return out


def claims_from_analysis(a: dict) -> list[dict]:
    """The claim rows on the algorithmic tasks (C1-C6, C8) of an :func:`analyse_claims`; :func:`claim_rows`
    adds C7."""
    return [claim_c1(a["summary"], a["centred"], a["control"]), claim_c2(a["summary"], a["centred"], a["control"]),
            claim_c3(a["summary"], a["control"]), claim_c4(a["probes"], a["selectivity"], a["control_probes"]),
            claim_c5(a["summary"], a["control"]), claim_c6(a["summary"]),
            claim_c8(a["correlations"], a["concordance"], a["size_ratio"])]


def claim_rows(a: dict, c7: dict | None = None) -> list[dict]:
    """The claims table's rows, C1 to C8 in order: :func:`claims_from_analysis` of an :func:`analyse_claims`
    with C7 between C6 and C8 (``c7``: a C7 row; default the committed Pythia stand-in's,
    :func:`geomcap.results.c7_from_store`)."""
    rows = claims_from_analysis(a)
    rows.insert(6, c7_from_store() if c7 is None else c7)
    return rows


def task_claims_from_store(root="", small: str = "405k", large: str = "1.3m", controls_root=None) -> list[dict]:
    """The claims on the algorithmic tasks (C1-C6, C8) over all complete runs of a store ("" = the committed
    data/runs, with the negative controls of data/controls), each as a :func:`claim_row` with its verdict;
    :func:`claims_from_store` is the whole table, C7 included."""
    return claims_from_analysis(analyse_claims(root, small, large, controls_root))


def claims_from_store(root="", small: str = "405k", large: str = "1.3m", controls_root=None,
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
    (:func:`matched`) where a control exists, all of them for C4-C5."""
    summary, control, warm = a["summary"], a["control"], a["warmup0"]
    same = matched(summary, control)
    rows = []

    def flag(table, series):
        return None if table is None else table.assign(_flag=series(table))

    recovers = collapse_recovers
    rows += [_effect("C1", "runs that collapse then recover", arm, flag(t, recovers), "_flag")
             for arm, t in (("real", same), ("control", control))]
    mod_floor = lambda t: float(pd.to_numeric(t["rankme_floor_value"], errors="coerce").mean())  # noqa: E731
    rows += [_effect("C2", "MOD's mean RankMe floor", arm, None if t is None else t[t["task"] == "mod"],
                     value_of=mod_floor) for arm, t in (("real", same), ("control", control))]
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
