"""The precursor rules cannot see the answer: synthetic runs whose answer is known, read through `geomcap show
--json` both ways (a rule that fires where it should not, or not where it should, fails here)."""
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

GEOMCAP = [sys.executable, "-m", "geomcap.cli"]
#: the protocol's schedule: every step to 128, then every 25 steps to 4000
STEPS = np.concatenate([np.arange(129), np.arange(150, 4001, 25)])


def sig(mid, width=40.0):
    return 1.0 / (1.0 + np.exp(-(STEPS - mid) / width))


def write_run(path, rankme, acquisition):
    """A run directory: accuracy, train accuracy and test loss move together at ``acquisition``; the final
    layer's RankMe is ``rankme`` (layer 0, the embedding, is constant)."""
    acc = sig(acquisition)
    series = {"accuracy": acc, "train_accuracy": acc, "first_token_accuracy": acc,
              "test_loss": 2.0 + 1.0 * (STEPS < 20) - 1.8 * acc}
    rows = [(s, -1, name, v) for name, values in series.items() for s, v in zip(STEPS, values)]
    rows += [(s, 0, "rankme", 1.0) for s in STEPS] + [(s, 1, "rankme", v) for s, v in zip(STEPS, rankme)]
    path.mkdir(parents=True)
    pd.DataFrame(rows, columns=["step", "layer", "measure", "value"]).to_csv(path / "metrics.csv", index=False)
    (path / "config.json").write_text(json.dumps({"task": "copy", "level": "easy", "size": "405k", "seed": 0,
                                                  "steps": 4000}))
    return path


def collapse_then(rest):
    """RankMe 8 at step 0, floor 2 at steps 20-40, back to 6 by step 60 (recovered), then ``rest`` added."""
    early = np.interp(STEPS, [0, 20, 40, 60], [8.0, 2.0, 2.0, 6.0])
    return early + np.where(STEPS >= 60, rest, 0.0)


def show(path) -> dict:
    out = subprocess.run([*GEOMCAP, "show", "--json", str(path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["summary"]


def informative(summary) -> bool:
    p = summary["precursors"]["rankme"]
    return bool(p["is_precursor"] and p["leads_test_loss"])


def test_the_same_series_under_two_behaviours_gets_the_same_transition(tmp_path):
    rankme = collapse_then(4.0 * sig(1200))
    early, late = (show(write_run(tmp_path / str(a), rankme, a)) for a in (2000, 3000))
    assert early["acquisition_step"] < late["acquisition_step"]
    for reading in ("precursors", "paper_precursors"):
        assert early[reading]["rankme"]["measure_step"] == late[reading]["rankme"]["measure_step"]
    assert early["reading_start"] == late["reading_start"] == 300


@pytest.mark.parametrize("case", ["slow ramp", "white noise", "test loss copy shifted later"])
def test_null_series_are_not_informative_precursors(tmp_path, case):
    rng = np.random.default_rng(0)
    rankme = {"slow ramp": collapse_then(0.002 * (STEPS - 60)),
              "white noise": collapse_then(rng.normal(0, 0.3, STEPS.size)),
              "test loss copy shifted later": collapse_then(4.0 * sig(3000 + 400))}[case]
    summary = show(write_run(tmp_path / "run", rankme, 3000))
    assert summary["acquisition_step"] is not None
    assert not informative(summary), summary["precursors"]["rankme"]
    if case != "test loss copy shifted later":  # a null with no course change has no transition at all
        assert summary["precursors"]["rankme"]["measure_step"] is None


def test_a_genuine_rise_long_before_behaviour_is_an_informative_precursor(tmp_path):
    summary = show(write_run(tmp_path / "run", collapse_then(4.0 * sig(1200)), 3000))
    p = summary["precursors"]["rankme"]
    assert informative(summary) and p["informative"]
    assert 1000 <= p["measure_step"] <= 1300 and p["gap_checkpoints"] >= 60
    # the paper's reading fires on the collapse whatever follows, in the null runs too
    assert summary["paper_precursors"]["rankme"]["measure_step"] < 60


def test_show_summarises_what_is_there_without_accuracy_or_with_non_finite_rows(tmp_path):
    """A monitor's or a checkpoints folder's metrics have no accuracy; a metrics file may hold one row or NaN:
    `show` reports what it can, says what it could not and why, and counts the rows it dropped."""
    one = tmp_path / "one"
    one.mkdir()
    (one / "metrics.csv").write_text("step,layer,measure,value\n0,-1,rankme,3.0\n")
    summary = show(one / "metrics.csv")
    assert summary["acquisition_step"] is None and summary["collapse"] is None
    assert any("no accuracy" in note for note in summary["notes"])
    rows = [(s, layer, "rankme", v) for s, v in zip(STEPS, collapse_then(0.0)) for layer in (0, 1)]
    rows += [(s, -1, "loss", np.nan if s == 5 else 1.0) for s in STEPS]
    monitor = tmp_path / "monitor"
    monitor.mkdir()
    pd.DataFrame(rows, columns=["step", "layer", "measure", "value"]).to_csv(monitor / "metrics.csv", index=False)
    summary = show(monitor)
    assert 40 < summary["collapse"]["recovery_step"] <= 60 and summary["nonfinite_rows"] == 1
    assert any("1 row(s) with a non-finite value dropped (loss 1)" in note for note in summary["notes"])
    out = subprocess.run([*GEOMCAP, "show", str(monitor)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "non-finite" in out.stdout and "Traceback" not in out.stderr
