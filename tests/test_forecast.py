"""The alarms and their scoring as a forecast (geomcap.analysis.alarms, geomcap.analysis.forecast), on synthetic
runs whose answer is known, read through `geomcap show --json` where a user would read them."""
import json

import numpy as np
import pandas as pd
import pytest

from geomcap import store
from geomcap.analysis import forecast
from geomcap.analysis.alarms import ALARM_RULE, alarms, first_alarm_step
from geomcap.analysis.table import summary_row
from test_leak_free import STEPS, collapse_then, show, sig, write_run


def excursion_then_fall(excursion=1000, fall=2200):
    """RankMe that collapses and recovers, makes a brief excursion at ``excursion`` (unrelated to behaviour),
    then falls for good at ``fall``."""
    blip = 3.0 * np.exp(-0.5 * ((STEPS - excursion) / 35.0) ** 2)
    return collapse_then(blip - 4.0 * sig(fall, 30.0))


def test_a_second_excursion_before_acquisition_is_an_alarm_the_first_transition_cannot_see(tmp_path):
    """The first-transition reading reads the brief excursion at ~1,000 and calls it a precursor ~1,500 steps
    ahead; the alarms read both events, and the fall at ~2,200 is the one followed by acquisition (~2,500)."""
    summary = show(write_run(tmp_path / "run", excursion_then_fall(), 2500))
    acquired = summary["acquisition_step"]
    assert 2450 <= acquired <= 2600
    assert 850 <= summary["precursors"]["rankme"]["measure_step"] <= 1000  # the excursion, 1,500 steps ahead
    raised = [a["step"] for a in summary["alarms"]["rankme"] if a["layer"] == 1]
    assert any(850 <= s <= 1100 for s in raised) and any(2150 <= s < acquired for s in raised), raised
    assert all(a["side"] in (-1, 1) and a["onset_step"] <= a["step"] for a in summary["alarms"]["rankme"])
    assert summary["first_alarm_step"] == first_alarm_step(STEPS, summary["reading_start"])
    row = {**summary_row(store.read_metrics(tmp_path / "run")), "task": "copy", "level": "easy", "size": "405k",
           "seed": 0, "run": "x"}
    hit = forecast.run_forecast(row, "rankme", "final", horizon=500)
    assert hit["eligible"] and hit["hit"] and 0 < hit["lead"] <= 500
    miss = forecast.run_forecast(row, "rankme", "final", horizon=100)  # the fall is ~300 steps ahead
    assert not miss["hit"] and miss["alarms_pre"] == hit["alarms_pre"] >= 2


def test_the_same_series_in_a_run_that_never_acquires_gives_false_alarms(tmp_path):
    summary = show(write_run(tmp_path / "run", excursion_then_fall(), 50_000))  # acquisition far past the run
    assert summary["acquisition_step"] is None
    row = {**summary_row(store.read_metrics(tmp_path / "run")), "task": "copy", "level": "easy", "size": "405k",
           "seed": 0, "run": "x"}
    table = forecast.false_alarm_table(pd.DataFrame([row]), signals=[("rankme", "final")], n_boot=50)
    assert table["alarms"].iloc[0] >= 2 and table["alarms_per_1000"].iloc[0] > 0


def _noise_run(seed, acquisition):
    rng = np.random.default_rng(seed)
    metrics = []
    acc = sig(acquisition)
    for name, values in {"accuracy": acc, "test_loss": 2.0 - 1.8 * acc}.items():
        metrics += [(s, -1, name, v) for s, v in zip(STEPS, values)]
    rankme = collapse_then(rng.normal(0, 0.3, STEPS.size))
    metrics += [(s, 1, "rankme", v) for s, v in zip(STEPS, rankme)]
    frame = pd.DataFrame(metrics, columns=["step", "layer", "measure", "value"])
    return {**summary_row(frame), "task": "copy", "level": "easy", "size": f"s{seed % 4}", "seed": seed,
            "run": f"r{seed}"}


def test_white_noise_scores_like_the_random_baseline_at_its_rate():
    """A signal of pure noise has no skill: its recall is the random process's at the same rate (here both are
    near zero: the rule fires on noise in well under 1% of checkpoints)."""
    rows = pd.DataFrame([_noise_run(seed, int(a)) for seed, a in enumerate(np.linspace(1200, 3600, 24))])
    per_run = forecast.forecast_runs(rows, signals=[("rankme", "final")], horizons=(500,))
    table = forecast.forecast_table(per_run, n_boot=50)
    r = table.iloc[0]
    assert r["runs"] == 24 and r["alarms_per_1000_pre"] < 0.5
    assert abs(r["recall"] - r["random_recall"]) <= 0.1


