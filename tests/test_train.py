"""Training: it learns, it is deterministic, and a killed run resumes to the same metrics."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from geomcap import events, measures, store
from geomcap.train import TrainConfig, checkpoint_steps, learning_rate, recorded_at, thinned_steps, train

GEOMCAP = [sys.executable, "-m", "geomcap.cli"]


def test_checkpoint_schedule_is_dense_early():
    steps = checkpoint_steps(2000, n_log=20, n_linear=40, dense=0)  # the first grid's schedule
    assert steps[0] == 0 and steps[-1] == 2000
    assert np.all(np.diff(steps) > 0)
    early = steps[steps <= 200]
    assert len(early) >= 15          # log-spaced points crowd the first 10%
    assert np.all(np.diff(steps[steps >= 200]) <= 50)


def test_checkpoint_schedule_every_step_then_linear():
    steps = checkpoint_steps(3000)
    assert np.array_equal(steps[:129], np.arange(129))       # every step over the first 128
    later = steps[steps > 128]
    assert len(later) == 150 and later[-1] == 3000          # 150 evenly spaced over the rest
    assert np.ptp(np.diff(later)) <= 1
    assert np.array_equal(checkpoint_steps(50), np.arange(51))  # shorter than the dense part
    costly = sorted(thinned_steps(steps, 128, 4))
    assert costly[:9] == [0, 1, 2, 4, 8, 16, 32, 64, 128] and costly[-1] == 3000
    assert len(costly) == 9 + len(later[::4]) + (later[-1] not in later[::4])
    legacy = checkpoint_steps(100, 5, 10, 0)
    assert thinned_steps(legacy, 0, 4) == set(legacy[::4].tolist()) | {100}
    assert thinned_steps(legacy, 0, 1) == set(legacy.tolist())
    every_later = thinned_steps(steps, 128, 1)
    assert 3 not in every_later and set(later.tolist()) <= every_later


def test_learning_rate_warmup_and_cosine():
    cfg = TrainConfig(task="copy", level="easy", steps=1000)
    assert cfg.warmup_steps == 100 and cfg.weight_decay == 0.1
    assert learning_rate(0, cfg) == pytest.approx(1e-5)
    assert learning_rate(99, cfg) == pytest.approx(1e-3)
    assert learning_rate(1000, cfg) == pytest.approx(1e-4)
    lrs = [learning_rate(s, cfg) for s in range(100, 1000)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))
    assert TrainConfig(task="mod", level="easy").weight_decay == 1.0


@pytest.mark.parametrize("kwargs, message", [
    ({"task": "nope", "level": "easy"}, "unknown task 'nope'"),
    ({"task": "copy", "level": "extreme"}, "unknown level 'extreme'"),
    ({"task": "copy", "level": "easy", "size": "1b"}, "unknown size '1b'"),
    ({"task": "copy", "level": "easy", "steps": 0}, "steps must be a positive integer"),
    ({"task": "copy", "level": "easy", "measures": ("llc", "magic")}, "unknown measure 'magic'"),
])
def test_config_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kwargs)


def test_copy_easy_learns(tmp_path):
    """The smallest preset on copy/easy reaches > 90% test accuracy and stops a stated margin
    after acquisition; the run directory holds the documented files and tidy measures (its speed is
    measured by the benchmarks, not asserted here: a test must not fail because the machine is busy)."""
    cfg = TrainConfig(task="copy", level="easy", steps=600, dense_steps=16, n_linear_checkpoints=40,
                      stop_min_steps=100, n_test=256, probe_size=256, train_eval_size=256)
    run = train(cfg, out=tmp_path / "run", progress=False)
    metrics = store.read_metrics(run)
    steps, accuracy = events.tidy_series(metrics, "accuracy")
    assert accuracy[-1] > 0.9
    status = store.read_status(run)
    acquired = events.acquisition_step(steps, accuracy)
    # the run stopped at the first checkpoint past acquisition + max(acquisition, 100 steps)
    assert status["stopped_at"] == steps[-1] < 600
    assert steps[-2] < acquired + max(acquired, 100) <= steps[-1]
    assert status["complete"] and status["geometry_share"] > 0  # its size is measured by the benchmarks
    assert not (run / store.STATE_FILE).exists()  # no weights left in the store
    config = store.read_config(run)
    assert {"task", "level", "size", "seed", "steps", "task_params"} <= set(config)
    assert config["provenance"]["geomcap_version"]
    # tidy format: measure names lower case; layer -1 for model-level, 0.. for per-layer
    assert list(metrics.columns) == ["step", "layer", "measure", "value"]
    assert set(metrics.loc[metrics.layer == -1, "measure"]) == {"loss", "train_accuracy", "test_loss", "accuracy",
                                                                "first_token_accuracy", "param_norm"}
    assert set(metrics.loc[metrics.layer >= 0, "layer"]) == {0, 1, 2}
    assert set(metrics.loc[metrics.layer == 2, "measure"]) == {
        "rankme", "rankme_centred", "rankme_all_positions", "rankme_mean_pooled", "mean_energy_share",
        "probe_accuracy", "probe_control_accuracy", "rankme_residual", "rankme_centred_residual",
        "mean_energy_share_residual"}
    assert all(m == m.lower() for m in metrics.measure.unique())
    # the costly SVD variants and the training-set evaluation only at the powers of two of the dense part
    variant_at = set(metrics.loc[metrics.measure == "rankme_all_positions", "step"])
    assert {0, 1, 2, 4, 8, 16} <= variant_at and 3 not in variant_at and set(range(17)) <= set(steps)
    train_at = set(metrics.loc[metrics.measure == "train_accuracy", "step"])
    assert {0, 1, 2, 4, 8, 16} <= train_at and 3 not in train_at and set(steps[steps > 16]) <= train_at


def small_config(**overrides):
    base = dict(task="add", level="easy", steps=40, n_linear_checkpoints=8, n_log_checkpoints=6, dense_steps=8,
                n_train=2000, n_test=128, probe_size=128, train_eval_size=128, batch_size=32)
    return TrainConfig(**{**base, **overrides})


def test_same_seed_gives_byte_identical_metrics(tmp_path):
    a = train(small_config(), out=tmp_path / "a", progress=False)
    b = train(small_config(), out=tmp_path / "b", progress=False)
    c = train(small_config(seed=1), out=tmp_path / "c", progress=False)
    text_a = (a / store.METRICS_FILE).read_bytes()
    assert text_a == (b / store.METRICS_FILE).read_bytes()
    assert text_a != (c / store.METRICS_FILE).read_bytes()


def test_costly_measures_leave_the_training_metrics_unchanged(tmp_path):
    """The grid records the costly measures on some runs only; those runs stay comparable with the
    others (e.g. as the baselines of the sensitivity runs) because measuring never touches training."""
    plain = store.read_metrics(train(small_config(steps=16), out=tmp_path / "a", progress=False))
    cfg = small_config(steps=16, measures=("grad_rank", "hessian_top"), costly_every=2, dynamics_size=32)
    measured = store.read_metrics(train(cfg, out=tmp_path / "b", progress=False))
    both = plain.merge(measured, on=["step", "layer", "measure"], suffixes=("_plain", "_measured"))
    assert len(both) == len(plain) and set(measured["measure"]) > set(plain["measure"])
    assert np.array_equal(both["value_plain"], both["value_measured"], equal_nan=True)
    # what was recorded, where and when, is what the registry says
    schedule = checkpoint_steps(cfg.steps, cfg.n_log_checkpoints, cfg.n_linear_checkpoints, cfg.dense_steps)
    requested = [m for m in measures.MEASURES if not m.costly or m.option in cfg.measures]
    assert set(measured["measure"]) == {m.name for m in requested}
    last = int(measured["layer"].max())
    for m in requested:
        rows = measured[measured["measure"] == m.name]
        layers = {"model": {-1}, "each": set(range(last + 1)), "last": {last}}[m.layers]
        assert set(rows["layer"]) == layers, m.name
        assert set(rows["step"]) == recorded_at(m.recorded, schedule, cfg), m.name
    # powers of two over the dense part (8 steps), then every 2nd checkpoint (9..16, one per step), and the last
    assert recorded_at("costly", schedule, cfg) == {0, 1, 2, 4, 8, 9, 11, 13, 15, 16}


def test_the_checkpoint_schedule_leaves_the_training_unchanged(tmp_path):
    """A rerun with a checkpoint at every step (and a stop) trains the same steps as the run it reads more
    finely: every value both record is the same (geomcap.config.SCHEDULE_FIELDS). Another seed is not."""
    run = store.read_metrics(train(small_config(steps=24), out=tmp_path / "a", progress=False))
    rerun = store.read_metrics(train(small_config(steps=24, dense_steps=20, stop_at=20), out=tmp_path / "b",
                                     progress=False))
    both = run.merge(rerun, on=["step", "layer", "measure"], suffixes=("_run", "_rerun"))
    assert set(rerun["step"]) - set(run["step"]) and both["step"].nunique() >= 8
    assert np.array_equal(both["value_run"], both["value_rerun"], equal_nan=True)
    other = store.read_metrics(train(small_config(steps=24, seed=1), out=tmp_path / "c", progress=False))
    mixed = run.merge(other, on=["step", "layer", "measure"], suffixes=("_run", "_other"))
    assert not np.array_equal(mixed["value_run"], mixed["value_other"], equal_nan=True)


def test_hessian_top_is_spelled_hessian_in_config_json():
    """The costly measure is named hessian_top everywhere; config.json keeps the spelling the first runs
    were hashed with, so their run directories keep their names."""
    new, old = small_config(measures=("hessian_top", "llc")), small_config(measures=("llc", "hessian"))
    assert new == old and new.measures == ("hessian_top", "llc")
    assert new.to_dict()["measures"] == ["hessian", "llc"]
    assert TrainConfig.from_dict(new.to_dict()) == new
    assert store.config_hash(new.to_dict()) == store.config_hash({**new.to_dict(), "measures": ["hessian", "llc"]})
    with pytest.raises(ValueError, match="choose from: grad_rank, grad_cov_rank, hessian_top, llc"):
        small_config(measures=("hessian_bottom",))


def test_a_stopped_run_is_the_prefix_of_the_full_run(tmp_path):
    """The early stop changes nothing before it: same schedule, same learning rates, same batches."""
    common = dict(task="copy", level="easy", steps=400, dense_steps=8, n_linear_checkpoints=40, n_train=4000,
                  n_test=128, probe_size=128, train_eval_size=128, batch_size=64)
    full = train(TrainConfig(**common, stop_margin=None), out=tmp_path / "full", progress=False)
    stopped = train(TrainConfig(**common, stop_margin=0.0, stop_min_steps=20), out=tmp_path / "stop", progress=False)
    at = store.read_status(stopped)["stopped_at"]
    assert at is not None and at < 400 and store.read_status(full)["stopped_at"] is None
    full_m, stop_m = store.read_metrics(full), store.read_metrics(stopped)
    assert stop_m["step"].max() == at
    assert full_m[full_m["step"] <= at].reset_index(drop=True).equals(stop_m)


def test_finished_run_is_reused_not_retrained(tmp_path):
    run = train(small_config(), out=tmp_path / "run", progress=False)
    before = (run / store.STATUS_FILE).stat().st_mtime_ns
    assert train(small_config(), out=run, progress=False) == run
    assert (run / store.STATUS_FILE).stat().st_mtime_ns == before
    with pytest.raises(ValueError, match="holds a different run"):
        train(small_config(seed=3), out=run, progress=False)


def test_default_run_dir_is_the_config_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOMCAP_RUNS", str(tmp_path))
    cfg = small_config(steps=5)
    run = train(cfg, progress=False)
    assert run == tmp_path / store.config_hash(cfg.to_dict())
    assert len(store.list_runs(tmp_path)) == 1


def test_re_run_runs_keep_their_names_across_the_hessian_start_field():
    """data/runs-v2's runs were written before ``hessian_warm_start`` existed: without the Hessian
    measure the field changes nothing, so it stays out of the hash; with it, it names the run."""
    import json

    root = store.committed_data("runs")
    run_dirs = sorted(d for d in root.iterdir() if (d / "config.json").exists())
    assert run_dirs, "no committed re-run run to check"
    for run_dir in run_dirs:
        recorded = json.loads((run_dir / "config.json").read_text())
        config = TrainConfig.from_dict(recorded)
        assert store.config_hash(config.to_dict()) == run_dir.name
        fresh = TrainConfig.from_dict({**recorded, "hessian_warm_start": True})
        assert store.config_hash(fresh.to_dict()) == run_dir.name
    with_hessian = dict(task="add", level="hard", measures=("hessian",))
    assert (store.config_hash(TrainConfig(**with_hessian, hessian_warm_start=True).to_dict())
            != store.config_hash(TrainConfig(**with_hessian, hessian_warm_start=False).to_dict()))


def test_committed_runs_keep_their_names():
    """The run directory is the hash of TrainConfig.to_dict(): a field added to TrainConfig must
    not rename the committed runs (legacy_values keeps it out of the dict at the value they used)."""
    import json

    from geomcap.train import legacy_values

    run_dirs = sorted(d for d in store.committed_data("runs").iterdir() if (d / "config.json").exists())[:10]
    assert run_dirs, "no committed run to check"
    for run_dir in run_dirs:
        config = TrainConfig.from_dict(json.loads((run_dir / "config.json").read_text()))
        assert store.config_hash(config.to_dict()) == run_dir.name
    changed = TrainConfig(task="add", level="easy", answer_order="lsd").to_dict()
    assert changed["answer_order"] == "lsd" and "answer_order" in legacy_values("add", "easy")
    assert "answer_order" not in TrainConfig(task="add", level="easy").to_dict()
    # a first-grid config (no task_params, dense_steps, stop_margin) reads back as what it ran
    legacy = TrainConfig.from_dict({"task": "mod", "level": "easy", "n_log_checkpoints": 20,
                                    "n_linear_checkpoints": 40})
    assert legacy.task_params == {"p": 11, "train_fraction": 0.5} and legacy.dense_steps == 0
    assert legacy.stop_margin is None
    new = TrainConfig(task="mod", level="easy").to_dict()
    assert new["task_params"] == {"p": 47, "train_fraction": 0.6} and new["dense_steps"] == 128
    with pytest.raises(ValueError, match="applies to add, mod, mul only"):
        TrainConfig(task="copy", level="easy", answer_order="lsd")


KILL_SCRIPT = """
import sys
from geomcap.train import TrainConfig, train
cfg = TrainConfig(task="add", level="easy", steps=int(sys.argv[2]), n_linear_checkpoints=12,
                  n_log_checkpoints=10, dense_steps=8, n_train=2000, n_test=128, probe_size=128,
                  train_eval_size=128, batch_size=32)
