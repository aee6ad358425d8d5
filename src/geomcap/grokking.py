"""Grokking, read by the protocol: Nanda et al. (2023)'s setting trained by geomcap, its phases and its leads.

Nanda, Chan, Lieberum, Smith and Steinhardt (2023) trained a one-layer transformer on ``a + b mod 113``
with 30% of the pairs, full batch, AdamW (lr 1e-3, weight decay 1) and report three phases: memorisation
(to ~1.4k steps), circuit formation (1.4k-9.4k), cleanup (9.4k-14k, where the test loss falls).
:data:`~geomcap.grokking.NANDA_PHASES` holds their figures, cited as theirs. The runs are geomcap's own
(``scripts/grokking_grid.sh``; the model preset ``grok-1l``, the task ``mod`` with one token per number);
this module reads them: :func:`phase_table` (when each run memorised and generalised, beside Nanda et al.'s
phases) and :func:`lead_table` (which series moved before the test accuracy jumped, by the protocol's
informative reading, :func:`geomcap.events.summarize_run`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pathlib import Path

from geomcap import events, store

#: Nanda et al. (2023)'s phase boundaries for this setting, in steps (their figures)
NANDA_PHASES = {"memorisation_end": 1_400, "circuit_formation_end": 9_400, "cleanup_end": 14_000}
#: a run has memorised once its training accuracy reaches this
MEMORISED = 0.9
#: the series whose leads over the test accuracy's jump the grokking section reports, in its order
LEAD_SERIES = ("rankme", "llc", "param_norm", "test_loss", "train_accuracy")


#: the setting's defaults (Nanda et al.'s): modulus, share of the pairs for training, weight decay, step budget
DEFAULTS = {"p": 113, "train_fraction": 0.3, "weight_decay": 1.0, "steps": 30_000}


def config(seed: int = 0, p: int = DEFAULTS["p"], train_fraction: float = DEFAULTS["train_fraction"],
           weight_decay: float = DEFAULTS["weight_decay"], steps: int = DEFAULTS["steps"], llc: bool = False):
    """The :class:`geomcap.train.TrainConfig` of one grokking run, as ``scripts/grokking_grid.sh`` trains it:
    ``a b =`` with one token per number mod ``p``, ``train_fraction`` of the pairs for training, the
    ``grok-1l`` model, full batch, AdamW (lr 1e-3, betas 0.9/0.98, ``weight_decay``), 10 warmup steps then a
    constant rate, no gradient clipping; a checkpoint at every step to 128, then every 50 steps of a
    30,000-step budget; the whole training set evaluated at each; a stop a quarter of the acquisition step
    after it. ``llc``: also the LLC (with its health) at every second checkpoint, as seed 0's run."""
    from geomcap.train import TrainConfig  # training's config: imported only by who builds a run

    return TrainConfig(task="mod", level="hard", size="grok-1l", seed=seed, steps=steps,
                       task_params={"p": p, "train_fraction": train_fraction, "number_tokens": True},
                       full_batch=True, schedule="constant", warmup_steps=10, weight_decay=weight_decay,
                       beta1=0.9, beta2=0.98, lr=1e-3, grad_clip=None, n_linear_checkpoints=steps // 50,
                       train_eval_size=100_000, stop_margin=0.25,
                       **({"measures": ("llc",), "costly_every": 2} if llc else {}))


#: the committed grokking runs' store, beside data/runs
STORE = "grokking"


def stores(root="", recompute: bool = False) -> list[Path]:
    """The run stores the grokking section reads: ``root``, or ("") the committed data/grokking followed,
    with ``recompute``, by the user store (where a recompute trains: never into the committed data)."""
    if root:
        return [Path(root)]
    return [store.committed_data(STORE)] + ([store.user_root()] if recompute else [])


def wanted_configs(seeds, p: int = DEFAULTS["p"], train_fraction: float = DEFAULTS["train_fraction"],
                   weight_decay: float = DEFAULTS["weight_decay"], steps: int = DEFAULTS["steps"]) -> dict:
    """seed -> the configs that count as that seed's run: the plain one and the one that also records the
    LLC (measuring changes no training, so either is the run)."""
    return {seed: [config(seed, p, train_fraction, weight_decay, steps, llc=llc) for llc in (False, True)]
            for seed in seeds}


