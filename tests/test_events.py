"""Tests for geomcap.events on synthetic curves with known answers."""

import warnings

import numpy as np
import pandas as pd
import pytest

from geomcap.events import (
    Collapse,
    Precursor,
    TopDown,
    acquisition_step,
    collapse,
    layer_matrix,
    precursor,
    rolling_median,
    tidy_series,
    top_down,
    transition_step,
)


# ---------------------------------------------------------------------------
# acquisition_step
# ---------------------------------------------------------------------------

STEPS10 = np.arange(10) * 10


def test_acquisition_never():
    assert acquisition_step(STEPS10, np.full(10, 0.3)) is None


def test_acquisition_at_first_checkpoint():
    out = acquisition_step(STEPS10, np.full(10, 0.9))
    assert out == 0 and type(out) is int


def test_acquisition_exactly_at_threshold_is_not_above():
    assert acquisition_step(STEPS10, np.full(10, 0.5)) is None
    assert acquisition_step(STEPS10, np.full(10, 0.5), threshold=0.49) == 0


def test_acquisition_run_of_two_then_dip_then_run_of_three():
    acc = np.array([0.1, 0.6, 0.7, 0.2, 0.8, 0.9, 0.95, 0.99, 1.0, 1.0])
    assert acquisition_step(STEPS10, acc, patience=3) == 40
    assert acquisition_step(STEPS10, acc, patience=2) == 10
    assert acquisition_step(STEPS10, acc, patience=1) == 10


def test_acquisition_nan_breaks_run():
    acc = np.array([0.1, 0.9, 0.9, np.nan, 0.9, 0.9, 0.9, 0.1, 0.1, 0.1])
    assert acquisition_step(STEPS10, acc, patience=3) == 40
    assert acquisition_step(STEPS10, acc, patience=4) is None


def test_acquisition_irregular_steps_returns_step():
    steps = np.array([0, 1, 2, 4, 8, 16, 32, 100, 200, 300])
    acc = np.array([0, 0, 0, 0, 0, 0.9, 0.9, 0.9, 1, 1.0])
    assert acquisition_step(steps, acc) == 16


def test_acquisition_float_integer_steps_accepted():
    assert acquisition_step(STEPS10.astype(float), np.full(10, 0.9)) == 0


@pytest.mark.parametrize(
    "steps, acc, kwargs",
    [
        (np.arange(5), np.zeros(4), {}),  # length mismatch
        (np.arange(5), np.zeros(5), {"patience": 0}),
        (np.arange(5), np.zeros(5), {"patience": 1.5}),
        (np.array([0, 1, 1, 2, 3]), np.zeros(5), {}),  # not strictly increasing
        (np.array([0, 2, 1, 3, 4]), np.zeros(5), {}),
        (np.array([0, 0.5, 1, 2, 3]), np.zeros(5), {}),  # non-integer step
        (np.arange(6).reshape(2, 3), np.zeros((2, 3)), {}),  # not 1-D
    ],
)
def test_acquisition_validation(steps, acc, kwargs):
    with pytest.raises(ValueError):
        acquisition_step(steps, acc, **kwargs)


# ---------------------------------------------------------------------------
# collapse
# ---------------------------------------------------------------------------


def v_curve(steps):
    """100 at step 0 -> 10 at step 50 -> 80 at step 100, piecewise linear."""
    return np.interp(steps, [0, 50, 100], [100.0, 10.0, 80.0])


def test_collapse_v_shape():
    steps = np.arange(0, 101, 2)  # grid chosen so no value sits exactly on a level
    c = collapse(steps, v_curve(steps))
    assert isinstance(c, Collapse)
    assert (c.initial_step, c.initial_value) == (0, 100.0)
    assert (c.peak_step, c.peak_value) == (0, 100.0)
    assert (c.floor_step, c.floor_value) == (50, pytest.approx(10.0))
    assert c.drop == pytest.approx(90.0)
    assert c.relative_drop == pytest.approx(0.9)
    assert c.collapsed is True
    # recovery: first step with value >= 10 + 0.5*90 = 55 -> 82 gives 54.8, 84 gives 57.6
    assert c.recovery_step == 84
    # onset: first step staying below 100 - 0.1*90 = 91 -> 4 gives 92.8, 6 gives 89.2
    assert c.onset_step == 6
    for s in (c.initial_step, c.peak_step, c.onset_step, c.floor_step, c.recovery_step):
        assert type(s) is int