train(cfg, out=sys.argv[1], progress=False)
"""


def test_kill_minus_9_then_resume_gives_the_same_metrics(tmp_path):
    steps = "120"  # 24 checkpoints, 530 metric rows
    reference = tmp_path / "reference"
    subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(reference), steps], check=True)

    run = tmp_path / "killed"
    for wait_for_rows in (60, 300):  # kill twice, at different points
        proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(run), steps])
        # wait for the rows however long it takes (no wall-clock limit: a busy machine is slow, not wrong)
        while proc.poll() is None:
            metrics = run / store.METRICS_FILE
            if metrics.exists() and len(metrics.read_text().splitlines()) > wait_for_rows:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not store.is_complete(run)
    subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(run), steps], check=True)
    assert store.is_complete(run)
    assert (run / store.METRICS_FILE).read_bytes() == (reference / store.METRICS_FILE).read_bytes()


def _interrupted_run(run_dir, monkeypatch, cfg, after_checkpoints=3):
    """Train ``cfg`` into ``run_dir`` and interrupt it (as Ctrl-C would) after a few checkpoints (the first
    writes metrics.csv, the next ones append to it)."""
    calls = []
    append_metrics = store.append_metrics

    def interrupting(*args):
        calls.append(1)
        if len(calls) == after_checkpoints - 1:
            raise KeyboardInterrupt
        append_metrics(*args)

    monkeypatch.setattr(store, "append_metrics", interrupting)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, out=run_dir, progress=False)
    monkeypatch.setattr(store, "append_metrics", append_metrics)
    assert (run_dir / store.STATE_FILE).exists() and not store.is_complete(run_dir)


def test_an_interrupted_run_resumes_from_its_last_saved_state_and_measures_the_rest_again(tmp_path, monkeypatch):
    """metrics.csv gets every checkpoint's rows as they come (appended); the state only now and then
    (train.STATE_EVERY_S). Interrupted after its state was saved, a run holds more rows than its state; resumed,
    it measures again from the state's step: the same bytes as an uninterrupted run."""
    import torch

    from geomcap import train as train_module

    reference = train(small_config(), out=tmp_path / "reference", progress=False)
    monkeypatch.setattr(train_module, "STATE_EVERY_S", float("inf"))  # the first checkpoint's state only
    run = tmp_path / "run"
    _interrupted_run(run, monkeypatch, small_config(), after_checkpoints=6)
    assert torch.load(run / store.STATE_FILE, weights_only=True)["step"] == 0
    assert store.last_metrics_step(run) == 4  # checkpoints 0..4 appended, the 6th interrupted
    train(small_config(), out=run, progress=False)
    assert (run / store.METRICS_FILE).read_bytes() == (reference / store.METRICS_FILE).read_bytes()
    assert store.read_status(run)["write_s"] >= 0


