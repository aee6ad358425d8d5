"""Figures draw from a real (tiny) run without error and show what they claim."""
import matplotlib

matplotlib.use("Agg")

from geomcap import plots, store
from geomcap.train import TrainConfig, train


def test_run_curves(tmp_path):
    cfg = TrainConfig(task="copy", level="easy", steps=60, n_train=2000, n_test=128, probe_size=128,
                      train_eval_size=128, n_log_checkpoints=8, n_linear_checkpoints=6)
    run = train(cfg, out=tmp_path / "run", progress=False)
    fig = plots.run_curves(store.read_metrics(run), title="copy/easy")
    ax_acc, ax_rank = fig.axes
    assert ax_acc.get_ylabel() == "accuracy" and "rankme" in ax_rank.get_ylabel()
    assert ax_rank.get_xscale() == "symlog" and ax_rank.get_xlabel() == "training step"
    assert len([line for line in ax_rank.lines if line.get_label().startswith("layer")]) == 3
    fig.savefig(tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 10_000