def test_collapse_onset_ignores_early_dip_that_bounces_back():
    steps = np.arange(8) * 10
    x = np.array([100, 80, 99, 95, 60, 30, 10, 50.0])
    c = collapse(steps, x)
    # below 91 at step 10, but back above it at 20-30; the final stretch starts at 40
    assert c.onset_step == 40
    assert c.floor_step == 60


def test_collapse_rise_then_fall_then_partial_rebound():
    steps = np.array([0, 10, 20, 30])
    c = collapse(steps, [8.0, 70.0, 20.0, 25.0])
    assert (c.initial_step, c.initial_value) == (0, 8.0)
    assert (c.peak_step, c.peak_value) == (10, 70.0)
    assert (c.floor_step, c.floor_value) == (20, 20.0)
    assert c.drop == pytest.approx(50.0)
    assert c.onset_step == 20
    assert c.recovery_step is None  # needs 45, never gets above 25
    assert c.collapsed is True


def test_collapse_minimum_at_last_checkpoint():
    # fast expansion, then compression to a minimum at the last checkpoint
    steps = np.arange(0, 301, 10)
    x = np.interp(steps, [0, 10, 100, 300], [8.0, 60.0, 70.0, 5.0])
    c = collapse(steps, x)
    assert c.peak_step == 100 and c.floor_step == 300
    assert c.recovery_step is None
    assert c.collapsed is True
    assert 100 < c.onset_step < 300


def test_collapse_gradual_rise_min_vs_drawdown():
    steps = np.arange(0, 401, 10)
    x = np.interp(steps, [0, 100, 300, 400], [8.0, 70.0, 20.0, 25.0])
    c = collapse(steps, x)  # "min": floor on the way up, no drop (documented caveat)
    assert c.floor_step == 10 and c.drop == 0 and c.collapsed is False
    d = collapse(steps, x, floor="drawdown")
    assert (d.peak_step, d.peak_value) == (100, 70.0)
    assert (d.floor_step, d.floor_value) == (300, 20.0)
    assert d.recovery_step is None and d.collapsed is True
    # agrees with "min" on a plain V, and falls back to it when nothing declines
    steps2 = np.arange(0, 101, 2)
    assert collapse(steps2, v_curve(steps2), floor="drawdown") == collapse(steps2, v_curve(steps2))
    assert collapse(steps2, steps2 + 1.0, floor="drawdown").floor_step == 2
    with pytest.raises(ValueError):
        collapse(steps2, v_curve(steps2), floor="max")


def test_collapse_monotone_increasing_is_not_collapsed():
    steps = np.arange(20)
    c = collapse(steps, 1.0 + steps.astype(float))
    assert c.collapsed is False
    assert c.drop == 0.0
    assert c.floor_step == 1  # min over checkpoints after initialisation
    assert c.onset_step is None and c.recovery_step is None


def test_collapse_small_drop_not_collapsed():
    steps = np.arange(5)
    c = collapse(steps, [100, 98, 95, 97, 99.0])
    assert c.relative_drop == pytest.approx(0.05)
    assert c.collapsed is False
    assert collapse(steps, [100, 98, 95, 97, 99.0], min_relative_drop=0.05).collapsed is True


def test_collapse_noisy_v_with_smoothing():
    rng = np.random.default_rng(0)
    steps = np.arange(0, 1001, 10)
    clean = np.interp(steps, [0, 500, 1000], [100.0, 10.0, 80.0])
    noisy = clean + rng.normal(0, 2.0, steps.size)
    c = collapse(steps, noisy, smooth=5)
    assert abs(c.floor_step - 500) <= 3 * 10
    assert c.collapsed
    assert c.recovery_step is not None and c.recovery_step > c.floor_step