def test_a_copy_of_the_test_loss_shifted_later_scores_no_lead(tmp_path):
    """A series that moves after behaviour raises its alarm after acquisition: no hit at any horizon."""
    summary_path = write_run(tmp_path / "run", collapse_then(4.0 * sig(3000 + 400)), 3000)
    row = {**summary_row(store.read_metrics(summary_path)), "task": "copy", "level": "easy", "size": "405k",
           "seed": 0, "run": "x"}
    assert row["alarms"]["rankme"], "the shifted copy departs from its course, after acquisition"
    for horizon in forecast.FORECAST_HORIZONS:
        f = forecast.run_forecast(row, "rankme", "final", horizon)
        assert f["eligible"] and not f["hit"] and f["alarms_post"] >= 1


def test_alarms_are_causal_a_prefix_raises_the_same_alarms():
    """At checkpoint t the rule reads only checkpoints <= t: cut the series anywhere and the alarms up to the
    cut are the whole series' alarms up to there (what a live monitor raises)."""
    values = excursion_then_fall()
    whole = alarms(STEPS, values, start=300)
    assert len(whole) >= 2
    for cut in range(150, STEPS.size, 7):
        prefix = alarms(STEPS[:cut], values[:cut], start=300)
        assert prefix == [a for a in whole if a.step <= STEPS[cut - 1]]


def test_an_alarm_rearms_and_fires_again_and_a_steady_course_never_fires():
    steps = np.arange(0, 3000, 20)
    steady = 5.0 + 0.001 * steps  # a ramp keeps its course: no alarm however far it drifts
    assert alarms(steps, steady) == []
    steps_up = np.where(steps > 1000, 3.0, 0.0) + np.where(steps > 2000, 3.0, 0.0) + steady
    raised = alarms(steps, steps_up)
    assert [a.side for a in raised] == [1, 1] and 1000 < raised[0].onset_step <= raised[0].step < 1100
    assert 2000 < raised[1].step < 2100
    assert ALARM_RULE["hold"] == 3 and set(ALARM_RULE) >= {"baseline", "sigmas", "min_change", "armed"}


def test_ratio_interval_brackets_the_pooled_ratio():
    table = pd.DataFrame({"task": list("aabbcc"), "level": "x", "size": "y", "hits": [1, 0, 2, 1, 0, 0],
                          "alarms": [1, 1, 2, 2, 1, 1]})
    low, high = forecast.ratio_interval(table, "hits", "alarms", n_boot=300)
    assert 0 <= low <= 4 / 8 <= high <= 1
    assert np.isnan(forecast.ratio_interval(table.iloc[:0], "hits", "alarms")[0])


def test_random_recall_curve_known_answer():
    per_run = pd.DataFrame({"eligible": [True, True, False], "window_steps": [1000.0, 0.0, 500.0]})
    curve = forecast.random_recall_curve(per_run, [0.0, 1.0])
    assert curve["recall"].tolist() == pytest.approx([0.0, (1 - np.exp(-1.0)) / 2])


def test_a_smaller_band_raises_the_alarm_the_protocol_s_band_does_not(tmp_path):
    """The sensitivity curve recomputes alarms with the band scaled: a fall of 6% of RankMe's level before
    acquisition is below the protocol's band (10% of the level) and above a quarter of it."""
    path = write_run(tmp_path / "run", collapse_then(-0.36 * sig(2200, 30.0)), 2500)
    metrics = store.read_metrics(path)
    row = {**summary_row(metrics), "task": "copy", "level": "easy", "size": "405k", "seed": 0, "run": "x"}
    summary = pd.DataFrame([row])
    table = forecast.band_sensitivity(summary, metrics.assign(run="x"), signals=[("rankme", "final")],
                                       scales=(0.25, 1.0)).set_index("scale")
    assert table.loc[1.0, "alarms"] == 0 and table.loc[1.0, "recall"] == 0
    assert table.loc[0.25, "alarms"] >= 1 and table.loc[0.25, "recall"] == 1
