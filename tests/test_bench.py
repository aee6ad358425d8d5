"""The benchmark suite at tiny sizes: each part runs, its figures are consistent, bad input fails cleanly.

The real figures are measured by `geomcap bench` (data/bench/README.md); these tests check the
machinery in well under a minute.
"""
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from geomcap import bench, geometry, store, tasks
from geomcap.cli import main
from geomcap.models import PRESETS, build, count_parameters
from geomcap.train import TrainConfig, checkpoint_steps, train

os.environ.setdefault("HF_HUB_OFFLINE", "1")
CPU = torch.device("cpu")


def test_flops_per_token_formula():
    cfg = PRESETS["405k"]
    with torch.device("meta"):
        n = count_parameters(build("405k", tasks.VOCAB_SIZE))
    expected = 6 * (n - cfg.block_size * cfg.d_model) + 12 * cfg.n_layer * cfg.d_model * 18
    assert bench.flops_per_token("405k", tasks.VOCAB_SIZE, 18) == expected
    with pytest.raises(ValueError, match="unknown size"):
        bench.flops_per_token("3b", tasks.VOCAB_SIZE, 18)


def test_peer_has_the_same_shape_and_returns_logits():
    torch.manual_seed(0)
    peer = bench.build_peer("405k", tasks.VOCAB_SIZE)
    assert count_parameters(peer) == count_parameters(build("405k", tasks.VOCAB_SIZE))
    idx = torch.randint(tasks.VOCAB_SIZE, (3, 18))
    assert peer(idx).shape == (3, 18, tasks.VOCAB_SIZE)
    with pytest.raises(ValueError, match="unknown peer"):
        bench.build_peer("405k", tasks.VOCAB_SIZE, kind="llama")


def test_train_step_lowers_the_loss_for_both_models():
    data = tasks.make_task("add", "easy", n_train=256, n_test=16)
    for model in (build("405k", tasks.VOCAB_SIZE), bench.build_peer("405k", tasks.VOCAB_SIZE)):
        run = bench.make_train_step(model, data.train_prompts, data.train_answers, 32, CPU, lr=3e-3)
        first = run(1).item()
        assert run(15).item() < first


def test_matmul_peak_and_timing_helpers():
    peak = bench.matmul_peak(CPU, n=64, repeats=3, warmup=1)
    assert peak["flops_per_s"] > 0 and len(peak["times_s"]) == 3 and peak["dtype"] == "float32"
    assert len(bench.time_repeats(lambda: None, repeats=4, warmup=0)) == 4
    assert bench.summarize([3, 1, 2])["median"] == 2
    with pytest.raises(ValueError):
        bench.time_repeats(lambda: None, repeats=0)


def test_throughput_tiny():
    out = bench.throughput(["405k"], CPU, task="add", level="easy", batch_size=8, rounds=2, block_s=0.01,
                           warmup_steps=1, peak_n=64, peak_repeats=1, progress=False)
    row = out["presets"][0]
    assert out["seq_len"] == tasks.sequence_lengths("add", "easy")[0] + tasks.sequence_lengths("add", "easy")[1] - 1
    assert set(row["models"]) == {"geomcap", "peer"}
    assert row["peer_parameters"] == row["parameters"]
    g, p = row["models"]["geomcap"], row["models"]["peer"]
    assert out["tokens_per_step"] == 8 * out["seq_len"]  # batch 8: every position of every sequence
    assert len(row["peer_ratio_rounds"]) == 2 and row["peer_ratio"] > 0
    assert 0 < g["peak_fraction"] and row["data_share"] >= 0


def test_select_presets():
    assert bench.select_presets("405k,1.3m", CPU, 1e11, 18, 128) == ["405k", "1.3m"]
    auto = bench.select_presets("auto", CPU, 1e11, 18, 128, max_step_s=1.0)
    assert auto[0] == "405k" and "151m" not in auto
    assert bench.select_presets("auto", CPU, 1.0, 18, 128) == ["405k"]  # always the smallest
    with pytest.raises(ValueError, match="unknown size"):
        bench.select_presets("405k,huge", CPU, 1e11, 18, 128)


