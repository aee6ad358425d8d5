"""C4: a linear probe decodes the answer before the model outputs it, against the model's own baselines,
Hewitt & Liang's control task and the negative controls."""

from __future__ import annotations

import numpy as np
import pandas as pd

from geomcap.analysis.acquisition import acquisition_step, run_chance, run_majority_rate
from geomcap.analysis.protocol import ACQUISITION_PATIENCE, ACQUISITION_THRESHOLD, RUN_KEYS
from geomcap.analysis.series import chance_corrected, layer_matrix, tidy_series
from geomcap.claims.verdicts import HOLDS, PARTLY, bool_share, claim_row, specific


#: C4: a probe "decodes the answer" when it beats both baselines by this margin (about 1.5 standard
#: errors of a probe scored on 256 prompts near 0.5)
PROBE_MARGIN = 0.05

#: C4 with Hewitt & Liang's control task: a probe reads the answer, not the input, only if its accuracy beats
#: its control-task accuracy by this much
SELECTIVITY_MARGIN = PROBE_MARGIN

#: the claim this module decides
CLAIM = "C4"
#: its verdict rule, in words, from the thresholds it uses (:data:`~geomcap.claims.table.RULES` collects every claim's)
RULE = (f"reproduced: holds in >= {HOLDS:.0%} of runs with checkpoints below 50% (probe > max(first-token "
        f"accuracy, majority rate) + {PROBE_MARGIN} at >= half of them); partly: >= {PARTLY:.0%}; not "
        f"reproduced: otherwise; not specific to learning: the probe's best layer beats its control task by "
        f"< {SELECTIVITY_MARGIN} (median over runs), or it holds as often in the negative controls; not "
        "testable: no such run")


def probe_table(metrics: pd.DataFrame, runs: pd.DataFrame, threshold: float = ACQUISITION_THRESHOLD,
                patience: int = ACQUISITION_PATIENCE, margin: float = PROBE_MARGIN) -> pd.DataFrame:
    """Per run: does a linear probe decode the answer before the model outputs it (claim C4)?

    Columns: ``probe_step0`` (best layer's probe accuracy at initialisation: what
    random features already allow), ``probe_acquisition_step`` (the acquisition
    rule applied to the best layer's probe accuracy at each checkpoint),
    ``first_token_acquisition_step`` and ``acquisition_step`` (the model's own,
    first answer token and exact match), the leads in steps
    (model's step - probe's step; positive = the probe is first),
    ``majority_rate`` (share of the test answers whose first token is the most
    common one: what a constant guess of the first token scores), and, among
    the checkpoints where the model's exact-match accuracy is < 0.5
    (``checkpoints_below``): ``probe_above_model_share`` (probe > exact match,
    the paper's comparison), ``probe_above_first_token_share`` (probe > the
    model's first-token accuracy) and ``probe_above_baselines_share`` (probe >
    max(first-token accuracy, majority rate) + ``margin``: the protocol's
    comparison); ``c4_holds``: that share is at least one half (None without
    such checkpoints).
    """
    rows = []
    for run in runs.itertuples():
        m = metrics[metrics["run"] == run.run]
        steps, acc = tidy_series(m, "accuracy")
        _, first = tidy_series(m, "first_token_accuracy")
        _, _, probe = layer_matrix(m, "probe_accuracy")
        best = np.nanmax(probe, axis=0)
        below = acc < 0.5
        majority = run_majority_rate(run._asdict())
        baseline = np.maximum(first, majority) + margin
        p_acq = acquisition_step(steps, best, threshold, patience)
        f_acq = acquisition_step(steps, first, threshold, patience)
        m_acq = acquisition_step(steps, chance_corrected(acc, run_chance(run._asdict())),
                                        threshold, patience)
        share = lambda other: float(np.mean(best[below] > other[below])) if below.any() else np.nan  # noqa: E731
        above = share(baseline)
        rows.append({**{k: getattr(run, k) for k in RUN_KEYS}, "run": run.run,
                     "probe_step0": float(best[0]), "probe_final": float(best[-1]),
                     "probe_acquisition_step": p_acq, "first_token_acquisition_step": f_acq,
                     "acquisition_step": m_acq,
                     "lead_vs_exact_match": None if p_acq is None or m_acq is None else m_acq - p_acq,
                     "lead_vs_first_token": None if p_acq is None or f_acq is None else f_acq - p_acq,
                     "majority_rate": majority, "checkpoints_below": int(below.sum()),
                     "probe_above_model_share": share(acc), "probe_above_first_token_share": share(first),
                     "probe_above_baselines_share": above,
                     "c4_holds": None if np.isnan(above) else bool(above >= 0.5)})
    table = pd.DataFrame(rows)
    for column in ("probe_acquisition_step", "first_token_acquisition_step", "acquisition_step",
                   "lead_vs_exact_match", "lead_vs_first_token"):
        if column in table:
            table[column] = table[column].astype("Int64")
    return table


