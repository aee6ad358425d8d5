"""The GPU grid runner: its runs, packs, FLOP count, projection, dry run and what it brings back."""

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

from geomcap import gpu_grid, models, packed, store, tasks
from geomcap.train import TrainConfig

REPO = Path(__file__).resolve().parents[1]
COSTS = {"kernels_fixed": 100.0, "kernels_per_layer": 0.0, "kernels_per_run": 0.0}


def test_the_grid_is_144_runs_in_18_packs_and_c8_is_18_runs():
    configs = gpu_grid.grid_configs("grid")
    assert len(configs) == 144
    assert {(c.task, c.level, c.size) for c in configs} == {
        (t, lv, s) for t in tasks.TASKS for lv in tasks.LEVELS for s in models.PRESETS}
    assert {c.seed for c in configs} == {0}
    packs = gpu_grid.plan(configs, pack=8, processes=6)
    assert len(packs) == 18 and all(len(p["runs"]) == 8 for p in packs)
    assert sorted((p["size"], *r) for p in packs for r in p["runs"]) == sorted(
        (c.size, c.task, c.level, c.seed) for c in configs)  # every run once
    assert all(len({c.steps for c in p["configs"]}) == 1 for p in packs)
    assert {p["process"] for p in packs} == set(range(6))
    c8 = gpu_grid.grid_configs("c8", task="mod", level="medium")
    assert len(c8) == 18 and {(c.task, c.level) for c in c8} == {("mod", "medium")}
    assert {c.seed for c in c8} == {0, 1, 2}
    with pytest.raises(ValueError, match="mode must be one of"):
        gpu_grid.grid_configs("everything")


@pytest.mark.parametrize("task,level,size", [("add", "hard", "405k"), ("copy", "easy", "405k-deep")])
def test_step_flops_match_torchs_flop_counter(task, level, size):
    from torch.utils.flop_counter import FlopCounterMode

    cfg = TrainConfig(task=task, level=level, size=size, batch_size=4)
    torch.manual_seed(0)
    model = models.build(size, tasks.VOCAB_SIZE)
    prompt_len, answer_len = tasks.sequence_lengths(task, level, cfg.task_params)
    x = torch.randint(0, tasks.VOCAB_SIZE, (4, prompt_len + answer_len - 1))
    with FlopCounterMode(display=False) as counter:
        model(x).sum().backward()
    counted = counter.get_total_flops()  # counts the full attention matrices, not the causal half
    # the attention is a few per cent of these models' FLOPs: the two agree within that
    assert abs(gpu_grid.step_flops(cfg) - counted) <= 0.05 * counted


def test_projection_is_the_larger_of_flops_and_launches():
    configs = gpu_grid.grid_configs("c8", steps=100)
    packs = gpu_grid.plan(configs, pack=8, processes=1)
    launches = gpu_grid.project(packs, COSTS, mfu=1.0, launch_us=1e4, processes=1, decomposition_ms=0.0)
    # at the full peak every preset's step (151m: ~0.01 s) takes less than 100 launches x 10 ms = 1 s
    assert all(p["bound"] == "launches" and p["step_s"] == pytest.approx(1.0) for p in packs)
    evaluation = sum(p["eval_s"] for p in packs)  # the forward passes only, at the full peak
    assert 0 < evaluation < 0.01 * launches["gpu_busy_s"]
    assert launches["wall_s"] == pytest.approx(len(packs) * 100 * 1.0 + evaluation)
    flops = gpu_grid.project(packs, COSTS, mfu=1e-6, launch_us=10.0, processes=1, decomposition_ms=0.0)
    assert all(p["bound"] == "flops" for p in packs)
    assert sum(p["train_s"] for p in packs) == pytest.approx(
        sum(p["flops"] for p in packs) / (1e-6 * gpu_grid.H200_BF16_FLOPS))
    slow = gpu_grid.project(packs, COSTS, mfu=1.0, launch_us=1e4, processes=1, decomposition_ms=1e3)
    n_ckpt = packs[0]["checkpoints"]  # 100 steps: every step is a checkpoint
    assert n_ckpt == 101 and slow["wall_s"] - launches["wall_s"] == pytest.approx(
        sum(n_ckpt * len(p["runs"]) * 1.0 * (gpu_grid.decompositions_per_checkpoint(
            gpu_grid.models.PRESETS[p["size"]].n_layer, True) + gpu_grid.decompositions_per_checkpoint(
            gpu_grid.models.PRESETS[p["size"]].n_layer, False)) / 2 for p in packs))
    with pytest.raises(ValueError, match="mfu"):
        gpu_grid.project(packs, COSTS, mfu=0.0)