def test_rankme_vs_naive_agrees():
    calls = []
    out = bench.rankme_vs_naive([(64, 16), (300, 1200)], repeats=1, progress=False,
                                on_progress=lambda partial: calls.append(len(partial["sizes"])))
    assert calls == [1, 2]  # a bench killed midway keeps the sizes it finished
    svd, gram = out["sizes"]
    assert (svd["method"], gram["method"]) == ("svd", "gram")
    for row in out["sizes"]:
        assert row["abs_diff"] < 1e-6 and row["geomcap_s"] > 0 and row["naive_s"] > 0
        Z = bench.rankme_test_matrix(row["n"], row["d"])
        assert row["geomcap_value"] == geometry.rankme(Z)
    assert bench.naive_rankme(np.eye(5)) == pytest.approx(5.0, rel=1e-5)


def test_geometry_cost_tiny():
    out = bench.geometry_cost(["405k"], CPU, task="parity", level="easy", rounds=1, block_s=0.01,
                              schedules=(100,), progress=False)
    row = out["presets"][0]
    sched = row["schedules"][0]
    assert row["layers"] == 3 and 0 < row["geometry_s"] <= row["eval_s"]
    assert sched["checkpoints"] == len(checkpoint_steps(100))
    assert 0 < sched["geometry_share"] <= sched["eval_share"]  # the geometry is part of the evaluation


def test_costly_cost_tiny():
    out = bench.costly_cost(task="parity", level="easy", repeats=1, warmup=0, n_examples=8,
                            measures=("per_example_gradients", "grad_rank"), steps=100, block_s=0.01,
                            progress=False)
    names = [r["measure"] for r in out["measures"]]
    assert names == ["per_example_gradients", "grad_rank"]
    assert all(r["seconds"] > 0 for r in out["measures"]) and out["run"]["run_share"] > 0
    with pytest.raises(ValueError, match="unknown costly measure"):
        bench.costly_cost(measures=("nope",))


def _fake_result():
    throughput = {"seq_len": 18, "tokens_per_step": 2304, "presets": [
        {"preset": "405k", "parameters": 408192, "peer_ratio": 1.2,
         "models": {"geomcap": {"ms_per_step": 100.0, "tokens_per_s": 23040.0, "peak_fraction": 0.5,
                                "achieved_flops_per_s": 5.7e10}}},
        {"preset": "1.3m", "parameters": 1_350_000, "peer_ratio": 0.9,
         "models": {"geomcap": {"ms_per_step": 300.0, "tokens_per_s": 7680.0, "peak_fraction": 0.3,
                                "achieved_flops_per_s": 6.2e10}}}]}
    geometry_part = {"presets": [{"preset": "405k", "geometry_s": 0.1, "eval_s": 0.2, "schedules": [{"steps": 2000, "checkpoints": 57,
                                                                    "geometry_share": 0.05, "eval_share": 0.1}]}]}
    rankme = {"sizes": [{"n": 512, "d": 128, "method": "svd", "speedup": 2.0, "abs_diff": 1e-9,
                         "geomcap_s": 0.01, "naive_s": 0.02}]}
    return {"machine": {"device": "cpu"}, "throughput": throughput, "geometry": geometry_part, "rankme": rankme,
            "matmul_peak": {"flops_per_s": 1e11, "dtype": "float32"}}


