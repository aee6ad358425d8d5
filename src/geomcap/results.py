"""Across runs: load a run store into tables, one row per run, for the notebooks (the names of
:mod:`geomcap.analysis` and :mod:`geomcap.claims`, importable from here as before).

    from geomcap import results
    runs = results.load_runs()                            # the committed runs, one row per complete run
    table = results.summary_table(runs)                   # events of every run (acquisition, floor, ...)
    metrics = results.load_metrics(runs, measures=["accuracy", "rankme"])   # tidy, with run columns
    results.verdict_table(results.claims_from_store())    # claim | paper | ours | control | verdict | rule

The analysis protocol's rules across runs: difficulty from behaviour (:func:`difficulty_class`), both
readings of "precursor" (:func:`precursor_table`, :func:`timing_prediction`), intervals over settings
(:func:`setting_bootstrap`), C4's baselines and control task (:func:`probe_table`, :func:`selectivity_table`),
the negative controls (:func:`load_arms`), and one verdict per claim (``claim_c1`` .. ``claim_c8``), each with
the rule that chose it (:data:`~geomcap.claims.table.RULES`). Each is defined in one module of :mod:`geomcap.analysis` (reading the
store) or :mod:`geomcap.claims` (one module per claim); the paper's figures come from :mod:`geomcap.paper`.
Nothing imported here imports torch, the training loop or the sweep (:func:`section_grid`, which builds a
notebook's training configs, imports the sweep when it is called: :mod:`geomcap.sections`).
"""

from __future__ import annotations

from geomcap.analysis.protocol import (
    READINGS, RECOVERY_FRACTION, RUN_KEYS, SETTING_KEYS)
from geomcap.analysis.runs import (
    CONTROLS, is_shuffled_control, load_arms, load_metrics, load_runs, one_run_per_setting, reruns_of, run_index)
from geomcap.analysis.selection import (
    check_positive_int, section_stores)
from geomcap.sections import (
    CONTROL_STORES, section_controls, section_grid, section_runs)
from geomcap.analysis.acquisition import (
    chance_for, majority_first_token_for, run_chance, run_majority_rate, run_test_size, subsampled_acquisition)
from geomcap.analysis.table import (
    summary_cache, summary_row, summary_table)
from geomcap.analysis.difficulty import (
    ACQUIRED_SHARE_GOAL, DIFFICULTY_CLASSES, EASY_MAX_STEP, HARD_MIN_PLATEAU, HARD_MIN_STEP, HARD_TASKS_GOAL,
    difficulty_class, grid_goals, level_table, not_acquired_table)
from geomcap.analysis.intervals import (
    rate_interval, rate_text, setting_bootstrap, timing_text)
from geomcap.analysis.costs import (
    COSTLY_HEALTH_COLUMNS, SUBSET_SCORING_COLUMNS, costly_health_table, costly_resolution_text, geometry_share_text,
    cpu_hours_table, measuring_cost_table, subset_scoring_summary, subset_scoring_table)
from geomcap.analysis.sensitivity import (
    RANKME_VARIANTS, sensitivity_table, setting_by_task, setting_claims, setting_runs, setting_table,
    training_setting)
from geomcap.analysis.memorisation import (
    memorisation_table, memorisation_texts)
from geomcap.analysis.twins import (
    twin_shift_correlation, twin_spread, twin_table, twins_text)
from geomcap.analysis.forecast import (
    FIGURE_SIGNALS, FORECAST_HORIZONS, SENSITIVITY_SCALES, VERDICT_HORIZON, alarm_note, alarm_precision,
    alarm_precision_record, false_alarm_table, forecast_runs, forecast_table, random_recall_curve, ratio_interval,
    band_sensitivity, rescaled, run_forecast, signal_alarm_steps, signal_name, twin_alarm_table)
from geomcap.analysis.precision import (
    PRECISION_STATISTICS, exchangeable_inside_probability, precision_check, precision_runs)
from geomcap.analysis.display import (
    book_table)
from geomcap.claims.verdicts import (
    CONTROL_MARGIN, HOLDS, MIN_RUNS, PARTLY, RATE_HIGH, RATE_LOW, VERDICTS, claim_row, matched)
from geomcap.claims.c1 import (
    claim_c1, collapse_recovers)
from geomcap.claims.c2 import (
    FLOOR_TOLERANCE, LEAVE_ONE_OUT_COLUMNS, claim_c2, collapse_table, control_leave_one_out, leave_one_out_text)
from geomcap.claims.c3 import (
    TOP_DOWN_SERIES, claim_c3, top_down_by_series, top_down_share, top_down_table)
from geomcap.claims.c4 import (
    PROBE_MARGIN, SELECTIVITY_MARGIN, claim_c4, probe_by_task, probe_table, selectivity_table)
from geomcap.claims.c5 import (
    BASELINES, C5_MEASURES, claim_c5, forecast_reading, group_count, precursor_table, timing_prediction)
from geomcap.claims.c6 import (
    COLLAPSE_READINGS, MARGIN_COLUMNS, acquired_during_collapse, claim_c6, collapse_readings, regime_margins,
    regime_margins_text, reread_ties_text, rerun_config, resolve_ties, tied)
from geomcap.claims.c7 import (
    REFERENCE_STEPS, c7_from_store, c7_verdict, claim_c7, gap_table, revision_cutoffs)
from geomcap.claims.c8 import (
    CROSS_TASK_COLUMNS, MIN_SIZE_RATIO, RHO_PARTLY, check_one_run_per_key, claim_c8, cross_task_correlation,
    own_task_rank, proxy_pairs, proxy_preset, size_ratio, timing_concordance, trajectory_correlation)