def _fake_run(root, name, size, task, level, steps, stopped_at, complete=True):
    run = root / name
    run.mkdir(parents=True)
    (run / store.CONFIG_FILE).write_text(json.dumps({"task": task, "level": level, "size": size, "seed": 0,
                                                     "steps": steps}))
    (run / store.STATUS_FILE).write_text(json.dumps({"complete": complete, "stopped_at": stopped_at}))


def test_measured_stops_are_the_median_last_step_of_the_smallest_presets_complete_runs(tmp_path):
    _fake_run(tmp_path, "a", "405k", "add", "hard", 8000, 1200)
    _fake_run(tmp_path, "b", "405k", "add", "hard", 8000, 1600)
    _fake_run(tmp_path, "c", "405k", "add", "hard", 8000, None)          # never acquired: its whole budget
    _fake_run(tmp_path, "d", "405k", "mod", "easy", 2000, 300, complete=False)  # interrupted: ignored
    _fake_run(tmp_path, "e", "1.3m", "mod", "easy", 2000, 300)              # another preset: ignored
    assert gpu_grid.measured_stops(tmp_path) == {("add", "hard"): 1600}


def test_early_stops_shorten_each_pack_to_its_runs_own_stops():
    configs = gpu_grid.grid_configs("grid")
    full = gpu_grid.plan(configs, pack=8, processes=6)
    stops = {("add", "hard"): 1000, ("mod", "hard"): 20000}  # a stop past the budget is the budget
    early = gpu_grid.plan(configs, pack=8, processes=6, stops=stops)
    for size in ("405k", "151m"):
        hard_full = next(p for p in full if p["size"] == size and p["steps"] == 8000)
        hard_early = next(p for p in early if p["size"] == size and p["steps"] == 8000)
        add = hard_early["runs"].index(("add", "hard", 0))
        assert hard_early["last_steps"][add] == 1000 and max(hard_early["last_steps"]) == 8000
        saved = gpu_grid.step_flops(hard_early["configs"][add]) * 7000
        assert hard_full["flops"] - hard_early["flops"] == pytest.approx(saved)
    projected = [gpu_grid.project(packs, COSTS, mfu=0.3, processes=6) for packs in (full, early)]
    assert projected[1]["early_stop"] and not projected[0]["early_stop"]
    assert projected[1]["gpu_busy_s"] < projected[0]["gpu_busy_s"]
    # no stop before the budget: the same projection as without stops
    unchanged = gpu_grid.plan(configs, pack=8, processes=6, stops={("add", "hard"): 9000})
    assert gpu_grid.project(unchanged, COSTS, processes=6)["gpu_busy_s"] == pytest.approx(projected[0]["gpu_busy_s"])


def test_dry_run_prints_the_plan_of_the_144_runs(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(["bash", "scripts/gpu_grid.sh", str(tmp_path / "out"), "--dry-run"], cwd=REPO, env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith("144 runs in 18 packs on 6 processes")
    assert "PROJECTION (not a measurement" in out and "projected wall time" in out
    for task in tasks.TASKS:
        for level in tasks.LEVELS:
            assert out.count(f"{task}/{level}/s0") == 6  # once per preset
    assert not (tmp_path / "out").exists()  # a dry run writes nothing
    c8 = subprocess.run(["bash", "scripts/gpu_grid.sh", str(tmp_path / "out"), "--dry-run", "--mode", "c8"],
                        cwd=REPO, env=env, capture_output=True, text=True, check=True).stdout
    assert c8.startswith("18 runs in 6 packs")


def test_the_scale_path_trains_its_runs_and_controls_on_the_cpu_at_toy_size(tmp_path):
    """scripts/scale_grid.sh --device is the GPU runner in its scale mode: four tasks at medium and their
    shuffled-answer controls (stopped at a quarter of the budget), at the precision asked for; at toy size on
    the CPU it brings back one archive per preset with all eight runs."""
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1", "PROCESSES": "1", "LIMIT_S": "300"}
    out = tmp_path / "out"
    subprocess.run(["bash", "scripts/scale_grid.sh", "--device", "cpu", "--presets", "405k", "--steps", "8",
                    "--precision", "bf16", "--out", str(out)], cwd=REPO, env=env, capture_output=True, text=True,
                   check=True)
    with tarfile.open(out / "runs-405k.tar.gz") as archive:
        configs = [json.load(archive.extractfile(m)) for m in archive.getmembers() if m.name.endswith("config.json")]
    assert sorted((c["task"], c.get("control", ""), c.get("stop_at", 0)) for c in configs) == sorted(
        (t, control, stop) for t in gpu_grid.SCALE_TASKS for control, stop in (("", 0), ("shuffled_answers", 2)))
    assert {c["precision"] for c in configs} == {"bf16"} and {c["level"] for c in configs} == {"medium"}


@pytest.mark.parametrize("native", [True, False])
def test_stage_p_skips_its_bf16_runs_where_the_cpu_has_no_bf16_kernels(tmp_path, native):
    """scripts/scale_grid.sh p: two float32 twins and a bf16 run per preset, and a held-out twin on 4m; on a CPU
    without native bf16 kernels (asked of PYTHON) the two bf16 runs are skipped with a line each, the rest
    planned as before. GEOMCAP is a stub that records its arguments."""
    calls = tmp_path / "calls"
    geomcap, python = tmp_path / "geomcap", tmp_path / "python"
    geomcap.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    python.write_text(f"#!/bin/sh\nexit {0 if native else 1}\n")
    geomcap.chmod(0o755)
    python.chmod(0o755)
    done = subprocess.run(["bash", "scripts/scale_grid.sh", "p"], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "GEOMCAP": str(geomcap), "PYTHON": str(python)})
    assert done.returncode == 0
    swept = calls.read_text().splitlines()
    assert sum("precision=bf16" in c for c in swept) == (2 if native else 0)
    assert sum("perturb_seed=" in c for c in swept) == 5
    skipped = [line for line in done.stdout.splitlines() if line.startswith("skipped:")]
    assert len(skipped) == (0 if native else 2) and all("bf16" in line for line in skipped)


@pytest.mark.parametrize("dry", [True, False])
def test_a_dry_run_of_the_cpu_stages_asks_every_sweep_for_its_plan_only(tmp_path, dry):
    """scripts/scale_grid.sh --dry-run 1 3: each sweep of the stages gets --dry-run (its plan printed, nothing
    trained); without the flag none does. GEOMCAP is a stub that records its arguments."""
    calls, geomcap = tmp_path / "calls", tmp_path / "geomcap"
    geomcap.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    geomcap.chmod(0o755)
    done = subprocess.run(["bash", "scripts/scale_grid.sh", *(["--dry-run"] if dry else []), "1", "3"], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, "GEOMCAP": str(geomcap)})
    assert done.returncode == 0, done.stderr
    swept = calls.read_text().splitlines()
    assert len(swept) == 5 and [c.startswith("sweep ") for c in swept] == [True] * 5
    assert [c.split().count("--dry-run") for c in swept] == [1 if dry else 0] * 5



