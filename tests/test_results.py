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
