"""The claims across sizes (geomcap.claims.scale) on synthetic summaries whose answers are known, and the
figure that draws them."""
import matplotlib

matplotlib.use("Agg")
import numpy as np
import pandas as pd
import pytest

from geomcap import plots
from geomcap.claims.scale import (
    C6_TREND_COLUMNS, CONTRAST_COLUMNS, FLOOR_COLUMNS, SCALE_COLUMNS, against_controls, block_parameters,
    c2_floors_by_level, c6_regime_trend, claims_by_size, size_ratios)
from geomcap.presets import PRESETS


def _summary(size, parameters, ordered, floors, top_down, acquisition=(400, 450, 800, 900)):
    """Four runs of one preset: mod medium and hard, mul medium and hard (two seeds of each would be the
    same settings), with the given C1 orderings, collapse floors and top-down flags."""
    rows = []
    for i, (task, level) in enumerate((("mod", "medium"), ("mod", "hard"), ("mul", "medium"), ("mul", "hard"))):
        rows.append({"task": task, "level": level, "size": size, "seed": 0, "run": f"{size}-{i}",
                     "parameters": parameters, "acquisition_step": acquisition[i], "plateau_fraction": 0.0,
                     "ordered_collapse_recovery_acquisition": ordered[i], "rankme_collapsed": True,
                     "rankme_recovery_step": 100,
                     "rankme_floor_value": floors[i], "is_top_down": top_down[i]})
    return pd.DataFrame(rows)


def test_claims_by_size_reads_each_preset_and_arm():
    summary = pd.concat([_summary("405k", 4e5, [True] * 4, [2.0, 2.2, 3.0, 3.2], [True] * 4),
                         _summary("4m", 4e6, [True, False, True, False], [1.0, 1.2, 5.0, 5.4], [True, False] * 2)],
                        ignore_index=True)
    control = _summary("4m", 4e6, [None] * 4, [9.0, 9.0, 9.0, 9.0], [True] * 4, acquisition=(None,) * 4)
    control["run"] = control["run"] + "-control"
    table = claims_by_size(summary, control)
    assert list(table.columns) == list(SCALE_COLUMNS)
    value = lambda claim, stat, size, arm="real": table[(table["claim"] == claim) & (table["statistic"] == stat)  # noqa: E731
                                                        & (table["size"] == size) & (table["arm"] == arm)]["value"].iloc[0]
    assert value("C1", "ordered", "405k") == 1.0 and value("C1", "ordered", "4m") == 0.5
    assert value("C2", "MOD floor", "405k") == pytest.approx(2.1) and value("C2", "MOD floor", "4m") == pytest.approx(1.1)
    assert value("C2", "MUL floor", "4m") == pytest.approx(5.2)
    assert value("C3", "top-down", "4m") == 0.5
    assert value("C2", "MOD floor", "4m", "control") == 9.0
    assert not ((table["arm"] == "control") & (table["claim"] == "C1") & (table["statistic"] == "ordered")).any()
    assert size_ratios(table).to_dict() == {"405k": 1.0, "4m": 10.0}
    fig = plots.claims_by_size_figure(table)
    drawn = [ax for ax in fig.axes if ax.get_visible()]
    assert len(drawn) == table.groupby(["claim", "statistic"]).ngroups
    assert all(ax.get_xscale() == "log" for ax in drawn)


def test_a_preset_with_no_acquired_run_has_no_ordering_row():
    summary = _summary("14m", 1.4e7, [None] * 4, [1.0] * 4, [True] * 4, acquisition=(None,) * 4)
    table = claims_by_size(summary)
    assert not (table["statistic"] == "ordered").any() and (table["statistic"] == "collapse then recovery").any()
    assert np.isnan(size_ratios(table).get("405k", np.nan))


def _clock(size, parameters, level, acquisition, recovery=100):
    summary = _summary(size, parameters, [True] * 4, [2.0] * 4, [True] * 4, acquisition=acquisition)
    return summary.assign(level=level, rankme_recovery_step=recovery)


