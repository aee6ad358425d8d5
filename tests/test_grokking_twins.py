"""Grokking's phases and leads, and the twins' shift correlation, on synthetic tables with known answers."""
import numpy as np
import pandas as pd
import pytest

from geomcap import grokking, results


def test_memorisation_step_is_the_first_checkpoint_at_the_level():
    steps = np.array([0, 100, 200, 300, 400])
    assert grokking.memorisation_step(steps, [0.0, 0.5, 0.95, 0.8, 1.0]) == 200
    assert grokking.memorisation_step(steps, [0.0, np.nan, 0.5, 0.6, 0.7]) is None
    assert grokking.memorisation_step(steps, [0.0, 0.5, 0.6, 0.7, 0.9]) == 400  # at the level counts


def test_phase_table_reads_memorisation_and_acquisition():
    steps = np.arange(0, 5001, 100)
    rows = [(s, -1, "train_accuracy", min(1.0, s / 300)) for s in steps]  # memorised at step 300 (0.9 at 270)
    metrics = pd.DataFrame(rows, columns=["step", "layer", "measure", "value"]).assign(run="r")
    summary = pd.DataFrame({"seed": [0], "run": ["r"], "acquisition_step": pd.array([3000], dtype="Int64"),
                            "test_loss_transition_step": [2800], "final_accuracy": [0.99], "last_step": [5000]})
    table = grokking.phase_table(summary, metrics)
    assert table["memorised_step"].iloc[0] == 300 and table["acquisition_step"].iloc[0] == 3000
    assert table["generalisation_delay"].iloc[0] == pytest.approx(10.0)


def _twins(shift_with_acquisition: bool):
    """Two settings' seeds, four twins each; acquisition moves between twins by 0-300 steps; a transition
    that moves with it (the shift plus the seed's own lead) or not at all (a fixed step per seed)."""
    rng = np.random.default_rng(0)
    rows = []
    for level in ("medium", "hard"):
        for seed in range(3):
            base = 1000 + 500 * seed
            for twin in range(4):
                acq = base + int(rng.integers(0, 300))
                step = acq - 400 if shift_with_acquisition else base - 400
                rows.append({"task": "add", "level": level, "size": "405k", "seed": seed, "twin": twin,
                             "run": f"{level}{seed}{twin}", "acquisition_step": acq, "rankme_transition_step": step})
    return pd.DataFrame(rows)


def test_twin_shift_correlation_known_both_ways():
    moves = results.twin_shift_correlation(_twins(True), "rankme", n_boot=300)
    assert moves["rho"] == pytest.approx(1.0) and moves["ci_low"] > 0.9 and (moves["twins"], moves["seeds"]) == (24, 6)
    fixed = results.twin_shift_correlation(_twins(False), "rankme", n_boot=300)
    assert np.isnan(fixed["rho"])  # a transition that never moves between twins has no shift to correlate
    noisy = _twins(False)
    noisy["rankme_transition_step"] += np.random.default_rng(1).integers(0, 300, len(noisy))
    unrelated = results.twin_shift_correlation(noisy, "rankme", n_boot=300)
    assert abs(unrelated["rho"]) < 0.5 and unrelated["ci_low"] < 0 < unrelated["ci_high"]
    assert results.twin_shift_correlation(_twins(True), "llc")["twins"] == 0  # not recorded


def test_twin_spread_within_and_across_seeds():
    table = _twins(True)
    spread = results.twin_spread(table).set_index("level")
    assert spread.loc["hard", "seeds"] == 3 and spread.loc["hard", "twins_per_seed"] == 4
    assert spread.loc["hard", "within_seed_range"] < 300 < spread.loc["hard", "across_seed_sd"]


def test_the_script_trains_the_library_s_grokking_config():
    """scripts/grokking_grid.sh spells the setting as CLI options; geomcap.grokking.config is the same run (the
    same config hash), so the section's recompute trains what the committed runs are."""
    import re
    import shlex
    from pathlib import Path

    from geomcap import cli, store
    from geomcap.train import TrainConfig

    script = (Path(__file__).resolve().parents[1] / "scripts" / "grokking_grid.sh").read_text()
    body = re.search(r'grokking\(\) \{\n(.*?)\n\}', script, re.S).group(1)
    words = shlex.split(body.replace("\\\n", " "))
    options = words[words.index("train") + 1: words.index('"$@"') if '"$@"' in words else None]
    options = [w for w in options if w != "$@"]
    parser = cli.build_parser()
    for seed, extra in ((0, ["--measures", "llc", "--costly-every", "2"]), (1, [])):
        args = parser.parse_args(["train", *options, "--seed", str(seed), *extra])
        given = {name: getattr(args, name) for name in cli.config_fields() if hasattr(args, name)}
        scripted = TrainConfig(**given)
        assert store.config_hash(scripted.to_dict()) == store.config_hash(grokking.config(seed, llc=seed == 0).to_dict())


def test_grokking_curves_draw_each_seed_and_the_phase_lines():
    from geomcap import plots

    steps = np.arange(0, 3001, 100)
    def run(seed):
        rows = [(s, -1, "train_accuracy", min(1.0, s / 300)) for s in steps]
        rows += [(s, -1, "accuracy", float(s > 2000)) for s in steps]
        rows += [(s, -1, "test_loss", 5.0 - 4.0 * (s > 2000)) for s in steps]
        rows += [(s, -1, "param_norm", 50 - s / 100) for s in steps]
        rows += [(s, layer, "rankme", 10 + layer + s / 1000) for s in steps for layer in (0, 1)]
        return pd.DataFrame(rows, columns=["step", "layer", "measure", "value"])
    phases = pd.DataFrame({"seed": [0, 1], "memorised_step": pd.array([300, None], dtype="Int64"),
                           "acquisition_step": pd.array([2100, 2200], dtype="Int64")})
    fig = plots.grokking_curves({0: run(0), 1: run(1)}, phases, grokking.NANDA_PHASES)
    assert [ax.get_title() for ax in fig.axes] == ["accuracy", "test loss", "parameter norm", "RankMe at '='"]
    assert len(fig.axes[0].lines) == 4 + 3 + 3  # 2 series x 2 seeds, 3 run lines, 3 of Nanda et al.'s


def test_twins_text_says_spread_and_shift_and_when_there_is_nothing():
    text = results.twins_text(_twins(True), measures=("rankme", "llc"))
    assert text.startswith("add/")
    assert "rankme rho = 1.00" in text and "llc: no shift to correlate (0 runs with both steps)" in text
    empty = _twins(True).iloc[:0]
    assert results.twins_text(empty) == "No twin run is in this selection yet."
    plain = _twins(True)
    assert results.twins_text(plain[plain["twin"] == 0]) == "No twin run is in this selection yet."


def test_twin_acquisition_figure_draws_one_panel_per_setting():
    import matplotlib.pyplot as plt

    from geomcap import plots

    fig = plots.twin_acquisition(_twins(True))
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 2
    plt.close(fig)
    fig = plots.twin_acquisition(_twins(True).iloc[:0])
    assert any(t.get_text() == "no twins" for t in fig.axes[0].texts)
    plt.close(fig)
