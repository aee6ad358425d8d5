"""Tables across runs: loading, filtering, summaries, parameter validation."""
import pytest

from geomcap import results
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
    assert len(table) == 2
    for column in ("acquisition_step", "rankme_floor_value", "rankme_is_precursor", "top_down_rho_step"):
        assert column in table.columns


def test_parameter_checks():
    assert results.check_choices("tasks", "all", ["a", "b"]) == ["a", "b"]
    assert results.check_choices("tasks", "a", ["a", "b"]) == ["a"]
    with pytest.raises(ValueError, match="parameter tasks: unknown value 'c'"):
        results.check_choices("tasks", ["a", "c"], ["a", "b"])
    with pytest.raises(ValueError, match="parameter steps: must be a positive integer"):
        results.check_positive_int("steps", -5)
    assert results.rate([True, False, None, True]) == pytest.approx(2 / 3)


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


def test_paper_vs_ours_rows(store_root):
    runs = results.load_runs(store_root)
    summary = results.summary_table(runs)
    metrics = results.load_metrics(runs, measures=["accuracy", "first_token_accuracy", "probe_accuracy", "rankme"])
    rows = [results.claim_c1(summary), results.claim_c2(summary), results.claim_c3(summary),
            results.claim_c4(results.probe_table(metrics, runs)), results.claim_c5(summary),
            results.claim_c6(summary), results.claim_c8(results.trajectory_correlation(metrics, runs, "405k", "1.3m"))]
    table = results.paper_vs_ours(rows)
    assert list(table.index) == ["C1", "C2", "C3", "C4", "C5", "C6", "C8"]
    assert table.loc["C2", "ours"] == "no MOD run selected"          # the tiny store has copy and parity only
    assert table.loc["C8", "ours"].startswith("no task trained at both presets")
    assert table.loc["C1", "paper"] == "144/144 combinations"       # the paper's figure, quoted
    assert results.claims_from_store(store_root)[0]["claim"] == "C1"


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


def test_claims_c5_c6_report_rankme_from_its_floor_onward():
    import pandas as pd
    # three acquired runs, all after the floor (hard by the data's rule); from the floor onward
    # RankMe moves before acquisition in two of them, by 40 and 60 steps
    summary = pd.DataFrame({
        "level": ["easy", "hard", "hard"], "acquisition_step": pd.array([100, 500, 900], dtype="Int64"),
        "rankme_floor_step": pd.array([20, 20, 20], dtype="Int64"),
        "rankme_is_precursor": [True, True, True], "rankme_gap_steps": pd.array([90, 490, 890], dtype="Int64"),
        "rankme_after_floor_is_precursor": [False, True, True],
        "rankme_after_floor_gap_steps": pd.array([-50, 40, 60], dtype="Int64")})
    c5 = results.claim_c5(summary)
    assert c5["ours"].endswith("rankme 3/3; rankme from its floor onward 2/3 (median gap 40 steps)")
    assert c5["value"] == 1.0
    c6 = results.claim_c6(summary)["ours"]
    assert "easy 1/1, hard 2/2" in c6
    assert c6.endswith("from its floor onward: easy 0/1 (median gap -50 steps), hard 2/2 (median gap 50 steps)")


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


def test_recompute_writes_to_the_user_store_not_the_committed_data(tmp_path, monkeypatch):
    """recompute=True with the default root trained into the committed data/runs (a later book build would
    then silently change). The missing runs now go to the user store ($GEOMCAP_RUNS here); the section gets
    the committed runs plus those."""
    from geomcap import store

    monkeypatch.setenv("GEOMCAP_RUNS", str(tmp_path / "user"))
    assert store.user_root() == tmp_path / "user"
    committed = sorted(p.name for p in results.data_root().iterdir())
    runs = results.section_runs(tasks="copy", levels="easy", sizes="405k", seeds=[7], recompute=True, steps="3",
                                progress=False)
    assert sorted(p.name for p in results.data_root().iterdir()) == committed
    trained = [p for p in (tmp_path / "user").iterdir() if store.is_complete(p)]
    assert len(trained) == 1 and list(runs["path"]) == [str(trained[0])]
    # a run committed already is not trained again; the section gets exactly the grid's runs
    committed_only = results.section_runs(tasks="copy", levels="easy", sizes="405k", seeds=[1], recompute=True,
                                          steps="easy:2000,medium:4000,hard:3000", progress=False)
    assert len(list((tmp_path / "user").iterdir())) == 1
    assert len(committed_only) == 1 and committed_only["path"].iloc[0].startswith(str(results.data_root()))
    both = results.section_runs(tasks="copy", levels="easy", sizes="405k", seeds=[1, 7], recompute=True, steps="3",
                                progress=False)
    assert sorted(both["seed"]) == [1, 7] and set(both["steps"]) == {3}
    with pytest.raises(ValueError, match="parameter recompute: must be True or False, got 'no'"):
        results.section_runs(tasks="copy", recompute="no")
    monkeypatch.delenv("GEOMCAP_RUNS")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert store.user_root() == tmp_path / "cache" / "geomcap" / "runs"


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
    assert "overflow-wrap: anywhere" in html