def test_c6_trend_finds_where_a_falling_ratio_reaches_one_and_none_where_it_does_not_fall():
    """Medium: acquisition at 4x, 2x, 1x the recovery at 1e5, 1e6, 1e7 parameters -> slope -log10(2) per decade,
    reaching 1 at 1e7. Hard: 3x at every size -> slope 0, never. A run never acquired, or whose collapse never
    recovered, is not read."""
    summary = pd.concat([_clock("a", 1e5, "hard", (300,) * 4), _clock("c", 1e7, "medium", (100, 100, None, 100)),
                         _clock("a", 1e5, "medium", (400,) * 4), _clock("b", 1e6, "medium", (200,) * 4),
                         _clock("b", 1e6, "hard", (300,) * 4),
                         _clock("c", 1e7, "hard", (300, 300, 300, 300), recovery=[100, 100, 100, None])],
                        ignore_index=True)
    per_size, fits = c6_regime_trend(summary)
    assert list(per_size.columns) == list(C6_TREND_COLUMNS)
    assert list(per_size["size"]) == ["a", "b", "c"] * 2  # by parameters within each level
    assert list(dict.fromkeys(per_size["level"])) == ["medium", "hard"]
    medium = per_size[per_size["level"] == "medium"].set_index("size")
    assert medium["value"].to_dict() == {"a": 4.0, "b": 2.0, "c": 1.0} and medium.loc["c", "runs"] == 3
    assert per_size[(per_size["level"] == "hard") & (per_size["size"] == "c")]["runs"].iloc[0] == 3
    fit = fits.set_index("level")
    assert fit.loc["medium", "slope"] == pytest.approx(-np.log10(2))
    assert fit.loc["medium", "reaches_one_at"] == pytest.approx(1e7)
    assert fit.loc["hard", "slope"] == pytest.approx(0, abs=1e-12) and np.isnan(fit.loc["hard", "reaches_one_at"])
    assert fit.loc["hard", "at_largest"] == pytest.approx(3.0)  # a flat line stays where it is
    _, far = c6_regime_trend(summary, largest=1e9)
    assert far.set_index("level").loc["medium", "at_largest"] == pytest.approx(0.25)  # two decades past 1e7
    one_preset, no_fit = c6_regime_trend(_clock("a", 1e5, "easy", (400,) * 4))
    assert len(one_preset) == 1 and no_fit.empty  # one preset: no line


def test_c8_per_preset_reads_the_proxy_against_real_runs_and_against_controls():
    """A 14m run whose final-layer RankMe is a monotone map of the 405k proxy's (rho 1) and a 14m control
    whose trajectory is the proxy's reversed (rho -1): each arm gets its own C8 row at 14m."""
    steps = [0, 10, 20, 40, 80]
    shape = np.array([8.0, 3.0, 2.0, 5.0, 6.0])
    runs = pd.DataFrame({"run": ["small", "big", "big-control"], "task": "mod", "level": "medium", "seed": 0,
                         "steps": 4000, "size": ["405k", "14m", "14m"],
                         "control": [None, None, "shuffled_answers"]})
    metrics = pd.DataFrame([{"run": run, "step": s, "layer": layer, "measure": "rankme", "value": v}
                            for run, values, layers in (("small", shape, 2), ("big", 3 * shape ** 2, 8),
                                                        ("big-control", -shape, 8))
                            for s, v in zip(steps, values) for layer in range(layers)])
    summary = _summary("405k", 4e5, [True] * 4, [2.0] * 4, [True] * 4)
    summary = pd.concat([summary, _summary("14m", 1.4e7, [True] * 4, [2.0] * 4, [True] * 4)], ignore_index=True)
    table = claims_by_size(summary, runs=runs, metrics=metrics)
    c8 = table[table["claim"] == "C8"].set_index("arm")
    assert list(c8["size"]) == ["14m", "14m"]
    assert c8.loc["real", "value"] == pytest.approx(1.0) and c8.loc["control", "value"] == pytest.approx(-1.0)
    assert (c8["runs"] == 1).all()
    # without a control in the runs, no control row
    alone = claims_by_size(summary, runs=runs[runs["run"] != "big-control"], metrics=metrics)
    assert list(alone.loc[alone["claim"] == "C8", "arm"]) == ["real"]