@pytest.mark.parametrize("done, expected", [(None, ["data/scale", "data/scale-controls", "data/scale-precision"]),
                                            ("", []), ("data/scale,no/such/store", ["data/scale"])])
def test_every_sweep_of_the_cpu_stages_counts_the_committed_runs_as_done(tmp_path, done, expected):
    """A fresh worktree must not retrain what has landed: each sweep gets --done for each committed store of
    DONE that exists (default data/scale, data/scale-controls, data/scale-precision); DONE="" gives none.
    GEOMCAP is a stub that records its arguments."""
    calls, geomcap = tmp_path / "calls", tmp_path / "geomcap"
    geomcap.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    geomcap.chmod(0o755)
    env = {**os.environ, "GEOMCAP": str(geomcap), **({} if done is None else {"DONE": done})}
    finished = subprocess.run(["bash", "scripts/scale_grid.sh", "2"], cwd=REPO, capture_output=True, text=True,
                              env=env)
    assert finished.returncode == 0, finished.stderr
    for call in calls.read_text().splitlines():
        words = call.split()
        assert [words[i + 1] for i, w in enumerate(words) if w == "--done"] == expected


@pytest.mark.parametrize("margin, expected", [(None, "1"), ("1.6", "1.6")])
def test_until_reaches_every_sweep_of_the_cpu_stages_with_its_margin(tmp_path, margin, expected):
    """UNTIL is read once, as a date and time, and every sweep gets it with MARGIN (default 1) as
    --until-margin; without UNTIL no sweep gets either. GEOMCAP is a stub that records its arguments."""
    import sys

    calls, geomcap = tmp_path / "calls", tmp_path / "geomcap"
    geomcap.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    geomcap.chmod(0o755)
    env = {**os.environ, "GEOMCAP": str(geomcap), "PYTHON": sys.executable, "UNTIL": "+2h",
           **({} if margin is None else {"MARGIN": margin})}
    finished = subprocess.run(["bash", "scripts/scale_grid.sh", "2"], cwd=REPO, capture_output=True, text=True,
                              env=env)
    assert finished.returncode == 0, finished.stderr
    lines = calls.read_text().splitlines()
    assert lines
    for call in lines:
        words = call.split()
        until = words[words.index("--until") + 1]
        assert len(until) == 19 and until[10] == "T"  # one ISO time, the same for every sweep
        assert words[words.index("--until-margin") + 1] == expected
    assert len({c.split()[c.split().index("--until") + 1] for c in lines}) == 1
    calls.unlink()
    env.pop("UNTIL")
    subprocess.run(["bash", "scripts/scale_grid.sh", "2"], cwd=REPO, capture_output=True, text=True, env=env)
    assert not any("--until" in c for c in calls.read_text().splitlines())


