"""Tables across runs: loading, filtering, summaries, parameter validation."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from geomcap import paper, results, store
from geomcap.sweep import grid, run_sweep

TINY = dict(n_linear_checkpoints=4, n_log_checkpoints=4, n_train=500, n_test=64, probe_size=64,
            train_eval_size=64, batch_size=16, steps=8)


@pytest.fixture(scope="module")
def store_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    configs = grid(tasks=["copy", "parity"], levels=["easy"], seeds=[0, 1], **TINY)
    from concurrent.futures import ThreadPoolExecutor
    assert all(r.ok for r in run_sweep(configs, root=root, executor=ThreadPoolExecutor(1), progress=False))
    return root


def test_load_and_filter(store_root):
    runs = results.load_runs(store_root)
    assert len(runs) == 4 and list(runs["task"]) == ["copy", "copy", "parity", "parity"]
    assert len(results.load_runs(store_root, task="parity", seed=[1])) == 1
    with pytest.raises(KeyError, match="unknown run field"):
        results.load_runs(store_root, colour="blue")


def test_metrics_and_summary(store_root):
    runs = results.load_runs(store_root, task="copy")
    metrics = results.load_metrics(runs, measures=["accuracy"])
    assert set(metrics["measure"]) == {"accuracy"} and set(metrics["seed"]) == {0, 1}
    table = results.summary_table(runs)
    assert list(table["run"]) == list(runs["run"])
    # the known answer, brute force from each run's own series: the first of three checkpoints in a row above 0.5
    for run, row in zip(runs.itertuples(), table.itertuples()):
        acc = metrics[metrics["run"] == run.run].sort_values("step")
        above = (acc["value"] > 0.5).to_numpy()
        first = next((i for i in range(len(above) - 2) if above[i:i + 3].all()), None)
        expected = None if first is None else int(acc["step"].iloc[first])
        assert (None if pd.isna(row.acquisition_step) else int(row.acquisition_step)) == expected


def test_parameter_checks():
    """A notebook's selection, its layers and its positive integers go through the parameter rows: the same
    line as the notebook's own check of its parameters (parameters.check) for the same value."""
    from geomcap import parameters
    from geomcap.analysis.selection import check_layers, section_selection
    from geomcap.tasks import TASKS

    assert section_selection("all", "easy,hard", ("405k",), "all") == (list(TASKS), ["easy", "hard"], ["405k"], "all")
    assert section_selection("mod", "hard", "1.3m", 2) == (["mod"], ["hard"], ["1.3m"], [2])
    for name, value in (("tasks", ["copy", "chess"]), ("sizes", "7b"), ("seeds", [-1]), ("levels", "")):
        selection = {"tasks": "all", "levels": "all", "sizes": "all", "seeds": "all", name: value}
        with pytest.raises(parameters.ParameterError) as from_the_selection:
            section_selection(**selection)
        with pytest.raises(parameters.ParameterError) as from_the_notebook:
            parameters.check({name: value}, cells=["", f"# parameters\n{name} = 'all'\n"])
        assert str(from_the_selection.value) == str(from_the_notebook.value)
        assert str(from_the_selection.value).startswith(f"parameter {name}: ") and "\n" not in str(from_the_notebook.value)
    with pytest.raises(ValueError, match="parameter steps: must be a positive integer, got -5"):
        results.check_positive_int("steps", -5)
    assert check_layers("final", [0, 2, 1]) == [2] and check_layers("all", [1, 0]) == [0, 1]
    assert check_layers("2,0", range(3)) == [0, 2] and check_layers(1, range(3)) == [1]
    with pytest.raises(parameters.ParameterError, match="^parameter layers: unknown value 3; choose one of: 0, 1, 2$"):
        check_layers([0, 3], range(3))
    with pytest.raises(parameters.ParameterError, match="^parameter layers: must be a non-negative integer, got 'deep'"):
        check_layers("deep", range(3))


def _synthetic_metrics(run, task, size, steps, values, n_layers=3):
    import pandas as pd
    rows = [{"step": s, "layer": layer, "measure": "rankme", "value": v * (layer + 1), "run": run,
             "task": task, "size": size, "level": "hard", "seed": 0}
            for s, v in zip(steps, values) for layer in range(n_layers)]
    return pd.DataFrame(rows)


def test_trajectory_correlation_known_answers():
    import numpy as np
    import pandas as pd
    steps = [0, 10, 20, 30, 40]
    base = np.array([8.0, 3.0, 2.0, 5.0, 6.0])
    runs = pd.DataFrame({"task": ["mod", "mod", "add", "add"], "level": "hard", "seed": 0, "steps": 40,
                         "size": ["405k", "1.3m", "405k", "1.3m"], "run": ["a", "b", "c", "d"]})
    metrics = pd.concat([
        _synthetic_metrics("a", "mod", "405k", steps, base),
        _synthetic_metrics("b", "mod", "1.3m", steps, 3 * base ** 2, n_layers=4),   # monotone map: rho = 1
        _synthetic_metrics("c", "add", "405k", steps, base),
        _synthetic_metrics("d", "add", "1.3m", steps, -base, n_layers=4),          # reversed: rho = -1
    ])
    table = results.trajectory_correlation(metrics, runs, "405k", "1.3m").set_index("task")
    assert table.loc["mod", "spearman"] == pytest.approx(1.0)
    assert table.loc["add", "spearman"] == pytest.approx(-1.0)
    assert table.loc["add", "pearson"] == pytest.approx(-1.0)
    assert table.loc["mod", "checkpoints"] == 5
    # a pair needs the same step count at both presets
    assert results.proxy_pairs(runs.assign(steps=[40, 80, 40, 40]), "405k", "1.3m")["task"].tolist() == ["add"]


def test_cross_task_correlation_tells_a_proxy_of_its_task_from_a_shape_every_run_shares():
    steps = [0, 10, 20, 30, 40, 50]
    shapes = {"mod": np.array([8.0, 3.0, 2.0, 5.0, 6.0, 7.0]), "add": np.array([8.0, 7.0, 6.0, 2.0, 3.0, 1.0])}
    runs = pd.DataFrame({"task": ["mod", "add", "mod", "add"], "level": "hard", "seed": 0, "steps": 50,
                         "size": ["405k", "405k", "14m", "14m"], "run": ["sm", "sa", "lm", "la"]})

    def metrics(large_shapes):
        return pd.concat([_synthetic_metrics("sm", "mod", "405k", steps, shapes["mod"]),
                          _synthetic_metrics("sa", "add", "405k", steps, shapes["add"]),
                          _synthetic_metrics("lm", "mod", "14m", steps, 2 * large_shapes["mod"], n_layers=4),
                          _synthetic_metrics("la", "add", "14m", steps, 2 * large_shapes["add"], n_layers=4)])

    # each task its own shape: a proxy of the same task correlates 1, of the other task less
    own = results.cross_task_correlation(metrics(shapes), runs, "405k", "14m")
    assert len(own) == 4 and list(own.columns) == results.CROSS_TASK_COLUMNS
    assert own.loc[own["same_task"], "spearman"].tolist() == pytest.approx([1.0, 1.0])
    assert (own.loc[~own["same_task"], "spearman"] < 0.5).all()
    # every large run the mod shape (no task-specific trajectory): the wrong proxy does as well as the right one
    shared = results.cross_task_correlation(metrics({"mod": shapes["mod"], "add": shapes["mod"]}), runs, "405k", "14m")
    rho = shared.set_index(["task_small", "task_large"])["spearman"]
    assert rho[("mod", "add")] == pytest.approx(1.0) and rho[("add", "add")] < 0.5  # the wrong proxy predicts best
    assert results.own_task_rank(own)["best"].tolist() == [True, True]
    ranks = results.own_task_rank(shared).set_index("task")
    assert ranks.loc["add", "rank"] == 2 and ranks.loc["mod", "rank"] == 1 and (ranks["proxies"] == 2).all()
    assert "best of 2 in 1 of 2 large runs" in results.claim_c8(
        shared[shared["same_task"]], size_ratio=35, cross_task=shared)["control"]


def test_proxy_preset_is_the_largest_with_enough_pairs_never_a_correlation():
    runs = pd.DataFrame({"task": ["a", "b", "c"] * 3 + ["a", "b"], "level": "medium", "seed": 0, "steps": 100,
                         "size": ["405k"] * 3 + ["1.3m"] * 3 + ["4m"] * 3 + ["14m"] * 2})
    runs["run"] = [f"r{i}" for i in range(len(runs))]
    assert results.proxy_preset(runs, "405k") == "4m"               # 14m has 2 pairs, MIN_RUNS is 3
    assert results.proxy_preset(runs, "405k", min_pairs=2) == "14m"
    assert results.proxy_preset(runs, "405k", min_pairs=4) is None
    assert results.proxy_preset(runs[runs["size"] == "405k"], "405k") is None


def test_c8_reads_its_controls():
    corr = pd.DataFrame({"spearman": [0.95, 0.97, 0.93]})
    nothing_learnt = pd.DataFrame({"spearman": [0.9, 0.96, 0.94]})
    row = results.claim_c8(corr, size_ratio=35, control=nothing_learnt)
    assert row["verdict"] == "reproduced, not specific to learning"
    assert "shuffled-answer runs: median rho 0.94 over 3 pairs" in row["control"]
    assert results.claim_c8(corr, size_ratio=35, control=nothing_learnt - 0.5)["verdict"] == "reproduced"
    cross = pd.DataFrame({"level": "medium", "seed": 0, "steps": 100, "task_small": ["a", "b", "c"], "task_large": "a",
                          "same_task": [True, False, False], "spearman": [0.95, 0.1, 0.3]})
    text = results.claim_c8(corr, size_ratio=35, cross_task=cross)["control"]
    assert "another task: median rho 0.20 over 2 pairs; its own task's proxy is the best of 3 in 1 of 1" in text
    low = results.claim_c8(corr - 0.5, size_ratio=35, control=nothing_learnt)
    assert low["verdict"] == "not reproduced"  # the controls only ever take a verdict down


