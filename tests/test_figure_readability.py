"""Every figure a section draws is readable at the book's width: drawn from synthetic runs as large as the
sections' (eight tasks, sixteen runs, the longest measure names), no tick label, legend or title shows under
``plots.style.MIN_SCREEN_PT`` once the figure is scaled to the text column. tests/test_book.py checks the
figures the sections actually saved against the same widths."""
import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from geomcap import grokking, plots  # noqa: E402
from geomcap.plots import style  # noqa: E402

TASKS = ("copy", "reverse", "compare", "parity", "add", "mod", "sort", "mul")
STEPS = np.r_[np.arange(0, 129, 4), np.linspace(178, 4000, 40).round().astype(int)]


def _metrics(runs: pd.DataFrame, layers: int = 4) -> pd.DataFrame:
    """Tidy metrics of ``runs``: per-layer RankMe and probes, accuracies, loss and norm at every step."""
    rows = []
    rng = np.random.default_rng(0)
    for run in runs.itertuples():
        curve = 1 / (1 + np.exp(-(STEPS - 800 - 100 * run.seed) / 150))
        base = {"run": run.run, "task": run.task, "level": run.level, "size": run.size, "seed": run.seed}
        for name, values in (("accuracy", curve), ("train_accuracy", np.minimum(1, 3 * curve)),
                             ("first_token_accuracy", np.minimum(1, 1.5 * curve)), ("test_loss", 5 - 4 * curve),
                             ("param_norm", 40 + 10 * curve)):
            rows.append(pd.DataFrame({**base, "step": STEPS, "layer": -1, "measure": name, "value": values}))
        for layer in range(layers):
            rank = 10 - 8 * np.exp(-STEPS / (20 + 5 * layer)) + 10 * curve + rng.normal(0, 0.1, len(STEPS))
            for name, values in (("rankme", rank), ("rankme_centred", rank + 2), ("probe_accuracy", 0.5 + curve / 2)):
                rows.append(pd.DataFrame({**base, "step": STEPS, "layer": layer, "measure": name, "value": values}))
    return pd.concat(rows, ignore_index=True)


def _runs(tasks=TASKS, levels=("easy", "medium", "hard"), sizes=("405k",), seeds=(0,)) -> pd.DataFrame:
    return pd.DataFrame([{"run": f"{t}-{lv}-{s}-{seed}", "task": t, "level": lv, "size": s, "seed": seed}
                         for t in tasks for lv in levels for s in sizes for seed in seeds])


@pytest.fixture(scope="module")
def grid():
    runs = _runs(sizes=("405k", "1.3m-deep"))
    return runs, _metrics(runs)


def _collapse_grid(grid):
    return plots.collapse_grid(grid[1], paper_floor={"mod": 2.0})


def _arm_curves(grid):
    runs, metrics = grid
    return plots.arm_curves(metrics.assign(arm=np.where(metrics["seed"] == 0, "real", "control")), max_step=1000)


def _layer_heatmaps(grid):
    runs, metrics = grid
    return plots.layer_heatmaps(metrics, runs.head(12))


def _probe_curves(grid):
    runs, metrics = grid
    return plots.probe_curves(metrics, runs.head(16))


def _proxy_trajectories(grid):
    runs, metrics = grid
    pairs = pd.DataFrame([{"task": t, "level": "hard", "seed": 0, "run_small": f"{t}-hard-405k-0",
                           "run_large": f"{t}-hard-1.3m-deep-0"} for t in TASKS])
    correlations = pd.DataFrame({"task": list(TASKS), "spearman": 0.95})
    return plots.proxy_trajectories(metrics, pairs, "405k", "1.3m-deep", correlations=correlations)


def _cross_task_matrix(grid):
    cross = pd.DataFrame([{"level": "medium", "seed": 0, "steps": 4000, "task_small": a, "task_large": b,
                           "same_task": a == b, "spearman": -0.95 if a == b else 0.5}
                          for a in TASKS for b in TASKS])
    return plots.cross_task_matrix(cross, "405k", "14m")


def _grokking_curves(grid):
    runs = _runs(tasks=("mod",), levels=("hard",), seeds=(0, 1, 2))
    metrics = _metrics(runs, layers=2)
    phases = pd.DataFrame({"seed": [0, 1, 2], "memorised_step": [178] * 3, "acquisition_step": [900, 1000, 1100]})
    alarms = {seed: {"rankme": [{"step": 500 + 100 * seed, "layer": 1}], "test_loss": [{"step": 700, "layer": -1}]}
              for seed in (0, 1, 2)}
    return plots.grokking_curves({r.seed: metrics[metrics["run"] == r.run] for r in runs.itertuples()}, phases,
                                 grokking.NANDA_PHASES, alarms)