def test_a_bf16_run_trains_in_bf16_hashes_apart_and_resumes_byte_identically(tmp_path, monkeypatch):
    """precision=bf16 changes the training step (not the same metrics as float32), enters the hash (a float32
    run keeps its name), and an interrupted bf16 run resumes at its recorded precision: the same bytes as an
    uninterrupted one."""
    fp32, bf16 = small_config(), small_config(precision="bf16")
    assert "precision" not in fp32.to_dict() and bf16.to_dict()["precision"] == "bf16"
    assert store.config_hash(fp32.to_dict()) != store.config_hash(bf16.to_dict())
    reference = train(bf16, out=tmp_path / "reference", progress=False)
    plain = train(fp32, out=tmp_path / "fp32", progress=False)
    assert (reference / store.METRICS_FILE).read_bytes() != (plain / store.METRICS_FILE).read_bytes()
    run = tmp_path / "run"
    _interrupted_run(run, monkeypatch, bf16)
    train(TrainConfig.from_dict(store.read_config(run)), out=run, progress=False)
    assert (run / store.METRICS_FILE).read_bytes() == (reference / store.METRICS_FILE).read_bytes()


@pytest.mark.parametrize("native, precision, warned", [(False, "bf16", True), (True, "bf16", False),
                                                        (False, "fp32", False)])
