"""C7: on Pythia (or the offline stand-in), RankMe precedes the hard benchmark's acquisition and no easy
diagnostic's: the gap table per benchmark and layer, the claim's text, its rule and its verdict.

The stored Pythia runs are read through :mod:`geomcap.analysis.pythia_runs` (torch-free, as everything here); the
revisions a run holds that are copies of others (:mod:`geomcap.analysis.integrity`) are taken out before any event
is timed, and what the public Pythia-2.8B checkpoints leave of the paper's gap is
:mod:`geomcap.analysis.pythia_upstream`'s.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from geomcap import store
from geomcap.analysis.acquisition import plateau_fraction
from geomcap.analysis.collapse import collapse
from geomcap.analysis.difficulty import EASY_MAX_STEP, HARD_MIN_STEP, difficulty_class
from geomcap.analysis.integrity import INTEGRITY_COLUMNS, copies_in_span, integrity_table, left_out_steps, warn_copies
from geomcap.analysis.protocol import ACQUISITION_PATIENCE, ACQUISITION_THRESHOLD
from geomcap.analysis.pythia_runs import model_runs, select_metrics
from geomcap.analysis.pythia_upstream import paper_span, paper_span_text
from geomcap.analysis.runs import load_metrics
from geomcap.analysis.selection import check_layers
from geomcap.analysis.series import chance_corrected, layer_matrix, tidy_series
from geomcap.analysis.transition import precursor
from geomcap.claims.verdicts import bool_share, claim_row
from geomcap.config import DEFAULT_LEVEL_STEPS

#: the claim this module decides
CLAIM = "C7"
#: its verdict rule, in words, from the thresholds it uses (:data:`~geomcap.claims.table.RULES` collects every claim's)
RULE = ("reproduced: the hard benchmark is acquired with a precursor (final layer) and no easy benchmark "
        "has one; partly: the hard one has a precursor but some easy ones do too; not reproduced: the hard "
        "one is acquired without a precursor; not testable: no Pythia run, the hard benchmark is never "
        "acquired, or its gap is refused (measured across revisions that hold another revision's weights)")

#: the step budget the protocol's difficulty cut-offs (:data:`~geomcap.analysis.difficulty.EASY_MAX_STEP`,
#: :data:`~geomcap.analysis.difficulty.HARD_MIN_STEP`) were set against: the grid's longest, its hard levels'
REFERENCE_STEPS = DEFAULT_LEVEL_STEPS["hard"]


def revision_cutoffs(training_steps) -> tuple:
    """The difficulty cut-offs for a model trained ``training_steps`` steps (a number, or a Series per row),
    in its revision steps: the protocol's (:data:`~geomcap.analysis.difficulty.EASY_MAX_STEP`,
    :data:`~geomcap.analysis.difficulty.HARD_MIN_STEP`) at the same share of its training as on the grid's longest runs
    (:data:`~geomcap.claims.c7.REFERENCE_STEPS`). The stand-in (8,000 steps) reads exactly the grid's 300 and 500; Pythia
    (143,000 steps) 5,362.5 and 8,937.5. Returns ``(easy_max_step, hard_min_step)``."""
    share = training_steps / REFERENCE_STEPS
    return EASY_MAX_STEP * share, HARD_MIN_STEP * share


def run_integrity(run) -> pd.DataFrame:
    """The :func:`~geomcap.analysis.integrity.integrity_table` of one run (a row of a runs table) from the
    digests it recorded (``digests.json`` in its ``path``); empty when it has no path or recorded none."""
    path = getattr(run, "path", None)
    digests = store.read_digests(path) if isinstance(path, (str, os.PathLike)) and str(path) else {}
    return integrity_table(digests) if digests else pd.DataFrame(columns=INTEGRITY_COLUMNS)


def gap_table(runs: pd.DataFrame, metrics: pd.DataFrame, layers="final", measure: str = "rankme",
              threshold: float = ACQUISITION_THRESHOLD, patience: int = ACQUISITION_PATIENCE) -> pd.DataFrame:
    """Per benchmark and layer: acquisition, ``measure``'s transition and the precursor gap.

    Acquisition: chance-corrected accuracy ``(acc - chance) / (1 - chance) >
    threshold`` at ``patience`` consecutive revisions
    (:func:`geomcap.events.acquisition_step`); transition: where the series
    leaves its early course, read from step 0 (the paper's reading,
    :func:`geomcap.events.transition_step`);
    gap = acquisition - transition (:func:`geomcap.events.precursor`), also in
    tokens (x the run's tokens per step) and as a fraction of the last step.
    ``floor_step``: the step of the final layer's minimum after initialisation
    (:func:`geomcap.events.collapse`); ``plateau_fraction``: the share of the steps before acquisition (of
    the record when never acquired) at which the chance-corrected accuracy sat at chance
    (:func:`geomcap.events.plateau_fraction`); ``data_class`` (final layer): the project's difficulty from
    behaviour alone (:func:`geomcap.results.difficulty_class`), with its step cut-offs read in the model's
    revision steps (:func:`geomcap.results.revision_cutoffs` of the run's ``steps``, its training length);
    ``standin``: the run is the offline stand-in, not Pythia.

    Revision integrity, before any event is timed: the revisions whose weights an earlier revision holds
    (:func:`geomcap.analysis.integrity.integrity_table` of the run's recorded digests) are left out
    (``left_out``: how many), and a gap measured across a revision that is not step-specific is refused
    (``gap_refused``: the revisions it spans; the gap, its tokens and fraction and ``is_precursor`` are then
    empty). One :class:`~geomcap.analysis.integrity.CopiedRevisionsWarning` per model names the copies.

    ``runs``: one row per benchmark (``run``, ``model``, ``task``, ``level``, ``chance``, ``tokens_per_step``;
    ``steps``, ``standin`` and ``path`` when stored); ``metrics``: their tidy metrics with a ``run`` column.
    """
    rows, copies = [], {}
    for run in runs.itertuples():
        integrity = run_integrity(run)
        if len(integrity):
            copies.setdefault(run.model, integrity)
        m = metrics[(metrics["run"] == run.run) & ~metrics["step"].isin(left_out_steps(integrity))]
        steps, acc = tidy_series(m, "accuracy")
        corrected = chance_corrected(acc, run.chance)
        r_layers, r_steps, values = layer_matrix(m, measure)
        if not np.array_equal(r_steps, steps):
            raise ValueError(f"run {run.run}: {measure} and accuracy recorded at different revisions")
        final = int(r_layers[-1])
        floor = collapse(steps, values[-1]) if len(steps) >= 2 else None
        training = getattr(run, "steps", None)
        for layer in check_layers(layers, r_layers):
            p = precursor(steps, values[list(r_layers).index(layer)], corrected, threshold=threshold,
                          patience=patience)
            refused = copies_in_span(integrity, p.measure_step, p.acquisition_step) if p.gap_steps is not None \
                else []
            gap = None if refused else p.gap_steps
            rows.append({
                "model": run.model, "benchmark": run.task, "level": run.level, "chance": run.chance,
                "revisions": len(steps), "last_step": int(steps[-1]), "final_accuracy": float(acc[-1]),
                "best_accuracy": float(np.max(acc)), "acquisition_step": p.acquisition_step,
                "layer": layer, "final_layer": layer == final, "transition_step": p.measure_step,
                "gap_steps": gap, "gap_checkpoints": None if refused else p.gap_checkpoints,
                "gap_tokens": None if gap is None else gap * int(run.tokens_per_step),
                "gap_fraction": None if gap is None else gap / int(steps[-1]),
                "is_precursor": None if refused else p.is_precursor,
                "gap_refused": ", ".join(refused) or None, "left_out": len(left_out_steps(integrity)),
                "floor_step": floor.floor_step if floor else None,
                "plateau_fraction": plateau_fraction(steps, corrected, until=p.acquisition_step),
                # a run's training length; the last revision stored when the runs table does not say
                "training_steps": int(steps[-1]) if training is None or pd.isna(training) else int(training),
                "standin": isinstance(getattr(run, "standin", None), dict)})
    for model, integrity in copies.items():
        warn_copies(integrity, model)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    easy_max, hard_min = revision_cutoffs(table["training_steps"])
    table["data_class"] = difficulty_class(table, easy_max_step=easy_max, hard_min_step=hard_min).where(
        table["final_layer"])
    table = table.drop(columns="training_steps")
    for column in ("acquisition_step", "transition_step", "gap_steps", "gap_checkpoints", "gap_tokens",
                   "floor_step"):
        table[column] = table[column].astype("Int64")
    return table


def c7_verdict(table: pd.DataFrame | None = None) -> dict:
    """C7's verdict (its rule: :data:`~geomcap.claims.table.RULES`) from a gap table (:func:`gap_table`:
    one row per benchmark and layer, with ``level``, ``final_layer``, ``acquisition_step``, ``is_precursor``,
    ``gap_checkpoints``), as a claim row whose text counts the hard benchmark's precursors and the easy ones';
    :func:`claim_c7` words it per benchmark."""
    if table is None or table.empty:
        return claim_row("C7", "no Pythia run", rule=RULE)
    final = table[table["final_layer"].astype(bool)]
    hard, easy = final[final["level"] == "hard"], final[final["level"] != "hard"]
    acquired = hard[hard["acquisition_step"].notna()]
    easy_k, easy_n = bool_share(easy.loc[easy["acquisition_step"].notna(), "is_precursor"])
    if acquired.empty:
        return claim_row("C7", f"hard benchmark never acquired; easy precursors {easy_k}/{easy_n}", rule=RULE)
    acquired = acquired[acquired["is_precursor"].notna()]  # a refused gap (across copied revisions) is not read
    if acquired.empty:
        return claim_row("C7", f"hard benchmark's gap refused (measured across revisions that hold another "
                               f"revision's weights); easy precursors {easy_k}/{easy_n}", rule=RULE)
    k, n = bool_share(acquired["is_precursor"])
    gap = pd.to_numeric(acquired["gap_checkpoints"], errors="coerce").median()
    text = f"hard: precursor {k}/{n} (median gap {gap:.0f} checkpoints); easy precursors {easy_k}/{easy_n}"
    verdict = ("reproduced" if k == n and easy_k == 0 else "partly reproduced" if k > 0 else "not reproduced")
    return claim_row("C7", text, float(k / n), verdict, RULE)


def claim_c7(table: pd.DataFrame | None = None, public: str | None = None) -> dict:
    """The C7 row of the claims table from a :func:`gap_table` (None: no Pythia run): who was measured, with
    the verdict on it ("on the stand-in (NOT Pythia): <verdict>: ..." or "on <model>: <verdict>: ..."), each
    hard benchmark's gap at the final layer (or why there is none: never acquired, or refused because it is
    measured across copied revisions), and how many easy benchmarks show a precursor; for the stand-in, then
    "on Pythia: not testable here (hub unreachable)" and ``public``, what the public checkpoints leave of the
    paper's gap (:func:`geomcap.analysis.pythia_upstream.paper_span_text`). The verdict is the measured
    model's (:func:`c7_verdict`); the value is the hard gap in steps (NaN when undefined or refused)."""
    if table is None:
        return c7_verdict(None)
    final = table[table["final_layer"]] if len(table) else table
    if final.empty:
        return claim_row("C7", "no benchmark selected")
    model = final["model"].iloc[0]
    standin = bool(final["standin"].iloc[0]) if "standin" in final else False
    judged = c7_verdict(table)
    who = "the stand-in (NOT Pythia)" if standin else model
    hard = final[final["level"] == "hard"]
    easy = final[final["level"] == "easy"]
    parts, value = [f"on {who}: {judged['verdict']}:"], float("nan")
    for row in hard.itertuples():
        refused = getattr(row, "gap_refused", None)
        if pd.isna(row.acquisition_step):
            parts.append(f"{row.benchmark} never acquired (best accuracy {row.best_accuracy:.2f}, "
                         f"chance {row.chance:.2f}), so no gap;")
        elif isinstance(refused, str) and refused:
            names = refused.split(", ")
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            parts.append(f"{row.benchmark} acquired at step {row.acquisition_step}, gap from RankMe's transition at "
                         f"step {row.transition_step} refused: it spans revisions that hold another revision's "
                         f"weights ({shown});")
        else:
            parts.append(f"{row.benchmark} gap {row.gap_steps} steps ({row.gap_fraction:.0%} of training);")
            value = float(row.gap_steps)
    k, n = bool_share(easy.loc[easy["acquisition_step"].notna(), "is_precursor"])
    parts.append(f"easy benchmarks with a RankMe precursor: {k}/{n} acquired ({len(easy)} selected)")
    ours = " ".join(parts)
    if standin:
        ours += "; on Pythia: not testable here (hub unreachable)" + (f"; {public}" if public else "")
    return claim_row("C7", ours, value, judged["verdict"], judged["rule"])


def c7_from_store(model: str = "standin", root="") -> dict:
    """The C7 row (:func:`claim_c7`) from the stored metrics of ``model`` at every stored revision, final
    layer (``root`` "" as in :func:`geomcap.pythia.section_root`: the committed stand-in's by
    default), with what the public Pythia-2.8B checkpoints leave of the paper's gap
    (:func:`geomcap.analysis.pythia_upstream.paper_span`). Reads only."""
    runs = model_runs(model, "all", root)
    public = paper_span_text(paper_span())
    return claim_c7(gap_table(runs, select_metrics(load_metrics(runs), "all")), public)