from geomcap.claims.scale import (
    C6_TREND_COLUMNS, CONTRAST_COLUMNS, FLOOR_COLUMNS, GAP_COLUMNS, PAPER_LARGEST, RECOVERY_COLUMNS, SCALE_COLUMNS,
    SCALE_GAPS, SCALE_STATISTICS, TREND_COLUMNS, against_controls, block_parameters, c1_recovery_thresholds,
    c2_floors_by_level, c6_regime_trend, claims_by_size, missing_points, size_ratios, size_trends, size_trends_text)
from geomcap.claims.table import (
    EFFECT_COLUMNS, RERUN_STORE, RULES, SCALE_STORES, analyse_claims, read_ties_again, regime_metrics, claim_effects, claim_rows, claims_from_analysis,
    claims_from_store, findings_markdown, proxy_analysis, proxy_arms, proxy_claim, glue_values, paper_vs_ours, task_claims_from_store, verdict_table)

__all__ = [
    "RUN_KEYS", "load_runs", "one_run_per_setting", "load_metrics", "run_index", "geometry_share_text", "measuring_cost_table",
    "cpu_hours_table",
    "SUBSET_SCORING_COLUMNS", "subset_scoring_table", "subset_scoring_summary", "run_test_size", "subsampled_acquisition",
    "COSTLY_HEALTH_COLUMNS", "costly_health_table", "costly_resolution_text", "summary_row", "chance_for",
    "majority_first_token_for", "run_chance", "run_majority_rate", "summary_cache", "summary_table",
    "check_positive_int", "RANKME_VARIANTS", "section_grid", "section_stores",
    "section_runs", "section_controls", "CONTROL_STORES", "is_shuffled_control", "SCALE_STORES", "proxy_analysis",
    "proxy_arms", "proxy_claim", "sensitivity_table", "training_setting", "setting_runs", "setting_table",
    "setting_claims", "setting_by_task", "collapse_table", "not_acquired_table", "top_down_table",
    "TOP_DOWN_SERIES", "top_down_by_series", "PROBE_MARGIN", "probe_table", "probe_by_task", "C5_MEASURES",
    "BASELINES", "READINGS", "RECOVERY_FRACTION", "SETTING_KEYS", "HARD_MIN_STEP", "HARD_MIN_PLATEAU", "EASY_MAX_STEP",
    "DIFFICULTY_CLASSES", "difficulty_class", "ACQUIRED_SHARE_GOAL", "HARD_TASKS_GOAL", "level_table",
    "grid_goals", "setting_bootstrap", "rate_interval", "rate_text", "timing_text", "precursor_table",
    "group_count", "timing_prediction", "memorisation_table", "memorisation_texts", "check_one_run_per_key",
    "proxy_pairs", "proxy_preset", "cross_task_correlation", "CROSS_TASK_COLUMNS", "own_task_rank", "trajectory_correlation",
    "timing_concordance", "twin_table", "twin_spread",
    "twin_shift_correlation", "twins_text", "VERDICTS", "HOLDS", "PARTLY", "RATE_HIGH", "RATE_LOW", "FLOOR_TOLERANCE",
    "MIN_RUNS", "RHO_PARTLY", "CONTROL_MARGIN", "MIN_SIZE_RATIO", "SELECTIVITY_MARGIN", "RULES", "claim_row",
    "matched", "collapse_recovers", "claim_c1", "claim_c2", "control_leave_one_out", "leave_one_out_text",
    "LEAVE_ONE_OUT_COLUMNS", "top_down_share", "claim_c3", "selectivity_table",
    "claim_c4", "claim_c5", "acquired_during_collapse", "COLLAPSE_READINGS",
    "collapse_readings", "MARGIN_COLUMNS", "regime_margins", "regime_margins_text", "tied", "resolve_ties",
    "read_ties_again", "regime_metrics", "RERUN_STORE", "reruns_of", "rerun_config", "reread_ties_text", "claim_c6", "claim_c7", "claim_c8", "paper_vs_ours",
    "glue_values", "verdict_table", "findings_markdown", "size_ratio", "CONTROLS", "load_arms",
    "analyse_claims", "claims_from_analysis", "task_claims_from_store", "EFFECT_COLUMNS", "claim_effects",
    "book_table", "claim_rows", "claims_from_store", "c7_from_store", "revision_cutoffs", "REFERENCE_STEPS",
    "c7_verdict", "gap_table",
    "forecast_runs", "forecast_table", "false_alarm_table", "twin_alarm_table", "ratio_interval", "run_forecast",
    "signal_alarm_steps", "signal_name", "alarm_precision_record", "alarm_precision", "alarm_note",
    "forecast_reading", "precision_runs", "precision_check", "exchangeable_inside_probability", "PRECISION_STATISTICS",
    "FIGURE_SIGNALS", "FORECAST_HORIZONS", "SENSITIVITY_SCALES", "VERDICT_HORIZON", "random_recall_curve",
    "rescaled", "band_sensitivity", "SCALE_COLUMNS", "SCALE_STATISTICS", "claims_by_size", "size_ratios",
    "C6_TREND_COLUMNS", "PAPER_LARGEST", "block_parameters", "c6_regime_trend", "CONTRAST_COLUMNS",
    "against_controls", "TREND_COLUMNS", "size_trends", "size_trends_text", "FLOOR_COLUMNS", "c2_floors_by_level",
    "RECOVERY_COLUMNS", "c1_recovery_thresholds",
    "SCALE_GAPS", "GAP_COLUMNS", "missing_points",
]

