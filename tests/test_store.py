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