def test_bf16_without_native_kernels_is_one_warning_before_training(tmp_path, monkeypatch, native, precision,
                                                                     warned):
    """bf16 autocast on a CPU whose bf16 matrix products have no native kernel (an AVX2-only CPU: torch falls
    back to a reference GEMM, many times slower than float32) is one PrecisionWarning when train and
    train_packed start; bf16 where the kernels exist, or fp32 anywhere, is silent. The training itself is
    stubbed: only the check before it is under test."""
    import warnings

    from geomcap import models, packed
    from geomcap import train as train_module

    monkeypatch.setattr(models, "bf16_matmul_native", lambda device: native)
    monkeypatch.setattr(train_module, "_train_locked", lambda cfg, run_dir, *args: run_dir)
    monkeypatch.setattr(packed, "_train_runs", lambda *args: None)
    cfg = small_config(precision=precision)
    for start in (lambda: train(cfg, out=tmp_path / "one", progress=False, device="cpu"),
                  lambda: packed.train_packed([cfg], outs=[tmp_path / "pack"], progress=False, device="cpu")):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start()
        slow = [w for w in caught if issubclass(w.category, models.PrecisionWarning)]
        assert len(slow) == (1 if warned else 0)
        if warned:
            assert "precision=fp32" in str(slow[0].message)


