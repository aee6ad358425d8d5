"""The run store: one writer per run directory, stale locks recovered."""
import os
import subprocess
import sys

import pytest

from geomcap import store
from geomcap.train import TrainConfig, train

GEOMCAP = [sys.executable, "-m", "geomcap.cli"]


def tiny_config(**overrides):
    base = dict(task="copy", level="easy", steps=6, n_linear_checkpoints=2, n_log_checkpoints=2,
                n_train=200, n_test=32, probe_size=32, train_eval_size=32, batch_size=16)
    return TrainConfig(**{**base, **overrides})


def test_a_second_writer_is_refused_while_the_first_holds_the_lock(tmp_path):
    """Two `geomcap train` on one --out with different configs used to both exit 0, leaving a config.json
    that did not match its metrics.csv. Now the second gets one line and exit 2 and writes nothing."""
    run = tmp_path / "run"
    run.mkdir()
    with store.run_lock(run) as lock:
        assert f"pid {os.getpid()} " in lock.read_text()
        with pytest.raises(store.RunLockedError, match="being written by another process"):
            train(tiny_config(), out=run, progress=False)
        result = subprocess.run(GEOMCAP + ["train", "--task", "copy", "--level", "easy", "--steps", "5",
                                           "--seed", "1", "--quiet", "--out", str(run)],
                                capture_output=True, text=True)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and "being written by another process (pid" in result.stderr
        assert sorted(p.name for p in run.iterdir()) == [store.LOCK_FILE]
    assert not (run / store.LOCK_FILE).exists()  # released
    train(tiny_config(), out=run, progress=False)
    assert store.is_complete(run) and not (run / store.LOCK_FILE).exists()


def test_a_stale_lock_is_recovered(tmp_path):
    """A lock file left by a killed writer (no process holds it) does not block the next one."""
    run = tmp_path / "run"
    run.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (run / store.LOCK_FILE).write_text(f"pid {dead.stdout.strip()} on somewhere\n")
    train(tiny_config(), out=run, progress=False)
    assert store.is_complete(run) and not (run / store.LOCK_FILE).exists()


def test_a_killed_writer_leaves_a_recoverable_lock(tmp_path):
    """The lock of a process killed with SIGKILL (no cleanup ran) is taken over."""
    run = tmp_path / "run"
    run.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom geomcap import store\n"
                               "with store.run_lock(sys.argv[1]):\n    print('held', flush=True)\n"
                               "    time.sleep(600)\n", str(run)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(store.RunLockedError, match=f"pid {holder.pid} "):
        train(tiny_config(), out=run, progress=False)
    holder.kill()
    holder.wait()
    assert (run / store.LOCK_FILE).exists()
    train(tiny_config(), out=run, progress=False)
    assert store.is_complete(run)


def _complete_run(tmp_path, name="run", **overrides):
    return train(tiny_config(**overrides), out=tmp_path / name, progress=False)


def test_one_bad_run_does_not_break_the_store(tmp_path):
    """A corrupted config.json or status.json made `geomcap runs` and every notebook fail without naming the
    file. Now the run is skipped with a warning naming it, and the others are listed."""
    from geomcap import results

    good = _complete_run(tmp_path, "good")
    bad_config = _complete_run(tmp_path, "bad-config", seed=1)
    bad_status = _complete_run(tmp_path, "bad-status", seed=2)
    (bad_config / store.CONFIG_FILE).write_text('{"task": "copy", "lev')
    (bad_status / store.STATUS_FILE).write_bytes(b"\x00\x01")
    with pytest.warns(store.StoreWarning) as caught:
        runs = store.list_runs(tmp_path)
    assert list(runs["run"]) == ["good"] and runs["complete"].all()
    messages = sorted(str(w.message) for w in caught)
    assert messages[0].startswith(f"skipping run {bad_config}: {bad_config / store.CONFIG_FILE} is unreadable")
    assert messages[1].startswith(f"skipping run {bad_status}: {bad_status / store.STATUS_FILE} is unreadable")
    with pytest.warns(store.StoreWarning):
        assert list(results.run_index(tmp_path)["run"]) == ["good"]
    listed = subprocess.run(GEOMCAP + ["runs", "--root", str(tmp_path)], capture_output=True, text=True)
    assert listed.returncode == 0 and "copy" in listed.stdout
    assert listed.stderr.count("\n") == 2 and listed.stderr.count("geomcap: warning: skipping run") == 2
    assert store.is_complete(good)