def test_collapse_nan_ignored_and_steps_from_original():
    steps = np.arange(0, 101, 2)
    x = v_curve(steps)
    x[[3, 10, 25, 40]] = np.nan  # step 50 (index 25) is the true floor
    c = collapse(steps, x)
    assert c.floor_step == 48 or c.floor_step == 52
    assert c.floor_value == pytest.approx(10 + 1.4 * 2)
    assert c.initial_step == 0
    # NaN at initialisation: the first finite checkpoint is the initial one
    x[0] = np.nan
    assert collapse(steps, x).initial_step == 2


def test_collapse_errors():
    with pytest.raises(ValueError, match="at least 2 finite"):
        collapse(np.arange(4), np.full(4, np.nan))
    with pytest.raises(ValueError, match="at least 2 finite"):
        collapse(np.arange(4), [1.0, np.nan, np.nan, np.nan])
    with pytest.raises(ValueError, match="odd"):
        collapse(np.arange(4), np.arange(4.0), smooth=4)
    with pytest.raises(ValueError):
        collapse(np.arange(4), np.arange(4.0), onset_fraction=1.5)


def test_rolling_median_centred_shrinking():
    x = np.array([5.0, 0, 0, 100, 0, 0, 7])
    out = rolling_median(x, 5)
    assert out[0] == 5.0 and out[-1] == 7.0  # endpoints keep raw values
    assert out[3] == 0.0  # spike removed
    assert out[1] == 0.0  # window of 3 at index 1
    np.testing.assert_array_equal(rolling_median(x, 1), x)


# ---------------------------------------------------------------------------
# transition_step
# ---------------------------------------------------------------------------


def sigmoid(steps, mid, width):
    return 1.0 / (1.0 + np.exp(-(steps - mid) / width))


def test_transition_step_function():
    steps = np.arange(0, 1001, 10)
    x = (steps >= 500).astype(float)
    assert transition_step(steps, x) == 500


def test_transition_sigmoid_midpoint():
    steps = np.arange(0, 1001, 10)
    assert transition_step(steps, sigmoid(steps, 505, 30)) == 510
    assert transition_step(steps, 3.0 + 7.0 * sigmoid(steps, 505, 30)) == 510  # scale-free


def test_transition_decreasing_same_as_increasing():
    steps = np.arange(0, 1001, 10)
    up = sigmoid(steps, 305, 40)
    assert transition_step(steps, up) == transition_step(steps, 50.0 - 20.0 * up) == 310


def test_transition_fraction():
    steps = np.arange(11)
    x = np.arange(11.0)  # excursion 10
    assert transition_step(steps, x, fraction=0.25) == 3
    assert transition_step(steps, x, fraction=1.0) == 10


def test_transition_constant_or_nan_is_none():
    steps = np.arange(10)
    assert transition_step(steps, np.full(10, 3.0)) is None
    assert transition_step(steps, np.full(10, np.nan)) is None
    assert transition_step(steps, [1.0] + [np.nan] * 9) is None


# ---------------------------------------------------------------------------
# precursor
# ---------------------------------------------------------------------------

STEPS_P = np.arange(0, 1001, 10)


def test_precursor_leads():
    measure = np.where(STEPS_P >= 100, 2.0, 10.0)
    acc = np.where(STEPS_P >= 300, 0.95, 0.05)
    p = precursor(STEPS_P, measure, acc)
    assert isinstance(p, Precursor)
    assert p == Precursor(100, 300, 200, 20, True)


def test_precursor_simultaneous_is_not_precursor():
    measure = np.where(STEPS_P >= 300, 2.0, 10.0)
    acc = np.where(STEPS_P >= 300, 0.95, 0.05)
    p = precursor(STEPS_P, measure, acc)
    assert (p.gap_steps, p.gap_checkpoints, p.is_precursor) == (0, 0, False)


def test_precursor_measure_never_transitions():
    acc = np.where(STEPS_P >= 300, 0.95, 0.05)
    p = precursor(STEPS_P, np.ones(STEPS_P.size), acc)
    assert p == Precursor(None, 300, None, None, False)


def test_precursor_never_acquired():
    measure = np.where(STEPS_P >= 100, 2.0, 10.0)
    p = precursor(STEPS_P, measure, np.zeros(STEPS_P.size))
    assert p == Precursor(100, None, None, None, False)


