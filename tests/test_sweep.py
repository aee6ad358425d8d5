"""Sweeps: every run lands in the store, a failing run is isolated, a rerun resumes/reuses."""
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from geomcap import store
from geomcap.sweep import grid, parse_steps, run_sweep

TINY = dict(n_linear_checkpoints=4, n_log_checkpoints=3, n_train=500, n_test=64, probe_size=64,
            train_eval_size=64, batch_size=16)


def test_grid_and_steps_parsing():
    configs = grid(tasks=["copy", "mod"], levels=["easy", "hard"], seeds=[0, 1],
                   steps={"easy": 10, "medium": 20, "hard": 30})
    assert len(configs) == 8
    assert {(c.level, c.steps) for c in configs} == {("easy", 10), ("hard", 30)}
    assert parse_steps("500") == 500
    assert parse_steps("easy=1,medium=2,hard=3") == {"easy": 1, "medium": 2, "hard": 3}
    assert parse_steps("easy:1,medium:2,hard:3") == {"easy": 1, "medium": 2, "hard": 3}
    assert parse_steps("medium=4000") == {"medium": 4000}  # enough for a grid of medium runs
    assert [c.steps for c in grid(tasks=["copy"], levels=["medium"], steps=parse_steps("medium=4000"))] == [4000]
    with pytest.raises(ValueError, match="no value for level\\(s\\): hard"):
        grid(tasks=["copy"], levels=["medium", "hard"], steps=parse_steps("easy=1,medium=2"))
    with pytest.raises(ValueError, match="unknown task"):
        grid(tasks=["copy", "telepathy"])


def test_failing_run_is_reported_and_does_not_stop_the_others(tmp_path):
    configs = grid(tasks=["copy", "parity", "sort"], levels=["easy"], steps=6, **TINY)
    # make the second run fail: its run directory path is taken by a file
    blocked = store.run_dir_for(configs[1].to_dict(), tmp_path)
    blocked.parent.mkdir(parents=True, exist_ok=True)
    blocked.write_text("in the way")
    results = run_sweep(configs, root=tmp_path, executor=ThreadPoolExecutor(2), progress=False)
    assert [r.ok for r in results] == [True, False, True]
    assert "not a directory" in results[1].error
    assert store.is_complete(results[0].run_dir) and store.is_complete(results[2].run_dir)

    # a rerun reuses the finished runs and retries the failed one
    blocked.unlink()
    again = run_sweep(configs, root=tmp_path, executor=ThreadPoolExecutor(2), progress=False)
    assert all(r.ok for r in again)
    assert again[0].seconds == 0.0 and again[1].seconds > 0


def test_local_process_pool(tmp_path):
    configs = grid(tasks=["reverse"], levels=["easy"], seeds=[0, 1], steps=5, **TINY)
    results = run_sweep(configs, root=tmp_path, workers=2, progress=False)
    assert all(r.ok for r in results), [r.error for r in results]
    assert len({r.run_dir for r in results}) == 2


def test_submitit_debug_executor(tmp_path):
    import submitit
    executor = submitit.DebugExecutor(folder=tmp_path / "submitit")
    configs = grid(tasks=["compare"], levels=["easy"], steps=5, **TINY)
    results = run_sweep(configs, root=tmp_path / "runs", executor=executor, progress=False)
    assert results[0].ok, results[0].error
    assert store.is_complete(results[0].run_dir)


def test_dask_local_cluster_as_the_readme_shows(tmp_path):
    """The README offers a dask cluster to users who outgrow one machine: a real
    dask.distributed LocalCluster (worker processes), its Client as the executor."""
    from dask.distributed import Client, LocalCluster

    configs = grid(tasks=["copy"], levels=["easy"], seeds=[0, 1], steps=5, **TINY)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        results = run_sweep(configs, root=tmp_path, executor=client, progress=False)
        assert all(r.ok for r in results), [r.error for r in results]
        workers = set(client.run(os.getpid).values())  # the worker processes' pids
    assert len(workers) == 2 and os.getpid() not in workers
    assert all(store.is_complete(r.run_dir) for r in results) and len({r.run_dir for r in results}) == 2
    # a second sweep on the cluster reuses both runs
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        again = run_sweep(configs, root=tmp_path, executor=client, progress=False)
    assert [r.seconds for r in again] == [0.0, 0.0]


def _lock_pid(root):
    """The pid in the lock file of the first run being written under root (None while there is none)."""
    for lock in root.glob(f"*/{store.LOCK_FILE}"):
        text = lock.read_text().split()
        if len(text) >= 2:
            return int(text[1])
    return None