def probe_by_task(probes: pd.DataFrame) -> pd.DataFrame:
    """Claim C4 per task from :func:`probe_table`: runs with checkpoints below 50%, runs where C4 holds
    against both baselines, and the mean shares of sub-50% checkpoints where the probe beats the model's
    exact match, its first-token accuracy, and both baselines; the mean majority rate."""
    rows = []
    for task, group in probes.groupby("task", sort=False):
        holds = group["c4_holds"].dropna().astype(bool)
        rows.append({"task": task, "runs": len(holds), "c4_holds": int(holds.sum()),
                     "rate": float(holds.mean()) if len(holds) else np.nan,
                     "above_exact_match": group["probe_above_model_share"].mean(),
                     "above_first_token": group["probe_above_first_token_share"].mean(),
                     "above_baselines": group["probe_above_baselines_share"].mean(),
                     "majority_rate": group["majority_rate"].mean()})
    return pd.DataFrame(rows, columns=["task", "runs", "c4_holds", "rate", "above_exact_match",
                                       "above_first_token", "above_baselines", "majority_rate"])


def selectivity_table(metrics: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """C4's control task (Hewitt & Liang 2019): per run that recorded ``probe_control_accuracy`` and per layer,
    the probe's mean accuracy on the true labels and on the control task's, over the checkpoints where the
    model's exact-match accuracy is below 0.5, and ``selectivity`` (their difference). ``metrics``: tidy, with a
    ``run`` column (:func:`load_metrics`)."""
    rows = []
    for run in runs.itertuples():
        m = metrics[metrics["run"] == run.run]
        if not (m["measure"] == "probe_control_accuracy").any():
            continue
        steps, acc = tidy_series(m, "accuracy")
        below = set(steps[acc < 0.5].tolist())
        wide = m[m["measure"].isin(["probe_accuracy", "probe_control_accuracy"]) & m["step"].isin(below)]
        means = wide.groupby(["layer", "measure"])["value"].mean().unstack()
        for layer, row in means.iterrows():
            rows.append({**{k: getattr(run, k) for k in RUN_KEYS}, "run": run.run, "layer": int(layer),
                         "checkpoints_below": len(below), "probe": row.get("probe_accuracy", np.nan),
                         "control": row.get("probe_control_accuracy", np.nan),
                         "selectivity": row.get("probe_accuracy", np.nan) - row.get("probe_control_accuracy", np.nan)})
    return pd.DataFrame(rows, columns=[*RUN_KEYS, "run", "layer", "checkpoints_below", "probe", "control",
                                       "selectivity"])


def claim_c4(probes: pd.DataFrame, selectivity: pd.DataFrame | None = None,
             control_probes: pd.DataFrame | None = None) -> dict:
    """C4 from :func:`probe_table`: runs where the probe beats the model's first-token accuracy and the
    majority rate (plus :data:`~geomcap.claims.c4.PROBE_MARGIN`) at most checkpoints with exact match < 50%; with Hewitt &
    Liang's control task (``selectivity``: :func:`selectivity_table`) and the negative controls' probes
    (``control_probes``: :func:`probe_table` of the controls)."""
    rule = RULE
    if probes.empty or probes["c4_holds"].dropna().empty:
        return claim_row("C4", "no run with a checkpoint below 50%", rule=rule)
    k, n = bool_share(probes["c4_holds"])
    per_task = probe_by_task(probes)
    text = f"{k}/{n} runs (" + ", ".join(f"{r.task} {r.c4_holds}/{r.runs}" for r in per_task.itertuples()) + ")"
    verdict = "reproduced" if k / n >= HOLDS else "partly reproduced" if k / n >= PARTLY else "not reproduced"
    parts = []
    if selectivity is not None and len(selectivity):
        best = selectivity.sort_values("probe").groupby("run").tail(1)
        median = float(best["selectivity"].median())
        parts.append(f"selectivity at the best layer median {median:+.2f} ({len(best)} runs)")
        if median < SELECTIVITY_MARGIN and verdict != "not reproduced":
            verdict = "reproduced, not specific to learning"
    if control_probes is not None and len(control_probes) and control_probes["c4_holds"].notna().any():
        kc, nc = bool_share(control_probes["c4_holds"])
        parts.append(f"holds in {kc}/{nc} controls")
        verdict = specific(k / n, kc / nc, verdict)
    return claim_row("C4", text, k / n, verdict, rule, "; ".join(parts) or "selectivity not recorded")