def test_targets_and_projection():
    result = _fake_result()
    targets = {(r["target"], r["subject"]): r for r in bench.check_targets(result)}
    assert targets[("geomcap / peer tokens/s", "405k")]["met"]
    missed = targets[("geomcap / peer tokens/s", "1.3m")]
    assert not missed["met"] and missed["by"] == pytest.approx(-0.1)
    assert not targets[("fraction of matmul peak", "1.3m")]["met"]
    assert targets[("geometry share (2000-step run)", "405k")]["met"]
    assert targets[("RankMe |difference|", "512 x 128")]["met"]

    proj = bench.project_grid(result)
    rows = {r["preset"]: r for r in proj["presets"]}
    assert rows["405k"]["source"] == "measured" and rows["151m"]["source"].startswith("extrapolated")
    assert rows["405k"]["steps"] == 8 * 9000 and rows["405k"]["runs"] == 24
    # a step twice as slow takes twice the hours; the total is the presets' sum
    slower = _fake_result()
    slower["throughput"]["presets"][0]["models"]["geomcap"]["ms_per_step"] = 200.0
    slow_rows = {r["preset"]: r for r in bench.project_grid(slower)["presets"]}
    assert slow_rows["405k"]["hours"] == pytest.approx(2 * rows["405k"]["hours"])
    assert slow_rows["1.3m"]["hours"] == pytest.approx(rows["1.3m"]["hours"])
    assert proj["total_hours"] == pytest.approx(sum(r["hours"] for r in rows.values()))
    assert rows["151m"]["ms_per_step"] > rows["48m"]["ms_per_step"] > rows["1.3m"]["ms_per_step"]
    table = bench.figures_table(result)
    assert "405k geomcap / peer tokens/s" in set(table["figure"])


def test_cli_bench_writes_json(tmp_path):
    out = tmp_path / "bench" / "r.json"
    code = main(["bench", "--parts", "rankme", "--rankme-n", "64", "--rankme-d", "16,300",
                 "--rankme-repeats", "1", "--peak-n", "64", "--threads", "1", "--out", str(out), "--quiet"])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["schema"] == 1 and result["settings"]["threads"] == 1
    assert result["machine"]["cpu_cores"] >= 1 and result["machine"]["torch_version"] == torch.__version__
    assert len(result["load_average_start"]) == 3 and result["wall_s"] > 0
    assert [(r["n"], r["d"]) for r in result["rankme"]["sizes"]] == [(64, 16), (64, 300)]
    assert result["command"].startswith("geomcap bench --parts rankme")
    assert bench.load_results(out.parent)[0]["file"] == "r.json"

    # --update replaces only the parts run now and records the update
    assert main(["bench", "--parts", "rankme", "--rankme-n", "32", "--rankme-d", "8", "--rankme-repeats", "1",
                 "--threads", "1", "--update", "--out", str(out), "--quiet"]) == 0
    updated = json.loads(out.read_text())
    assert [(r["n"], r["d"]) for r in updated["rankme"]["sizes"]] == [(32, 8)]
    assert updated["started_at"] == result["started_at"]
    assert len(updated["updates"]) == 1 and "--update" in updated["updates"][0]["command"]
    # the test suite's time is recorded by the checkout's script, not by geomcap bench
    suite = _suite_times()
    assert suite.main(["--make-test-s", "12.5", "--out", str(out)]) == 0
    updated = json.loads(out.read_text())
    assert updated["make_test"]["seconds"] == 12.5 and len(updated["updates"]) == 2
    # the same keys as geomcap bench's own update: the performance page prints them for every update
    page_keys = {"command", "started_at", "finished_at", "wall_s", "machine", "load_average_start", "load_average_end"}
    assert page_keys <= set(updated["updates"][0]) and page_keys <= set(updated["updates"][1])
    assert updated["updates"][1]["command"] == f"python benchmarks/suite_times.py --make-test-s 12.5 --out {out}"
    assert updated["rankme"]["sizes"][0]["n"] == 32
    assert ("make test", 12.5, "s") in set(bench.figures_table(updated).itertuples(index=False, name=None))
    with pytest.raises(SystemExit):  # not a bench result: refused before anything is timed
        suite.main(["--book", "--out", str(tmp_path / "missing.json")])