def _alive(pid):
    """Whether process pid runs (a zombie, ended but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _start_sweep(root):
    """A two-run sweep on one worker whose runs take long (thousands of steps)."""
    proc = subprocess.Popen([sys.executable, "-m", "geomcap.cli", "sweep", "--tasks", "copy", "--levels", "easy",
                             "--seeds", "0,1", "--steps", "5000", "--workers", "1", "--threads", "1",
                             "--root", str(root), "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # Ctrl-C's default action even when this test runs in the background (a shell
                            # starts background jobs with SIGINT ignored, and children inherit that)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    while (worker := _lock_pid(root)) is None:  # the first run has started in the worker
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.1)
    return proc, worker


def test_ctrl_c_stops_the_sweep(tmp_path):
    """Ctrl-C used to count as a failure of the running run; the next run started and the sweep ended
    only after it. SIGINT to the sweep's own process (the worker gets none) must stop everything."""
    root = tmp_path / "runs"
    proc, worker = _start_sweep(root)
    os.kill(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate()
    assert proc.returncode == 130 and "interrupted" in stderr, stderr
    while _alive(worker) and not any(store.is_complete(d) for d in root.iterdir()):
        time.sleep(0.1)
    assert not _alive(worker)
    assert len(list(root.iterdir())) == 1  # the second run never started
    assert not any(store.is_complete(d) for d in root.iterdir())


def test_a_killed_sweep_does_not_leave_its_worker_behind(tmp_path):
    """kill -9 of the sweep's process left its worker blocked forever once its run ended."""
    root = tmp_path / "runs"
    proc, worker = _start_sweep(root)
    proc.kill()
    proc.communicate()
    # the worker ends long before its 5000-step run could complete
    while _alive(worker) and not any(store.is_complete(d) for d in root.iterdir()):
        time.sleep(0.1)
    assert not _alive(worker)
    assert not any(store.is_complete(d) for d in root.iterdir())


def test_pack_groups_share_preset_and_steps_in_packs_of_at_most_k():
    from geomcap.sweep import pack_groups

    configs = grid(tasks=["copy", "mod", "add"], levels=["easy", "hard"], sizes=["405k", "1.3m"],
                   steps={"easy": 10, "medium": 20, "hard": 30})
    groups = pack_groups(configs, 2)
    assert sorted(i for g in groups for i in g) == list(range(len(configs)))  # every config once
    assert all(1 <= len(g) <= 2 for g in groups)
    for g in groups:
        assert len({(configs[i].size, configs[i].steps) for i in g}) == 1
    # 4 (size, steps) groups of 3 configs -> a pack of 2 and a pack of 1 each
    assert sorted(len(g) for g in groups) == [1] * 4 + [2] * 4
    assert len(pack_groups(configs, 3)) == 4
    with pytest.raises(ValueError, match="pack must be a positive integer"):
        pack_groups(configs, 0)


def test_packed_sweep_writes_every_run_and_reuses_them(tmp_path):
    small = dict(TINY, n_linear_checkpoints=2, n_log_checkpoints=0, dense_steps=2, n_train=128, n_test=32,
                 probe_size=16, train_eval_size=32, stop_margin=None)
    configs = grid(tasks=["copy", "mod"], levels=["easy"], steps=4, **small)
    results = run_sweep(configs, root=tmp_path, executor=ThreadPoolExecutor(1), progress=False, pack=2)
    assert all(r.ok for r in results), [r.error for r in results]
    for r in results:
        assert store.is_complete(r.run_dir)
        assert store.read_config(r.run_dir)["provenance"]["pack"] == 2
    again = run_sweep(configs, root=tmp_path, executor=ThreadPoolExecutor(1), progress=False, pack=2)
    assert [r.seconds for r in again] == [0.0, 0.0]


def test_sweep_pack_option_rejects_a_non_positive_pack(tmp_path, capsys):
    from geomcap.cli import main

    assert main(["sweep", "--tasks", "copy", "--levels", "easy", "--pack", "0", "--root", str(tmp_path)]) == 2
    assert capsys.readouterr().err == "geomcap: error: --pack: must be a positive integer, got 0\n"
    assert not any(tmp_path.iterdir())  # nothing ran


@pytest.mark.parametrize("keyword, value", [("workers", 0), ("threads", -1), ("pack", 0), ("device", "tpu"),
                                            ("device", "cuda:1")])
def test_run_sweep_refuses_what_the_command_refuses(tmp_path, capsys, monkeypatch, keyword, value):
    """run_sweep checks workers, threads, pack and its own workers' device through the rows of geomcap sweep's
    options: the same reason, before anything is read or trained (workers=0 ran one worker per core)."""
    import torch

    from geomcap.cli import main
    from geomcap.schema import SettingError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    configs = grid(tasks=["copy"], levels=["easy"], steps=2, **TINY)
    with pytest.raises(SettingError) as from_python:
        run_sweep(configs, root=tmp_path / "python", progress=False, **{keyword: value})
    assert main(["sweep", "--tasks", "copy", "--levels", "easy", f"--{keyword}", str(value),
                 "--root", str(tmp_path / "command")]) == 2
    assert capsys.readouterr().err == f"geomcap: error: --{keyword}: {from_python.value.reason}\n"
    assert list(tmp_path.iterdir()) == []


def test_an_outside_executor_s_device_is_left_to_its_workers(tmp_path, monkeypatch):
    """With an outside executor (Slurm, dask) the workers may have the GPU this machine lacks: run_sweep does not
    refuse device="cuda" here; its own workers' device is checked (test above)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert run_sweep([], root=tmp_path, executor=ThreadPoolExecutor(1), device="cuda", progress=False) == []


def test_local_workers_default_to_one_thread(tmp_path, monkeypatch):
    """One worker on a 2-core machine ran (and recorded) 2 threads, against the documented safe default of 1."""
    import geomcap.sweep

    monkeypatch.setattr(geomcap.sweep.os, "cpu_count", lambda: 4)
    configs = grid(tasks=["copy"], levels=["easy"], steps=2, **TINY)
    results = run_sweep(configs, root=tmp_path, workers=1, progress=False)
    assert results[0].ok, results[0].error
    assert store.read_config(results[0].run_dir)["provenance"]["threads"] == 1


def test_a_locked_run_is_skipped_and_the_rest_of_its_pack_trains(tmp_path):
    """With another process writing one run, `sweep --pack 2` failed the whole pack with an 87-line
    traceback, printed under each run's name (so also under a run never started). The plan finds the lock and
    skips the run in one line; a run locked only after the plan is left out of its pack, the rest trains."""
    configs = grid(tasks=["copy", "parity"], levels=["easy"], steps=4)  # what the command below trains
    (free, held), (free_api, held_api) = ([store.run_dir_for(c.to_dict(), root) for c in configs]
                                          for root in (tmp_path / "cli", tmp_path / "api"))
    held.mkdir(parents=True)
    held_api.mkdir(parents=True)
    # another writer (a lock of another open file: flock refuses it in-process too)
    with store.run_lock(held), store.run_lock(held_api):
        result = subprocess.run([sys.executable, "-m", "geomcap.cli", "sweep", "--tasks", "copy,parity", "--levels",
                                 "easy", "--steps", "4", "--root", str(tmp_path / "cli"), "--pack", "2", "--workers",
                                 "1", "--quiet"], capture_output=True, text=True)
        assert result.returncode == 1 and result.stderr == "", result.stderr[-3000:]
        lines = result.stdout.splitlines()
        skipped = [line for line in lines if line.startswith("SKIPPED")]
        assert len(skipped) == 1, lines
        assert skipped[0].startswith(f"SKIPPED parity/easy 405k seed 0: {held} is being written by another process "
                                     f"(pid {os.getpid()} on ") and skipped[0].endswith("rerun the sweep once it is done")
        assert lines[-1] == "1 runs complete, 0 failed, 1 skipped: being written by another process"
        assert store.is_complete(free) and not (held / store.CONFIG_FILE).exists()
        # locked after the plan (here: no plan): left out of its pack, the other run trains
        packed = run_sweep(configs, root=tmp_path / "api", executor=ThreadPoolExecutor(1), progress=False, pack=2)
        assert packed[0].ok and packed[1].locked and packed[1].error.count("\n") == 0, packed[1].error
        assert store.is_complete(free_api) and not (held_api / store.CONFIG_FILE).exists()
        # a run alone (no pack) is skipped the same way
        alone = run_sweep(configs, root=tmp_path / "api", executor=ThreadPoolExecutor(1), progress=False)
        assert alone[0].ok and alone[1].locked and alone[1].error.count("\n") == 0


def test_a_crashed_worker_fails_only_its_own_run(tmp_path):
    """kill -9 of the worker of a one-worker sweep marked all three runs FAILED (BrokenProcessPool), two of
    them never started. Now the crashed run is reported with its cause and the others train."""
    import threading

    slow = grid(tasks=["copy"], levels=["easy"], steps=20000, **TINY)  # killed long before its end
    configs = slow + grid(tasks=["parity", "sort"], levels=["easy"], steps=4, **TINY)
    crashed = store.run_dir_for(slow[0].to_dict(), tmp_path)
    killed = []

    def kill_the_worker():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            text = (crashed / store.LOCK_FILE).read_text().split() if (crashed / store.LOCK_FILE).exists() else []
            if len(text) >= 2 and (crashed / store.METRICS_FILE).exists():  # trained up to a checkpoint
                killed.append(int(text[1]))
                os.kill(killed[0], signal.SIGKILL)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_worker)
    killer.start()
    results = run_sweep(configs, root=tmp_path, workers=1, progress=False, poll_s=0.1)
    killer.join()
    errors = [r.error for r in results]
    assert killed and killed[0] != os.getpid(), errors
    assert not results[0].ok and not results[0].locked
    assert results[0].error == (f"its worker process (pid {killed[0]}) was killed by SIGKILL while training this "
                                "run; rerun the sweep to resume it from its last checkpoint")
    assert results[1].ok and results[2].ok, errors
    assert store.is_complete(results[1].run_dir) and store.is_complete(results[2].run_dir)
    # the crashed run resumes on rerun: its stale lock is taken over, its state is there
    assert not store.is_complete(crashed) and (crashed / store.STATE_FILE).exists()
    with store.run_lock(crashed):
        pass


def test_a_plan_names_what_exists_what_it_trains_and_how_long(tmp_path):
    """Before training, a sweep says which runs exist, which it will train, and a projected time from the
    per-step costs measured on this machine (here: the one run that exists), or that it has none."""
    from geomcap import sweep

    existing, missing = grid(tasks=["copy"], levels=["easy"], seeds=[0, 1], steps=4, **TINY)
    done = run_sweep([existing], root=tmp_path / "a", progress=False)[0].run_dir
    the_plan = sweep.plan([existing, missing], [tmp_path / "a", tmp_path / "b"], workers=2)
    lines = the_plan.lines()
    assert lines[0] == f"plan: 2 runs; 1 exist, 1 to train into {tmp_path / 'b'} (2 workers)"
    assert lines[1].split() == ["exists", "copy/easy", "405k", "seed", "0", str(done)]
    assert lines[2].split()[:7] == ["train", "copy/easy", "405k", "seed", "1", "4", "steps,"]
    assert [r.state for r in the_plan.runs] == ["exists", "train"]
    assert the_plan.runs[1].run_dir.parent == tmp_path / "b"
    assert "(measured: 1 run on " in lines[3] and lines[3].startswith("  405k fp32: ")
    assert lines[-1].startswith("projected: ") and the_plan.projected_s() == the_plan.runs[1].seconds > 0

    # 151m, which no machine here has run or benchmarked: from the nearest preset measured on this CPU
    larger = grid(tasks=["copy"], levels=["easy"], sizes=["151m"], seeds=[0], steps=4, **TINY)[0]
    extrapolated = sweep.plan([larger], [tmp_path / "a", tmp_path / "b"], workers=1)
    assert extrapolated.runs[0].seconds > the_plan.runs[1].seconds
    assert any(line.startswith("  151m fp32: ") and "(extrapolated from " in line for line in extrapolated.lines())

    other = sweep.plan([existing, missing], [tmp_path / "a", tmp_path / "b"], workers=1, cpu="no such CPU")
    assert other.runs[1].seconds is None and other.projected_s() is None
    assert "  405k fp32: no measurement of this preset on this machine: not projected" in other.lines()
    assert other.lines()[-1] == "projected: unknown (no measurement of these presets on this machine)"



def test_a_preset_never_run_here_is_extrapolated_from_the_nearest_measured_one_by_its_flops():
    """4m is nearer 14m than 405k in FLOPs per token, so it is scaled from 14m; 1.3m bf16 has no measured
    bf16 preset and 405k-deep is not one of the paper's presets, so neither is extrapolated; a measured preset
    keeps its measurement; an extrapolated cost is never the base of another."""
    from geomcap import tasks
    from geomcap.bench.step import flops_per_token
    from geomcap.planning import EXTRAPOLATION_SEQ_LEN, StepCost, extrapolated_costs

    def flops(preset):
        return flops_per_token(preset, tasks.VOCAB_SIZE, EXTRAPOLATION_SEQ_LEN)
    small = StepCost(0.1, 1.0, "here", {"intercept_s": 0.02, "per_token_s": 0.005})
    large = StepCost(2.0, 8.0, "there")
    costs = {("405k", "fp32"): small, ("14m", "fp32"): large}
    found = extrapolated_costs(costs, {("4m", "fp32"), ("405k", "fp32"), ("1.3m", "bf16"), ("405k-deep", "fp32")})
    assert set(found) == {("4m", "fp32")}
    cost, ratio = found["4m", "fp32"], flops("4m") / flops("14m")
    assert 0.1 < ratio < 1 and cost.extrapolated and cost.source.startswith("extrapolated from 14m (there)")
    assert cost.per_step_s == pytest.approx(2.0 * ratio) and cost.per_checkpoint_s == pytest.approx(8.0 * ratio)
    assert cost.line is None and cost.step_seconds(30) == pytest.approx(2.0 * ratio)
    up = extrapolated_costs({("405k", "fp32"): small}, {("1.3m", "fp32")})["1.3m", "fp32"]
    grow = flops("1.3m") / flops("405k")
    assert up.step_seconds(10) == pytest.approx(grow * small.step_seconds(10)) and grow > 1
    assert extrapolated_costs({("4m", "fp32"): cost}, {("14m", "fp32")}) == {}

def test_a_plan_projects_its_runs_on_its_workers():
    from geomcap import sweep

    cfg = grid(tasks=["copy"], levels=["easy"], steps=4, **TINY)[0]
    runs = [sweep.PlannedRun(cfg, Path("x"), "train", 4, seconds=s) for s in (3.0, 2.0, 2.0)]
    assert sweep.Plan(runs, {}, workers=2).projected_s() == 4.0  # 3 on one worker, 2 + 2 on the other
    assert sweep.Plan(runs, {}, workers=1).projected_s() == 7.0
    assert sweep.Plan(runs + [sweep.PlannedRun(cfg, Path("y"), "exists", 4)], {}, workers=3).projected_s() == 3.0


def test_metrics_tail_reads_the_last_step_and_its_accuracy(tmp_path):
    from geomcap.sweep import metrics_tail

    assert metrics_tail(tmp_path) == (None, None)
    store.write_metrics(tmp_path, [(0, -1, "accuracy", 0.25), (0, 1, "rankme", 3.0), (8, -1, "accuracy", 0.5),
                                   (8, 1, "rankme", 2.0)])
    assert metrics_tail(tmp_path) == (8, 0.5)
    with open(tmp_path / store.METRICS_FILE, "a") as f:
        f.write("9,-1,acc")  # a row being written: not read
    assert metrics_tail(tmp_path) == (8, 0.5)


def test_train_missing_prints_its_plan_then_trains_with_bars(tmp_path, capsys):
    from geomcap.sweep import train_missing

    configs = grid(tasks=["copy"], levels=["easy"], seeds=[0, 1], steps=4, **TINY)
    run_sweep(configs[:1], root=tmp_path / "a", progress=False)
    results = train_missing(configs, [tmp_path / "a", tmp_path / "b"], executor=ThreadPoolExecutor(1), bars=True)
    assert [r.config.seed for r in results] == [1] and results[0].ok
    out, err = capsys.readouterr()
    assert out.startswith("plan: 2 runs; 1 exist, 1 to train into ")
    assert "sweep: 1/1 runs" in err and "ETA" in err  # the plan's bar, at its end


def _sweep_command(root, *args):
    return [sys.executable, "-m", "geomcap.cli", "sweep", "--tasks", "copy,parity", "--levels", "easy", "--steps",
            "4", "--workers", "1", "--root", str(root), *args]


def test_off_a_terminal_a_sweep_logs_lines_not_bars(tmp_path):
    """A two-run `geomcap sweep --pack 2` written to a file printed ~2,700 lines of tqdm redraws, and --quiet
    printed nothing but the last line, not even the plan. Off a terminal (and with --quiet on one): the plan,
    one line as each run starts and as it ends, a summary now and then; no bars."""
    root = tmp_path / "runs"
    result = subprocess.run(_sweep_command(root, "--pack", "2"), capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == "", result.stderr[-3000:]
    assert "\r" not in result.stdout
    lines = result.stdout.splitlines()
    assert lines[0] == f"plan: 2 runs; 0 exist, 2 to train into {root} (1 worker, packs of 2)"
    log = [line for line in lines if not line.startswith(("plan:", "  ", "projected:"))]
    assert [line.split()[:2] for line in log if not line.startswith("sweep:")] == [
        ["start", "copy/easy"], ["start", "parity/easy"], ["done", "copy/easy"], ["done", "parity/easy"],
        ["2", "runs"]]
    assert "(pack of 2)" in log[0] and log[-1] == "2 runs complete, 0 failed"
    quiet = subprocess.run(_sweep_command(root, "--quiet"), capture_output=True, text=True)
    assert quiet.returncode == 0 and quiet.stdout.splitlines()[0] == (
        f"plan: 2 runs; 2 exist, 0 to train into {root} (1 worker)"), quiet.stdout


def test_a_sweep_s_log_has_a_summary_line_now_and_then(tmp_path, capsys):
    from geomcap.sweep_progress import SweepBars

    configs = grid(tasks=["copy", "parity"], levels=["easy"], steps=4, **TINY)
    log = SweepBars(configs, tmp_path, None, done=0, enabled=True, bars=False, summary_every_s=0.0)
    log.start((0,))
    log.poll()
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "start   copy/easy 405k seed 0"
    assert out.splitlines()[1].startswith("sweep: 0/2 runs done, 1 training, ")
    log.summary_every_s = 3600.0
    log.poll()
    assert capsys.readouterr().out == ""  # not again before its time


def test_with_a_deadline_the_eta_leaves_out_the_runs_the_sweep_would_defer(tmp_path):
    """A sweep under --until logged an ETA of 5.2 h while every run left would be deferred: the ETA counts a
    queued run only where it would start (taken in order as a worker frees) and end before the deadline,
    the margin included."""
    from geomcap.planning import Plan, PlannedRun
    from geomcap.sweep_progress import SweepBars

    configs = grid(tasks=["copy", "parity", "sort"], levels=["easy"], steps=4, **TINY)
    the_plan = Plan([PlannedRun(c, Path("x"), "train", 4, seconds=s) for c, s in zip(configs, (600.0, 7200.0, 600.0))],
                    {}, workers=1)

    def eta(until, margin=1.0):
        bar = SweepBars(configs, tmp_path, the_plan, done=0, enabled=False, until=until, until_margin=margin)
        bar.training.add(0)  # the first run trains; it has done nothing yet
        return bar._eta({})

    assert eta(None) == "ETA ~2.3 h (projected)"  # all three, one after another
    assert eta(time.time() + 3600).startswith("ETA ~20 min (projected; ")  # the 2-hour run is deferred
    assert eta(time.time() + 1500, margin=2.0).startswith("ETA ~10 min (")  # 2 x 600 s no longer fits after the first
    assert eta(time.time() + 3 * 3600).startswith("ETA ~2.3 h (")


def test_a_plan_says_a_locked_run_is_skipped_and_does_not_count_it(tmp_path):
    """A run another sweep was writing was planned as "resume ... from step N" and counted in the projection;
    it was skipped only after the others had trained. Now the plan says who holds it, and it is not trained."""
    from geomcap import sweep

    configs = grid(tasks=["copy", "parity"], levels=["easy"], steps=4, **TINY)
    held = store.run_dir_for(configs[1].to_dict(), tmp_path)
    held.mkdir(parents=True)
    store.write_metrics(held, [(0, -1, "accuracy", 0.0), (1, -1, "accuracy", 0.0)])  # begun: up to step 1
    with store.run_lock(held):
        the_plan = sweep.plan(configs, [tmp_path], workers=1, cpu="no such CPU")
        assert [r.state for r in the_plan.runs] == ["train", "locked"]
        assert [r.config for r in the_plan.to_train] == configs[:1]
        lines = the_plan.lines()
        assert lines[0] == f"plan: 2 runs; 0 exist, 1 to train, 1 locked (skipped) into {tmp_path} (1 worker)"
        assert lines[2].split()[:5] == ["locked", "parity/easy", "405k", "seed", "0"]
        assert lines[2].endswith(f"by pid {os.getpid()} on {socket.gethostname()}: skipped")
        results = run_sweep(configs, root=tmp_path, executor=ThreadPoolExecutor(1), progress=False, plan=the_plan)
        assert results[0].ok and results[1].locked and not (held / store.CONFIG_FILE).exists()
        assert f"pid {os.getpid()} on" in results[1].error
    assert store.lock_owner(held) is None  # released: nobody holds it


def test_the_same_config_asked_twice_is_one_run(tmp_path):
    """`geomcap sweep --seeds 0,0` planned the same run twice (its projected time doubled); the two copies
    raced, one was skipped as "being written by another process", and the sweep exited 1."""
    from geomcap import sweep

    once = grid(tasks=["copy"], levels=["easy"], steps=3, **TINY)
    assert grid(tasks=["copy", "copy"], levels=["easy"], seeds=[0, 0], steps=3, **TINY) == once
    twice = once * 2  # a caller's list may still name a run twice
    assert len(sweep.plan(twice, [tmp_path], workers=2).runs) == 1
    results = run_sweep(twice, root=tmp_path, executor=ThreadPoolExecutor(2), progress=False)
    assert [(r.ok, r.locked) for r in results] == [(True, False), (True, False)], [r.error for r in results]
    assert results[0].run_dir == results[1].run_dir and store.is_complete(results[0].run_dir)


def test_a_plan_expects_a_run_to_stop_where_like_runs_stopped_and_never_past_stop_at(tmp_path):
    """A run's expected steps: where its other seeds stopped; else where its task and level stopped at the
    nearest other preset (same schedule; a run cut by stop_at says nothing of that); else its budget, which is
    stop_at where that comes first. Parity's task_params is a dict: its key order in config.json must not matter."""
    import json

    from geomcap import sweep

    def stored(cfg, stopped_at, name):  # a complete run as a store holds it: config.json and status.json
        run = tmp_path / "store" / name
        run.mkdir(parents=True)
        config = cfg.to_dict()
        if config["task_params"]:
            config["task_params"] = dict(reversed(list(config["task_params"].items())))
        (run / store.CONFIG_FILE).write_text(json.dumps(config))
        (run / store.STATUS_FILE).write_text(json.dumps({"complete": True, "stopped_at": stopped_at}))

    def planned(**axes):
        cfg = grid(levels=["easy"], steps=400, **axes, **TINY)[0]
        return sweep.plan([cfg], [tmp_path / "store"], workers=1, cpu="no such CPU").runs[0]

    stored(grid(tasks=["parity"], levels=["easy"], sizes=["405k"], seeds=[0], steps=400, **TINY)[0], 120, "a")
    stored(grid(tasks=["copy"], levels=["easy"], sizes=["405k"], seeds=[0], steps=400, stop_at=50, **TINY)[0], 50, "b")
    seed = planned(tasks=["parity"], sizes=["405k"], seeds=[1])
    assert (seed.steps, seed.like) == (120, "its other seeds")
    other = planned(tasks=["parity"], sizes=["1.3m"], seeds=[0])
    assert (other.steps, other.like) == (120, "its task and level at 405k")
    stored(grid(tasks=["parity"], levels=["easy"], sizes=["14m"], seeds=[0], steps=400, **TINY)[0], 60, "c")
    nearer = planned(tasks=["parity"], sizes=["4m"], seeds=[0])  # 14m's blocks are nearer 4m's than 405k's
    assert (nearer.steps, nearer.like) == (60, "its task and level at 14m")
    from geomcap.planning import nearest_preset
    assert nearest_preset("48m", ["405k", "14m"]) == "14m" and nearest_preset("1.3m-deep", ["405k", "48m"]) == "405k"
    assert nearest_preset("no such preset", ["405k"]) is None and nearest_preset("4m", ["unknown"]) is None
    assert sweep.plan([nearer.config], [tmp_path / "store"], cpu="no such CPU").lines()[1].endswith(
        "~60 of 400 steps, where its task and level at 14m stopped, no projection")
    capped = planned(tasks=["parity"], sizes=["1.3m"], seeds=[0], stop_at=100)
    assert (capped.steps, sweep.budget_steps(capped.config)) == (100, 100)
    unknown = planned(tasks=["copy"], sizes=["1.3m"], seeds=[0])  # copy's one run was cut by stop_at
    assert (unknown.steps, unknown.like) == (400, None)
    assert sweep.budget_steps(grid(tasks=["copy"], levels=["easy"], steps=400, stop_at=90, **TINY)[0]) == 90


def test_until_defers_the_runs_projected_to_end_after_it_and_trains_the_others(tmp_path, capsys):
    """A lane stopped mid-run at a session's end lost its run (its store did not outlive the machine). With a
    deadline, a run starts only where its projection ends before it; the others are deferred, named, and left
    unwritten, and the sweep goes on to the runs that fit (here the short one after a long one)."""
    from geomcap import sweep

    long_run, no_projection, short_run = grid(tasks=["copy", "parity", "reverse"], levels=["easy"], steps=2, **TINY)
    the_plan = sweep.Plan([sweep.PlannedRun(long_run, Path("x"), "train", 2, seconds=7200.0),
                           sweep.PlannedRun(no_projection, Path("y"), "train", 2, seconds=None),
                           sweep.PlannedRun(short_run, Path("z"), "train", 2, seconds=1.0)], {}, workers=1)
    results = run_sweep([long_run, no_projection, short_run], root=tmp_path, workers=1, progress=True, bars=False,
                        plan=the_plan, until=time.time() + 600)
    assert [(r.ok, r.deferred) for r in results] == [(False, True), (False, True), (True, False)]
    assert store.is_complete(results[2].run_dir)
    assert not results[0].run_dir.exists() and not results[1].run_dir.exists()
    assert "projected to end at" in results[0].error and "no projection" in results[1].error
    assert results[1].error.endswith("train one run without --until, or run `geomcap bench --parts scale`)")
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in out if not line.startswith("sweep:")] == [
        ["DEFERRED", "copy/easy"], ["DEFERRED", "parity/easy"], ["start", "reverse/easy"], ["done", "reverse/easy"]]

    later = run_sweep([long_run], root=tmp_path, workers=1, progress=False, plan=the_plan,
                      until=time.time() + 3 * 3600)  # a deadline the run fits: it trains
    assert later[0].ok and store.is_complete(later[0].run_dir)

    # with a margin, the projection times the margin must fit: 7200 s x 2 does not fit 3 hours, x 1.25 does
    wide = sweep.Plan([sweep.PlannedRun(short_run, Path("z"), "train", 2, seconds=7200.0)], {}, workers=1)
    short_root = tmp_path / "margin"
    refused = run_sweep([short_run], root=short_root, workers=1, progress=False, plan=wide,
                        until=time.time() + 3 * 3600, until_margin=2.0)
    assert refused[0].deferred and "(x2 margin), after --until" in refused[0].error
    fits = run_sweep([short_run], root=short_root, workers=1, progress=False, plan=wide,
                     until=time.time() + 3 * 3600, until_margin=1.25)
    assert fits[0].ok and store.is_complete(fits[0].run_dir)
    for bad, message in (({"until_margin": 0.5, "until": time.time() + 60},
                          r"until_margin must be a number in \[1, inf\), got 0.5"),
                         ({"until_margin": 2.0}, "until_margin applies to a deadline: give until as well")):
        with pytest.raises(ValueError, match=message):
            run_sweep([short_run], root=short_root, workers=1, progress=False, **bad)