def test_timing_concordance_counts_pairs():
    import pandas as pd
    # three tasks: small order a < b < c; large order a < c < b -> pairs (a,b) (a,c) concordant, (b,c) not
    summary = pd.DataFrame({
        "task": ["a", "b", "c"] * 2, "level": "hard", "seed": 0, "steps": 100,
        "size": ["405k"] * 3 + ["1.3m"] * 3,
        "rankme_transition_step": [10, 20, 30, 5, 40, 30],
        "acquisition_step": pd.array([10, 10, None, 20, 30, 40], dtype="Int64")})
    row = results.timing_concordance(summary, "405k", "1.3m").iloc[0]
    assert (row["concordant"], row["discordant"], row["tied"]) == (2, 1, 0)
    assert row["rate"] == pytest.approx(2 / 3)
    # acquisition timing: c is missing at 405k, (a, b) tied at 405k -> no comparable pair
    row = results.timing_concordance(summary, "405k", "1.3m", timing="acquisition_step").iloc[0]
    assert (row["pairs"], row["tied"]) == (1, 1) and pd.isna(row["rate"])


def test_pairing_presets_refuses_two_settings_of_one_task_and_level():
    import pandas as pd
    # mod/hard seed 0 at 405k twice (two task_params): which one pairs with 1.3m is ambiguous
    summary = pd.DataFrame({"run": ["p47", "p97", "big"], "task": "mod", "level": "hard", "seed": 0,
                            "steps": 100, "size": ["405k", "405k", "1.3m"], "rankme_transition_step": [10, 20, 30]})
    with pytest.raises(ValueError, match="runs p47, p97 share task, level, seed, steps at preset 405k"):
        results.timing_concordance(summary, "405k", "1.3m")
    with pytest.raises(ValueError, match="p47, p97"):
        results.proxy_pairs(summary, "405k", "1.3m")
    one = summary[summary["run"] != "p47"]
    assert list(results.proxy_pairs(one, "405k", "1.3m")[["run_small", "run_large"]].iloc[0]) == ["p97", "big"]


def test_paper_vs_ours_rows(store_root):
    runs = results.load_runs(store_root)
    summary = results.summary_table(runs)
    metrics = results.load_metrics(runs, measures=["accuracy", "first_token_accuracy", "probe_accuracy", "rankme"])
    rows = [results.claim_c1(summary), results.claim_c2(summary), results.claim_c3(summary),
            results.claim_c4(results.probe_table(metrics, runs)), results.claim_c5(summary),
            results.claim_c6(summary), results.claim_c7(),
            results.claim_c8(results.trajectory_correlation(metrics, runs, "405k", "1.3m"))]
    table = results.paper_vs_ours(rows)
    assert list(table.index) == ["C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8"]
    assert table.loc["C2", "ours"] == "no MOD run selected"          # the tiny store has copy and parity only
    assert table.loc["C8", "ours"].startswith("no task trained at both presets")
    assert table.loc["C1", "paper"] == paper.figure_text("C1") == paper.CLAIMS["C1"]["figure"] + " (v4)"
    assert table.loc["C3", "paper"] == "28/32 top-down (v4; v1: 32/32)"  # the versions differ, and say so
    for claim in ("C2", "C3", "C7", "C8"):
        assert table.loc[claim, "verdict"] == "not testable"
    assert set(table["verdict"]) <= set(results.VERDICTS) and table["rule"].str.len().min() > 20
    assert list(results.verdict_table(rows).columns) == ["paper", "ours", "control", "verdict", "rule"]
    glued = results.glue_values(rows)  # values for the notebooks to glue: the library writes nothing
    assert len(glued) == 4 * len(rows) and glued["C2_ours"] == "no MOD run selected"
    assert glued["C2_verdict"] == "not testable" and glued["C1_value"] is rows[0]["value"]
    assert [row["claim"] for row in results.task_claims_from_store(store_root)] == ["C1", "C2", "C3", "C4", "C5", "C6", "C8"]


def test_c2_reads_every_preset_of_the_second_store(store_root, tmp_path):
    """C2 speaks of every size: a MOD run (and its control) that only the second store holds decides it."""
    from concurrent.futures import ThreadPoolExecutor
    more, controls = tmp_path / "scale", tmp_path / "scale-controls"
    for root, extra in ((more, {}), (controls, {"control": "shuffled_answers"})):
        configs = grid(tasks=["mod"], levels=["easy"], sizes=["1.3m"], **TINY, **extra)
        assert all(r.ok for r in run_sweep(configs, root=root, executor=ThreadPoolExecutor(1), progress=False))
    alone = results.claims_from_analysis(results.analyse_claims(store_root))[1]
    assert alone["ours"] == "no MOD run selected" and alone["verdict"] == "not testable"
    a = results.analyse_claims(store_root, proxy_root=more, proxy_controls_root=controls)
    c2 = results.claims_from_analysis(a)[1]
    assert c2["claim"] == "C2" and c2["ours"].startswith("MOD floor 1.3m ")
    assert c2["control"].startswith("MOD floor in the controls ")
    effect = results.claim_effects(a).set_index(["claim", "arm"]).loc["C2"]
    assert effect.loc["real", "runs"] == effect.loc["control", "runs"] == 1