def test_precursor_gap_in_checkpoints_irregular_steps():
    steps = np.array([0, 1, 2, 4, 8, 16, 32, 64, 128, 256])
    measure = np.array([9, 9, 1, 1, 1, 1, 1, 1, 1, 1.0])
    acc = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1.0])
    p = precursor(steps, measure, acc)
    assert p == Precursor(2, 32, 30, 4, True)


# ---------------------------------------------------------------------------
# top_down
# ---------------------------------------------------------------------------

STEPS_T = np.arange(0, 1001, 10)


def layered(min_steps, depths_floor=None):
    """One V per layer, minimum at the given step; plus a constant layer 0."""
    rows = [np.ones(STEPS_T.size)]  # embedding layer: RankMe exactly 1
    for k, m in enumerate(min_steps):
        floor = 5.0 if depths_floor is None else depths_floor[k]
        rows.append(np.interp(STEPS_T, [0, m, 1000], [50.0, floor, 40.0]))
    return np.vstack(rows)


def test_top_down_decreasing_min_steps():
    vals = layered([700, 500, 300, 100], depths_floor=[20.0, 15.0, 10.0, 5.0])
    td = top_down(STEPS_T, vals)
    assert isinstance(td, TopDown)
    np.testing.assert_array_equal(td.layers, [1, 2, 3, 4])
    np.testing.assert_array_equal(td.excluded, [0])
    np.testing.assert_array_equal(td.min_step, [700, 500, 300, 100])
    np.testing.assert_allclose(td.floor, [20, 15, 10, 5])
    np.testing.assert_allclose(td.relative_floor, [0.4, 0.3, 0.2, 0.1])
    assert td.rho_step == pytest.approx(-1.0)
    assert td.rho_floor == pytest.approx(-1.0)
    assert td.is_top_down is True


def test_top_down_increasing_min_steps():
    td = top_down(STEPS_T, layered([100, 300, 500, 700]))
    assert td.rho_step == pytest.approx(1.0)
    assert td.is_top_down is False


def test_top_down_custom_layers_and_two_layers():
    vals = layered([700, 100])
    td = top_down(STEPS_T, vals, layers=[0, 3, 6])
    np.testing.assert_array_equal(td.layers, [3, 6])
    assert td.rho_step == pytest.approx(-1.0)  # 2 layers: always +-1


def test_top_down_ties_and_too_few_layers_give_nan_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tied = top_down(STEPS_T, layered([400, 400, 400]))
        assert np.isnan(tied.rho_step) and tied.is_top_down is False
        assert np.isnan(tied.rho_floor)  # equal floors and initial values too
        one = top_down(STEPS_T, layered([400]))
        assert np.isnan(one.rho_step) and one.layers.tolist() == [1]
        none = top_down(STEPS_T, np.ones((3, STEPS_T.size)))
        assert none.layers.size == 0 and np.isnan(none.rho_step)


def test_top_down_shape_errors():
    with pytest.raises(ValueError):
        top_down(STEPS_T, np.ones((3, STEPS_T.size - 1)))
    with pytest.raises(ValueError):
        top_down(STEPS_T, np.ones((3, STEPS_T.size)), layers=[0, 1])


# ---------------------------------------------------------------------------
# tidy_series / layer_matrix
# ---------------------------------------------------------------------------


@pytest.fixture
def metrics():
    rows = []
    for step in (20, 0, 10):  # deliberately unsorted
        rows.append((step, -1, "accuracy", step / 20))
        rows.append((step, -1, "loss", 2.0 - step / 10))
        for layer in (0, 1, 2):
            if (layer, step) == (2, 10):
                continue  # a missing measurement
            rows.append((step, layer, "rankme", 10.0 * layer + step))
    return pd.DataFrame(rows, columns=["step", "layer", "measure", "value"])


def test_tidy_series(metrics):
    steps, acc = tidy_series(metrics, "accuracy")
    np.testing.assert_array_equal(steps, [0, 10, 20])
    np.testing.assert_allclose(acc, [0.0, 0.5, 1.0])
    steps, rk = tidy_series(metrics, "rankme", layer=1)
    np.testing.assert_allclose(rk, [10, 20, 30])
    assert steps.dtype == np.int64 and rk.dtype == np.float64