def test_until_is_read_as_a_time_of_day_or_a_date_and_refused_when_past_or_unreadable(tmp_path):
    import datetime as dt

    from geomcap.parameters import deadline
    from geomcap.schema import SettingError

    now = dt.datetime(2026, 12, 7, 18, 30).timestamp()
    assert deadline("20:10", now=now) == dt.datetime(2026, 12, 7, 20, 10).timestamp()
    assert deadline("06:00", now=now) == dt.datetime(2026, 12, 8, 6, 0).timestamp()  # its next occurrence
    assert deadline("2026-12-07T19:00", now=now) == dt.datetime(2026, 12, 7, 19, 0).timestamp()
    assert deadline(now + 5.0, now=now) == now + 5.0
    assert deadline("+2h40m", now=now) == now + 9600 and deadline("+90m", now=now) == deadline("+1h30m", now=now)
    for bad, reason in (("25:00", "not a time of day"), ("2026-12-07T18:00", "already past"), ("+0m", "already past"),
                        ("+", "must be a time of day"), ("+2x", "must be a time of day"),
                        ("soon", "must be a time of day"), (True, "must be a time of day")):
        with pytest.raises(SettingError, match=reason):
            deadline(bad, now=now)
    with pytest.raises(ValueError, match="until needs the sweep's own workers"):
        run_sweep([], root=tmp_path, executor=ThreadPoolExecutor(1), until=time.time() + 60, progress=False)