def test_bf16_kernels_are_taken_as_native_on_cuda_and_asked_of_torch_on_a_cpu(monkeypatch):
    import torch

    from geomcap import models

    assert models.bf16_matmul_native(torch.device("cuda")) is True
    for answer in (True, False):
        monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: answer, raising=False)
        assert models.bf16_matmul_native(torch.device("cpu")) is answer


def test_a_corrupted_state_is_discarded_and_the_run_retrained_identically(tmp_path, monkeypatch):
    """A truncated state.pt gave a 23-line traceback without its path and stuck the run; a kill during the
    state write left its .state.pt.*.tmp for good. Now: a warning naming the file, the same metrics as an
    uninterrupted run, and no temporary file left."""
    reference = train(small_config(), out=tmp_path / "reference", progress=False)
    run = tmp_path / "run"
    _interrupted_run(run, monkeypatch, small_config())
    state = run / store.STATE_FILE
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    leftover = run / ".state.pt.x1y2z3.tmp"
    leftover.write_bytes(b"\0" * 1000)
    with pytest.warns(UserWarning, match=f"discarding the unreadable training state {state}"):
        train(small_config(), out=run, progress=False)
    assert store.is_complete(run) and not leftover.exists()
    assert (run / store.METRICS_FILE).read_bytes() == (reference / store.METRICS_FILE).read_bytes()