def test_block_parameters_count_what_a_built_model_holds_in_its_matrices():
    """12 L d^2 against the model built on the meta device: what is left is the embeddings (vocabulary and
    positions, d each) and the vectors (biases, LayerNorms: at most 16 d per block and 2 d at the end)."""
    from geomcap.models import preset_table
    built = {row["preset"]: row["parameters"] for row in preset_table(vocab_size=32)}
    for preset in ("405k", "4m", "14m", "48m", "151m"):
        cfg = PRESETS[preset]
        rest = built[preset] - block_parameters(preset)
        assert 0 < rest <= (32 + cfg.block_size) * cfg.d_model + 16 * cfg.d_model * cfg.n_layer + 2 * cfg.d_model
    assert abs(built["151m"] / block_parameters("151m") - 1) < 2e-3


def test_against_controls_marks_a_control_inside_the_real_interval_and_reads_no_single_setting():
    """C3: the control's 1.0 lies in the real runs' [0.8, 1.0] -> inside (the statistic does not tell learning
    from its absence); C8: the control's -0.4 lies below [0.1, 0.7] -> outside; C2 rests on one setting -> None;
    a control row with no real row, and real rows with no control, are left out."""
    def row(claim, statistic, size, arm, value, low, high, settings, runs=4):
        return {"claim": claim, "statistic": statistic, "size": size, "parameters": 1e7, "arm": arm, "value": value,
                "low": low, "high": high, "runs": runs, "settings": settings}
    table = pd.DataFrame([
        row("C3", "top-down", "14m", "real", 1.0, 0.8, 1.0, 4), row("C3", "top-down", "14m", "control", 1.0, 1, 1, 4),
        row("C8", "trajectory rho", "14m", "real", 0.3, 0.1, 0.7, 4),
        row("C8", "trajectory rho", "14m", "control", -0.4, -0.7, 0.1, 4),
        row("C2", "MOD floor", "14m", "real", 1.8, 1.8, 1.8, 1),
        row("C2", "MOD floor", "14m", "control", 2.2, 2.2, 2.2, 1),
        row("C4", "selectivity", "4m", "control", 0.0, -0.1, 0.1, 4),
        row("C1", "ordered", "14m", "real", 0.5, 0.2, 0.8, 4)])
    contrast = against_controls(table)
    assert list(contrast.columns) == list(CONTRAST_COLUMNS)
    assert contrast.set_index("claim")["control_inside"].to_dict() == {"C3": True, "C8": False, "C2": None}
    c8 = contrast.set_index("claim").loc["C8"]
    assert c8[["real", "control", "settings", "control_runs"]].tolist() == [0.3, -0.4, 4, 4]


def test_the_c8_panel_greys_the_sizes_outside_its_regime_and_no_other_panel_does():
    rows = [{"claim": c, "statistic": s, "size": size, "parameters": p, "arm": "real", "value": 0.5, "low": 0.4,
             "high": 0.6, "runs": 4, "settings": 4}
            for c, s, sizes in (("C1", "ordered", (("405k", 4e5), ("14m", 1.4e7))),
                                ("C8", "trajectory rho", (("1.3m", 1.3e6), ("14m", 1.4e7))))
            for size, p in sizes]
    fig = plots.claims_by_size_figure(pd.DataFrame(rows))
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    grey = panels["C8: trajectory rho"].patches
    assert len(grey) == 1 and grey[0].get_x() + grey[0].get_width() == pytest.approx(10 * 4e5)
    assert not panels["C1: ordered"].patches