def test_sweep_until_refuses_a_bad_time_before_anything_trains(tmp_path, capsys):
    from geomcap.cli import main

    assert main(["sweep", "--tasks", "copy", "--levels", "easy", "--until", "25:61",
                 "--root", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err == "geomcap: error: --until: '25:61' is not a time of day (HH:MM, 00:00 to 23:59)\n"
    for margin, until, message in (("0.5", ["--until", "+1h"], "--until-margin: must be a number in [1, inf), got 0.5"),
                                   ("2", [], "--until-margin applies to a deadline: give --until as well")):
        assert main(["sweep", "--tasks", "copy", "--levels", "easy", "--until-margin", margin, *until, "--dry-run",
                     "--root", str(tmp_path / "runs")]) == 2
        assert capsys.readouterr() == ("", f"geomcap: error: {message}\n")
    assert not (tmp_path / "runs").exists()


def _timed_run(root, cfg, step_s, checkpoint_s, cpu="test CPU"):
    """A complete run as a store holds it, trained on ``cpu`` at one thread, whose steps took ``step_s`` and
    whose checkpoints (those of its schedule after step 0) took ``checkpoint_s`` seconds each."""
    import json

    from geomcap.config import checkpoint_steps

    run = root / store.config_hash(cfg.to_dict())
    run.mkdir(parents=True)
    config = {**cfg.to_dict(), "provenance": {"cpu_model": cpu, "device": "cpu", "threads": 1}}
    checkpoints = int((checkpoint_steps(cfg.steps, cfg.n_log_checkpoints, cfg.n_linear_checkpoints,
                                        cfg.dense_steps) > 0).sum())
    (run / store.CONFIG_FILE).write_text(json.dumps(config))
    (run / store.STATUS_FILE).write_text(json.dumps({
        "complete": True, "stopped_at": cfg.steps, "train_s": step_s * cfg.steps, "eval_s": checkpoint_s * checkpoints,
        "write_s": 0.0, "checkpoints": checkpoints}))


def test_a_task_whose_checkpoints_cost_more_is_projected_at_its_own_cost_and_a_lone_run_sets_nothing(tmp_path):
    """Three copy runs at 1 s per checkpoint and two parity runs at 4 s: the preset's median checkpoint is
    1 s, parity's factor 4 and copy's 1, and a parity run is projected at 4 s per checkpoint. Steps cost
    10 ms per token but for sort's one run (90 ms), which sets no factor: every step factor is 1. Where every
    task costs the same, every factor is 1 and the projection is the preset's alone."""
    from geomcap import planning, tasks

    def runs(name, task, seeds, checkpoint_s, per_token_s=0.01):
        for cfg in grid(tasks=[task], levels=["easy"], seeds=seeds, steps=200, **TINY):
            _timed_run(tmp_path / name, cfg, per_token_s * tasks.sequence_length(task, "easy"), checkpoint_s)

    runs("a", "copy", [0, 1, 2], 1.0)
    runs("a", "parity", [0, 1], 4.0)
    runs("a", "sort", [0], 1.0, per_token_s=0.09)
    factors = planning.task_factors(planning.stored_runs([tmp_path / "a"]))
    assert set(factors) == {("copy", "easy"), ("parity", "easy")}
    assert factors["parity", "easy"].checkpoint == pytest.approx(4.0) and factors["copy", "easy"].checkpoint == 1.0
    assert all(f.step == pytest.approx(1.0) for f in factors.values()) and factors["parity", "easy"].runs == 2

    new = grid(tasks=["parity"], levels=["easy"], seeds=[5], steps=200, **TINY)[0]
    the_plan = planning.plan([new], [tmp_path / "a"], workers=1, cpu="test CPU")
    cost = the_plan.costs["405k", "fp32"]
    assert cost.per_checkpoint_s == pytest.approx(1.0)
    assert the_plan.runs[0].seconds == pytest.approx(planning.run_seconds(new, cost, factors["parity", "easy"], 200))
    assert the_plan.runs[0].seconds > planning.run_seconds(new, cost, None, 200) * 2
    assert any(line.startswith("  parity/easy: x1.00 per step, x4.00 per checkpoint") for line in the_plan.lines())

    runs("b", "copy", [0, 1, 2], 1.0)
    runs("b", "parity", [0, 1], 1.0)
    alike = planning.task_factors(planning.stored_runs([tmp_path / "b"]))
    assert all(f.step == pytest.approx(1.0) and f.checkpoint == pytest.approx(1.0) for f in alike.values())
    level = planning.plan([new], [tmp_path / "b"], workers=1, cpu="test CPU")
    assert level.runs[0].seconds == pytest.approx(planning.run_seconds(new, level.costs["405k", "fp32"], None, 200))
    assert not any("per checkpoint of its preset's" in line for line in level.lines())


def test_a_benchmark_line_is_rescaled_to_the_runs_times_only_where_enough_runs_have_one(tmp_path, monkeypatch):
    """Runs that take twice the benchmark's line per step rescale it by 2 once MIN_CALIBRATION_RUNS of them
    exist (not before, and not with calibrate=False); the intercept scales with the slope."""
    import json

    from geomcap import planning, tasks

    bench_dir = tmp_path / "data" / "bench"
    bench_dir.mkdir(parents=True)
    line = {"intercept_s": 0.1, "per_token_s": 0.01}
    (bench_dir / "scale.json").write_text(json.dumps({
        "schema": 1, "machine": {"cpu_model": "test CPU", "device": "cpu", "torch_threads": 2},
        "scale": {"presets": [{"preset": "405k", "eval_s": 2.0,
                               "fits": [{"threads": 1, "precision": "fp32", **line}]}]}}))
    monkeypatch.setenv("GEOMCAP_DATA", str(tmp_path / "data"))
    configs = grid(tasks=["copy", "parity", "sort"], levels=["easy"], steps=100, **TINY)
    for cfg in configs:
        _timed_run(tmp_path / "runs", cfg, 2 * (0.1 + 0.01 * tasks.sequence_length(cfg.task, "easy")), 1.0)
    stored = planning.stored_runs([tmp_path / "runs"])
    assert planning.MIN_CALIBRATION_RUNS == 3
    calibrated = planning.step_costs(stored, "test CPU")["405k", "fp32"]
    assert calibrated.line == pytest.approx({"intercept_s": 0.2, "per_token_s": 0.02})
    assert "x2.00 to the runs' steps" in calibrated.source
    assert planning.step_costs(stored, "test CPU", calibrate=False)["405k", "fp32"].line == pytest.approx(line)
    assert planning.step_costs(stored[:2], "test CPU")["405k", "fp32"].line == pytest.approx(line)


def test_projection_errors_read_each_run_against_the_others_and_name_what_the_preset_alone_misses(tmp_path):
    """Runs that cost exactly what the model says (10 ms per token per step; copy 1 s and parity 4 s per
    checkpoint) are projected at their real time, each from the others; one cost per preset projects the
    parity runs short. A run on a CPU no other run names has no projection."""
    from geomcap import planning, tasks

    for task, checkpoint_s in (("copy", 1.0), ("parity", 4.0)):
        for cfg in grid(tasks=[task], levels=["easy"], seeds=[0, 1, 2], steps=200, **TINY):
            _timed_run(tmp_path / "s", cfg, 0.01 * tasks.sequence_length(task, "easy"), checkpoint_s)
    _timed_run(tmp_path / "s", grid(tasks=["copy"], levels=["easy"], seeds=[9], steps=200, **TINY)[0], 1.0, 1.0,
               cpu="lone CPU")
    errors = planning.projection_errors([tmp_path / "s"])
    assert list(errors.columns) == list(planning.PROJECTION_COLUMNS) and len(errors) == 6
    assert set(errors["cpu"]) == {"test CPU"}
    assert (errors["real_s"] / errors["projected_s"]).to_numpy() == pytest.approx(1.0)
    assert (errors["expected_steps"] == 200).all()  # where the other seeds stopped
    assert errors["projected_at_expected_s"].to_numpy() == pytest.approx(errors["projected_s"].to_numpy())
    by_task = (errors["real_s"] / errors["projected_by_preset_s"]).groupby(errors["task"]).min()
    assert by_task["parity"] > 1.5 and by_task["copy"] < 1.0
    summary = planning.projection_summary(errors).set_index("projection")
    assert summary.loc["with task factors", "median"] == pytest.approx(1.0)
    assert summary.loc["with task factors", "share over 1.25x"] == 0
    assert summary.loc["one cost per preset", "share over 1.25x"] == 0.5  # the three parity runs
    assert summary.loc["with task factors, at the expected stop", "share over 1.25x"] == 0
