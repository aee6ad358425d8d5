"""Tests for geomcap.events on synthetic curves with known answers."""

import warnings

import numpy as np
import pandas as pd
import pytest

from geomcap import events
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
#: the collapse rule's mechanics without the protocol's smoothing, window and hold
RAW = dict(smooth=1, window=None, hold=1)


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
    c = collapse(steps, v_curve(steps), **RAW)
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
    c = collapse(steps, x, **RAW)
    # below 91 at step 10, but back above it at 20-30; the final stretch starts at 40
    assert c.onset_step == 40
    assert c.floor_step == 60


def test_collapse_rise_then_fall_then_partial_rebound():
    steps = np.array([0, 10, 20, 30])
    c = collapse(steps, [8.0, 70.0, 20.0, 25.0], **RAW)
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
    c = collapse(steps, x, **RAW)
    assert c.peak_step == 100 and c.floor_step == 300
    assert c.recovery_step is None
    assert c.collapsed is True
    assert 100 < c.onset_step < 300


def test_collapse_gradual_rise_min_vs_drawdown():
    steps = np.arange(0, 401, 10)
    x = np.interp(steps, [0, 100, 300, 400], [8.0, 70.0, 20.0, 25.0])
    c = collapse(steps, x, **RAW)  # "min": floor on the way up, no drop (documented caveat)
    assert c.floor_step == 10 and c.drop == 0 and c.collapsed is False
    d = collapse(steps, x, floor="drawdown", **RAW)
    assert (d.peak_step, d.peak_value) == (100, 70.0)
    assert (d.floor_step, d.floor_value) == (300, 20.0)
    assert d.recovery_step is None and d.collapsed is True
    # agrees with "min" on a plain V, and falls back to it when nothing declines
    steps2 = np.arange(0, 101, 2)
    assert collapse(steps2, v_curve(steps2), floor="drawdown", **RAW) == collapse(steps2, v_curve(steps2), **RAW)
    assert collapse(steps2, steps2 + 1.0, floor="drawdown", **RAW).floor_step == 2
    with pytest.raises(ValueError):
        collapse(steps2, v_curve(steps2), floor="max", **RAW)


def test_collapse_monotone_increasing_is_not_collapsed():
    steps = np.arange(20)
    c = collapse(steps, 1.0 + steps.astype(float), **RAW)
    assert c.collapsed is False
    assert c.drop == 0.0
    assert c.floor_step == 1  # min over checkpoints after initialisation
    assert c.onset_step is None and c.recovery_step is None


def test_collapse_small_drop_not_collapsed():
    steps = np.arange(5)
    c = collapse(steps, [100, 98, 95, 97, 99.0], **RAW)
    assert c.relative_drop == pytest.approx(0.05)
    assert c.collapsed is False
    assert collapse(steps, [100, 98, 95, 97, 99.0], min_relative_drop=0.05, **RAW).collapsed is True


def test_collapse_noisy_v_with_smoothing():
    rng = np.random.default_rng(0)
    steps = np.arange(0, 1001, 10)
    clean = np.interp(steps, [0, 500, 1000], [100.0, 10.0, 80.0])
    noisy = clean + rng.normal(0, 2.0, steps.size)
    c = collapse(steps, noisy, **{**RAW, "smooth": 5})
    assert abs(c.floor_step - 500) <= 3 * 10
    assert c.collapsed
    assert c.recovery_step is not None and c.recovery_step > c.floor_step


def test_collapse_nan_ignored_and_steps_from_original():
    steps = np.arange(0, 101, 2)
    x = v_curve(steps)
    x[[3, 10, 25, 40]] = np.nan  # step 50 (index 25) is the true floor
    c = collapse(steps, x, **RAW)
    assert c.floor_step == 48 or c.floor_step == 52
    assert c.floor_value == pytest.approx(10 + 1.4 * 2)
    assert c.initial_step == 0
    # NaN at initialisation: the first finite checkpoint is the initial one
    x[0] = np.nan
    assert collapse(steps, x, **RAW).initial_step == 2


def test_collapse_errors():
    with pytest.raises(ValueError, match="at least 2 finite"):
        collapse(np.arange(4), np.full(4, np.nan), **RAW)
    with pytest.raises(ValueError, match="at least 2 finite"):
        collapse(np.arange(4), [1.0, np.nan, np.nan, np.nan], **RAW)
    with pytest.raises(ValueError, match="odd"):
        collapse(np.arange(4), np.arange(4.0), **{**RAW, "smooth": 4})
    with pytest.raises(ValueError):
        collapse(np.arange(4), np.arange(4.0), onset_fraction=1.5, **RAW)