def test_tidy_series_errors(metrics):
    with pytest.raises(KeyError, match="accuracy"):  # lists available measures
        tidy_series(metrics, "llc")
    with pytest.raises(KeyError, match="available layers"):
        tidy_series(metrics, "rankme")  # default layer -1 absent for rankme
    with pytest.raises(ValueError):
        tidy_series(metrics, "rankme", layer=None)
    with pytest.raises(ValueError, match="several rows"):
        tidy_series(pd.concat([metrics, metrics]), "accuracy")


def test_layer_matrix(metrics):
    layers, steps, vals = layer_matrix(metrics, "rankme")
    np.testing.assert_array_equal(layers, [0, 1, 2])
    np.testing.assert_array_equal(steps, [0, 10, 20])
    assert vals.shape == (3, 3)
    np.testing.assert_allclose(vals[:2], [[0, 10, 20], [10, 20, 30]])
    assert vals[2, 0] == 20 and np.isnan(vals[2, 1]) and vals[2, 2] == 40
    with pytest.raises(KeyError, match="rankme"):
        layer_matrix(metrics, "gradrank")


def test_layer_matrix_feeds_top_down(metrics):
    layers, steps, vals = layer_matrix(metrics, "rankme")
    td = top_down(steps, vals, layers)  # NaN cell dropped per layer
    np.testing.assert_array_equal(td.layers, [0, 1, 2])


def test_chance_corrected_acquisition_ignores_a_lucky_constant_guess():
    from geomcap import events

    steps = np.arange(0, 100, 10)
    accuracy = np.array([0.5, 0.52, 0.53, 0.51, 0.52, 0.6, 0.9, 1.0, 1.0, 1.0])  # parity-like: chance 0.5
    rows = [(s, -1, "accuracy", a) for s, a in zip(steps, accuracy)]
    rows += [(s, layer, "rankme", 5.0 - layer + (s == 30)) for s in steps for layer in (0, 1)]
    metrics = pd.DataFrame(rows, columns=["step", "layer", "measure", "value"])
    assert events.summarize_run(metrics)["acquisition_step"] == 10  # lucky: just above 0.5
    assert events.summarize_run(metrics, chance=0.5)["acquisition_step"] == 60
    np.testing.assert_allclose(events.chance_corrected([0.5, 0.75, 1.0], 0.5), [0.0, 0.5, 1.0])
    with pytest.raises(ValueError):
        events.chance_corrected([0.5], 1.0)


def collapse_then_rise_run(rise_step, acquisition_step):
    """Final-layer RankMe: 8 at step 0, floor 2 at step 20, back to 4 around ``rise_step``;
    accuracy jumps from 0 to 1 at ``acquisition_step``."""
    steps = np.arange(0, 1000, 10)
    rankme = np.where(steps < 20, 8.0 - 0.3 * steps, 2.0 + 2.0 * (steps >= rise_step))
    accuracy = (steps >= acquisition_step).astype(float)
    rows = [(s, -1, "accuracy", a) for s, a in zip(steps, accuracy)]
    rows += [(s, layer, "rankme", r - layer) for s, r in zip(steps, rankme) for layer in (0, 1)]
    return pd.DataFrame(rows, columns=["step", "layer", "measure", "value"])


@pytest.mark.parametrize("rise_step, acquisition_step, expected", [(300, 500, True), (700, 500, False)])
def test_summarize_run_after_floor_precursor(rise_step, acquisition_step, expected):
    from geomcap import events

    summary = events.summarize_run(collapse_then_rise_run(rise_step, acquisition_step))
    whole = summary["precursors"]["rankme"]
    after = summary["precursors"]["rankme_after_floor"]
    assert whole["measure_step"] == 10 and whole["is_precursor"]  # the collapse is the largest excursion
    assert after["measure_step"] == rise_step  # from the floor (step 20) the excursion is the rise
    assert after["is_precursor"] is expected
    assert after["gap_steps"] == acquisition_step - rise_step


def test_summarize_run_no_after_floor_without_collapse():
    from geomcap import events

    metrics = collapse_then_rise_run(300, 500)
    metrics.loc[metrics["measure"] == "rankme", "value"] = 5.0 + metrics["step"] / 1000  # monotone: no collapse
    assert "rankme_after_floor" not in events.summarize_run(metrics)["precursors"]