def _suite_times():
    """benchmarks/suite_times.py, imported from the checkout."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "suite_times.py"
    spec = importlib.util.spec_from_file_location("suite_times", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SIZES = "405k, 1.3m, 4m, 14m, 48m, 151m, 405k-deep, 1.3m-deep, grok-1l"


@pytest.mark.parametrize("option, value, reason", [
    ("--parts", "nope", "unknown value 'nope'; choose one of: throughput, geometry, costly, rankme, threads, "
                        "llc_calibration, scale (or 'default' or 'all')"),
    ("--parts", ",", "empty selection: name one or more values, comma-separated (or 'default' or 'all')"),
    ("--device", "tpu", "unknown value 'tpu'; choose one of: auto, cpu, cuda, cuda:N"),
    ("--device", "cuda", "'cuda' requested but CUDA is not available"),
    ("--threads", "0", "must be a positive integer, got 0"),
    ("--threads", "x", "must be a positive integer, got 'x'"),
    ("--presets", "huge", f"unknown value 'huge'; choose one of: {SIZES} (or 'auto')"),
    ("--presets", "all", f"unknown value 'all'; choose one of: {SIZES} (or 'auto')"),
    ("--max-step-s", "0", "must be a number in (0, inf), got 0.0"),
    ("--max-step-s", "x", "must be a number in (0, inf), got 'x'"),
    ("--task", "chess", "unknown value 'chess'; choose one of: copy, reverse, compare, parity, add, mod, sort, mul"),
    ("--level", "x", "unknown value 'x'; choose one of: easy, medium, hard"),
    ("--batch-size", "0", "must be a positive integer, got 0"),
    ("--batch-size", "2.5", "must be a positive integer, got '2.5'"),
    ("--rounds", "0", "must be a positive integer, got 0"),
    ("--block-s", "-1", "must be a number in (0, inf), got -1.0"),
    ("--block-s", "inf", "must be a number in (0, inf), got inf"),
    ("--peer", "llama", "unknown value 'llama'; choose one of: none, gpt2, gpt-neox"),
    ("--compile", "405k,huge", f"unknown value 'huge'; choose one of: {SIZES}"),
    ("--rankme-n", "0", "must be a positive integer, got 0"),
    ("--rankme-n", ",", "empty selection: name one or more values, comma-separated"),
    ("--rankme-d", "16,x", "must be a positive integer, got 'x'"),
    ("--rankme-repeats", "0", "must be a positive integer, got 0"),
    ("--costly-repeats", "x", "must be a positive integer, got 'x'"),
    ("--peak-n", "-5", "must be a positive integer, got -5"),
])
def test_cli_bench_bad_input(tmp_path, capsys, monkeypatch, option, value, reason):
    """Every option of geomcap bench is a row of parameters.BENCH: a bad value is one line "--NAME: REASON",
    before anything runs or is written (they said "rounds must be a positive integer, got 0" without the option,
    "unknown peer 'llama'", argparse's "invalid int value: 'x'", or "block_s and max_step_s must be positive")."""
    def runs(*args, **kwargs):
        raise AssertionError("the bench ran")

    monkeypatch.setattr(bench, "run_bench", runs)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the same line on a machine with a GPU
    assert main(["bench", option, value, "--out", str(tmp_path / "r.json"), "--quiet"]) == 2
    assert capsys.readouterr() == ("", f"geomcap: error: {option}: {reason}\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("keyword, value", [("rounds", 0), ("block_s", 0.0), ("peer", "llama"), ("task", "chess"),
                                            ("compile_presets", "405k,huge"), ("presets", "huge"), ("parts", "nope"),
                                            ("threads", 0), ("peak_n", -5), ("rankme_repeats", 0)])
def test_run_bench_refuses_what_the_command_refuses(tmp_path, capsys, keyword, value):
    """run_bench checks its keywords through the rows of geomcap bench's options: the same reason."""
    from geomcap.schema import SettingError

    with pytest.raises(SettingError) as from_python:
        bench.run_bench(tmp_path / "python.json", **{keyword: value}, progress=False)
    option = "--" + {"compile_presets": "compile"}.get(keyword, keyword).replace("_", "-")
    assert main(["bench", option, str(value), "--out", str(tmp_path / "command.json"), "--quiet"]) == 2
    assert capsys.readouterr().err == f"geomcap: error: {option}: {from_python.value.reason}\n"
    assert list(tmp_path.iterdir()) == []