def test_setting_runs_pair_each_change_with_its_baseline(store_root, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    changed = grid(tasks=["copy"], levels=["easy"], seeds=[0], **{**TINY, "warmup_steps": 2})  # default at 8 steps: 0
    changed += grid(tasks=["copy"], levels=["easy"], seeds=[0], **{**TINY, "lr": 1e-2})
    assert all(r.ok for r in run_sweep(changed, root=tmp_path, executor=ThreadPoolExecutor(1), progress=False))
    runs = results.setting_runs(tmp_path, baseline_root=store_root)
    # the baseline is the store's copy/easy seed 0 only (TINY's batch of 16 is itself a change)
    assert sorted(runs["setting"]) == ["batch_size=16", "batch_size=16, lr=0.01", "batch_size=16, warmup_steps=2"]
    assert set(runs["task"]) == {"copy"} and set(runs["seed"]) == {0}
    table = results.setting_table(runs)
    assert len(table) == 3 and "rankme_floor_value" in table.columns
    claims = results.setting_claims(table)
    assert list(claims["runs"]) == [1, 1, 1] and claims["mod_floor"].isna().all()
    by_task = results.setting_by_task(table)
    assert list(by_task["setting"]) == ["batch_size=16", "batch_size=16, lr=0.01", "batch_size=16, warmup_steps=2"]
    assert (by_task["runs"] == 1).all() and by_task["floor"].notna().all()
    with pytest.raises(ValueError, match="no complete run"):
        results.setting_runs(tmp_path / "empty", baseline_root=store_root)


def test_training_setting_names_only_what_changed():
    row = {"task": "mod", "level": "hard", "size": "405k", "seed": 0, "steps": 3000, "lr": 1e-3,
           "weight_decay": 1.0, "beta1": 0.9, "beta2": 0.98, "warmup_steps": 100, "min_lr_ratio": 0.1,
           "grad_clip": 1.0, "batch_size": 128}
    assert results.training_setting(row) == "default"
    assert results.training_setting({**row, "weight_decay": 0.1}) == "weight_decay=0.1"  # mod's default is 1.0
    assert results.training_setting({**row, "warmup_steps": 0, "lr": 3e-4}) == "lr=0.0003, warmup_steps=0"
    assert results.training_setting({**row, "answer_order": "lsd"}) == "answer_order=lsd"
    assert results.training_setting({**row, "answer_order": float("nan")}) == "default"  # made before the field


def test_the_analysis_reaches_neither_the_sweep_nor_the_sections():
    """analysis/sensitivity imported sweep.SETTABLE_FIELDS, and analysis/selection's section_runs imported
    sections.section_grid (the sweep's side) on a recompute: the analysis reached up to the sweep. Now what a
    sweep may set is a flag of the parameter rows, and the runs a recompute asks for are passed in."""
    import ast
    import inspect

    from geomcap.analysis import selection, sensitivity

    for module in (selection, sensitivity):  # every import, those inside functions too
        imported = {node.module for node in ast.walk(ast.parse(inspect.getsource(module)))
                    if isinstance(node, ast.ImportFrom)}
        assert not imported & {"geomcap.sweep", "geomcap.sections"}, (module.__name__, imported)
    code = ("import sys; from geomcap.analysis import sensitivity; "
            "row = dict(task='mod', level='hard', size='405k', seed=0, steps=3000, lr=3e-4, precision='bf16'); "
            "setting = sensitivity.training_setting(row); assert setting == 'lr=0.0003, precision=bf16', setting; "
            "loaded = [m for m in ('geomcap.sweep', 'geomcap.sections') if m in sys.modules]; assert not loaded, loaded")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def _summary(classes, rankme_leads, leads_loss, gap=5):
    """A summary table with one row per run (each its own setting, so intervals have something to resample):
    its behaviour class, RankMe's informative reading, and the paper's reading (the same values)."""
    acq = {"easy": 100, "hard": 1500, "intermediate": 400, "not acquired": None}
    plateau = {"easy": 0.2, "hard": 0.8, "intermediate": 0.1, "not acquired": 1.0}
    n = len(classes)
    table = pd.DataFrame({
        "task": [f"t{i}" for i in range(n)], "size": "405k", "level": "hard",
        "acquisition_step": pd.array([acq[c] for c in classes], dtype="Int64"),
        "plateau_fraction": [plateau[c] for c in classes],
        "rankme_recovery_step": pd.array([60] * n, dtype="Int64"),
        "rankme_transition_step": [(acq[c] or 0) // 2 for c in classes],
        "rankme_is_precursor": rankme_leads, "rankme_leads_test_loss": leads_loss,
        "rankme_gap_steps": pd.array([gap * 10] * n, dtype="Int64"),
        "rankme_gap_checkpoints": pd.array([gap] * n, dtype="Int64"), "rankme_gap_share": [0.5] * n})
    for column in ("transition_step", "is_precursor", "leads_test_loss", "gap_checkpoints", "gap_share"):
        table[f"paper_rankme_{column}"] = table[f"rankme_{column}"]
    return table


def test_difficulty_class_from_behaviour_only():
    table = pd.DataFrame({"acquisition_step": pd.array([100, 300, 301, 600, 600, 2000, None], dtype="Int64"),
                          "plateau_fraction": [0.9, 0.0, 0.9, 0.5, 0.49, 0.7, 1.0],
                          "rankme_floor_step": [500] * 7})  # ignored: never from RankMe
    assert results.difficulty_class(table).tolist() == [
        "easy", "easy", "intermediate", "hard", "intermediate", "hard", "not acquired"]
    # without a plateau column (e.g. a Pythia table) no run can be hard
    assert results.difficulty_class(table.drop(columns="plateau_fraction")).tolist()[3] == "intermediate"


def _forecast_summary(acquisitions, rankme_offsets, loss_offsets=None, acquired=True):
    """Summary rows with alarms, for C5's forecast reading: one run per acquisition step (each its own task: its
    own setting), checkpoints every 25 steps to 4000, armed from step 700; RankMe's final layer (layer 2) raises
    an alarm at ``acquisition - offset`` (an offset per run; a tuple: several alarms; None: none), the test loss
    likewise (``loss_offsets``).
    ``acquired=False``: runs that never acquire (controls), whose "acquisition" only places the alarms."""
    grid = list(range(0, 4001, 25))
    rows = []
    for i, (a, r_off) in enumerate(zip(acquisitions, rankme_offsets)):
        l_off = None if loss_offsets is None else loss_offsets[i]
        alarm = lambda offset, layer: [] if offset is None else [  # noqa: E731
            {"step": a - o, "onset_step": a - o - 50, "side": -1, "layer": layer}
            for o in (offset if isinstance(offset, tuple) else (offset,))]
        rows.append({"task": f"t{i}", "level": "hard", "size": "405k", "seed": 0, "run": f"r{i}",
                     "acquisition_step": a if acquired else None, "plateau_fraction": 0.9, "last_step": 3900,
                     "reading_start": 300, "first_alarm_step": 700, "earliest_alarm_step": 700,
                     "checkpoint_grid": grid, "alarm_final_layers": {"rankme": 2, "test_loss": -1},
                     "alarms": {"rankme": alarm(r_off, 2), "test_loss": alarm(l_off, -1)}})
    table = pd.DataFrame(rows)
    table["acquisition_step"] = pd.array(table["acquisition_step"], dtype="Int64")
    return table


def test_claims_c5_c6_known_both_ways():
    acquisitions = [1500, 1600, 1700, 1800, 1900, 2000, 2100, 2200]
    quiet_controls = _forecast_summary(acquisitions, [None] * 8, acquired=False)
    # the paper's shape: RankMe's alarm comes 200 steps before every acquisition, the test loss's after it
    shaped = _forecast_summary(acquisitions, [200] * 8, [-100] * 8)
    c5 = results.claim_c5(shaped, quiet_controls)
    assert c5["verdict"] == "reproduced" and c5["value"] == 1.0
    assert "recall 1.00 (8 runs)" in c5["ours"] and "controls: 0 RankMe alarm(s)" in c5["control"]
    # the test loss forecasts better (every run) than RankMe (7 of 8): RankMe has skill, not the claim -> partly
    behind = _forecast_summary(acquisitions, [200] * 7 + [1000], [100] * 8)
    assert results.claim_c5(behind, quiet_controls)["verdict"] == "partly reproduced"
    # RankMe alarms as often where nothing is learnt: skill, but not specific to learning -> partly
    noisy = _forecast_summary(acquisitions, [(200, 600, 1000)] * 8, acquired=False)
    assert results.claim_c5(shaped, noisy)["verdict"] == "partly reproduced"
    # alarms far from acquisition (soon after arming): no recall beyond random alarms -> not reproduced
    early = _forecast_summary(acquisitions, [a - 725 for a in acquisitions], [-100] * 8)
    assert results.claim_c5(early, quiet_controls)["verdict"] == "not reproduced"
    # too few hard runs
    assert results.claim_c5(shaped.iloc[:2], quiet_controls)["verdict"] == "not testable"

    classes = ["easy"] * 4 + ["hard"] * 4
    shaped = _summary(classes, [False] * 4 + [True] * 4, [False] * 4 + [True] * 4)
    shaped["acquisition_step"] = pd.array([100, 120, 150, 200, 1400, 1500, 1600, 1700], dtype="Int64")
    # C6 needs runs acquired during the collapse (by RankMe's recovery): none here (recovery at 60)
    assert results.claim_c6(shaped)["verdict"] == "not testable"
    during = shaped.assign(rankme_recovery_step=pd.array([300] * 8, dtype="Int64"))  # easy runs acquired by 300
    assert results.claim_c6(during)["verdict"] == "reproduced"
    assert "order not resolved" not in results.claim_c6(during)["ours"]
    # a run acquired at the very step RankMe recovered is counted by the rule, and named as unresolved
    tie = during.assign(rankme_recovery_step=pd.array([200] * 8, dtype="Int64"))
    assert results.claim_c6(tie)["verdict"] == "reproduced"
    assert results.claim_c6(tie)["ours"].startswith("acquired during the collapse 4 of 8 acquired runs (1 at its "
                                                     "recovery's own checkpoint: order not resolved); classes")
    assert results.claim_c6(tie)["control"].endswith("; without the 1 whose order is not resolved: reproduced (the "
                                                     "paper's reading leads in 0% of those and 100% of hard runs)")
    edge = during.assign(rankme_recovery_step=pd.array([150] * 8, dtype="Int64"))  # 3 inside, one of them a tie
    assert results.claim_c6(edge)["verdict"] == "reproduced"
    assert results.claim_c6(edge)["control"].endswith("; without the 1 whose order is not resolved: not testable")
    # the test loss read the same way is reported beside it: a contrast behaviour shares is not geometry's
    behaviour = results.claim_c6(during.assign(paper_test_loss_is_precursor=[True] * 4 + [False] * 4))
    assert behaviour["verdict"] == "reproduced"
    assert behaviour["control"].startswith("the test loss, read the same way, leads in 100% of those and 0% of hard")
    # the other readings of "during the collapse" are reported beside the rule's, not used by it
    never = shaped.assign(rankme_recovery_step=pd.array([None] * 8, dtype="Int64"))  # no collapse recovered
    assert results.claim_c6(never)["verdict"] == "not testable"
    assert "or never recovered, 8 runs (the paper's reading leads in 50%)" in results.claim_c6(never)["control"]
    assert results.claim_c6(during.assign(paper_rankme_is_precursor=True))["verdict"] == "not reproduced"


def test_precursor_table_reports_both_readings_with_intervals():
    summary = _summary(["hard"] * 4, [True, True, True, False], [True, False, None, False])
    row = results.precursor_table(summary, measures=["rankme"]).iloc[0]
    assert (row["runs"], row["precursor"], row["leads_defined"], row["leads_test_loss"]) == (4, 3, 3, 1)
    assert (row["informative"], row["settings"]) == (1, 4)
    assert row["rate_low"] < 0.75 < row["rate_high"] and row["median_gap_checkpoints"] == 5
    assert row["median_gap_share"] == 0.5
    paper = results.precursor_table(summary, measures=["rankme"], reading="paper").iloc[0]
    assert paper["precursor"] == 3
    with pytest.raises(ValueError, match="reading must be one of"):
        results.precursor_table(summary, reading="b")


def test_setting_bootstrap_resamples_settings_not_runs():
    """Ten seeds of one setting that all lead and one setting that never does: counted as runs the rate is
    10/11, but over settings the interval spans nearly 0 to 1."""
    table = pd.DataFrame({"task": ["a"] * 10 + ["b"], "level": "hard", "size": "405k",
                          "lead": [True] * 10 + [False]})
    r = results.rate_interval(table, "lead", n_boot=500)
    assert (r["k"], r["n"], r["settings"]) == (10, 11, 2)
    assert r["low"] == 0.0 and r["high"] == 1.0
    spread = pd.DataFrame({"task": [f"t{i}" for i in range(20)], "level": "hard", "size": "405k",
                           "lead": [True] * 18 + [False] * 2})
    r = results.rate_interval(spread, "lead", n_boot=500)
    assert 0.7 < r["low"] < 0.9 < r["high"] <= 1.0
    assert results.rate_interval(table.iloc[:0], "lead")["n"] == 0


def test_precursor_table_orders_levels_and_classes_from_easy_to_hard():
    """The level table came out medium, easy, hard: "easy" is both a level and a class."""
    summary = _summary(["hard", "easy", "hard", "easy"], [True] * 4, [True] * 4)
    summary["level"] = ["hard", "medium", "easy", "easy"]
    summary["acquisition_step"] = pd.array([1000, 400, 900, 100], dtype="Int64")
    summary["plateau_fraction"] = [0.9, 0.2, 0.9, 0.0]  # classes: hard, intermediate, hard, easy
    assert results.precursor_table(summary, by="level", measures=["rankme"])["level"].tolist() == [
        "easy", "medium", "hard"]
    assert results.precursor_table(summary, measures=["rankme"])["difficulty"].tolist() == [
        "easy", "intermediate", "hard"]


def test_timing_prediction_rank_correlation_with_bootstrap_ci():
    acq = np.array([100, 300, 200, 500, 400, 600])
    table = pd.DataFrame({"task": list("abcdef"), "level": "hard", "size": "405k",
                          "acquisition_step": acq, "llc_transition_step": acq - 50,
                          "rankme_transition_step": -acq, "grad_rank_transition_step": [10] * 6})
    up = results.timing_prediction(table, "llc", n_boot=200)
    assert up["rho"] == pytest.approx(1.0) and up["ci_low"] == pytest.approx(1.0) and up["runs"] == 6
    assert up["settings"] == 6
    down = results.timing_prediction(table, "rankme", n_boot=200)
    assert down["rho"] == pytest.approx(-1.0) and down["ci_high"] == pytest.approx(-1.0)
    assert np.isnan(results.timing_prediction(table, "grad_rank")["rho"])  # constant: undefined
    assert results.timing_prediction(table, "hessian_top")["runs"] == 0


def test_memorisation_table_known_both_ways():
    """A measure that rises with train accuracy (grokking-like run) vs one that rises well before it."""
    summary = pd.DataFrame({
        "task": ["mod"] * 3, "level": ["medium"] * 3, "size": ["405k"] * 3, "seed": [0, 1, 2],
        "acquisition_step": pd.array([1000, 400, None], dtype="Int64"),
        "train_accuracy_transition_step": [300, 400, 50], "train_accuracy_gap_checkpoints": [10, 0, None],
        "train_accuracy_gap_share": [0.7, 0.0, None],
        "rankme_transition_step": [290, 100, 40], "rankme_gap_checkpoints": [11, 12, None]})
    table = results.memorisation_table(summary)
    assert table["seed"].tolist() == [0, 1]  # the run never acquired has no lead
    grok, plain = table.iloc[0], table.iloc[1]
    assert grok["memorises_first"] and grok["with_train_accuracy"] and not grok["leads_train_accuracy"]
    assert grok["measure_minus_train"] == -1 and grok["train_lead_share"] == 0.7
    assert not plain["memorises_first"] and not plain["with_train_accuracy"] and plain["leads_train_accuracy"]
    assert plain["measure_minus_train"] == -12
    # a table without the columns (e.g. no train accuracy recorded): empty, with the columns
    assert results.memorisation_table(summary.drop(columns="train_accuracy_gap_checkpoints")).empty


def test_rate_and_timing_texts_say_the_count_or_why_not():
    r = {"k": 3, "n": 4, "rate": 0.75, "low": 0.5, "high": 1.0, "settings": 2}
    assert results.rate_text(r) == "3/4 (95% CI 0.50-1.00 over 2 settings)"
    assert results.rate_text({**r, "k": 0, "n": 0}) == "none of 0 runs"
    assert results.rate_text({**r, "low": np.nan}) == "3/4 (no interval over 2 settings)"
    defined = {"rho": 0.5, "ci_low": -0.25, "ci_high": 0.75, "runs": 7, "settings": 3}
    assert results.timing_text(defined) == "0.50 (95% CI -0.25 to 0.75, 7 runs in 3 settings)"
    assert results.timing_text({**defined, "rho": np.nan, "runs": 2}).startswith("undefined (2 runs")


def test_verdict_rules_c1_c2_c3_c8():
    ordered = pd.DataFrame({"acquisition_step": pd.array([10] * 10, dtype="Int64"),
                            "ordered_collapse_recovery_acquisition": [True] * 10, "task": "mod", "size": "405k",
                            "rankme_floor_value": 2.1})
    centred_fail = ordered.assign(ordered_collapse_recovery_acquisition=[True] + [False] * 9)
    assert results.claim_c1(ordered, ordered)["verdict"] == "reproduced"
    assert results.claim_c1(ordered, centred_fail)["verdict"] == "partly reproduced"
    assert results.claim_c1(centred_fail, centred_fail)["verdict"] == "not reproduced"
    assert results.claim_c1(ordered)["verdict"] == "not testable"  # the centred reading is part of the rule
    two_sizes = pd.concat([ordered, ordered.assign(size="1.3m", rankme_floor_value=1.9)])
    assert results.claim_c2(two_sizes)["verdict"] == "reproduced"
    assert results.claim_c2(ordered)["verdict"] == "partly reproduced"  # one size: size-independence untested
    assert results.claim_c2(ordered.assign(rankme_floor_value=8.8))["verdict"] == "not reproduced"
    pairs = pd.DataFrame({"task": ["a", "b", "c", "d"], "size": "405k", "top_down_rho_step": [-0.8, -0.4, -1.0, 0.2],
                          "top_down_rho_floor": 0.0})
    assert results.claim_c3(pairs)["verdict"] == "partly reproduced"  # 3/4 < 28/32
    assert results.claim_c3(pairs.assign(top_down_rho_step=-0.5))["verdict"] == "reproduced"
    assert results.claim_c3(pairs.assign(top_down_rho_step=np.nan))["verdict"] == "not testable"
    corr = pd.DataFrame({"spearman": [0.95, 0.97, 0.93]})
    assert results.claim_c8(corr, size_ratio=370)["verdict"] == "reproduced"
    assert results.claim_c8(corr - 0.5, size_ratio=370)["verdict"] == "not reproduced"
    # outside the claim's regime: a proxy only 3.3x smaller, or sizes unknown
    assert results.claim_c8(corr, size_ratio=3.3)["verdict"] == "not testable"
    assert "3.3x apart" in results.claim_c8(corr, size_ratio=3.3)["ours"]
    assert results.claim_c8(corr)["verdict"] == "not testable"


def test_verdicts_read_the_controls_both_ways():
    """An effect the negative controls show as strongly is not specific to learning; one they lack is."""
    real = pd.DataFrame({"task": ["copy", "add", "mod", "parity"], "level": "medium", "size": "405k-deep",
                         "acquisition_step": pd.array([500] * 4, dtype="Int64"),
                         "ordered_collapse_recovery_acquisition": True, "rankme_collapsed": True,
                         "rankme_recovery_step": pd.array([60] * 4, dtype="Int64"),
                         "rankme_floor_value": 2.0, "top_down_rho_step": -1.0, "top_down_rho_floor": 0.0})
    lookalike = real.assign(acquisition_step=pd.array([None] * 4, dtype="Int64"))
    nothing = lookalike.assign(rankme_recovery_step=pd.array([None] * 4, dtype="Int64"), top_down_rho_step=0.5,
                               rankme_floor_value=8.0)
    assert results.claim_c1(real, real, lookalike)["verdict"] == "reproduced, not specific to learning"
    assert results.claim_c1(real, real, nothing)["verdict"] == "reproduced"
    assert "controls 4/4" in results.claim_c1(real, real, lookalike)["control"]
    assert results.claim_c3(real, lookalike)["verdict"] == "reproduced, not specific to learning"
    assert results.claim_c3(real, nothing)["verdict"] == "reproduced"
    assert results.claim_c2(real, None, lookalike)["verdict"] == "reproduced, not specific to learning"
    assert results.claim_c2(real, None, nothing)["verdict"] == "partly reproduced"  # one size
    # controls of other settings than the real runs' do not count as the same settings
    assert results.matched(real, lookalike.assign(size="1.3m-deep")).empty


def test_c2_left_one_control_out_names_the_run_its_verdict_rests_on():
    """C2's verdict moved on one 14m control whose floor (2.22) lifted the controls' pooled floor into the band:
    leaving each control out in turn names such a run, and names none where no single run decides."""
    real = pd.DataFrame({"run": ["r1", "r2"], "task": "mod", "size": ["405k", "1.3m"], "seed": 0,
                         "rankme_floor_value": [1.8, 1.9]})
    controls = pd.DataFrame({"run": ["c1", "c2", "c3"], "task": "mod", "size": ["405k-deep", "405k-deep", "14m"],
                             "seed": [0, 1, 0], "rankme_floor_value": [1.4, 1.4, 1.9]})
    assert results.claim_c2(real, None, controls)["verdict"] == "reproduced, not specific to learning"  # 1.57
    table = results.control_leave_one_out(real, controls)
    assert list(table.columns) == list(results.LEAVE_ONE_OUT_COLUMNS)
    assert table["pooled"].round(2).tolist() == [1.65, 1.65, 1.4]
    assert table["verdict"].tolist() == ["reproduced, not specific to learning"] * 2 + ["reproduced"]
    text = results.leave_one_out_text(table, "reproduced, not specific to learning")
    assert "without the 14m control of seed 0 (floor 1.90) the verdict is reproduced" in text
    assert text.endswith("the verdict rests on that run.")

    steady = controls.assign(rankme_floor_value=2.0)  # no single control decides
    held = results.leave_one_out_text(results.control_leave_one_out(real, steady),
                                      "reproduced, not specific to learning")
    assert held.endswith("the verdict holds without any one of them.") and "from 2.00 to 2.00" in held
    other_task = controls.assign(task="add")
    assert results.control_leave_one_out(real, other_task).empty
    assert results.leave_one_out_text(results.control_leave_one_out(real, other_task), "reproduced") == (
        "There is no MOD control to leave out.")


def test_claim_c7_from_a_pythia_table():
    table = pd.DataFrame({"level": ["hard", "easy", "easy"], "final_layer": True,
                          "acquisition_step": pd.array([4000, 100, 200], dtype="Int64"),
                          "is_precursor": [True, False, False], "gap_checkpoints": [3, 0, 0]})
    assert results.c7_verdict(table)["verdict"] == "reproduced"
    assert results.c7_verdict(table.assign(is_precursor=True))["verdict"] == "partly reproduced"
    never = table.assign(acquisition_step=pd.array([None, 100, 200], dtype="Int64"))
    assert results.c7_verdict(never)["verdict"] == "not testable"


def test_run_chance_from_a_minimal_config():
    minimal = {"task": "parity", "level": "easy", "size": "405k", "seed": 0, "steps": 100}
    full = {**minimal, "n_train": 100_000, "n_test": 512}
    # without task_params a config is a first-grid run: parity easy had one answer bit (chance ~0.5)
    assert results.run_chance(minimal) == results.run_chance(full) > 0.3
    assert 0 < results.run_majority_rate(minimal) <= 1
    # with the current levels' task_params: running parity, 18 answer tokens (chance ~0)
    current = {**minimal, "task_params": {"n_bits": 18, "answer": "running"}}
    assert results.run_chance(current) < 0.01


def test_chance_levels_are_read_from_the_run_directory(tmp_path):
    """Training records a run's chance levels in status.json; a run made before it did is recomputed, the same
    numbers without torch."""
    config = {"task": "parity", "level": "easy", "size": "405k", "seed": 0, "steps": 100, "path": str(tmp_path)}
    recomputed = results.run_chance(config), results.run_majority_rate(config)  # no status.json
    (tmp_path / store.STATUS_FILE).write_text(json.dumps({"chance_accuracy": 0.125, "majority_first_token": 0.75}))
    assert (results.run_chance(config), results.run_majority_rate(config)) == (0.125, 0.75)
    assert results.run_chance(config, status={}) == recomputed[0]


def test_analysis_and_claims_import_neither_torch_nor_training():
    import subprocess
    import sys

    code = ("import sys, geomcap.analysis, geomcap.claims, geomcap.claims.table, geomcap.results, geomcap.events; "
            "import geomcap.analysis.table, geomcap.analysis.sensitivity, geomcap.analysis.costs; "
            "loaded = [m for m in ('torch', 'geomcap.train', 'geomcap.sweep') if m in sys.modules]; "
            "assert not loaded, loaded")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_one_protocol_for_acquisition():
    import inspect

    from geomcap import events
    threshold, patience = events.ACQUISITION_THRESHOLD, events.ACQUISITION_PATIENCE
    assert (events.PROTOCOL["acquisition_threshold"], events.PROTOCOL["acquisition_patience"]) == (threshold, patience)
    for f in (events.acquisition_step, events.precursor, events.summarize_run, events.confirmed_events,
              results.probe_table, results.gap_table):
        defaults = inspect.signature(f).parameters
        assert (defaults["threshold"].default, defaults["patience"].default) == (threshold, patience), f


def test_the_claims_table_has_every_claim_c7_included(store_root):
    c7 = results.claim_row("C7", "a stand-in's row")
    rows = results.claims_from_store(store_root, c7=c7)
    assert [row["claim"] for row in rows] == [f"C{i}" for i in range(1, 9)] and rows[6] is c7
    assert list(results.RULES) == [f"C{i}" for i in range(1, 9)]
    assert all(results.RULES[row["claim"]] == row["rule"] for row in rows if row["rule"])


def test_the_claims_table_does_not_load_torch(store_root):
    """The claims table reads the store only: C7's row included (the Pythia runs are read through
    geomcap.analysis, not geomcap.pythia's loaders). In a fresh interpreter, so that nothing imported here counts."""
    code = ("import sys, geomcap.claims; rows = geomcap.claims.claims_from_store(sys.argv[1]); "
            "assert [r['claim'] for r in rows] == [f'C{i}' for i in range(1, 9)]; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith(('torch.', 'transformers'))))")
    result = subprocess.run([sys.executable, "-c", code, str(store_root)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_pythia_difficulty_cutoffs_are_read_in_the_models_revision_steps():
    from geomcap import config

    assert results.REFERENCE_STEPS == config.DEFAULT_LEVEL_STEPS["hard"]
    assert results.revision_cutoffs(results.REFERENCE_STEPS) == (results.EASY_MAX_STEP, results.HARD_MIN_STEP)
    easy, hard = results.revision_cutoffs(143_000)
    assert easy == pytest.approx(143_000 * results.EASY_MAX_STEP / results.REFERENCE_STEPS) and hard > easy
    # a benchmark at chance until revision 4000, then acquired: hard for a model trained 8,000 steps (after a
    # plateau over all of the steps before), easy for one trained 143,000 (within its first 5,362.5)
    steps = np.concatenate([np.arange(20), np.arange(1000, 8001, 500)])
    acc = np.where(steps < 4000, 0.25, 0.9)
    rows = [(s, -1, "accuracy", a) for s, a in zip(steps, acc)]
    rows += [(s, layer, "rankme", 5.0 + layer) for s in steps for layer in (0, 1)]
    metrics = pd.DataFrame(rows, columns=store.METRIC_COLUMNS).assign(run="r")
    runs = pd.DataFrame([{"run": "r", "model": "m", "task": "b", "level": "easy", "chance": 0.25,
                          "tokens_per_step": 1, "steps": 8000}])
    table = results.gap_table(runs, metrics)
    assert table["plateau_fraction"].iloc[0] == 1.0 and table["data_class"].tolist() == ["hard"]
    assert results.gap_table(runs.assign(steps=143_000), metrics)["data_class"].tolist() == ["easy"]


def test_not_acquired_table_diagnoses_memorised_and_underfit():
    import pandas as pd
    summary = pd.DataFrame({
        "task": ["mod", "mod", "parity", "copy"], "level": "easy", "size": "405k", "seed": [0, 1, 0, 0],
        "steps": 2000, "run": ["m0", "m1", "p0", "c0"], "chance": [0.1, 0.1, 0.5, 0.0],
        "final_accuracy": [0.08, 0.10, 0.5, 1.0], "acquisition_step": pd.array([None, None, None, 50], dtype="Int64")})
    metrics = pd.DataFrame({"run": ["m0", "m0", "m1", "p0", "c0"], "measure": "train_accuracy", "layer": -1,
                            "step": [1000, 2000, 2000, 2000, 2000], "value": [0.5, 1.0, 0.9, 0.52, 1.0]})
    table = results.not_acquired_table(summary, metrics).set_index("task")
    assert list(table.index) == ["mod", "parity"]                  # copy was acquired
    assert table.loc["mod", "not_acquired"] == 2 and table.loc["mod", "runs"] == 2
    assert table.loc["mod", "train_accuracy"] == pytest.approx(0.95)  # the final step's value per run
    assert table.loc["mod", "diagnosis"] == "memorised"
    assert table.loc["parity", "diagnosis"] == "underfit"
    assert results.not_acquired_table(summary[summary["task"] == "copy"], metrics).empty


def test_probe_baselines_and_selectivity(store_root):
    runs = results.load_runs(store_root, task="parity")
    metrics = results.load_metrics(runs, measures=["accuracy", "first_token_accuracy", "probe_accuracy",
                                                   "probe_control_accuracy"])
    probes = results.probe_table(metrics, runs)
    # parity's first answer token is one of two: a constant guess scores about one half
    assert (probes["majority_rate"] > 0.4).all()
    assert {"probe_above_baselines_share", "c4_holds"} <= set(probes.columns)
    assert results.probe_by_task(probes)["task"].tolist() == ["parity"]
    selectivity = results.selectivity_table(metrics, runs)
    assert set(selectivity["run"]) == set(runs["run"])  # the store's runs record the control task
    assert np.allclose(selectivity["selectivity"], selectivity["probe"] - selectivity["control"])
    summary = results.summary_table(runs)
    assert summary["stopped_at"].isna().all() and (summary["last_step"] == 8).all()
    assert set(summary["difficulty"]) <= set(results.DIFFICULTY_CLASSES)


def test_selectivity_is_the_probe_minus_its_control_below_fifty_percent():
    rows = []
    for step, acc in ((0, 0.1), (10, 0.2), (20, 0.9)):
        rows += [(step, -1, "accuracy", acc), (step, 1, "probe_accuracy", 0.8), (step, 1, "probe_control_accuracy",
                                                                                 0.3 if step < 20 else 0.8)]
    metrics = pd.DataFrame(rows, columns=["step", "layer", "measure", "value"]).assign(run="r")
    runs = pd.DataFrame({"task": ["add"], "level": "hard", "size": "405k", "seed": 0, "run": ["r"]})
    table = results.selectivity_table(metrics, runs)
    assert table[["layer", "checkpoints_below"]].values.tolist() == [[1, 2]]  # step 20 is above 50%
    assert table["selectivity"].iloc[0] == pytest.approx(0.5)


def test_recompute_writes_to_the_user_store_not_the_committed_data(tmp_path, monkeypatch):
    """recompute=True with the default root trained into the committed data/runs (a later book build would
    then silently change). The notebooks' recompute cell trains the missing runs into the user store
    ($GEOMCAP_RUNS here) with the sweep; the analysis (section_runs) trains nothing and gets exactly the
    grid's runs from the committed store and the user store."""
    from geomcap import store, sweep

    monkeypatch.setenv("GEOMCAP_RUNS", str(tmp_path / "user"))
    assert store.user_root() == tmp_path / "user"
    committed = sorted(p.name for p in store.committed_data("runs").iterdir())
    selection = dict(tasks="copy", levels="easy", sizes="405k", seeds=[7], steps="3")
    stores = results.section_stores("", recompute=True)
    assert stores == [store.committed_data("runs"), tmp_path / "user"]
    with pytest.raises(ValueError, match="1 of the 1 runs asked for are not in"):  # the analysis never trains
        results.section_runs(recompute=True, **selection)
    assert not (tmp_path / "user").exists()
    sweep.train_missing(results.section_grid(**selection), stores, progress=False)
    runs = results.section_runs(recompute=True, **selection)
    assert sorted(p.name for p in store.committed_data("runs").iterdir()) == committed
    trained = [p for p in (tmp_path / "user").iterdir() if store.is_complete(p)]
    assert len(trained) == 1 and list(runs["path"]) == [str(trained[0])]
    # a run stored already is not trained again (the committed first-grid runs do not match the current
    # protocol's configs, so the reuse is checked on the user store)
    assert sweep.train_missing(results.section_grid(**selection), stores, progress=False) == []
    assert len(list((tmp_path / "user").iterdir())) == 1
    both = {**selection, "seeds": [1, 7]}
    sweep.train_missing(results.section_grid(**both), stores, progress=False)
    both = results.section_runs(recompute=True, **both)
    assert sorted(both["seed"]) == [1, 7] and set(both["steps"]) == {3}
    with pytest.raises(ValueError, match="parameter recompute: must be True or False, got 'no'"):
        results.section_runs(tasks="copy", recompute="no")
    with pytest.raises(ValueError, match="parameter steps: must be a positive integer, got -5"):
        results.section_grid(**{**selection, "steps": "-5"})
    with pytest.raises(ValueError, match="parameter seeds: give explicit seeds"):
        results.section_grid(**{**selection, "seeds": "all"})
    monkeypatch.delenv("GEOMCAP_RUNS")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert store.user_root() == tmp_path / "cache" / "geomcap" / "runs"


def test_section_grid_default_configs_are_the_committed_runs():
    """A notebook's recompute cell trains what section_grid makes; at the default budget those are the
    committed runs themselves (same hash, so recompute reuses them instead of training them again)."""
    import json

    from geomcap.train import DEFAULT_LEVEL_STEPS

    assert DEFAULT_LEVEL_STEPS == {"easy": 2000, "medium": 4000, "hard": 8000}
    committed = store.committed_data("runs")
    runs = results.load_runs(committed)
    configs = results.section_grid(tasks="all", levels="all", sizes=sorted(runs["size"].unique()),
                                   seeds=sorted(int(s) for s in runs["seed"].unique()))
    made = {store.config_hash(c.to_dict()) for c in configs}
    default_measures = [r.run for r in runs.itertuples()
                        if not json.loads((committed / r.run / "config.json").read_text()).get("measures")]
    assert default_measures and set(default_measures) <= made


def test_book_table_shows_whole_numbers_and_missing_values_plainly():
    """06's table showed counts as "200.0" and raw <NA>; 01's were elided by pandas' display options."""
    import numpy as np
    import pandas as pd

    table = pd.DataFrame({"n_items": [200.0, 12.0], "gap": [0.12345, np.nan], "steps": [21656.84, 3.5],
                          "note": ["x", pd.NA], "ok": [True, False], **{f"c{i}": [i, i] for i in range(30)}})
    html = results.book_table(table).to_html()
    assert ">200<" in html and ">12<" in html and "200.0" not in html
    assert ">0.123<" in html and ">21,657<" in html and ">3.5<" in html
    assert "&lt;NA&gt;" not in html and "nan" not in html and html.count(">–<") == 2
    assert ">c29<" in html and "..." not in html  # every column, nothing elided
    assert "overflow-wrap: break-word" in html  # long text wraps, never a short word cut in two ("ad|d")
    assert ">n_<wbr>items<" in html  # a header breaks after an underscore
    # 07's concordance: a rate column of object dtype (a missing rate beside numbers) printed 0.8333333333333334
    mixed = results.book_table(pd.DataFrame({"rate": pd.Series([None, 0.8333333333333334, 2.0, "n/a"],
                                                               dtype=object)})).to_html()
    assert ">0.833<" in mixed and "0.8333333" not in mixed and ">2<" in mixed and ">n/a<" in mixed
    assert mixed.count(">–<") == 1


def test_every_notebooks_steps_parameter_defaults_to_the_committed_budget():
    """papermill parameters are literals, so each section notebook that trains its grid on recompute restates
    the budget: it must be the library's. (06's, 08's and 09's ``steps`` are other budgets: the stand-in's, the
    monitored run's, the grokking runs'.)"""
    import ast
    import json
    from pathlib import Path

    from geomcap.train import DEFAULT_LEVEL_STEPS_TEXT

    found = {}
    for path in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("0*.ipynb")):
        cell = next(c for c in json.loads(path.read_text())["cells"]
                    if "parameters" in c["metadata"].get("tags", []))
        values = {node.targets[0].id: ast.literal_eval(node.value) for node in ast.parse("".join(cell["source"])).body
                  if isinstance(node, ast.Assign)}
        if path.name == "09_grokking.ipynb":  # its own budget, the grokking runs'
            from geomcap.grokking import DEFAULTS

            assert values["steps"] == DEFAULTS["steps"]
        elif "recompute" in values and path.name != "06_pythia.ipynb":
            found[path.name] = values["steps"]
    assert len(found) == 6, found
    assert set(found.values()) == {DEFAULT_LEVEL_STEPS_TEXT}, found


def test_level_table_and_grid_goals_from_behaviour():
    """Three seeds per task x level: a pair acquired in 2 of 3 meets the goal, 1 of 3 does not; hard is
    the class of late acquisitions after a plateau, and the goal needs three tasks with one."""
    import pandas as pd

    def runs(task, level, acquisitions, plateau):
        return [{"task": task, "level": level, "size": "405k", "seed": seed, "acquisition_step": a,
                 "plateau_fraction": plateau} for seed, a in enumerate(acquisitions)]

    summary = pd.DataFrame(runs("copy", "easy", [40, 50, 60], 0.0) + runs("add", "hard", [900, 1200, None], 0.8)
                           + runs("mul", "hard", [2000, None, None], 0.9) + runs("mod", "hard", [800, 700, 900], 0.2))
    table = results.level_table(summary)
    assert list(zip(table["task"], table["level"]))[:2] == [("add", "hard"), ("copy", "easy")]  # by task, then level
    levels = table.set_index(["task", "level"])
    assert levels.loc[("copy", "easy"), "class"] == "easy" and levels.loc[("copy", "easy"), "goal_met"]
    assert levels.loc[("add", "hard"), ["acquired", "hard", "class"]].tolist() == [2, 2, "hard"]
    assert levels.loc[("add", "hard"), "goal_met"] and not levels.loc[("mul", "hard"), "goal_met"]
    assert levels.loc[("mul", "hard"), "class"] == "not acquired"  # 2 of 3 runs never acquired
    assert levels.loc[("mod", "hard"), "class"] == "intermediate"  # late but no plateau
    assert levels.loc[("add", "hard"), "median_acquisition_step"] == 1050
    goals = results.grid_goals(results.level_table(summary), "405k")
    assert goals["pairs"] == 4 and goals["pairs_acquired"] == 3 and goals["hard_tasks"] == ["add"]
    assert not goals["met"]
    plateaued = pd.DataFrame(runs("copy", "easy", [40, 50, 60], 0.0) + runs("add", "hard", [900, 1200, 800], 0.8)
                             + runs("mul", "hard", [2000, 900, 3000], 0.9) + runs("mod", "hard", [800, 700, 900], 0.6))
    assert results.grid_goals(results.level_table(plateaued), "405k")["met"]
    assert results.grid_goals(results.level_table(plateaued), "1.3m") == {
        "size": "1.3m", "pairs": 0, "pairs_acquired": 0, "min_seeds": 0, "hard_pairs": 0, "hard_tasks": [],
        "met": False}


def test_summary_rows_are_cached_by_code_and_content(store_root, tmp_path, monkeypatch):
    """A cached row equals the computed one; a run whose metrics change is summarised again (never a
    stale row); the cache can be turned off."""
    import shutil

    import pandas as pd

    monkeypatch.setenv("GEOMCAP_SUMMARY_CACHE", "off")
    runs = results.load_runs(store_root, task="copy")
    computed = results.summary_table(runs)
    monkeypatch.setenv("GEOMCAP_SUMMARY_CACHE", str(tmp_path / "cache"))
    first = results.summary_table(runs)
    assert len(list((tmp_path / "cache").glob("*.pkl"))) == len(runs)
    again = results.summary_table(runs)
    pd.testing.assert_frame_equal(first, computed)
    pd.testing.assert_frame_equal(again, computed)
    assert len(list((tmp_path / "cache").glob("*.pkl"))) == len(runs)  # read, not written again
    # other arguments are another row
    results.summary_table(runs, min_lead=3)
    assert len(list((tmp_path / "cache").glob("*.pkl"))) == 2 * len(runs)
    # a run copied elsewhere and then changed: exact match 1 at every checkpoint, so acquired at step 0
    copy = tmp_path / "store" / runs["run"].iloc[0]
    shutil.copytree(runs["path"].iloc[0], copy)
    metrics = pd.read_csv(copy / "metrics.csv")
    metrics.loc[metrics["measure"] == "accuracy", "value"] = 1.0
    metrics.to_csv(copy / "metrics.csv", index=False)
    changed = results.summary_table(results.load_runs(tmp_path / "store"))
    assert computed["acquisition_step"].iloc[0] is pd.NA or computed["acquisition_step"].iloc[0] > 0
    assert changed["acquisition_step"].iloc[0] == 0
    # a corrupt cache file is recomputed
    for path in (tmp_path / "cache").glob("*.pkl"):
        path.write_bytes(b"not a pickle")
    pd.testing.assert_frame_equal(results.summary_table(runs), computed)


def test_top_down_by_series_known_both_ways():
    """C3 on RankMe and its baselines: a run built top-down in RankMe (deeper blocks lose half their drop
    earlier, the residual stream at the last block included) and in the energy outside the mean direction,
    and bottom-up in centred RankMe; the post-LayerNorm output collapses last, so reading it as the last
    layer breaks the ordering."""
    steps = np.arange(61)
    drop = lambda t, at, high, low: low + (high - low) / (1 + np.exp((t - at) / 1.5))  # noqa: E731 half-drop at `at`
    top_down_at = {1: 26.0, 2: 22.0, 3: 18.0, 4: 14.0}
    bottom_up_at = {1: 14.0, 2: 18.0, 3: 22.0, 4: 26.0}
    rows = [("accuracy", -1, s, float(s > 50)) for s in steps]
    for s in steps:
        rows += [("rankme", 0, s, 1.0), ("rankme_centred", 0, s, 1.0), ("mean_energy_share", 0, s, 1.0 - 1e-9 * (1 + (s < 5)))]  # rounding noise
        for layer in range(1, 5):
            # layer 4 of rankme is the post-LayerNorm output: it collapses last (step 40)
            rows.append(("rankme", layer, s, drop(s, 40.0 if layer == 4 else top_down_at[layer], 10, 2)))
            rows.append(("rankme_centred", layer, s, drop(s, bottom_up_at[layer], 12, 4)))
            rows.append(("mean_energy_share", layer, s, 1 - drop(s, top_down_at[layer], 0.05, 0.001)))
        rows += [("rankme_residual", 4, s, drop(s, top_down_at[4], 10, 2)),
                 ("rankme_centred_residual", 4, s, drop(s, bottom_up_at[4], 12, 4)),
                 ("mean_energy_share_residual", 4, s, 1 - drop(s, top_down_at[4], 0.05, 0.001))]
    metrics = pd.DataFrame(rows, columns=["measure", "layer", "step", "value"]).assign(run="r")
    runs = pd.DataFrame([{"task": "add", "level": "hard", "size": "405k-deep", "seed": 0, "run": "r"}])
    table = results.top_down_by_series(metrics, runs).set_index("series")
    assert list(table.index) == list(results.TOP_DOWN_SERIES)
    assert (table["layers"] == 4).all()  # layer 0 never counts, in any series
    rankme, centred, outside = (table.loc[name] for name in results.TOP_DOWN_SERIES)
    assert rankme["rho_step"] == pytest.approx(-1) and bool(rankme["is_top_down"]) is True
    assert rankme["collapse_layers"] == [1, 2, 3, 4]
    assert rankme["collapse_steps"] == pytest.approx([26, 22, 18, 14], abs=0.05)
    assert rankme["spread_steps"] == pytest.approx(12, abs=0.1) and rankme["median_gap_steps"] == pytest.approx(4, abs=0.1)
    assert rankme["rho_step_post_ln"] == pytest.approx(0.2)  # ranks 3, 2, 1, 4 of depth 1..4
    assert centred["rho_step"] == pytest.approx(1) and bool(centred["is_top_down"]) is False
    assert outside["rho_step"] == pytest.approx(-1) and outside["first_step"] == pytest.approx(14, abs=0.05)
    # a run without the mean energy share has no row for it
    no_share = metrics[~metrics["measure"].str.startswith("mean_energy")]
    assert list(results.top_down_by_series(no_share, runs)["series"]) == ["rankme", "rankme_centred"]


def test_a_setting_measured_twice_counts_once(store_root, tmp_path):
    """The grid re-runs a seed with the costly measures: same training, more measures. Loaded runs keep
    that run once (the one with more measures), so no seed is counted twice and presets still pair;
    runs that differ in anything that changes training (here the seed, or the learning rate) all stay."""
    import json
    import shutil

    from geomcap.train import TrainConfig

    plain = results.load_runs(store_root, task="copy", seed=0).iloc[0]
    config = json.loads((Path(plain.path) / store.CONFIG_FILE).read_text())

    def copy_as(**changes):
        new = {**config, **changes}
        target = store.run_dir_for(new, tmp_path)
        shutil.copytree(plain.path, target)
        (target / store.CONFIG_FILE).write_text(json.dumps(new))
        return target.name

    measured = copy_as(measures=["grad_rank", "llc"], costly_every=2, dynamics_size=32, hessian_warm_start=True)
    fewer = copy_as(measures=["grad_rank"])
    other_lr = copy_as(lr=config["lr"] / 2)
    shutil.copytree(plain.path, tmp_path / plain.run)
    assert set(TrainConfig.from_dict(config).to_dict()) >= {"lr", "measures", "costly_every"}

    windowed = copy_as(measures=["grad_rank", "llc"], costly_every=2, dynamics_size=32, hessian_warm_start=True,
                       costly_window=[4, 6])
    assert sorted(results.load_runs(tmp_path)["run"]) == sorted([windowed, other_lr])  # more costly checkpoints
    shutil.rmtree(tmp_path / windowed)
    every = results.load_runs(tmp_path, one_per_setting=False)
    assert len(every) == 4
    kept = results.load_runs(tmp_path)
    assert sorted(kept["run"]) == sorted([measured, other_lr])
    assert results.run_index(tmp_path)["run"].nunique() == 4  # the index lists every run that trained
    results.check_one_run_per_key(kept[kept["lr"] == config["lr"]], ["task", "level", "seed", "steps"])
    with pytest.raises(ValueError, match="share task, level, seed, steps"):
        results.check_one_run_per_key(every[every["lr"] == config["lr"]], ["task", "level", "seed", "steps"])


def _by_class(rankme, test_loss, leads_loss=None):
    """A precursor table by difficulty from {class: (k, n)} counts of RankMe and of the test loss."""
    rows = []
    for measure, counts in (("rankme", rankme), ("test_loss", test_loss)):
        for group, (k, n) in counts.items():
            defined = (leads_loss or {}).get(group, (0, 0)) if measure == "rankme" else (0, 0)
            rows.append({"measure": measure, "difficulty": group, "runs": n, "precursor": k,
                         "leads_test_loss": defined[0], "leads_defined": defined[1]})
    return pd.DataFrame(rows)


def test_group_count_reads_one_measure_in_one_group():
    table = _by_class({"easy": (1, 4), "hard": (3, 5)}, {"hard": (5, 5)}, {"hard": (2, 4)})
    assert results.group_count(table, "rankme", "hard") == (3, 5)
    assert results.group_count(table, "rankme", "hard", k="leads_test_loss", n="leads_defined") == (2, 4)
    assert results.group_count(table, "test_loss", "easy") == (0, 0)
    assert results.group_count(pd.DataFrame(), "rankme", "hard") == (0, 0)


def test_memorisation_texts_known_both_ways():
    def summary(rankme_lead):  # two mod/medium runs whose train accuracy leads acquisition by 10 checkpoints
        return pd.DataFrame({
            "task": "mod", "level": "medium", "size": "405k", "seed": [0, 1],
            "acquisition_step": pd.array([1000, 900], dtype="Int64"),
            "train_accuracy_transition_step": [300, 250], "train_accuracy_gap_checkpoints": [10, 10],
            "train_accuracy_gap_share": [0.7, 0.7],
            "rankme_transition_step": [290, 100], "rankme_gap_checkpoints": rankme_lead})
    text, verdict = results.memorisation_texts(summary([10, 11]))
    assert verdict.endswith("the first grid's finding holds.") and text.endswith(verdict)
    assert text.startswith("mod/medium: 2 of 2 runs memorise first")
    assert results.memorisation_texts(summary([10, 30]))[1].endswith("holds only in part.")
    no_grokking = summary([10, 11]).assign(train_accuracy_gap_checkpoints=[0, 1])
    assert "do not behave like grokking" in results.memorisation_texts(no_grokking)[1]
    text, verdict = results.memorisation_texts(summary([10, 11]).assign(task="add"))
    assert text == verdict and "cannot be made" in text


def test_costly_health_table_counts_flat_chains_and_cost(tmp_path):
    import json

    rows = [(step, -1, "llc", 5.0) for step in (0, 4, 8)] + [
        (0, -1, "llc_trace_drift", 0.05), (4, -1, "llc_trace_drift", -0.3), (8, -1, "llc_trace_drift", 0.25),
        (0, -1, "hessian_residual", 1e-4), (4, -1, "hessian_residual", 2e-3), (8, -1, "hessian_residual", 0.0),
        (0, -1, "hessian_matvecs", 21), (4, -1, "hessian_matvecs", 30), (8, -1, "hessian_matvecs", 21)]
    run = tmp_path / "costly"
    run.mkdir()
    store.write_metrics(run, rows)
    (run / "status.json").write_text(json.dumps({"train_s": 100.0, "costly_s": 250.0}))
    plain = tmp_path / "plain"
    plain.mkdir()
    runs = pd.DataFrame({"task": "add", "level": "hard", "size": "405k", "seed": [0, 0], "run": ["costly", "plain"],
                         "path": [str(run), str(plain)], "measures": [["llc", "hessian"], []]})
    table = results.costly_health_table(runs)
    assert table["run"].tolist() == ["costly"]  # the plain run recorded nothing costly
    row = table.iloc[0]
    assert (row["estimates"], row["llc_not_flat"], row["hessian_median_matvecs"]) == (3, 2, 21)
    assert row["llc_median_drift"] == pytest.approx(0.25) and row["hessian_max_residual"] == pytest.approx(2e-3)
    assert row["cost_ratio"] == pytest.approx(2.5)


def test_costly_resolution_text_reads_the_window_both_ways():
    runs = pd.DataFrame({"run": ["a", "b", "c"], "costly_window": [(400, 1300), (1000, 1900), None]})
    summary = pd.DataFrame({"run": ["a", "b", "c"], "llc_transition_step": [1020, 900, 500],
                            "llc_gap_checkpoints": [3, 12, 9], "test_loss_gap_checkpoints": [4, 2, 1]})
    text = results.costly_resolution_text(summary, runs, ["llc", "hessian_top"], costly_every=4, dense_steps=128)
    assert "2 run(s) record them at every checkpoint" in text and "steps 400-1300, 1000-1900" in text
    # a: inside its window, 3 checkpoints ahead of acquisition and 1 behind the test loss; b: outside
    assert "inside the window in 1 of 2" in text
    assert "acquisition by 3, 12 (median 8) checkpoints and the test loss by -1, 10 (median 4)" in text
    assert "hessian_top" not in text  # not recorded, not described
    # no windowed run: only the coarse resolution
    plain = results.costly_resolution_text(summary.iloc[2:], runs, ["llc"], costly_every=4, dense_steps=128)
    assert plain.endswith("fewer than 4 checkpoints cannot be told from synchrony.") and "window" not in plain
    none_recorded = results.costly_resolution_text(summary.drop(columns=[c for c in summary if c.startswith("llc")]),
                                                   runs, ["llc"], costly_every=4, dense_steps=128)
    assert "none records these measures" in none_recorded


def test_costly_health_table_names_the_window(tmp_path):
    run = tmp_path / "windowed"
    run.mkdir()
    store.write_metrics(run, [(0, -1, "llc", 1.0)])
    runs = pd.DataFrame({"task": "add", "level": "hard", "size": "405k", "seed": [0, 0], "run": ["windowed", "thin"],
                         "path": [str(run), str(run)], "measures": [["llc"], ["llc"]],
                         "costly_window": [[428, 1288], float("nan")]})
    assert results.costly_health_table(runs)["window"].tolist() == ["428-1288", ""]


def test_geometry_share_text_counts_the_runs_over_the_limit_and_how_long_they_trained():
    index = pd.DataFrame({"steps": [2000, 2000, 8000, 8000], "trained_steps": [560, 900, 8000, 3000],
                          "geometry_share": [0.20, 0.12, 0.02, 0.04]})
    text = results.geometry_share_text(index, 0.10, 128)
    assert ("On the 4 committed runs the per-checkpoint geometry took 8.0% of the training time "
            "(median; 2.0% to 20.0%)") in text
    assert "2 runs exceed the target of 10%; each of them trained at most 900 steps (all stopped" in text
    assert "The 2 runs that trained longer stay at or below 4.0% (median 3.0%)" in text
    under = results.geometry_share_text(index.assign(geometry_share=[0.05, 0.04, 0.02, 0.01]), 0.10, 128)
    assert under.endswith("None exceeds the target of 10%.")
    assert results.geometry_share_text(index.assign(geometry_share=None), 0.10, 128).startswith("No committed run")


def test_claim_effects_put_the_real_runs_beside_the_controls():
    real = pd.DataFrame({"task": ["copy", "add", "mod", "parity"], "level": "medium", "size": "405k-deep",
                         "acquisition_step": pd.array([500] * 4, dtype="Int64"), "plateau_fraction": 0.0,
                         "rankme_collapsed": True, "rankme_recovery_step": pd.array([60] * 4, dtype="Int64"),
                         "rankme_floor_value": [1.0, 1.5, 2.0, 2.5], "top_down_rho_step": [-1.0, -1.0, -1.0, np.nan]})
    control = real.assign(acquisition_step=pd.array([None] * 4, dtype="Int64"),
                          rankme_recovery_step=pd.array([None, None, None, 60], dtype="Int64"),
                          top_down_rho_step=[-1.0, 0.5, 0.5, 0.5], rankme_floor_value=4.0)
    probes = pd.DataFrame({"task": ["copy", "add"], "level": "medium", "size": "405k-deep", "c4_holds": [True, False]})
    analysis = {"summary": real, "control": control, "warmup0": None, "probes": probes, "control_probes": None,
                "all_sizes": real, "all_controls": control}
    effects = results.claim_effects(analysis).set_index(["claim", "arm"])
    assert effects.loc[("C1", "real"), "value"] == 1.0 and effects.loc[("C1", "control"), "value"] == 0.25
    assert effects.loc[("C2", "real"), "value"] == 2.0 and effects.loc[("C2", "control"), "value"] == 4.0
    assert effects.loc[("C3", "real"), ["value", "runs"]].tolist() == [1.0, 3]  # the undefined run is left out
    assert effects.loc[("C3", "warmup 0"), "runs"] == 0 and np.isnan(effects.loc[("C3", "warmup 0"), "value"])
    assert effects.loc[("C4", "real"), "value"] == 0.5
    from geomcap import plots
    fig = plots.claim_effects_figure(results.claim_effects(analysis))
    assert [ax.get_title() for ax in fig.axes] == ["C1", "C2", "C3", "C4"]


def test_measuring_cost_table_known_answers():
    """Per preset and code: seconds per checkpoint over seconds per step, median and worst; a run without
    write_s is 'before'; the costly share only over the runs that took the costly measures."""
    index = pd.DataFrame({
        "size": ["405k", "405k", "405k", "1.3m"], "measures": ["", "", "llc", ""],
        # 100 steps in 10 s (0.1 s a step), 50 checkpoints
        "train_s": [10.0, 10.0, 10.0, 20.0], "trained_steps": [100, 100, 100, 100], "checkpoints": [50, 50, 50, 50],
        # evaluation without geometry: 5 s -> 0.1 s a checkpoint -> 1 step (the 1.3m run: 0.5 step)
        "eval_s": [6.0, 11.0, 6.0, 6.0], "geometry_s": [1.0, 1.0, 1.0, 1.0],
        "write_s": [np.nan, 0.5, 0.5, 0.5], "costly_s": [0.0, 0.0, 30.0, 0.0]})
    t = results.measuring_cost_table(index).set_index(["size", "code"])
    before, after = t.loc[("405k", "before")], t.loc[("405k", "after")]
    assert before["runs"] == 1 and after["runs"] == 2
    assert before["evaluation (steps) median"] == pytest.approx(1.0)
    assert after["evaluation (steps) worst"] == pytest.approx(2.0) and after["evaluation (steps) median"] == pytest.approx(1.5)
    assert after["geometry (steps) median"] == pytest.approx(0.2) and after["writing (steps) median"] == pytest.approx(0.1)
    assert after["measuring / training worst"] == pytest.approx(1.15)
    assert after["costly / training median"] == pytest.approx(3.0) and np.isnan(before["costly / training median"])
    assert t.loc[("1.3m", "after"), "evaluation (steps) median"] == pytest.approx(0.5)
    assert results.measuring_cost_table(index.iloc[:0]).empty
    by_task = results.measuring_cost_table(index.assign(task=["add", "mod", "mod", "add"]), by="task")
    by_task = by_task.set_index(["task", "code"])
    assert by_task.loc[("mod", "after"), "runs"] == 2 and by_task.loc[("add", "after"), "runs"] == 1
    assert by_task.loc[("add", "after"), "evaluation (steps) median"] == pytest.approx(0.5)  # the 1.3m run


def test_subset_scoring_table_known_answers(tmp_path):
    """A sharp jump keeps its step under any subset; a curve that hovers at the threshold does not; a subset as
    large as the test set is no subset; mod's test set is not n_test."""
    import json

    from geomcap.analysis.acquisition import run_test_size

    config = {"task": "copy", "level": "easy", "size": "405k", "seed": 0}
    n = run_test_size(config)
    steps = np.arange(0, 200, 10)
    curves = {"jump": (steps >= 100) * 1.0, "hover": np.full(steps.size, np.ceil(0.52 * n) / n)}
    paths = []
    for name, accuracy in curves.items():
        run = tmp_path / name
        run.mkdir()
        store.write_metrics(run, [(int(s), -1, "accuracy", float(a)) for s, a in zip(steps, accuracy)])
        (run / "status.json").write_text(json.dumps({"chance_accuracy": 0.0}))
        paths.append(str(run))
    runs = pd.DataFrame({**config, "seed": [0, 1], "run": list(curves), "path": paths})
    table = results.subset_scoring_table(runs, subset_sizes=(16, n), draws=100).set_index("run")
    assert table["subset_size"].tolist() == [16, 16] and table["n_scored"].tolist() == [n, n]
    assert table.loc["jump", ["acquisition_step", "unchanged", "flipped", "shift_p95"]].tolist() == [100, 1.0, 0.0, 0.0]
    assert table.loc["hover", "acquisition_step"] == 0 and table.loc["hover", "unchanged"] < 0.9
    summary = results.subset_scoring_summary(table.reset_index()).iloc[0]
    assert (summary["runs"], summary["acquired"], summary["runs moved"]) == (2, 2, 1)
    assert summary["worst unchanged"] == table.loc["hover", "unchanged"]
    mod = {"task": "mod", "level": "hard", "seed": 0, "n_test": 512}
    assert run_test_size(mod) != 512


def test_cpu_hours_table_known_answers():
    """Runs and hours per preset and part, from wall_s; a part a preset never ran is 0 runs and 0 hours;
    totals per row (``all``) and per column (the ``all`` row)."""
    index = pd.DataFrame({"run": list("abcde"), "size": ["4m", "4m", "14m", "14m", "14m"],
                          "part": ["easy", "medium", "easy", "easy", "controls"],
                          "wall_s": [3600.0, 1800.0, 7200.0, 3600.0, 900.0]})
    table = results.cpu_hours_table(index).set_index("size")
    assert list(table.index) == ["4m", "14m", "all"]
    assert table.loc["4m", "easy runs"] == 1 and table.loc["4m", "easy CPU-hours"] == 1.0
    assert table.loc["4m", "controls runs"] == 0 and table.loc["4m", "controls CPU-hours"] == 0.0
    assert table.loc["14m", "easy runs"] == 2 and table.loc["14m", "easy CPU-hours"] == 3.0
    assert table.loc["14m", "all runs"] == 3 and table.loc["14m", "all CPU-hours"] == 3.25
    assert table.loc["all", "all runs"] == 5 and table.loc["all", "all CPU-hours"] == 4.75
    assert table.loc["all", "medium CPU-hours"] == 0.5
    with pytest.raises(KeyError, match="no 'part' column"):
        results.cpu_hours_table(index.drop(columns="part"))
    ordered = results.cpu_hours_table(index, row_order=["14m", "4m", "48m"], column_order=["controls", "easy"])
    assert list(ordered["size"]) == ["14m", "4m", "all"]  # 48m ran nothing: left out
    assert list(ordered.columns[1:5]) == ["controls runs", "controls CPU-hours", "easy runs", "easy CPU-hours"]
    assert ordered["all runs"].dtype.kind == "i"