def test_a_state_that_does_not_fit_the_run_names_the_file(tmp_path, monkeypatch):
    import torch

    run = tmp_path / "run"
    _interrupted_run(run, monkeypatch, small_config())
    state = store.load_state(run / store.STATE_FILE)
    state["model"] = {"not": torch.zeros(1)}
    torch.save(state, run / store.STATE_FILE)
    with pytest.raises(ValueError, match=f"{run / store.STATE_FILE} does not fit this run .*delete it"):
        train(small_config(), out=run, progress=False)


def test_resuming_with_another_thread_count_warns_in_one_line(tmp_path, monkeypatch):
    """Metrics are byte-identical only at a fixed thread count: a run started with one thread and resumed
    with two says so (naming the run and both counts); resumed with the recorded count, it says nothing."""
    import warnings

    from geomcap.train import ThreadsWarning

    other = tmp_path / "other"
    _interrupted_run(other, monkeypatch, small_config())
    assert store.read_config(other)["provenance"]["threads"] == 1
    with pytest.warns(ThreadsWarning) as caught:
        train(small_config(), out=other, progress=False, threads=2)
    [warning] = caught
    message = str(warning.message)
    assert "\n" not in message and str(other) in message and "with 2 torch thread(s), started with 1" in message
    assert store.is_complete(other)

    same = tmp_path / "same"
    _interrupted_run(same, monkeypatch, small_config())
    with warnings.catch_warnings():
        warnings.simplefilter("error", ThreadsWarning)
        train(small_config(), out=same, progress=False, threads=1)
    assert store.is_complete(same)