def _claim_effects(grid):
    rows = []
    for claim, arms in (("C1", ("real", "control")), ("C2", ("real", "control")), ("C3", ("real", "control", "warmup 0")),
                        ("C4", ("real", "control")),
                        ("C5", ("rankme", "train_accuracy", "first_token_accuracy", "param_norm"))):
        for arm in arms:
            rows.append({"claim": claim, "arm": arm, "runs": 156, "value": 0.5, "low": 0.3, "high": 0.7,
                         "statistic": "hard runs where it is informative"})
    return plots.claim_effects_figure(pd.DataFrame(rows))


def _lead_strips(grid):
    measures = ["paper_rankme", "paper_test_loss", "paper_train_accuracy", "paper_first_token_accuracy",
                "paper_param_norm"]
    n = 40
    rng = np.random.default_rng(1)
    summary = pd.DataFrame({f"{m}_{c}": rng.normal(0, 5, n) for m in measures for c in ("gap_checkpoints", "gap_share")})
    groups = pd.Series(rng.choice(["easy", "intermediate", "hard", "not acquired"], n))
    return plots.lead_strips(summary, measures, groups, title="class (behaviour)")


def _layer_collapse_steps(grid):
    rows = [{"series": s, "task": t, "run": f"{s}{t}{k}", "collapse_layers": [1, 2, 3, 4, 5, 6],
             "collapse_steps": [40, 35, 30, 25, 20, 15], "is_top_down": True}
            for s in ("rankme", "rankme_centred", "mean_energy_outside") for t in TASKS for k in range(3)]
    return plots.layer_collapse_steps(pd.DataFrame(rows))


def _top_down_arms(grid):
    rows = [{"arm": arm, "run": f"{arm}{k}", "rho_step": -0.9, "collapse_steps": [20, 30, 40]}
            for arm in ("real", "control") for k in range(24)]
    return plots.top_down_arms(pd.DataFrame(rows), ["real", "control", "warmup 0"], warmup=100)


def _selectivity_layers(grid):
    rows = [{"arm": arm, "run": f"{arm}{k}", "layer": layer, "probe": 0.8, "control": 0.4}
            for arm in ("real", "control") for k in range(20) for layer in range(7)]
    return plots.selectivity_layers(pd.DataFrame(rows))


def _acquisition_regime(grid):
    n = 150
    rng = np.random.default_rng(2)
    summary = pd.DataFrame({"acquisition_step": rng.integers(20, 8000, n), "rankme_recovery_step": rng.integers(20, 8000, n)})
    classes = pd.Series(rng.choice(["easy", "intermediate", "hard"], n))
    return plots.acquisition_regime(summary, classes)


def _pythia(grid):
    benchmarks = ["agreement", "category", "negation", "arithmetic", "capitals", "pronoun", "induction",
                  "logical_deduction", "logical_deduction_3"]
    runs = pd.DataFrame([{"run": b, "task": b, "level": "hard", "size": "standin", "seed": 0} for b in benchmarks])
    metrics = _metrics(runs)
    table = pd.DataFrame([{"benchmark": b, "layer": 3, "level": "hard" if "logical" in b else "easy", "chance": 0.25,
                           "acquisition_step": 1000, "transition_step": 500, "gap_fraction": 0.1 * (i % 3)}
                          for i, b in enumerate(benchmarks)])
    return metrics, table


def _pythia_curves(grid):
    return plots.pythia_curves(*_pythia(grid))


def _pythia_gaps(grid):
    return plots.pythia_gaps(_pythia(grid)[1])


def _shortcut_curves(grid):
    rows = [{"build": build, "benchmark": "logical_deduction_3", "step": step, "class": name, "items": items,
             "accuracy": 0.3 + step / 4000, "chance": 1 / 3}
            for build in ("standin-4x256", "standin-4x128-balanced") for step in (0, 1, 2, 4, 100, 200, 1000, 2000)
            for name, items in (("all", 200), ("shortcut right", 59), ("shortcut wrong", 18), ("no shortcut", 123))]
    return plots.shortcut_curves(pd.DataFrame(rows))


def _twin_acquisition(grid):
    rows = [{"task": t, "level": "hard", "size": "405k", "seed": seed, "twin": twin, "acquisition_step": 1000 + 10 * twin,
             "rankme_transition_step": 900} for t in ("add", "mod", "mul", "sort") for seed in range(3) for twin in range(4)]
    return plots.twin_acquisition(pd.DataFrame(rows))


def _aligned_measures(grid):
    runs, metrics = grid
    summary = runs.head(8).assign(acquisition_step=900)
    return plots.aligned_measures(metrics, summary, ["rankme", "rankme_centred", "test_loss", "param_norm"])