def test_compile_option_keeps_the_config_hash(tmp_path):
    cfg = TrainConfig(task="parity", level="easy", steps=3, n_log_checkpoints=1, n_linear_checkpoints=1,
                      n_train=64, n_test=16, probe_size=16, train_eval_size=16, batch_size=8)
    run_dir = train(cfg, out=tmp_path / "run", device="cpu", progress=False, compile="eager")
    config = store.read_config(run_dir)
    assert config.pop("provenance")["compile"] == "eager"
    assert store.config_hash(config) == store.config_hash(cfg.to_dict())
    # an eager run of the same config reuses it: compile is not part of the config
    assert train(cfg, out=run_dir, device="cpu", progress=False) == run_dir
    with pytest.raises(ValueError, match="compile must be"):
        train(cfg, out=tmp_path / "other", compile=3)


def test_bench_figure_draws_every_panel_and_tolerates_missing_parts():
    import matplotlib.pyplot as plt

    from geomcap import plots

    result = _fake_result()
    result["costly"] = {"size": "405k", "run": {"costly_every": 4, "steps": 3000, "run_share": 2.0}}
    fig = plots.bench_figure(result, title="fake")
    assert len(fig.axes) == 4 and all(ax.has_data() for ax in fig.axes)
    plt.close(fig)
    fig = plots.bench_figure({"matmul_peak": result["matmul_peak"]})
    assert not any(ax.has_data() for ax in fig.axes)
    plt.close(fig)


def test_thread_contention_times_each_setting_side_by_side():
    """The threads part: default flags, --threads 1 and --threads <cores>, each timed in every round while a
    busy process holds a core; ratios to one thread (their values are the benchmark's, not asserted here)."""
    out = bench.thread_contention(steps=2, rounds=1, busy=1, progress=False)
    names = {"default", "threads_1", f"threads_{out['cores']}"}
    assert set(out["seconds"]) == names and all(len(v) == 1 for v in out["seconds"].values())
    assert out["ratio_to_threads_1"]["threads_1"] == 1.0
    assert out["ratio_to_threads_1"]["default"] == pytest.approx(out["median_s"]["default"] / out["median_s"]["threads_1"])


def test_llc_settings_table_known_answers():
    # reference (2, 100): seed-means 1, 3, 5 (excursion 4), spread 0.2; cheap (1, 60): means 1.5, 3, 5, spread 2
    rows = []
    for step, mean in ((0, 1.0), (10, 3.0), (20, 5.0)):
        for seed, offset in enumerate((-0.1, 0.1)):
            rows.append({"step": step, "chains": 2, "draws": 100, "seed": seed, "llc": mean + offset,
                         "trace_drift": 0.0, "seconds": 4.0})
            cheap = mean + (0.5 if step == 0 else 0.0)
            rows.append({"step": step, "chains": 1, "draws": 60, "seed": seed, "llc": cheap + 10 * offset,
                         "trace_drift": 0.3 if seed else 0.0, "seconds": 1.0})
    ref, cheap = bench.llc_settings_table(rows, drift_tolerance=0.2)
    assert (ref["chains"], ref["draws"], ref["cost"], ref["max_bias"], ref["not_flat"]) == (2, 100, 1.0, 0.0, 0.0)
    assert ref["noise"] == pytest.approx(np.sqrt(0.02)) and ref["excursion"] == pytest.approx(4.0)
    assert cheap["cost"] == pytest.approx(0.25) and cheap["noise"] == pytest.approx(np.sqrt(2.0))
    assert cheap["signal_to_noise"] == pytest.approx(4.0 / np.sqrt(2.0))
    assert cheap["max_bias"] == pytest.approx(0.5 / 4.0) and cheap["not_flat"] == pytest.approx(0.5)


def test_llc_calibration_tiny():
    from geomcap.train import TrainConfig

    cfg = TrainConfig(task="add", level="easy", steps=4, n_train=256, n_test=64, probe_size=64, train_eval_size=64,
                      batch_size=16, dynamics_size=32)  # the LLC's minibatch is 32
    result = bench.llc_calibration(cfg, steps=(4,), settings=((1, 52), (1, 51)), sgld_seeds=(0, 1), progress=False)
    assert [(r["step"], r["draws"], r["seed"]) for r in result["rows"]] == [(4, 52, 0), (4, 52, 1), (4, 51, 0),
                                                                             (4, 51, 1)]
    assert all(np.isfinite(r["llc"]) for r in result["rows"]) and result["rows"][0]["llc"] != result["rows"][1]["llc"]
    assert [s["draws"] for s in result["settings"]] == [52, 51] and result["n_examples"] == 32
    with pytest.raises(ValueError, match="burn-in"):
        bench.llc_calibration(cfg, settings=((1, 50),), progress=False)