def test_a_costly_window_adds_every_checkpoint_in_it():
    """costly_window: the costly measures at every checkpoint of a step range (e.g. around acquisition, where
    every 4th checkpoint cannot tell a short lead from synchrony), on top of the thinned schedule."""
    cfg = small_config(steps=16, measures=("llc",), costly_every=2, n_log_checkpoints=0, n_linear_checkpoints=8)
    schedule = checkpoint_steps(cfg.steps, cfg.n_log_checkpoints, cfg.n_linear_checkpoints, cfg.dense_steps)
    plain = recorded_at("costly", schedule, cfg)
    windowed = small_config(**{**{f: getattr(cfg, f) for f in ("steps", "measures", "costly_every",
                                                                 "n_log_checkpoints", "n_linear_checkpoints")},
                               "costly_window": [10, 14]})
    assert windowed.costly_window == (10, 14)
    assert recorded_at("costly", schedule, windowed) == plain | {s for s in schedule if 10 <= s <= 14}
    assert {10, 12, 14} <= recorded_at("costly", schedule, windowed) and not {10, 12, 14} <= plain
    # a measurement-only field: it names a new run, but not without costly measures, and round-trips
    assert store.config_hash(windowed.to_dict()) != store.config_hash(cfg.to_dict())
    bare = small_config(costly_window=(10, 14))
    assert store.config_hash(bare.to_dict()) == store.config_hash(small_config().to_dict())
    assert TrainConfig.from_dict(windowed.to_dict()).costly_window == (10, 14)
    assert "costly_window" not in cfg.to_dict()  # the runs made before the field keep their names
    for bad in [(5, 2), (1.5, 3), (1, 2, 3), (True, 3), -1]:
        with pytest.raises(ValueError, match="costly_window"):
            small_config(costly_window=bad)


def test_a_windowed_run_resumes_and_reruns(tmp_path, monkeypatch):
    """A windowed run once failed to resume ("holds a different run (differs in: costly_window)"): its
    config.json held the window as a list, the config as a tuple."""
    cfg = small_config(steps=16, measures=("grad_rank",), costly_every=2, n_log_checkpoints=0,
                       n_linear_checkpoints=8, dense_steps=0, costly_window=(10, 14), dynamics_size=32)
    reference = train(cfg, out=tmp_path / "reference", progress=False)
    _interrupted_run(tmp_path / "resumed", monkeypatch, cfg)
    resumed = train(cfg, out=tmp_path / "resumed", progress=False)
    assert (resumed / store.METRICS_FILE).read_bytes() == (reference / store.METRICS_FILE).read_bytes()
    again = train(cfg, out=tmp_path / "resumed", progress=False)  # complete: nothing to do, no error
    assert (again / store.METRICS_FILE).read_bytes() == (reference / store.METRICS_FILE).read_bytes()


def test_models_at_gives_the_runs_weights_at_its_checkpoints(tmp_path):
    import torch

    from geomcap.train import models_at

    cfg = small_config()
    run = train(cfg, out=tmp_path / "run", progress=False, keep_state=True)
    state = torch.load(run / store.STATE_FILE, weights_only=True)
    yielded = [(step, {k: v.clone() for k, v in model.state_dict().items()})
               for step, model in models_at(cfg, [0, 8, state["step"]])]
    assert [step for step, _ in yielded] == [0, 8, state["step"]]
    last = yielded[-1][1]
    assert all(torch.equal(last[k], v) for k, v in state["model"].items())
    assert not all(torch.equal(yielded[0][1][k], v) for k, v in state["model"].items())  # it did train
    with pytest.raises(ValueError, match="ascend"):
        next(models_at(cfg, [8, 0]))