def _forecast_figure(grid):
    signals = ["rankme", "rankme (any layer)", "rankme_centred", "test_loss", "train_accuracy",
               "first_token_accuracy", "param_norm"]
    sensitivity = pd.DataFrame([{"signal": sig, "scale": scale, "recall": 0.1 * i * scale,
                                 "control_alarms_per_1000": 0.2 / scale, "alarms_per_1000_armed": 1.0 / scale}
                                for i, sig in enumerate(signals) for scale in (0.25, 0.5, 1.0)])
    curve = pd.DataFrame({"alarms_per_1000": np.linspace(0, 4, 9), "recall": np.linspace(0, 0.7, 9)})
    return plots.forecast_figure(sensitivity, curve, 500)


def _alarm_curves(grid):
    runs, metrics = grid
    alarms = {"rankme": [{"step": 1000, "layer": 3}], "test_loss": [{"step": 1200, "layer": -1}]}
    return plots.alarm_curves(metrics[metrics["run"] == runs["run"].iloc[0]], alarms, armed_from=300, acquisition=1100)


def _claims_by_size_figure(grid):
    rows = [{"claim": c, "statistic": s, "size": size, "parameters": p, "arm": arm, "value": 0.5, "low": 0.4,
             "high": 0.6, "runs": 10, "settings": 4}
            for c, s in (("C1", "ordered"), ("C1", "collapse then recovery"), ("C2", "MOD floor"), ("C2", "MUL floor"),
                         ("C3", "top-down"), ("C4", "selectivity"), ("C5", "recall"),
                         ("C6", "acquired during the collapse"), ("C8", "trajectory rho"))
            for size, p in (("405k", 4e5), ("1.3m", 1.35e6), ("4m", 4e6), ("14m", 1.4e7), ("48m", 4.8e7))
            for arm in ("real", "control")]
    return plots.claims_by_size_figure(pd.DataFrame(rows))


def _c2_floor_figure(grid):
    rows = [{"task": task, "level": level, "size": size, "parameters": p, "value": 2.0, "low": 1.8, "high": 2.2,
             "runs": 3, "settings": 1}
            for task in ("mod", "mul") for level in ("easy", "medium", "hard")
            for size, p in (("405k", 4e5), ("1.3m", 1.35e6), ("4m", 4e6), ("14m", 1.4e7), ("48m", 4.8e7))]
    return plots.c2_floor_figure(pd.DataFrame(rows))


def _c1_recovery_figure(grid):
    rows = [{"size": size, "parameters": p, "recovery_fraction": f, "initial": 10.0, "floor": 2.0, "collapsed": 8,
             "recovered": 0.8, "acquired": 8, "ordered": 0.7}
            for size, p in (("405k", 4e5), ("1.3m", 1.35e6), ("4m", 4e6), ("14m", 1.4e7), ("48m", 4.8e7))
            for f in (0.25, 0.5, 0.75)]
    return plots.c1_recovery_figure(pd.DataFrame(rows))


FIGURES = [_forecast_figure, _alarm_curves, _claims_by_size_figure, _c2_floor_figure, _c1_recovery_figure, _collapse_grid, _arm_curves, _layer_heatmaps, _probe_curves, _proxy_trajectories,
           _cross_task_matrix, _grokking_curves,
           _claim_effects, _lead_strips, _layer_collapse_steps, _top_down_arms, _selectivity_layers,
           _acquisition_regime, _pythia_curves, _pythia_gaps, _shortcut_curves, _twin_acquisition, _aligned_measures]


@pytest.mark.parametrize("draw", FIGURES, ids=[f.__name__.strip("_") for f in FIGURES])
def test_every_text_of_a_section_figure_is_readable_at_the_books_width(grid, draw):
    fig = draw(grid)
    try:
        assert style.readability(fig) == []
        width = fig.get_tightbbox(fig.canvas.get_renderer()).width
        assert width <= style.max_figure_width() + 1e-6, f"{width:.2f} in"
    finally:
        plt.close(fig)


def test_a_figure_wider_than_its_panels_can_hold_is_flagged():
    """Four panels in one row, as the grokking figure was: its tick labels show at about 5 pt."""
    style.set_style()
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.3))
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="seed 0")
        ax.legend(fontsize="small")
    problems = style.readability(fig)
    plt.close(fig)
    assert problems and any("'seed 0'" in p for p in problems)


def test_the_widest_figure_shows_its_smallest_text_at_the_minimum():
    widest = style.max_figure_width()
    assert style.screen_points(style.smallest_text_pt(), widest) == pytest.approx(style.MIN_SCREEN_PT)
    assert 2 * style.PANEL_WIDTH < widest < 3 * style.PANEL_WIDTH  # two panels per row, not three
    assert style.screen_points(10, style.BOOK_FIGURE_PX / style.FIGURE_DPI) == pytest.approx(10 * style.FIGURE_DPI / 96)