def test_cheapest_adequate_llc_and_projected_share():
    ref = {"chains": 4, "draws": 200, "cost": 1.0, "signal_to_noise": 40.0, "max_bias": 0.0}
    half = {"chains": 4, "draws": 100, "cost": 0.5, "signal_to_noise": 20.0, "max_bias": 0.05}
    noisy = {"chains": 1, "draws": 100, "cost": 0.125, "signal_to_noise": 5.0, "max_bias": 0.05}
    biased = {"chains": 2, "draws": 100, "cost": 0.25, "signal_to_noise": 15.0, "max_bias": 0.3}
    assert bench.cheapest_adequate_llc([ref, half, noisy, biased]) is half
    assert bench.cheapest_adequate_llc([dict(ref, signal_to_noise=2.0), noisy]) is None
    # per costly checkpoint 40 s, 20 of them the LLC: a half-price LLC gives 30 / 40
    costly = {"measures": [{"measure": "hessian", "seconds": 10.0}, {"measure": "llc", "seconds": 20.0}],
              "per_costly_checkpoint_s": 40.0}
    assert bench.costly_checkpoint_fraction(costly, 0.5) == pytest.approx(0.75)
    assert bench.costly_checkpoint_fraction(costly, 1.0) == pytest.approx(1.0)


def _llc_metrics(steps, llc, drift):
    import pandas as pd

    rows = [(s, -1, "llc", v) for s, v in zip(steps, llc)] + [(s, -1, "llc_trace_drift", d)
                                                              for s, d in zip(steps, drift)]
    return pd.DataFrame(rows, columns=["step", "layer", "measure", "value"])


def test_llc_setting_agreement_known_answers():
    """Bias as a share of the reference's excursion, rank agreement, both transitions, health: a series that
    is the reference plus a constant agrees in rank and transition; one in reverse does not."""
    steps = np.arange(0, 400, 10)
    ref_llc = np.where(steps < 200, 5.0 + 0.001 * np.sin(steps), 25.0)  # a jump at step 200: excursion 20
    ref = _llc_metrics(steps, ref_llc, np.zeros(steps.size))
    shifted = _llc_metrics(steps, ref_llc + 1.0, np.r_[np.full(10, 0.5), np.zeros(steps.size - 10)])
    out = bench.llc_setting_agreement(ref, shifted)
    assert out["steps"] == steps.size and out["excursion"] == pytest.approx(20.0, abs=0.01)
    assert out["max_bias"] == pytest.approx(1.0 / out["excursion"])
    assert out["spearman"] == pytest.approx(1.0)
    assert out["transition"]["reference"] == out["transition"]["other"]
    assert 200 <= out["transition"]["other"] <= 230  # the jump, after the trailing median's delay
    assert out["not_flat"] == {"reference": 0.0, "other": pytest.approx(10 / steps.size)}
    # a series that never moves has no transition, and ranks nothing like the reference
    flat = _llc_metrics(steps, 5.0 + 0.001 * np.cos(3 * steps), np.zeros(steps.size))
    out = bench.llc_setting_agreement(ref, flat)
    assert out["transition"]["other"] is None and out["max_bias"] > 0.9 and abs(out["spearman"]) < 0.5
    with pytest.raises(ValueError, match="llc rows"):
        bench.llc_setting_agreement(ref, ref[ref["measure"] != "llc"])


def test_llc_calibration_figure_one_line_per_setting():
    import matplotlib.pyplot as plt

    from geomcap import plots

    rows = [{"step": step, "chains": c, "draws": d, "seed": seed, "llc": step / 100 + seed * 0.1, "trace_drift": 0.0,
             "seconds": 1.0} for step in (0, 100, 200) for c, d in ((4, 200), (1, 100)) for seed in (0, 1)]
    fig = plots.llc_calibration_figure({"rows": rows, "task": "add", "level": "hard", "size": "405k", "seed": 0})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "100", "200"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["4 x 200", "1 x 100"]
    plt.close(fig)