def test_rolling_median_centred_shrinking():
    x = np.array([5.0, 0, 0, 100, 0, 0, 7])
    out = rolling_median(x, 5)
    assert out[0] == 5.0 and out[-1] == 7.0  # endpoints keep raw values
    assert out[3] == 0.0  # spike removed
    assert out[1] == 0.0  # window of 3 at index 1
    np.testing.assert_array_equal(rolling_median(x, 1), x)


@pytest.mark.parametrize("window", [3, 5, 9])
def test_rolling_median_equals_the_window_by_window_definition(window):
    """The vectorised filter against its definition, element by element, on every length around the window
    (shorter than it, equal, longer)."""
    rng = np.random.default_rng(window)
    for n in range(0, 3 * window):
        x = rng.normal(size=n)
        expected = [np.median(x[i - h: i + h + 1]) for i in range(n) for h in [min(window // 2, i, n - 1 - i)]]
        np.testing.assert_array_equal(rolling_median(x, window), np.array(expected) if n >= 3 else x)


# ---------------------------------------------------------------------------
# transition_step
# ---------------------------------------------------------------------------


def sigmoid(steps, mid, width):
    return 1.0 / (1.0 + np.exp(-(steps - mid) / width))


def test_transition_step_function():
    """A step at 500: the trailing median of 3 sees it at its second checkpoint (510), held 3 checkpoints."""
    steps = np.arange(0, 1001, 10)
    x = (steps >= 500).astype(float)
    assert transition_step(steps, x) == 510
    assert transition_step(steps, x, smooth=1) == 500


def test_transition_is_scale_shift_and_direction_free():
    steps = np.arange(0, 1001, 10)
    noise = np.random.default_rng(0).normal(0, 0.01, steps.size)
    x = sigmoid(steps, 505, 30) + noise
    first = transition_step(steps, x)
    assert 300 < first < 505  # the rise leaves the baseline's band before its midpoint
    assert transition_step(steps, 7.0 * x) == first
    assert transition_step(steps, -3.0 * x) == first
    assert transition_step(steps, x + 0.0) == first


def test_transition_needs_a_change_beyond_noise_and_a_tenth_of_the_level():
    steps = np.arange(0, 1001, 10)
    rng = np.random.default_rng(1)
    flat = 10.0 + rng.normal(0, 0.5, steps.size)
    assert transition_step(steps, flat) is None                       # noise only
    assert transition_step(steps, flat + 0.5 * (steps >= 500)) is None  # below 8 sigmas and 10% of the level
    assert 500 <= transition_step(steps, flat + 6.0 * (steps >= 500)) <= 530


def test_transition_false_alarms_on_noise():
    """The rule's false-alarm rate, measured: on 150 checkpoints of white noise (and of heavy-tailed noise)
    it fires in a few percent of series; on a random walk, whose level really does wander, more often."""
    rng = np.random.default_rng(2)
    steps = np.arange(150) * 50
    white = np.mean([transition_step(steps, rng.normal(size=150)) is not None for _ in range(400)])
    heavy = np.mean([transition_step(steps, rng.standard_t(3, size=150)) is not None for _ in range(400)])
    assert white < 0.05 and heavy < 0.05


def test_transition_constant_or_nan_is_none():
    steps = np.arange(20)
    assert transition_step(steps, np.full(20, 3.0)) is None
    assert transition_step(steps, np.full(20, np.nan)) is None
    assert transition_step(steps, [1.0] + [np.nan] * 19) is None
    assert transition_step(steps[:10], np.arange(10.0)) is None  # fewer than baseline + hold checkpoints


def test_transition_reads_only_from_start_and_is_causal():
    """Nothing before ``start`` is read; a prefix gives the same transition as the whole series wherever the
    prefix holds the transition and its hold."""
    steps = np.arange(0, 1001, 10)
    x = np.where(steps < 300, 0.0, 1.0) + np.where(steps >= 600, 10.0, 0.0)
    assert transition_step(steps, x) == 310
    assert transition_step(steps, x, start=400) == 610
    for end in range(630, 1001, 10):
        assert transition_step(steps[steps <= end], x[steps <= end], start=400) == 610
    assert transition_step(steps[steps <= 620], x[steps <= 620], start=400) is None  # its hold not yet seen


def test_trailing_median_reads_no_later_checkpoint():
    x = np.array([5.0, 1.0, 9.0, 2.0, 7.0])
    assert events.trailing_median(x, 3).tolist() == [5.0, 3.0, 5.0, 2.0, 7.0]
    for k in range(1, 6):
        assert np.array_equal(events.trailing_median(x[:k], 3), events.trailing_median(x, 3)[:k])


# ---------------------------------------------------------------------------
# precursor
# ---------------------------------------------------------------------------

STEPS_P = np.arange(0, 1001, 10)


def test_precursor_leads():
    measure = np.where(STEPS_P >= 300, 2.0, 10.0)
    acc = np.where(STEPS_P >= 600, 0.95, 0.05)
    p = precursor(STEPS_P, measure, acc)
    assert isinstance(p, Precursor)
    assert p == Precursor(310, 600, 290, 29, True, pytest.approx(290 / 600))


def test_precursor_simultaneous_is_not_precursor():
    measure = np.where(STEPS_P >= 600, 2.0, 10.0)
    acc = np.where(STEPS_P >= 600, 0.95, 0.05)
    p = precursor(STEPS_P, measure, acc)
    assert (p.gap_steps, p.gap_checkpoints, p.is_precursor) == (-10, -1, False)


def test_precursor_measure_never_transitions():
    acc = np.where(STEPS_P >= 300, 0.95, 0.05)
    p = precursor(STEPS_P, np.ones(STEPS_P.size), acc)
    assert p == Precursor(None, 300, None, None, False)


def test_precursor_never_acquired():
    measure = np.where(STEPS_P >= 300, 2.0, 10.0)
    p = precursor(STEPS_P, measure, np.zeros(STEPS_P.size))
    assert p == Precursor(310, None, None, None, False)


def test_precursor_gap_in_checkpoints_irregular_steps():
    steps = np.concatenate([np.arange(20), [32, 64, 128, 256, 512, 600, 700, 800]])
    measure = np.where(steps >= 128, 1.0, 9.0)
    acc = (steps >= 600).astype(float)
    p = precursor(steps, measure, acc, smooth=1)
    assert p == Precursor(128, 600, 472, 3, True, pytest.approx(472 / 600))


# ---------------------------------------------------------------------------
# top_down
# ---------------------------------------------------------------------------

STEPS_T = np.arange(0, 601, 10)


def layered(min_steps, depths_floor=None):
    """One V per layer (50 at step 0, minimum at the given step, 40 at step 600); plus a constant
    layer 0. Linear pieces, so each layer's collapse step (half its drop) is half its minimum's step."""
    rows = [np.ones(STEPS_T.size)]  # embedding layer: RankMe exactly 1
    for k, m in enumerate(min_steps):
        floor = 5.0 if depths_floor is None else depths_floor[k]
        rows.append(np.interp(STEPS_T, [0, m, 600], [50.0, floor, 40.0]))
    return np.vstack(rows)


def test_top_down_decreasing_collapse_steps():
    vals = layered([280, 200, 120, 40], depths_floor=[20.0, 15.0, 10.0, 5.0])
    td = top_down(STEPS_T, vals, smooth=1)
    assert isinstance(td, TopDown)
    np.testing.assert_array_equal(td.layers, [1, 2, 3, 4])
    np.testing.assert_array_equal(td.excluded, [0])
    np.testing.assert_array_equal(td.min_step, [280, 200, 120, 40])
    np.testing.assert_allclose(td.collapse_step, [140, 100, 60, 20])  # half of each layer's own drop
    np.testing.assert_allclose(td.floor, [20, 15, 10, 5])
    np.testing.assert_allclose(td.relative_floor, [0.4, 0.3, 0.2, 0.1])
    assert td.rho_step == pytest.approx(-1.0)
    assert td.rho_floor == pytest.approx(-1.0)
    assert td.defined and td.is_top_down is True
    assert top_down(STEPS_T, vals).is_top_down is True  # the protocol's smoothing keeps the order


def test_top_down_increasing_collapse_steps():
    td = top_down(STEPS_T, layered([40, 120, 200, 280]))
    assert td.rho_step == pytest.approx(1.0)
    assert td.defined and td.is_top_down is False


def test_top_down_tied_minima_are_ordered_by_the_collapse_step():
    # log-spaced checkpoints: every layer reaches its minimum at step 32 (the argmin ties), but the
    # deeper layers started falling earlier, so they are further down at step 16
    steps = np.array([0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 400])
    starts = [10, 8, 6, 4]  # layers 1..4: the deepest starts first
    vals = [np.ones(steps.size)]
    for a in starts:
        vals.append(np.interp(steps, [0, a, 30, 40, 400], [50.0, 50.0, 5.0, 5.0, 30.0]))
    td = top_down(steps, np.vstack(vals), smooth=1)
    np.testing.assert_array_equal(td.min_step, [32, 32, 32, 32])
    assert np.all(np.diff(td.collapse_step) < 0)
    assert td.rho_step == pytest.approx(-1.0) and td.is_top_down


def test_top_down_needs_four_informative_layers():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        three = top_down(STEPS_T, layered([280, 200, 120]))
        assert three.layers.tolist() == [1, 2, 3]
        assert np.isnan(three.rho_step) and not three.defined and three.is_top_down is False
        assert top_down(STEPS_T, layered([280, 200, 120]), min_layers=3).is_top_down
        custom = top_down(STEPS_T, layered([280, 40]), layers=[0, 3, 6], min_layers=2)
        np.testing.assert_array_equal(custom.layers, [3, 6])
        assert custom.rho_step == pytest.approx(-1.0)  # 2 layers: always +-1
        none = top_down(STEPS_T, np.ones((3, STEPS_T.size)))
        assert none.layers.size == 0 and np.isnan(none.rho_step)


def test_top_down_excludes_layers_that_do_not_collapse():
    vals = layered([280, 200, 120, 40])
    vals = np.vstack([vals, 10.0 + STEPS_T / 100])  # a fifth layer that only rises
    td = top_down(STEPS_T, vals)
    np.testing.assert_array_equal(td.layers, [1, 2, 3, 4])
    np.testing.assert_array_equal(td.excluded, [0, 5])


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
    td = top_down(steps, vals, layers, smooth=1)  # NaN cell dropped per layer
    np.testing.assert_array_equal(td.excluded, [0, 1, 2])  # every layer only rises: none collapses
    assert not td.defined


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
    # the raw accuracy a figure draws as the acquisition level: chance-corrected, it is the threshold
    assert events.acquisition_accuracy(0.5, threshold=0.5) == 0.75
    assert events.chance_corrected([events.acquisition_accuracy(1 / 3)], 1 / 3)[0] == pytest.approx(
        events.ACQUISITION_THRESHOLD)
    with pytest.raises(ValueError):
        events.acquisition_accuracy(1.0)


def collapse_then_rise_run(rise_step, acquisition_step):
    """Final-layer RankMe: 8 at step 0, floor 2 at step 20, back to 6 by step 40 (recovery), a second rise
    to 8 at ``rise_step``; accuracy jumps from 0 to 1 at ``acquisition_step``. Checkpoints every step to 128
    (the protocol's dense part), then every 10 steps."""
    steps = np.concatenate([np.arange(0, 128), np.arange(130, 1000, 10)])
    rankme = np.where(steps < 20, 8.0 - 0.3 * steps, np.where(steps < 40, 2.0, 6.0)) + 2.0 * (steps >= rise_step)
    accuracy = (steps >= acquisition_step).astype(float)
    rows = [(s, -1, "accuracy", a) for s, a in zip(steps, accuracy)]
    rows += [(s, layer, "rankme", r - layer) for s, r in zip(steps, rankme) for layer in (0, 1)]
    return pd.DataFrame(rows, columns=["step", "layer", "measure", "value"])


@pytest.mark.parametrize("rise_step, acquisition_step, expected", [(500, 800, True), (700, 500, False)])
def test_summarize_run_both_readings(rise_step, acquisition_step, expected):
    from geomcap import events

    summary = events.summarize_run(collapse_then_rise_run(rise_step, acquisition_step))
    paper = summary["paper_precursors"]["rankme"]
    informative = summary["precursors"]["rankme"]
    assert summary["reading_start"] == events.READING_START  # the recovery (step 40) is earlier
    assert paper["measure_step"] < 30 and paper["reading"] == "from_start"  # the collapse itself
    assert informative["measure_step"] == rise_step + 10 and informative["reading"] == "after_collapse"
    assert informative["is_precursor"] is expected
    assert informative["gap_steps"] == acquisition_step - rise_step - 10


def test_summarize_run_no_informative_reading_when_the_collapse_never_recovers():
    from geomcap import events

    metrics = collapse_then_rise_run(300, 500)
    rank = metrics["measure"] == "rankme"
    metrics.loc[rank, "value"] = np.where(metrics.loc[rank, "step"] < 20, 8.0, 2.0)  # collapses, stays down
    summary = events.summarize_run(metrics)
    assert summary["reading_start"] is None and summary["precursors"] == {}
    assert summary["paper_precursors"]["rankme"]["measure_step"] == 21
    assert any("never recovered" in note for note in summary["notes"])


# ---------------------------------------------------------------------------
# the protocol: window, hold, certainty (no look-ahead), readings, horizon, plateau
# ---------------------------------------------------------------------------

#: the new checkpoint schedule: every step over the first 128, then every 20 steps
DENSE = np.concatenate([np.arange(0, 128), np.arange(140, 3001, 20)])


def collapse_curve(steps, floor_step=30, floor=3.0, recover_to=30.0, noise=0.0, seed=0):
    """RankMe-like: 40 at step 0, down to ``floor`` at ``floor_step``, back to ``recover_to`` by 3x it."""
    x = np.interp(steps, [0, floor_step, 3 * floor_step, 3000], [40.0, floor, recover_to, recover_to])
    return x + np.random.default_rng(seed).normal(0, noise, steps.size)


def test_collapse_floor_is_the_minimum_within_the_window_only():
    x = collapse_curve(DENSE)
    x[DENSE >= 2000] = 1.0  # a later, deeper minimum (e.g. after acquisition)
    c = collapse(DENSE, x)
    assert c.floor_step == 30 and c.floor_value == pytest.approx(3.0, abs=0.5)  # the median of 3 lifts the vertex
    assert collapse(DENSE, x, window=None).floor_step == 2000


def test_a_brief_spike_is_not_a_recovery():
    x = np.interp(DENSE, [0, 30, 400, 600, 3000], [40.0, 3.0, 3.0, 30.0, 30.0])
    x[(DENSE >= 100) & (DENSE <= 101)] = 35.0  # two checkpoints up, then back on the floor
    c = collapse(DENSE, x, smooth=1)
    assert c.recovery_step is not None and c.recovery_step > 400  # the spike is not held for 3 checkpoints
    assert collapse(DENSE, x, smooth=1, hold=1).recovery_step == 100


@pytest.mark.parametrize("noise, seed", [(0.0, 0), (0.8, 1), (0.8, 2), (2.0, 3)])
def test_collapse_has_no_look_ahead(noise, seed):
    """On every prefix that ends at or after an event's certain step, collapse returns the same event."""
    x = collapse_curve(DENSE, noise=noise, seed=seed)
    full = collapse(DENSE, x)
    assert full.floor_certain_step is not None and full.recovery_certain_step is not None
    floor_fields = ("peak_step", "peak_value", "onset_step", "floor_step", "floor_value", "drop", "collapsed",
                    "floor_certain_step")
    for end in range(2, DENSE.size + 1):
        part = collapse(DENSE[:end], x[:end])
        last = DENSE[end - 1]
        if last >= full.floor_certain_step:
            assert [getattr(part, f) for f in floor_fields] == [getattr(full, f) for f in floor_fields], last
        else:
            assert part.floor_certain_step is None
        if last >= full.recovery_certain_step:
            assert (part.recovery_step, part.recovery_certain_step) == (full.recovery_step,
                                                                       full.recovery_certain_step), last
        else:
            assert part.recovery_certain_step is None
    # the floor is certain once the window (300 steps) is closed and the smoothed values in it are final:
    # the value at step 300 needs the next checkpoint (320) for the rolling median of 3
    assert full.floor_certain_step == 320
    # the recovery: 3 checkpoints held, plus one for the rolling median of 3
    k = int(np.searchsorted(DENSE, full.recovery_step))
    assert full.recovery_step < 128 and full.recovery_certain_step == 320
    late = collapse(DENSE, np.interp(DENSE, [0, 30, 500, 600, 3000], [40.0, 3.0, 3.0, 30.0, 30.0]))
    k = int(np.searchsorted(DENSE, late.recovery_step))
    assert late.recovery_certain_step == int(DENSE[k + 2 + 1])


def test_a_series_ending_inside_the_window_has_no_certain_floor():
    x = collapse_curve(DENSE)
    c = collapse(DENSE[:100], x[:100])
    assert c.floor_step == 30 and c.floor_certain_step is None and c.recovery_certain_step is None


def test_confirmed_events_on_prefixes():
    x = collapse_curve(DENSE)
    acc = (DENSE >= 1000).astype(float)
    early = events.confirmed_events(DENSE[:100], x[:100], acc[:100])
    assert early["as_of_step"] == 99
    assert early["floor_step"] is None and early["recovery_step"] is None and early["acquisition_step"] is None
    later = events.confirmed_events(DENSE[:160], x[:160])
    assert later["floor_step"] == 30 and later["floor_certain_step"] == 320
    assert later["recovery_step"] == collapse(DENSE, x).recovery_step
    done = events.confirmed_events(DENSE, x, acc)
    assert done["acquisition_step"] == 1000
    assert events.confirmed_events([0], [1.0])["floor_step"] is None


def test_plateau_fraction_in_steps():
    steps = np.array([0, 10, 20, 100, 200])
    acc = np.array([0.0, 0.0, 0.05, 0.5, 1.0])
    # at chance over [0, 100) of [0, 200): steps, not checkpoints
    assert events.plateau_fraction(steps, acc, until=200) == pytest.approx(0.5)
    assert events.plateau_fraction(steps, acc, until=100) == pytest.approx(1.0)
    assert events.plateau_fraction(steps, acc, until=0) is None
    assert events.plateau_fraction(steps, acc, until=200, level=0.01) == pytest.approx(0.1)


def synthetic_run(acquisition=1500, lead=600, width=15.0, steps=DENSE, residual=True, stop=None):
    """A run with a RankMe collapse at step 30, acquisition at ``acquisition`` (accuracy and test loss
    move together), ``grad_rank`` rising with behaviour and ``llc`` rising ``lead`` steps earlier."""
    s = steps if stop is None else steps[steps <= stop]
    sig = lambda mid: 1.0 / (1.0 + np.exp(-(s - mid) / width))  # noqa: E731
    acc = sig(acquisition + 30)  # > 0.5 from just after the midpoint
    series = {"accuracy": acc, "train_accuracy": acc, "first_token_accuracy": acc,
              "test_loss": 3.2 - 0.3 * np.minimum(s, 30) / 30 - 2.8 * acc,
              "grad_rank": 10 + 20 * sig(acquisition + 30),
              "llc": 5 + 10 * sig(acquisition + 30 - lead)}
    rows = [(t, -1, name, v) for name, vals in series.items() for t, v in zip(s, vals)]
    for layer in range(5):  # layer 0: embeddings (constant); 1..4: blocks, the deepest collapses first
        base = collapse_curve(s, floor_step=40 - 5 * layer, floor=2.0 + layer) if layer else np.ones(s.size)
        rows += [(t, layer, "rankme", v) for t, v in zip(s, base)]
    if residual:  # the last block's residual stream: collapses first of all (top-down)
        rows += [(t, 4, "rankme_residual", v) for t, v in zip(s, collapse_curve(s, floor_step=15, floor=4.0))]
    return pd.DataFrame(rows, columns=["step", "layer", "measure", "value"])


def test_summarize_run_precursor_known_both_ways():
    summary = events.summarize_run(synthetic_run())
    assert summary["acquisition_step"] is not None and abs(summary["acquisition_step"] - 1540) <= 20
    acq = summary["acquisition_step"]
    p = summary["precursors"]
    assert summary["reading_start"] == events.READING_START
    # a measure that moves only with behaviour: not a precursor
    assert p["grad_rank"]["is_precursor"] is False and p["grad_rank"]["informative"] is False
    # a genuine earlier rise: a precursor, ahead of the test loss too, by ~30 checkpoints
    assert p["llc"]["is_precursor"] is True and p["llc"]["leads_test_loss"] is True and p["llc"]["informative"]
    assert p["llc"]["gap_checkpoints"] == pytest.approx(30, abs=3)
    assert p["llc"]["gap_share"] == pytest.approx(p["llc"]["gap_steps"] / acq)
    # the test loss is the reference: it cannot lead itself
    assert p["test_loss"]["leads_test_loss"] is None and p["test_loss"]["is_precursor"] is False
    # the paper's reading of RankMe fires on the early collapse
    paper = summary["paper_precursors"]
    assert paper["rankme"]["measure_step"] < 50 and paper["rankme"]["is_precursor"] is True
    assert paper["llc"]["is_precursor"] is True and paper["grad_rank"]["is_precursor"] is False
    assert summary["plateau_fraction"] == pytest.approx(1.0, abs=0.05)


def test_summarize_run_stopped_early_equals_the_full_run():
    """A run stopped anywhere after acquisition (and its confirmation) calls the same series precursors,
    with the same transitions before acquisition, as the full run: no rule reads where the run stopped."""
    full = events.summarize_run(synthetic_run())
    for stop in (full["acquisition_step"] + 100, full["acquisition_step"] + 500, 2400):
        stopped = events.summarize_run(synthetic_run(stop=stop))
        assert stopped["last_step"] < full["last_step"]
        for key in ("acquisition_step", "plateau_fraction", "reading_start", "top_down"):
            assert stopped[key] == full[key], key
        for reading in ("precursors", "paper_precursors"):
            for name, p in full[reading].items():
                q = stopped[reading][name]
                assert (q["is_precursor"], q["informative"]) == (p["is_precursor"], p["informative"]), name
                if p["is_precursor"]:
                    assert q == p, name
        for key in ("floor_step", "floor_value", "recovery_step", "floor_certain_step", "recovery_certain_step"):
            assert stopped["collapse"][key] == full["collapse"][key]


def test_summarize_run_top_down_on_the_residual_stream():
    with_residual = events.summarize_run(synthetic_run())["top_down"]
    # blocks 1..3 from rankme (floors at 35, 30, 25), block 4 from rankme_residual (floor at 15)
    assert with_residual["residual_measure"] == "rankme_residual"
    assert with_residual["layers"] == [1, 2, 3, 4] and with_residual["excluded"] == [0]
    assert with_residual["defined"] and with_residual["is_top_down"] is True
    assert with_residual["rho_step"] == pytest.approx(-1.0)
    assert with_residual["post_ln"]["rho_step"] == pytest.approx(-1.0)  # rankme layer 4: floor at 20
    without = events.summarize_run(synthetic_run(residual=False))["top_down"]
    assert without["residual_measure"] is None and "not recorded" in without["basis"]
    assert without["rho_step"] == without["post_ln"]["rho_step"]


def test_analysis_complete_marks_a_safe_stop():
    metrics = synthetic_run()
    full = events.summarize_run(metrics)
    steps, acc = tidy_series(metrics, "accuracy")
    _, rank = tidy_series(metrics, "rankme", layer=4)
    done = [events.confirmed_events(steps[:k], rank[:k], acc[:k])["analysis_complete"] for k in range(1, steps.size + 1)]
    first = done.index(True)
    assert all(done[first:]) and not any(done[:first])
    stop = int(steps[first])
    assert stop >= full["acquisition_step"] and stop >= full["collapse"]["recovery_certain_step"]
    stopped = events.summarize_run(metrics[metrics["step"] <= stop])
    for key in ("acquisition_step", "plateau_fraction", "reading_start", "top_down", "collapse",
                "order_collapse_recovery_acquisition"):
        assert stopped[key] == full[key], key
    for name, p in full["precursors"].items():
        assert stopped["precursors"][name]["is_precursor"] == p["is_precursor"], name
    assert not events.confirmed_events(steps, rank)["analysis_complete"]  # without accuracy: never


@pytest.mark.parametrize("smooth, hold, floor_rule", [(1, 1, "min"), (3, 3, "min"), (5, 3, "drawdown")])
def test_certain_events_never_change_on_random_walks(smooth, hold, floor_rule):
    """No look-ahead on random walks with gaps: an event a prefix calls certain is the full series' event."""
    rng = np.random.default_rng(smooth + hold)
    steps = np.concatenate([np.arange(0, 128), np.arange(140, 1001, 20)])
    for _ in range(8):
        x = np.cumsum(rng.normal(0, 1, steps.size)) + 20 + rng.normal(0, 2, steps.size)
        x[rng.integers(0, steps.size, 5)] = np.nan
        kw = dict(smooth=smooth, hold=hold, floor=floor_rule)
        full = collapse(steps, x, **kw)
        for end in range(3, steps.size + 1, 3):
            part = collapse(steps[:end], x[:end], **kw)
            if part.floor_certain_step is not None:
                assert (part.floor_step, part.peak_step, part.onset_step) == (
                    full.floor_step, full.peak_step, full.onset_step)
            if part.recovery_certain_step is not None:
                assert part.recovery_step == full.recovery_step


def test_precursor_on_a_measure_recorded_at_a_subset_of_the_checkpoints():
    """A costly measure exists at every 3rd checkpoint: its transition is read on its own steps, the gap
    counted in checkpoints of the accuracy's grid (summarize_run reads the costly measures this way)."""
    measure = np.where(STEPS_P >= 590, 2.0, 10.0)
    acc = np.where(STEPS_P >= 900, 0.95, 0.05)
    sub = STEPS_P[::3]  # 0, 30, 60, ...: the first step >= 590 recorded is 600, the median of 3 sees it at 630
    p = precursor(STEPS_P, measure[::3], acc, measure_steps=sub)
    assert p == Precursor(630, 900, 270, 27, True, pytest.approx(270 / 900))
    with pytest.raises(ValueError, match="same length"):
        precursor(STEPS_P, measure, acc, measure_steps=sub)


def test_summarize_run_precursors_are_the_precursor_rule():
    """summarize_run's gaps are events.precursor's, series by series, for both readings."""
    metrics = synthetic_run()
    summary = events.summarize_run(metrics)
    steps, acc = events.tidy_series(metrics, "accuracy")
    for name in ("llc", "grad_rank", "test_loss"):
        m_steps, values = events.tidy_series(metrics, name)
        for reading, start in (("paper_precursors", None), ("precursors", summary["reading_start"])):
            p = precursor(steps, values, acc, measure_steps=m_steps, start=start)
            got = summary[reading][name]
            assert (got["measure_step"], got["gap_checkpoints"], got["is_precursor"]) == (
                p.measure_step, p.gap_checkpoints, p.is_precursor), (reading, name)


def test_final_layer_is_the_deepest_layer_recorded_per_run():
    metrics = pd.DataFrame({"run": ["a"] * 4 + ["b"] * 3, "measure": ["rankme"] * 3 + ["accuracy"] + ["rankme"] * 3,
                            "layer": [0, 2, 1, -1, 0, 1, 3], "step": 0, "value": [1.0, 2, 3, 4, 5, 6, 7]})
    assert events.final_layer(metrics[metrics["run"] == "a"], "rankme") == 2
    assert events.final_layer(metrics, "probe_accuracy") is None
    rows = events.final_layer_rows(metrics, "rankme")
    assert sorted(zip(rows["run"], rows["layer"])) == [("a", 2), ("b", 3)]
    assert events.final_layer_rows(metrics, "rankme", by=None)["value"].tolist() == [7.0]


def test_format_summary_states_the_parameters_used():
    metrics = synthetic_run()
    default = events.format_summary(events.summarize_run(metrics))
    assert "leaves the course of its first 16 checkpoints" in default and ">= 2 checkpoints" in default
    assert "informative reading (b), from step 300" in default and "the paper's reading (a)" in default
    other = events.format_summary(events.summarize_run(metrics, min_lead=4))
    assert ">= 4 checkpoints" in other
    never = events.summarize_run(metrics, threshold=1.0, patience=5)  # accuracy never exceeds 1
    assert never["acquisition_step"] is None
    assert "never acquired (chance-corrected > 1 for 5 checkpoints)" in events.format_summary(never)


def test_precursor_measures_are_the_registry_s():
    from geomcap import measures

    names = [name for name, _ in events.PRECURSOR_MEASURES]
    assert names == [m.name for m in measures.MEASURES if m.precursor]
    assert dict(events.PRECURSOR_MEASURES)["rankme"] == "final" and dict(events.PRECURSOR_MEASURES)["llc"] == -1
    assert "hessian_top" in names and "hessian_residual" not in names and "accuracy" not in names


# --- scoring accuracy on a subset of the test set -------------------------------------------------------------

def test_subsampled_acquisition_whole_set_is_the_rule():
    """A 'subset' of every example is the whole set: each draw gives acquisition_step's answer."""
    from geomcap.analysis.acquisition import subsampled_acquisition

    rng = np.random.default_rng(3)
    steps = np.arange(0, 400, 10)
    accuracy = rng.integers(0, 101, size=steps.size) / 100
    sim = subsampled_acquisition(steps, accuracy, n_scored=100, subset_size=100, draws=20)
    expected = events.acquisition_step(steps, accuracy)
    assert np.all(np.isnan(sim)) if expected is None else np.all(sim == expected)


def test_subsampled_acquisition_matches_the_rule_draw_by_draw():
    """The vectorised rule gives, for every simulated subset, what acquisition_step gives on it."""
    from geomcap.analysis.acquisition import subsampled_acquisition

    steps = np.arange(0, 600, 20)
    accuracy = np.clip(np.linspace(-0.2, 1.1, steps.size), 0, 1)
    accuracy = np.round(accuracy * 512) / 512
    chance = 0.1
    sim = subsampled_acquisition(steps, accuracy, 512, 64, chance=chance, draws=50, seed=7)
    right = np.random.default_rng(7).hypergeometric(np.round(accuracy * 512).astype(int),
                                                    512 - np.round(accuracy * 512).astype(int), 64, size=(50, steps.size))
    for row, got in zip(right, sim):
        step = events.acquisition_step(steps, events.chance_corrected(row / 64, chance))
        assert (np.isnan(got) and step is None) or got == step


def test_subsampled_acquisition_a_sharp_jump_never_moves():
    """All wrong, then all right: every subset of any size sees the same jump."""
    from geomcap.analysis.acquisition import subsampled_acquisition

    steps = np.arange(0, 300, 10)
    accuracy = (steps >= 150).astype(float)
    for k in (1, 16, 511):
        assert np.all(subsampled_acquisition(steps, accuracy, 512, k, draws=30) == 150)


def test_subsampled_acquisition_a_curve_at_the_threshold_moves():
    """Accuracy just above the threshold all along: the whole set acquires at once, small subsets often not."""
    from geomcap.analysis.acquisition import subsampled_acquisition

    steps = np.arange(0, 300, 10)
    accuracy = np.full(steps.size, 264 / 512)
    assert events.acquisition_step(steps, accuracy) == 0
    sim = subsampled_acquisition(steps, accuracy, 512, 32, draws=200)
    assert np.mean(sim == 0) < 0.5


@pytest.mark.parametrize("kwargs, message", [
    (dict(n_scored=512, subset_size=513), "more than"),
    (dict(n_scored=512, subset_size=0), "subset_size"),
    (dict(n_scored=512, subset_size=8, draws=0), "draws"),
    (dict(n_scored=500, subset_size=8), "not a count"),  # 0.25 * 512 examples, read as out of 500
])
def test_subsampled_acquisition_validation(kwargs, message):
    from geomcap.analysis.acquisition import subsampled_acquisition

    with pytest.raises(ValueError, match=message):
        subsampled_acquisition([0, 10, 20], [0.25, 0.5, 1.0 / 512], **kwargs)