def test_c2_floors_keep_each_level_apart_where_the_pooled_median_mixes_them():
    """405k has mod medium (floors 2.0, 2.0, 2.6 over three seeds) and hard (1.0); 1.3m has hard only (1.2). The
    pooled median would fall from 2.0 to 1.2 with size; level by level, hard rises 1.0 -> 1.2. A shuffled-answer
    control (floor 9) and another task are not read."""
    runs = [("mod", "medium", "405k", 4e5, f) for f in (2.0, 2.0, 2.6)] + [("mod", "hard", "405k", 4e5, 1.0),
            ("mod", "hard", "1.3m", 1.3e6, 1.2), ("copy", "hard", "1.3m", 1.3e6, 7.0)]
    summary = pd.DataFrame([{"task": t, "level": lv, "size": s, "parameters": p, "seed": i, "run": f"r{i}",
                             "rankme_floor_value": f, "control": None} for i, (t, lv, s, p, f) in enumerate(runs)])
    control = summary.iloc[[4]].assign(run="c", control="shuffled_answers", rankme_floor_value=9.0)
    floors = c2_floors_by_level(pd.concat([summary, control], ignore_index=True))
    assert list(floors.columns) == list(FLOOR_COLUMNS)
    assert list(zip(floors["level"], floors["size"])) == [("medium", "405k"), ("hard", "405k"), ("hard", "1.3m")]
    assert floors["value"].tolist() == [2.0, 1.0, 1.2] and floors["runs"].tolist() == [3, 1, 1]
    assert floors.loc[0, "low"] == 2.0 and floors.loc[0, "high"] == 2.6  # over seeds: the median of 3 draws
    fig = plots.c2_floor_figure(floors)
    (mod,) = [ax for ax in fig.axes if ax.get_visible()]
    assert mod.get_xscale() == "log" and len(mod.get_lines()) >= 3  # two levels and the paper's line


def test_the_readings_of_during_the_collapse_differ_exactly_where_the_collapse_never_recovered():
    """Run a: acquired at 30, floor 50, recovery 80 -> every reading. b: acquired 200 after its recovery at 80
    -> none. c: acquired at 30 before its floor at 60, never recovered -> before the floor and never recovered,
    not by the rule. d: acquired at 200 after its floor at 20, never recovered -> only never recovered. e: never
    acquired; f: never collapsed -> none."""
    from geomcap.claims.c6 import COLLAPSE_READINGS, collapse_readings

    summary = pd.DataFrame({"acquisition_step": [30, 200, 30, 200, None, 40],
                            "rankme_floor_step": [50, 50, 60, 20, 20, None],
                            "rankme_recovery_step": [80, 80, None, None, None, None],
                            "rankme_collapsed": [True, True, True, True, True, False]})
    readings = collapse_readings(summary)
    assert list(readings.columns) == list(COLLAPSE_READINGS)
    assert readings.astype(int).to_numpy().tolist() == [[1, 1, 1], [0, 0, 0], [0, 1, 1], [0, 0, 1], [0, 0, 0],
                                                        [0, 0, 0]]


def test_regime_margins_count_checkpoints_between_acquisition_and_recovery():
    """Checkpoints every step to 10, then every 10. a: acquired at 20 and recovered at 20 -> the same
    checkpoint, order not resolved (both in steps 11-20). b: acquired at 5, recovered at 6 -> the next
    checkpoint, exact steps. c: acquired at 20, recovered at 50 -> 3 checkpoints later. d: acquired at 60,
    after its recovery at 30 -> outside the regime, not listed."""
    from geomcap.claims.c6 import MARGIN_COLUMNS, regime_margins, regime_margins_text

    steps = list(range(11)) + [20, 30, 40, 50, 60, 70]
    metrics = pd.concat([pd.DataFrame({"run": run, "step": steps, "measure": "accuracy", "value": 0.0})
                         for run in "abcd"], ignore_index=True)
    summary = pd.DataFrame({"run": list("abcd"), "task": "mod", "level": "easy", "size": "14m", "seed": 0,
                            "acquisition_step": [20, 5, 20, 60], "rankme_recovery_step": [20, 6, 50, 30]})
    margins = regime_margins(summary, metrics)
    assert list(margins.columns) == MARGIN_COLUMNS
    assert margins["run"].tolist() == ["a", "b", "c"]
    assert margins["checkpoints_apart"].tolist() == [0, 1, 3]
    assert margins["acquisition_range"].tolist() == ["11\u201320", "5", "11\u201320"]
    assert margins["recovery_range"].tolist() == ["11\u201320", "6", "41\u201350"]
    text = regime_margins_text(margins)
    assert "which came first is not resolved" in text and "at step 5" in text and "3 checkpoints later" in text
    assert text.endswith("1 read at the recovery's own checkpoint (order not resolved), 1 one checkpoint before "
                         "it, 1 more than one checkpoint before it. Without the unresolved, 2 remain, fewer than the "
                         "3 runs C6's rule needs to read a rate: whether C6 is testable here rests on a tie at the "
                         "checkpoints' resolution.")
    assert "rests on a tie" not in regime_margins_text(margins.iloc[1:])  # 2 runs: untestable either way
    assert regime_margins_text(margins.iloc[:0]) == "No run was acquired during the collapse."