def _cut_inside_a_line(text: str) -> str:
    """The first half of the lines and the first 3 characters of the next: a cut inside a line by construction
    (a cut at half the bytes lands on a line boundary on some machines, whose floats print shorter or longer)."""
    lines = text.splitlines(keepends=True)
    return "".join(lines[: len(lines) // 2]) + lines[len(lines) // 2][:3]


@pytest.mark.parametrize("damage, fragment", [
    (_cut_inside_a_line, "is truncated (its last line is incomplete)"),
    (lambda text: text.splitlines(keepends=True)[0], "has a header but no rows"),
    (lambda text: text.replace("step,layer,measure,value", "step,layer,metric,value"),
     "has columns step, layer, metric, value; expected step, layer, measure, value"),
    (lambda text: "", "is unreadable (EmptyDataError"),
    (lambda text: text.replace("\n1,", "\nx,", 1), "is unreadable (ValueError"),
])
def test_show_on_a_bad_metrics_file_is_one_line(tmp_path, damage, fragment):
    run = _complete_run(tmp_path)
    metrics = run / store.METRICS_FILE
    metrics.write_text(damage(metrics.read_text()))
    with pytest.raises(ValueError, match="metrics.csv"):
        store.read_metrics(run)
    result = subprocess.run(GEOMCAP + ["show", str(run)], capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"{metrics} {fragment}" in result.stderr, result.stderr


def test_show_on_a_config_missing_keys(tmp_path):
    """A config missing keys gave a traceback. Without a key that names the run (task, level, ...) show
    says so in one line; a config without steps is still shown (show needs only the metrics)."""
    import json

    run = _complete_run(tmp_path)
    config = json.loads((run / store.CONFIG_FILE).read_text())
    del config["steps"]
    (run / store.CONFIG_FILE).write_text(json.dumps(config))
    result = subprocess.run(GEOMCAP + ["show", str(run)], capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert "steps None" in result.stdout
    del config["task"]
    (run / store.CONFIG_FILE).write_text(json.dumps(config))
    result = subprocess.run(GEOMCAP + ["show", str(run)], capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert f"{run / store.CONFIG_FILE} lacks task" in result.stderr


def test_metrics_ending_before_the_last_checkpoint_are_not_complete(tmp_path):
    """status.json says complete, but metrics.csv stops short of the run's last checkpoint (its config's steps,
    or the step status.json records as stopped_at when a run stops early)."""
    import json

    run = _complete_run(tmp_path)
    assert store.is_complete(run) and store.last_metrics_step(run) == 6
    lines = (run / store.METRICS_FILE).read_text().splitlines(keepends=True)
    short = "".join(line for line in lines if not line.startswith("6,"))
    (run / store.METRICS_FILE).write_text(short)
    assert store.last_metrics_step(run) < 6 and not store.is_complete(run)
    status = json.loads((run / store.STATUS_FILE).read_text())
    (run / store.STATUS_FILE).write_text(json.dumps({**status, "stopped_at": store.last_metrics_step(run)}))
    assert store.is_complete(run)
    (run / store.STATUS_FILE).write_text(json.dumps({**status, "stopped_at": 6}))
    assert not store.is_complete(run)
    # such a run is trained again, not reused
    train(tiny_config(), out=run, progress=False)
    assert store.last_metrics_step(run) == 6 and store.is_complete(run)


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_files_respect_the_umask(tmp_path, umask, mode):
    """Every file was created 0600 whatever the umask, so a shared store was unreadable to others."""
    previous = os.umask(umask)
    try:
        assert store.current_umask() == umask
        run = _complete_run(tmp_path)
        store.atomic_write_text(tmp_path / "index.csv", "a,b\n")
    finally:
        os.umask(previous)
    files = [p for p in run.iterdir()] + [tmp_path / "index.csv"]
    assert {p.name for p in run.iterdir()} >= {store.CONFIG_FILE, store.METRICS_FILE, store.STATUS_FILE}
    assert {oct(p.stat().st_mode & 0o777) for p in files} == {oct(mode)}
    assert run.stat().st_mode & 0o777 == 0o777 & ~umask


def test_appended_metrics_equal_the_metrics_written_whole(tmp_path):
    rows = [(0, -1, "accuracy", 0.25), (0, 1, "rankme", float("nan")), (8, -1, "accuracy", 0.1 + 0.2)]
    (tmp_path / "a").mkdir()
    store.write_metrics(tmp_path / "a", rows[:1])
    store.append_metrics(tmp_path / "a", rows[1:2])
    store.append_metrics(tmp_path / "a", [])
    store.append_metrics(tmp_path / "a", rows[2:])
    store.write_metrics(tmp_path, rows)
    assert (tmp_path / "a" / store.METRICS_FILE).read_bytes() == (tmp_path / store.METRICS_FILE).read_bytes()
