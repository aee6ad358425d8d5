"""A step read at a checkpoint carries the spacing of the checkpoints there (geomcap.analysis.resolution)."""
import numpy as np
import pandas as pd

from geomcap.analysis.resolution import (
    checkpoint_spacing, column_steps_text, run_checkpoints, step_range, steps_text, with_step_ranges)

#: the grokking runs' schedule: every step to 128, then every 50 steps
GROKKING = np.r_[np.arange(129), np.arange(178, 30001, 50)]


def test_spacing_is_the_distance_to_the_checkpoint_before():
    assert checkpoint_spacing(GROKKING, 178) == 50  # memorised "at 178": anywhere in steps 129-178
    assert checkpoint_spacing(GROKKING, 57) == 1  # the dense start: exact
    assert checkpoint_spacing(GROKKING, 0) == 0
    assert checkpoint_spacing(GROKKING, 150.5) == 50  # between checkpoints: the two around it
    assert checkpoint_spacing([40, 0, 10, 10, 20], 40) == 20  # any order, repeats (a tidy step column)
    assert checkpoint_spacing(GROKKING, None) is None and checkpoint_spacing(GROKKING, np.nan) is None
    assert checkpoint_spacing(GROKKING, pd.NA) is None and checkpoint_spacing(GROKKING, 10 ** 6) is None


def test_a_step_is_written_as_the_steps_it_can_be():
    assert step_range(GROKKING, 178) == "129\u2013178"
    assert step_range(GROKKING, 4078) == "4,029\u20134,078"
    assert step_range(GROKKING, 57) == "57"
    assert step_range(GROKKING, np.nan) == "\u2013"


def test_prose_states_the_spacing_once():
    assert steps_text(GROKKING, [178, 178, 178]) == \
        "178, 178 and 178 (each in steps 129\u2013178: checkpoints are 50 steps apart there)"
    assert steps_text(GROKKING, [9828, 6778]) == "9,828 and 6,778 (each to within the 50 steps since the checkpoint before)"
    assert steps_text(GROKKING, [12, 40]) == "12 and 40 (checkpoints one step apart there: exact)"
    assert steps_text(GROKKING, [12, 4078]) == \
        "12 and 4,078 (in steps 12, 4,029\u20134,078: checkpoints are 50 steps apart there)"
    assert steps_text(GROKKING, []) == "no step"


def test_a_tables_step_columns_take_each_runs_own_checkpoints():
    metrics = pd.concat([
        pd.DataFrame({"run": "a", "step": GROKKING, "measure": "accuracy", "layer": -1, "value": 0.0}),
        pd.DataFrame({"run": "b", "step": np.arange(0, 1001, 10), "measure": "accuracy", "layer": -1, "value": 0.0}),
        pd.DataFrame({"run": "b", "step": np.arange(0, 1001, 100), "measure": "llc", "layer": -1, "value": 0.0}),
    ])
    table = pd.DataFrame({"run": ["a", "b"], "acquisition_step": pd.array([178, 500], dtype="Int64"),
                          "llc_transition_step": pd.array([None, 500], dtype="Int64"), "seed": [0, 1]})
    shown = with_step_ranges(table, metrics, {"acquisition_step": None, "llc_transition_step": "llc"})
    assert list(shown["acquisition_step"]) == ["129\u2013178", "491\u2013500"]
    assert list(shown["llc_transition_step"]) == ["\u2013", "401\u2013500"]  # the LLC's sparser schedule
    assert list(shown["seed"]) == [0, 1] and list(table["acquisition_step"]) == [178, 500]  # a copy
    by_series = pd.DataFrame({"run": ["b", "b"], "series": ["accuracy", "llc"], "transition_step": [500, 500]})
    assert list(with_step_ranges(by_series, metrics, ["transition_step"], by="series")["transition_step"]) == \
        ["491\u2013500", "401\u2013500"]
    assert list(run_checkpoints(metrics, "b", "llc")) == list(range(0, 1001, 100))
    assert column_steps_text(table, metrics, "llc_transition_step", "llc") == \
        "500 (in steps 401\u2013500: checkpoints are 100 steps apart there)"