def select_runs(wanted: dict, roots) -> "pd.DataFrame":
    """The complete runs of ``roots`` that are one of ``wanted``'s configs (:func:`wanted_configs`), one per
    seed (the one with the LLC when both exist), as :func:`geomcap.results.load_runs` rows."""
    from geomcap import results

    hashes = {store.config_hash(c.to_dict()): seed for seed, configs in wanted.items() for c in configs}
    tables = [results.load_runs(Path(r)) for r in roots if Path(r).exists()]
    runs = pd.concat([t for t in tables if not t.empty], ignore_index=True) if any(len(t) for t in tables) else None
    if runs is None:
        return pd.DataFrame(columns=["run", "seed", "path"])
    runs = runs[runs["run"].isin(hashes)].drop_duplicates("run")
    return results.one_run_per_setting(runs).sort_values("seed").reset_index(drop=True)


def memorisation_step(steps, train_accuracy, level: float = MEMORISED) -> int | None:
    """The first checkpoint at which the training accuracy reaches ``level`` (None if it never does).
    steps (n,) ints; train_accuracy (n,) in [0, 1], NaN ignored."""
    s, acc = np.asarray(steps), np.asarray(train_accuracy, dtype=float)
    hit = np.flatnonzero(np.nan_to_num(acc, nan=-1.0) >= level)
    return int(s[hit[0]]) if hit.size else None


def phase_table(summary: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """Per run: ``memorised_step`` (train accuracy >= :data:`~geomcap.grokking.MEMORISED`), ``acquisition_step`` (the test
    accuracy's, by the protocol's rule), ``generalisation_delay`` (acquisition / memorisation, steps over
    steps), ``test_loss_transition`` (its informative-reading transition), and the final accuracies.
    ``summary``: :func:`geomcap.results.summary_table` rows (``run``, ``seed``, ...); ``metrics``: tidy with
    a ``run`` column."""
    rows = []
    for row in summary.itertuples():
        m = metrics[metrics["run"] == row.run]
        steps, train = events.tidy_series(m, "train_accuracy")
        memorised = memorisation_step(steps, train)
        acq = None if pd.isna(row.acquisition_step) else int(row.acquisition_step)
        rows.append({"seed": row.seed, "run": row.run, "memorised_step": memorised, "acquisition_step": acq,
                     "generalisation_delay": acq / memorised if acq and memorised else np.nan,
                     "test_loss_transition": getattr(row, "test_loss_transition_step", None),
                     "final_train_accuracy": float(train[-1]) if train.size else np.nan,
                     "final_accuracy": row.final_accuracy, "last_step": row.last_step})
    table = pd.DataFrame(rows)
    for column in ("memorised_step", "acquisition_step", "test_loss_transition"):
        if column in table:
            table[column] = pd.to_numeric(table[column], errors="coerce").astype("Int64")
    return table


def lead_table(summary: pd.DataFrame, series=LEAD_SERIES) -> pd.DataFrame:
    """Per run and series: the informative reading's transition step, its lead over the test accuracy's
    acquisition in checkpoints and as a share of the acquisition step, whether it is a precursor, whether
    it leads the test loss, and both (``informative``). Series a run did not record are left out."""
    rows = []
    for row in summary.to_dict("records"):
        for name in series:
            if f"{name}_is_precursor" not in row:
                continue
            rows.append({"seed": row["seed"], "run": row["run"], "series": name,
                         "transition_step": row.get(f"{name}_transition_step"),
                         "lead_checkpoints": row.get(f"{name}_gap_checkpoints"),
                         "lead_share": row.get(f"{name}_gap_share"),
                         "precursor": row.get(f"{name}_is_precursor"),
                         "leads_test_loss": row.get(f"{name}_leads_test_loss"),
                         "informative": row.get(f"{name}_informative")})
    table = pd.DataFrame(rows, columns=["seed", "run", "series", "transition_step", "lead_checkpoints",
                                        "lead_share", "precursor", "leads_test_loss", "informative"])
    for column in ("transition_step", "lead_checkpoints"):
        table[column] = pd.to_numeric(table[column], errors="coerce").astype("Int64")
    return table
