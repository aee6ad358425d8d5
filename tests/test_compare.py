"""geomcap.compare: a rerun's metrics against the recorded ones, on the rows both hold."""
import numpy as np
import pandas as pd
import pytest

from geomcap import compare


def metrics(steps=(0, 10, 20, 30, 40), measures=("rankme", "test_loss"), layers=(0, 1)):
    """A synthetic tidy table: per-layer rankme, layer -1 for the losses."""
    rows = []
    for s in steps:
        for m in measures:
            for layer in (layers if m.startswith("rankme") else (-1,)):
                rows.append((s, layer, m, 10.0 + s / 7 + layer + len(m)))
    return pd.DataFrame(rows, columns=["step", "layer", "measure", "value"])


def test_identical_tables():
    a = metrics()
    result = compare.compare_metrics(a, a.copy())
    assert result["identical"] and result["max_rel_diff"] == 0.0 and result["max_rel_diff_at"] is None
    assert result["first_departure_step"] is None and result["first_departure_by_measure"] == {}
    assert (result["shared_rows"], result["only_recorded"], result["only_rerun"]) == (len(a), 0, 0)
    assert compare.format_comparison(result) == f"the {len(a)} shared rows are identical"


def test_one_value_off_at_step_k_is_the_first_departure():
    a = metrics()
    b = a.copy()
    b.loc[(b.step == 10) & (b.measure == "test_loss"), "value"] *= 1 + 1e-7   # round-off: within rtol
    b.loc[(b.step == 30) & (b.layer == 1) & (b.measure == "rankme"), "value"] *= 1.01
    result = compare.compare_metrics(a, b, rtol=1e-4)
    assert not result["identical"]
    assert result["first_departure_step"] == 30
    assert result["first_departure"]["layer"] == 1 and result["first_departure"]["measure"] == "rankme"
    assert result["max_rel_diff"] == pytest.approx(0.01 / 1.01)
    assert result["max_rel_diff_at"] == {"step": 30, "layer": 1, "measure": "rankme"}
    assert result["first_departure_by_measure"] == {"rankme": 30}
    text = compare.format_comparison(result)
    assert "largest relative difference 9.9e-03 (rankme layer 1, step 30)" in text
    assert "first departure beyond 0.0001 at step 30 (rankme layer 1)" in text
    assert text.endswith("first departures: rankme at step 30")
    # a looser tolerance: only the round-off and the 1% remain, and nothing departs beyond 0.1
    assert compare.compare_metrics(a, b, rtol=0.1)["first_departure_step"] is None


def test_only_shared_rows_are_compared_and_the_others_counted():
    """A run trained since param_norm and probe_control_accuracy were added, against an older one."""
    old = metrics(steps=(0, 10, 20, 30))                      # and it stopped earlier
    new = pd.concat([metrics(), metrics(measures=("param_norm", "probe_control_accuracy"), layers=(0,))])
    result = compare.compare_metrics(old, new)
    assert result["identical"] and result["shared_rows"] == len(old)
    assert result["only_recorded"] == 0
    assert result["only_rerun"] == len(new) - len(old)
    assert result["only_rerun_measures"] == ["param_norm", "probe_control_accuracy", "rankme", "test_loss"]
    text = compare.format_comparison(result)
    assert text.startswith(f"the {len(old)} shared rows are identical; {len(new) - len(old)} rows only in the rerun")


def test_nan_equals_nan_and_departs_from_a_number():
    a = metrics(steps=(0, 10))
    a.loc[0, "value"] = np.nan
    assert compare.compare_metrics(a, a.copy())["identical"]
    b = a.copy()
    b.loc[0, "value"] = 1.0
    result = compare.compare_metrics(a, b)
    assert result["max_rel_diff"] == np.inf and result["first_departure_step"] == 0
    np.testing.assert_array_equal(compare.relative_difference([0.0, np.inf, 2.0], [0.0, np.inf, -2.0]), [0, 0, 2])
    with pytest.raises(ValueError, match="rtol must be a number >= 0"):
        compare.compare_metrics(a, b, rtol=-1)
    with pytest.raises(ValueError, match="rerun: no column 'value'"):
        compare.compare_metrics(a, b.drop(columns="value"))