def test_a_rerun_resolves_a_tie_only_inside_the_interval_it_was_read_in():
    """Checkpoints every step to 10, then every 10. Runs a, b, c are ties at step 20 (acquired and recovered
    there, so somewhere in steps 11-20). a's rerun reads acquisition at 14 and recovery at 17: resolved, inside
    the regime. b's rerun reads recovery at 12 before acquisition at 15: resolved, outside. c's rerun reads
    acquisition at 25, outside steps 11-20: it did not train what c trained, so c stays a tie. d is no tie
    (acquired at 5, recovered at 30) and its rerun is not read."""
    from geomcap.claims.c6 import acquired_during_collapse, claim_c6, regime_margins, regime_margins_text, \
        resolve_ties, tied

    steps = np.array(list(range(11)) + [20, 30, 40])
    summary = pd.DataFrame({"run": list("abcd"), "task": "mod", "level": "easy", "size": "14m", "seed": 0,
                            "acquisition_step": [20, 20, 20, 5], "rankme_recovery_step": [20, 20, 20, 30]})
    reruns = pd.DataFrame({"run": ["ra", "rb", "rc", "rd"], "acquisition_step": [14, 15, 25, 1],
                           "rankme_recovery_step": [17, 12, 25, 2]})
    rerun_of = {"a": "ra", "b": "rb", "c": "rc", "d": "rd"}
    read = resolve_ties(summary, reruns, rerun_of, {run: steps for run in "abcd"})
    assert tied(summary).tolist() == [True, True, True, False]
    assert read["resolved_by"].tolist() == ["ra", "rb", None, None]
    assert read["rerun_departs"].tolist() == [False, False, True, False]
    assert read["acquisition_step"].tolist() == [14, 15, 20, 5]
    assert read["rankme_recovery_step"].tolist() == [17, 12, 20, 30]
    assert acquired_during_collapse(read).tolist() == [True, False, True, True]
    assert summary["acquisition_step"].tolist() == [20, 20, 20, 5]  # the input is left as it was
    # the margins read a resolved tie at its rerun's checkpoints, and say so
    every_step = np.arange(41)
    metrics = pd.concat([pd.DataFrame({"run": run, "step": at, "measure": "accuracy", "value": 0.0})
                         for run, at in (("a", steps), ("c", steps), ("d", steps), ("ra", every_step))],
                        ignore_index=True)
    margins = regime_margins(read, metrics)
    assert margins["run"].tolist() == ["a", "c", "d"] and margins["resolved_by"].notna().tolist() == [True, False, False]
    assert margins["resolved_by"].iloc[0] == "ra"
    assert margins["checkpoints_apart"].tolist() == [3, 0, 7]
    text = regime_margins_text(margins)
    assert "read again at a rerun's checkpoint at every step: acquired at step 14, RankMe recovered 3 steps later" \
        in text and "1 more than one checkpoint before it, 1 read again at a rerun's checkpoint at every step. " \
        "Without the unresolved, 2 remain" in text  # c's tie is still one
    from geomcap.claims.c6 import reread_ties_text

    assert reread_ties_text(read) == (
        "Read again at a rerun's checkpoint at every step: mod easy 14m, a tie at its checkpoints: RankMe recovered "
        "at step 12 and accuracy was acquired at 15, so it was not acquired during the collapse; mod easy 14m's "
        "rerun departed from the run's events (trained on another CPU: rounding), so its tie stands.")
    assert reread_ties_text(summary) == ""
    # C6's row counts the tie left and names the ones read again
    rows = pd.concat([read] * 3, ignore_index=True).assign(difficulty="easy", paper_rankme_is_precursor=False)
    ours = claim_c6(rows)["ours"]
    assert "(3 at their recovery's own checkpoint: order not resolved; 6 ties read again at a rerun's " \
           "checkpoint at every step, 3 of 6 then acquired during the collapse; 3 reruns departed from their " \
           "run's events: not read)" in ours