@pytest.mark.parametrize("argv, message", [
    (["--presets", "48x"], "unknown size '48x'"),
    (["--presets", "48m", "--precision", "fp16"], "unknown precision 'fp16'"),
    (["--presets", "48m", "--frobnicate"], "unknown option --frobnicate"),
])
def test_the_scale_path_refuses_bad_input_in_one_line_before_anything_runs(tmp_path, argv, message):
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", "scripts/scale_grid.sh", "--device", "cuda", *argv, "--out", str(tmp_path / "o")],
                          cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_collect_writes_one_archive_per_preset_and_the_bench_without_state(tmp_path):
    tiny = dict(steps=2, batch_size=4, n_train=64, n_test=16, probe_size=8, train_eval_size=16, dense_steps=1,
                n_linear_checkpoints=1, stop_margin=None)
    cfgs = [TrainConfig(task="copy", level="easy", **tiny), TrainConfig(task="mod", level="easy", **tiny)]
    root = tmp_path / "runs"
    dirs = packed.train_packed(cfgs, root=root, device="cpu", progress=False, save_state=False)
    (dirs[0] / store.STATE_FILE).write_bytes(b"weights")  # never brought back
    bench = {"per_preset": gpu_grid.bench_table(root)}
    row = bench["per_preset"]["405k"]
    assert row["runs"] == 2 and row["tokens_per_s"] > 0 and 0 < row["fraction_of_790T"] < 1
    files = gpu_grid.collect(root, tmp_path / "out", bench)
    assert [f.name for f in files] == ["runs-405k.tar.gz", "bench.json"]
    with tarfile.open(files[0]) as tar:
        names = sorted(tar.getnames())
    assert names == sorted(f"{d.name}/{n}" for d in dirs for n in (store.CONFIG_FILE, store.METRICS_FILE,
                                                                 store.STATUS_FILE))
    assert json.loads(files[1].read_text())["per_preset"]["405k"]["runs"] == 2


def test_each_process_trains_its_own_packs_and_together_they_train_all(tmp_path, monkeypatch):
    tiny = dict(steps=2, batch_size=4, n_train=64, n_test=16, probe_size=8, train_eval_size=16, dense_steps=1,
                n_linear_checkpoints=1, stop_margin=None)
    configs = [TrainConfig(task=t, level="easy", size=s, **tiny) for t in ("copy", "mod") for s in ("405k", "405k-deep")]
    monkeypatch.setattr(gpu_grid, "grid_configs", lambda mode, **kw: configs)
    root = tmp_path / "runs"
    gpu_grid.run_part(root, 0, 2, "grid", pack=8, device="cpu")
    first = {p.parent.name for p in root.glob(f"*/{store.STATUS_FILE}")}
    assert len(first) == 2  # one pack of two runs of one preset
    gpu_grid.run_part(root, 1, 2, "grid", pack=8, device="cpu")
    assert {p.parent.name for p in root.glob(f"*/{store.STATUS_FILE}")} == {
        store.config_hash(c.to_dict()) for c in configs}
    assert not list(root.glob(f"*/{store.STATE_FILE}"))  # the grid keeps no state


def test_the_cost_model_times_the_packed_step_with_the_runs_own_settings(monkeypatch):
    """measure_costs assembled a third copy of the packed step with lr 1e-3, weight decay 0.1 and betas
    (0.9, 0.98) written into it, so the GPU cost model could drift from the step that trains. Now it times
    packed.packed_step, given each run's own settings (mod's weight decay of 1.0 among them)."""
    from geomcap.config import learning_rate

    timed = []

    def recorded(stacked, inputs, answers, lr, step):
        timed.append((stacked.weight_decay.tolist(), (stacked.beta1, stacked.beta2), lr.tolist(), len(answers)))
        return real(stacked, inputs, answers, lr, step)

    real = packed.packed_step
    monkeypatch.setattr(packed, "packed_step", recorded)
    costs = gpu_grid.measure_costs(presets=("405k",), steps=1, pack=6, batch_size=2)
    assert costs["presets"]["405k"]["pack6_ms_per_step"] > 0
    configs = [TrainConfig(task=t, level="hard", size="405k", batch_size=2) for t in tasks.TASKS[:6]]
    assert "mod" in [c.task for c in configs]
    expected = {1: ([c.weight_decay for c in configs[:1]], [learning_rate(0, c) for c in configs[:1]]),
                6: ([c.weight_decay for c in configs], [learning_rate(0, c) for c in configs])}
    assert {n for *_, n in timed} == {1, 6}
    for weight_decay, betas, lr, n in timed:
        assert (weight_decay, lr) == expected[n] and betas == (configs[0].beta1, configs[0].beta2)