def test_llc_settings_benchmark_retrains_with_the_llc_alone_and_compares(tmp_path):
    """benchmarks/llc_settings.py on a tiny committed-like run: the same model (measurement-only settings),
    the cheap series compared with the committed run's LLC, the default's own series equal to it."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "llc_settings.py"
    spec = importlib.util.spec_from_file_location("llc_settings", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cfg = TrainConfig(task="add", level="easy", steps=2, dense_steps=2, n_linear_checkpoints=1, n_train=256,
                      n_test=64, probe_size=64, train_eval_size=64, batch_size=32, dynamics_size=32,
                      measures=("llc",), costly_every=1, llc_chains=2, llc_draws=52)
    source = train(cfg, out=tmp_path / "source" / "run", progress=False)
    out = tmp_path / "out.json"
    assert module.main(["--runs", "run", "--source", str(tmp_path / "source"), "--store", str(tmp_path / "store"),
                        "--chains", "1", "--draws", "51", "--reference-too", "run", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    (run,) = result["runs"]
    assert result["schema"] == "llc-settings-1" and run["reference"] == "committed"
    default, cheap = run["llc_alone_default"], run["cheap"]
    assert (default["chains"], default["draws"], cheap["chains"], cheap["draws"]) == (2, 52, 1, 51)
    assert default["training_metrics_identical"] and cheap["training_metrics_identical"]
    assert default["agreement"]["max_bias"] == 0.0 and cheap["agreement"]["steps"] == default["llc_checkpoints"]
    assert cheap["agreement"]["max_bias"] > 0
    assert store.read_config(source)["llc_draws"] == 52


# --- the scale part: step seconds by preset, length, threads and precision --------------------------

def test_scale_steps_tiny_times_every_setting_and_decides_threads():
    """Every (shape, threads, precision) is timed, a line is fitted per (threads, precision), two one-thread
    processes are timed side by side, and the decision compares them with one two-thread run."""
    from geomcap.bench.scale import scale_steps

    out = scale_steps(["405k"], shapes=[("mod", "easy"), ("copy", "easy")], threads=(1, 2),
                      precisions=("fp32", "bf16"), rounds=1, steps=1, pair_shape=("mod", "easy"), pair_steps=1,
                      progress=False)
    row = out["presets"][0]
    assert [s["seq_len"] for s in out["shapes"]] == [tasks.sequence_length("mod", "easy"),
                                                     tasks.sequence_length("copy", "easy")]
    assert {(r["task"], r["threads"], r["precision"]) for r in row["shapes"]} == {
        (t, n, p) for t in ("mod", "copy") for n in (1, 2) for p in ("fp32", "bf16")}
    assert all(r["s_per_step"] > 0 for r in row["shapes"])
    assert {(f["threads"], f["precision"]) for f in row["fits"]} == {(n, p) for n in (1, 2) for p in ("fp32", "bf16")}
    assert [p["precision"] for p in row["pair"]] == ["fp32", "bf16"]
    assert all(len(p["s_per_step_processes"]) == 2 for p in row["pair"])
    decision = row["threads_decision"]["fp32"]
    assert decision["ratio_two_runs_to_one"] == pytest.approx(
        decision["two_runs_one_thread_steps_per_s"] / decision["one_run_two_threads_steps_per_s"])
    assert decision["better"] in ("two runs on one thread", "one run on two threads")
    assert row["eval_s"] > 0
    assert "405k one checkpoint, one thread" in set(bench.figures_table({"matmul_peak": {"flops_per_s": 1e9,
                                                                                          "dtype": "float32"},
                                                                          "scale": out})["figure"])


def test_scale_fit_and_prediction_known_answers():
    from geomcap.bench.scale import fit_seconds, threads_decision
    from geomcap.planning import StepCost

    rows = [{"seq_len": t, "s_per_step": 0.5 + 0.02 * t} for t in (8, 15, 45)]
    fit = fit_seconds(rows)
    assert fit["intercept_s"] == pytest.approx(0.5) and fit["per_token_s"] == pytest.approx(0.02)
    assert fit_seconds(rows[:1]) == {"intercept_s": pytest.approx(0.66), "per_token_s": 0.0}
    cost = StepCost(0.5, 1.0, "here", fit)
    assert cost.step_seconds(53) == pytest.approx(0.5 + 0.02 * 53)
    assert StepCost(1.0, 1.0, "here", {"intercept_s": 1.0, "per_token_s": -1.0}).step_seconds(10) == 0.1  # floor
    assert StepCost(0.3, 1.0, "here").step_seconds(50) == 0.3  # no line: one figure for every length
    # two one-thread runs at 1.0 s per step (2 steps/s) beat one two-thread run at 0.6 s (1.67 steps/s) ...
    preset = {"shapes": [{"task": "add", "level": "medium", "threads": 2, "precision": "fp32", "s_per_step": 0.6}],
              "pair": [{"task": "add", "level": "medium", "precision": "fp32", "s_per_step": 1.0}]}
    assert threads_decision(preset)["fp32"]["better"] == "two runs on one thread"
    preset["pair"][0]["s_per_step"] = 1.5  # ... and lose to it when they slow each other down to 1.5 s
    assert threads_decision(preset)["fp32"]["better"] == "one run on two threads"


@pytest.mark.parametrize("kwargs, message", [
    ({"presets": ["huge"]}, "unknown size"),
    ({"precisions": ["fp16"]}, "unknown precision"),
    ({"threads": [0]}, "threads must be positive integers"),
    ({"shapes": [("add", "extreme")]}, "level"),
    ({"rounds": 0}, "rounds must be a positive integer"),
])
def test_scale_steps_refuses_bad_input_before_timing(kwargs, message):
    from geomcap.bench.scale import scale_steps

    with pytest.raises(ValueError, match=message):
        scale_steps(**{"presets": ["405k"], **kwargs}, progress=False)


def test_plan_projects_from_the_scale_lines_by_length_and_precision(tmp_path, monkeypatch):
    """A bench result with the scale part, made on this CPU, gives each run its own step cost: the line at
    its sequence length, at its precision; a precision without a line is not projected."""
    from geomcap import planning

    bench_dir = tmp_path / "data" / "bench"
    bench_dir.mkdir(parents=True)
    line = {"intercept_s": 0.1, "per_token_s": 0.01}
    result = {"schema": 1, "machine": {"cpu_model": "test CPU", "device": "cpu", "torch_threads": 2},
              "scale": {"presets": [{"preset": "405k", "eval_s": 2.0,
                                     "fits": [{"threads": 1, "precision": "fp32", **line},
                                              {"threads": 2, "precision": "fp32", "intercept_s": 9.0,
                                               "per_token_s": 9.0}]}]}}
    (bench_dir / "scale.json").write_text(json.dumps(result))
    monkeypatch.setenv("GEOMCAP_DATA", str(tmp_path / "data"))
    short, long_ = (TrainConfig(task=t, level="easy", steps=100) for t in ("mod", "parity"))
    bf16 = TrainConfig(task="mod", level="easy", steps=100, precision="bf16")
    the_plan = planning.plan([short, long_, bf16], [tmp_path / "runs"], workers=1, cpu="test CPU")
    checkpoints = int((checkpoint_steps(100) > 0).sum())  # the plan counts the checkpoints after step 0
    for run, cfg in zip(the_plan.runs, (short, long_)):
        length = tasks.sequence_length(cfg.task, cfg.level)
        assert run.seconds == pytest.approx(100 * (0.1 + 0.01 * length) + 2.0 * checkpoints)
    assert the_plan.runs[2].seconds is None
    lines = the_plan.lines()
    assert any(x.startswith("  405k fp32: 0.100 s + 10.0 ms per token") for x in lines)
    assert "  405k bf16: no measurement of this preset on this machine: not projected" in lines