def test_a_rerun_reads_every_step_to_a_little_past_its_tie_and_trains_nothing_else():
    from geomcap.config import SCHEDULE_FIELDS, TrainConfig
    from geomcap.claims.c6 import RERUN_PAST_TIE, rerun_config

    run = TrainConfig(task="parity", level="hard", size="4m", steps=8000)
    rerun = rerun_config(run, 180)
    assert (rerun.dense_steps, rerun.stop_at) == (200, 200) and rerun_config(run, 190).stop_at == 200
    assert rerun_config(run, 100 - RERUN_PAST_TIE + 1).stop_at == 200  # at least RERUN_PAST_TIE steps past
    changed = {k for k, v in rerun.to_dict().items() if run.to_dict().get(k) != v}
    assert changed and changed <= set(SCHEDULE_FIELDS)
    with pytest.raises(ValueError, match="past the run's 150 steps"):
        rerun_config(TrainConfig(task="parity", level="hard", steps=150), 140)


def test_reruns_match_the_runs_they_trained_again():
    """A rerun differs from its run only in the checkpoint schedule and the stop; another seed, or another
    learning rate, is another run, whatever its schedule."""
    from geomcap.analysis.runs import reruns_of

    runs = pd.DataFrame({"run": ["r0", "r1"], "path": ["x", "y"], "task": "parity", "level": "hard", "seed": [0, 1],
                         "lr": 1e-3, "dense_steps": 128, "complete": True})
    reruns = pd.DataFrame({"run": ["d0", "d1", "lr"], "path": "z", "task": "parity", "level": "hard",
                           "seed": [0, 2, 1], "lr": [1e-3, 1e-3, 3e-4], "dense_steps": 200, "stop_at": 200,
                           "measures": [["llc"], [], []], "complete": True})
    assert reruns_of(runs, reruns) == {"r0": "d0"}
    assert reruns_of(runs, reruns.iloc[:0]) == {}


def test_a_recovery_relative_to_initial_rankme_asks_a_wider_model_to_climb_further():
    """Two runs whose RankMe falls to 2 and climbs back to 8, from 10 (small) and from 40 (wide) at
    initialisation: regaining half the drop is 6 for the small run (recovered) and 21 for the wide one (never),
    a tenth of it 2.8 and 5.8 (both recovered, and both before their acquisition at step 300)."""
    from geomcap.claims.scale import RECOVERY_COLUMNS, c1_recovery_thresholds

    steps = np.arange(0, 410, 10)
    def rankme(initial):  # falls to 2 by step 50, climbs linearly to 8 by step 200, stays
        return np.interp(steps, [0, 50, 200, 400], [initial, 2.0, 8.0, 8.0])
    metrics = pd.concat([pd.DataFrame({"run": run, "step": steps, "layer": 2, "measure": "rankme", "value": rankme(v)})
                         for run, v in (("small", 10.0), ("wide", 40.0), ("ctl", 10.0))], ignore_index=True)
    summary = pd.DataFrame({"run": ["small", "wide", "ctl"], "size": ["a", "b", "a"], "task": "mod", "level": "easy",
                            "parameters": [1e5, 1e7, 1e5], "acquisition_step": [300, 300, None],
                            "control": [None, None, "shuffled_answers"]})
    found = c1_recovery_thresholds(summary, metrics, fractions=(0.1, 0.5))
    assert list(found.columns) == list(RECOVERY_COLUMNS)
    table = found.set_index(["size", "recovery_fraction"])
    assert table["recovered"].to_dict() == {("a", 0.1): 1.0, ("a", 0.5): 1.0, ("b", 0.1): 1.0, ("b", 0.5): 0.0}
    assert table["ordered"].to_dict() == table["recovered"].to_dict()
    assert table.loc[("b", 0.5), "initial"] == pytest.approx(40.0) and table.loc[("a", 0.5), "collapsed"] == 1
    fig = plots.c1_recovery_figure(found)
    right = [ax for ax in fig.axes if ax.get_title().startswith("C1")][0]
    assert len(right.get_lines()) == 2 and right.get_xscale() == "log"  # one line per fraction


def test_missing_points_name_the_presets_a_panel_lacks_and_why():
    """Real C3 rows at 4m only and a control C3 row at 405k: C3 lacks 405k and 1.3m (a control point is not a
    real one); C1's ordered share is at all three presets, so it is not listed; every other statistic lacks
    all three."""
    from geomcap.claims.scale import GAP_COLUMNS, SCALE_GAPS, SCALE_STATISTICS, missing_points

    def row(claim, statistic, size, arm="real"):
        return {"claim": claim, "statistic": statistic, "size": size, "arm": arm}
    table = pd.DataFrame([row("C3", "top-down", "4m"), row("C3", "top-down", "405k", "control")]
                         + [row("C1", "ordered", s) for s in ("405k", "1.3m", "4m")])
    gaps = missing_points(table, ["405k", "1.3m", "4m"])
    assert list(gaps.columns) == list(GAP_COLUMNS)
    by = gaps.set_index(["claim", "statistic"])
    assert by.loc[("C3", "top-down"), "sizes"] == "405k, 1.3m"
    assert by.loc[("C3", "top-down"), "why"] == SCALE_GAPS["C3", "top-down"]
    assert ("C1", "ordered") not in by.index
    assert len(gaps) == len(SCALE_STATISTICS) - 1 and set(SCALE_GAPS) == set(SCALE_STATISTICS)
    assert (by.drop(index=("C3", "top-down"))["sizes"] == "405k, 1.3m, 4m").all()


def test_size_trends_compare_the_smallest_and_largest_presets_by_their_intervals():
    """Known answers on a synthetic table: a statistic whose intervals separate rises or falls; overlapping
    ones stay; one preset is named as such; a preset read on one setting is not compared; controls and
    missing values are not read."""
    from geomcap import results

    def row(claim, statistic, size, value, low, high, settings=4, arm="real"):
        return {"claim": claim, "statistic": statistic, "size": size,
                "parameters": {"405k": 4e5, "4m": 4e6, "14m": 1.4e7}[size],
                "arm": arm, "value": value, "low": low, "high": high, "runs": settings, "settings": settings}
    table = pd.DataFrame([
        row("C1", "ordered", "14m", 0.4, 0.2, 0.6), row("C1", "ordered", "405k", 0.99, 0.9, 1.0),
        row("C2", "MUL floor", "405k", 2.9, 2.8, 3.1), row("C2", "MUL floor", "14m", 4.0, 3.6, 4.3),
        row("C2", "MOD floor", "405k", 1.7, 1.4, 1.8), row("C2", "MOD floor", "14m", 1.8, 1.75, 1.85),
        row("C2", "MOD floor", "14m", 9.0, 9.0, 9.0, arm="control"),
        row("C5", "recall", "405k", 0.0, 0.0, 0.0), row("C5", "recall", "14m", np.nan, np.nan, np.nan),
        row("C8", "trajectory rho", "4m", 0.7, 0.5, 0.8), row("C8", "trajectory rho", "14m", 0.1, 0.1, 0.1, settings=1),
    ])
    trends = results.size_trends(table).set_index(["claim", "statistic"])["change"]
    assert trends.to_dict() == {("C1", "ordered"): "falls", ("C2", "MOD floor"): "within the intervals",
                                ("C2", "MUL floor"): "rises", ("C5", "recall"): "one preset",
                                ("C8", "trajectory rho"): "not compared"}
    text = results.size_trends_text(results.size_trends(table))
    assert text.startswith("C1 (ordered) falls: 0.99 [0.90, 1.00] at 405k, 0.40 [0.20, 0.60] at 14m;")
    assert "C5 (recall) only at 405k: 0.00 [0.00, 0.00]" in text and "9.00" not in text
    assert results.size_trends_text(results.size_trends(table.iloc[:0])) == "No statistic has a value yet."
