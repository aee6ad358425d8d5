"""Figures draw from a real (tiny) run without error and show what they claim."""
import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from geomcap import events, plots, store
from geomcap.train import TrainConfig, train


def test_run_curves(tmp_path):
    cfg = TrainConfig(task="copy", level="easy", steps=60, n_train=2000, n_test=128, probe_size=128,
                      train_eval_size=128, n_log_checkpoints=8, n_linear_checkpoints=6)
    run = train(cfg, out=tmp_path / "run", progress=False)
    metrics = store.read_metrics(run)
    bare = plots.run_curves(metrics, title="copy/easy")  # draws what it is given: no summary, no event marks
    assert not [line for ax in bare.axes for line in ax.lines if "floor" in str(line.get_label())
                or line.get_label() == "acquisition"]
    summary = {**events.summarize_run(metrics),  # known events, drawn where the summary puts them
               "acquisition_step": 30, "collapse": {"floor_step": 8, "floor_value": 1.5, "recovery_step": None}}
    fig = plots.run_curves(metrics, summary, title="copy/easy")
    ax_acc, ax_rank = fig.axes
    acquisition = [line for line in ax_acc.lines if line.get_label() == "acquisition"]
    assert len(acquisition) == 1 and list(acquisition[0].get_xdata()) == [30, 30]
    floor = [line for line in ax_rank.lines if line.get_label() == "final layer: floor"]
    assert len(floor) == 1 and (floor[0].get_xdata()[0], floor[0].get_ydata()[0]) == (8, 1.5)
    assert ax_acc.get_ylabel() == "accuracy" and "rankme" in ax_rank.get_ylabel()
    assert ax_rank.get_xscale() == "symlog" and ax_rank.get_xlabel() == "training step"
    assert len([line for line in ax_rank.lines if line.get_label().startswith("layer")]) == 3
    fig.savefig(tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 10_000


def test_proxy_trajectories_normalises_each_preset():
    import numpy as np
    import pandas as pd

    from geomcap import results

    steps = [0, 10, 20, 40]
    rows = []
    for run, size, scale, layers in (("a", "405k", 1.0, 3), ("b", "1.3m", 5.0, 4)):
        for s, v in zip(steps, [8.0, 2.0, 4.0, 6.0]):
            for layer in range(layers):
                rows.append({"step": s, "layer": layer, "measure": "rankme", "value": scale * v, "run": run,
                             "task": "mod", "level": "hard", "size": size, "seed": 0})
    metrics = pd.DataFrame(rows)
    runs = pd.DataFrame({"task": "mod", "level": "hard", "seed": 0, "steps": 40, "size": ["405k", "1.3m"],
                         "run": ["a", "b"]})
    pairs = results.proxy_pairs(runs, "405k", "1.3m")
    corr = results.trajectory_correlation(metrics, runs, "405k", "1.3m")
    fig = plots.proxy_trajectories(metrics, pairs, "405k", "1.3m", correlations=corr)
    ax = fig.axes[0]
    small, large = ax.lines[0].get_ydata(), ax.lines[1].get_ydata()
    assert np.allclose(small, large) and small[0] == 1.0     # divided by the value at step 0
    assert "rho 1.00" in ax.get_title()


def test_cross_task_matrix_one_cell_per_pair_of_tasks_the_same_task_outlined():
    import pandas as pd
    from matplotlib.patches import Rectangle

    cross = pd.DataFrame([{"level": "medium", "seed": seed, "steps": 100, "task_small": a, "task_large": b,
                           "same_task": a == b, "spearman": (0.9 if a == b else 0.1) + 0.04 * seed}
                          for a in ("add", "mod", "sort") for b in ("add", "mod") for seed in (0, 1)])
    cross = pd.concat([cross, cross.assign(level="hard", task_large="copy", same_task=False)])
    fig = plots.cross_task_matrix(cross, "405k", "14m")
    ax = fig.axes[0]
    assert ax.get_title().startswith("medium")  # the level with most tasks at the large preset
    values = sorted(t.get_text() for t in ax.texts)
    assert values == ["0.12"] * 4 + ["0.92"] * 2  # the median over seeds, one cell per (proxy, run)
    outlined = [p for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill()]
    assert sorted((p.get_x(), p.get_y()) for p in outlined) == [(0, 0), (1, 1)]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["add", "mod", "sort"]


def test_setting_curves_one_column_per_task_default_in_black():
    import pandas as pd

    rows = []
    for run, task, setting in (("a", "mod", "default"), ("b", "mod", "lr=0.0003"), ("c", "add", "default")):
        for s, v in zip([0, 10, 100], [8.0, 2.0, 6.0]):
            rows.append({"step": s, "layer": 2, "measure": "rankme", "value": v, "run": run})
            rows.append({"step": s, "layer": -1, "measure": "accuracy", "value": s / 100, "run": run})
    runs = pd.DataFrame({"run": ["a", "b", "c"], "task": ["mod", "mod", "add"], "level": "hard",
                         "setting": ["default", "lr=0.0003", "default"]})
    fig = plots.setting_curves(pd.DataFrame(rows), runs)
    top_mod, top_add, bottom_mod, _ = fig.axes
    assert top_mod.get_title() == "mod/hard" and top_add.get_title() == "add/hard"
    assert [line.get_label() for line in top_mod.lines] == ["default", "lr=0.0003"]
    assert top_mod.lines[0].get_color() == "black" and list(bottom_mod.lines[1].get_ydata()) == [0, 0.1, 1.0]


def test_collapse_grid_legend_orders_levels_and_labels_the_paper_line():
    """The legend was taken from the first panel: levels in the order met there (easy, hard, medium), the
    paper's dotted floor unlabelled when drawn on another panel, and medium/hard in two near-identical oranges."""
    import pandas as pd
    from matplotlib.colors import to_rgb

    rows = []
    for task in ("add", "mod"):
        for run, level in ((f"{task}-e", "easy"), (f"{task}-h", "hard"), (f"{task}-m", "medium")):
            for step, rank, acc in ((0, 8.0, 0.0), (10, 2.0, 0.1), (100, 5.0, 0.9)):
                base = {"step": step, "run": run, "task": task, "level": level, "size": "405k", "seed": 0}
                rows += [{**base, "layer": 2, "measure": "rankme", "value": rank},
                         {**base, "layer": -1, "measure": "accuracy", "value": acc}]
    fig = plots.collapse_grid(pd.DataFrame(rows), paper_floor={"mod": 2.0})
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["easy", "medium", "hard", "paper's floor"]
    colours = [to_rgb(plots.LEVEL_COLORS[level]) for level in ("easy", "medium", "hard")]
    assert min(sum((a - b) ** 2 for a, b in zip(x, y)) ** 0.5
               for i, x in enumerate(colours) for y in colours[i + 1:]) > 0.25  # orange vs vermilion: 0.20


def test_lead_strips_draws_each_defined_lead_in_checkpoints_and_shares():
    import pandas as pd

    summary = pd.DataFrame({"rankme_gap_checkpoints": [10, -3, None], "rankme_gap_share": [0.8, -0.2, None],
                            "test_loss_gap_checkpoints": [4, 1, 2], "test_loss_gap_share": [0.3, 0.1, 0.2],
                            "llc_gap_checkpoints": [None, None, None]})
    fig = plots.lead_strips(summary, ["rankme", "test_loss", "llc", "hessian_top"],
                            pd.Series(["hard", "easy", "hard"]))
    ax_c, ax_s = fig.axes[:2]
    # llc (no defined lead) and hessian_top (not recorded) are left out: two columns (named under the lower panel)
    assert [t.get_text() for t in ax_s.get_xticklabels()] == ["rankme", "test_loss"]
    shares = sorted(y for coll in ax_s.collections for _, y in coll.get_offsets())
    assert shares == [-0.2, 0.1, 0.2, 0.3, 0.8]  # every defined share, once
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["easy", "hard"]  # one legend, above both
    by_level = plots.lead_strips(summary, ["test_loss"], pd.Series(["hard", "easy", "medium"]))
    assert [t.get_text() for t in by_level.legends[0].get_texts()] == ["easy", "medium", "hard"]
    empty = plots.lead_strips(summary, ["llc"], pd.Series(["hard"] * 3))
    assert "no measure" in empty.axes[0].texts[0].get_text()


def test_step_axis_has_no_crowded_ticks():
    """06's x labels clipped into each other: "0" and "10^0" sat side by side on the symlog step axis."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    plots.step_axis(ax, [0, 5, 50, 1500])
    assert list(ax.get_xticks()) == [0, 10, 100, 1000]
    plt.close(fig)


def test_layer_collapse_steps_one_panel_per_series_lines_at_each_layer():
    import pandas as pd

    rows = [{"task": "copy", "series": "rankme", "collapse_layers": [1, 2, 3], "collapse_steps": [9.0, 6.5, 4.0],
             "is_top_down": True, "layers": 3},
            {"task": "add", "series": "rankme", "collapse_layers": [2, 3, 4], "collapse_steps": [3.0, 5.0, 8.0],
             "is_top_down": False, "layers": 3},
            {"task": "add", "series": "rankme_centred", "collapse_layers": [1, 2], "collapse_steps": [20.0, 30.0],
             "is_top_down": None, "layers": 2}]
    fig = plots.layer_collapse_steps(pd.DataFrame(rows))
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["rankme: top-down 1/2", "rankme_centred: top-down 0/0"]
    copy, add = axes[0].lines
    assert list(copy.get_xdata()) == [1, 2, 3] and list(copy.get_ydata()) == [9.0, 6.5, 4.0]
    assert list(add.get_xdata()) == [2, 3, 4] and axes[0].get_yscale() == "log"
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["copy", "add"]


def test_layer_heatmaps_step_axis_has_no_crowded_ticks():
    """A heatmap's step axis is the project's: 0 and the powers of ten from 10 (02 showed "0" beside "10^0")."""
    import numpy as np
    import pandas as pd

    steps = np.arange(0, 200)
    metrics = pd.DataFrame([{"run": "r", "step": s, "layer": layer, "measure": "rankme", "value": 5.0 - layer * (s > 20)}
                            for s in steps for layer in range(3)])
    runs = pd.DataFrame([{"run": "r", "task": "copy", "level": "easy", "size": "405k-deep", "seed": 0}])
    ax = plots.layer_heatmaps(metrics, runs).axes[0]
    assert list(ax.get_xticks()) == [0, 10, 100] and ax.get_xscale() == "symlog" and ax.get_xlim() == (0, 199)


def test_probe_curves_one_colour_and_one_legend_entry_per_layer_across_depths():
    """A 2-block and a 4-block run side by side: layer 2 has one colour in both panels, and the legend
    lists every layer of the deeper run (it listed only the first panel's)."""
    import pandas as pd

    rows = []
    for run, n_layers in (("shallow", 3), ("deep", 5)):
        for step in range(5):
            rows += [{"run": run, "step": step, "layer": -1, "measure": m, "value": 0.1 * step}
                     for m in ("accuracy", "first_token_accuracy")]
            rows += [{"run": run, "step": step, "layer": layer, "measure": "probe_accuracy", "value": 0.5}
                     for layer in range(n_layers)]
    runs = pd.DataFrame([{"run": r, "task": "add", "level": "hard", "size": s, "seed": 0}
                         for r, s in (("shallow", "405k"), ("deep", "405k-deep"))])
    fig = plots.probe_curves(pd.DataFrame(rows), runs)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == [f"probe, layer {k}" for k in range(5)] + ["model, exact match", "model, first token"]
    colour = lambda ax: {line.get_label(): line.get_color() for line in ax.lines}["probe, layer 2"]  # noqa: E731
    assert colour(fig.axes[0]) == colour(fig.axes[1])


def test_aligned_measures_puts_runs_on_the_acquisition_clock():
    import pandas as pd

    rows = []
    for run, acq in (("a", 100), ("b", 400)):
        for step in range(0, 2 * acq + 1, acq // 4):  # 9 checkpoints up to twice the acquisition step
            rows += [(run, step, -1, "llc", 3.0 + step), (run, step, 0, "rankme", 50.0),
                     (run, step, 2, "rankme", 10.0 * step)]
    rows += [("a", 5 * 100, -1, "llc", -1.0)]  # past max_share: not drawn, so it does not set the scale
    metrics = pd.DataFrame(rows, columns=["run", "step", "layer", "measure", "value"])
    summary = pd.DataFrame({"run": ["a", "b", "c"], "acquisition_step": pd.array([100, 400, None], dtype="Int64"),
                            "task": "add", "level": "hard", "seed": [0, 1, 2]})
    fig = plots.aligned_measures(metrics, summary, ["rankme", "llc", "hessian_top"])
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["rankme", "llc"]  # hessian_top was not recorded
    for ax in panels:
        lines = [line for line in ax.get_lines() if len(line.get_xdata()) > 2]
        assert len(lines) == 2  # the run never acquired is left out
        for line in lines:  # both runs on one clock, 0..2, scaled 0..1 (rankme: the final layer, not layer 0)
            assert list(line.get_xdata()) == [i / 4 for i in range(9)]
            assert list(line.get_ydata()) == [i / 8 for i in range(9)]
    assert {t.get_text() for t in fig.legends[0].get_texts()} == {"add/hard seed 0", "add/hard seed 1"}


def test_geometry_share_figure_one_colour_per_preset_and_the_target_line():
    import matplotlib.pyplot as plt
    import pandas as pd

    index = pd.DataFrame({"size": ["405k", "405k", "1.3m"], "trained_steps": [560, 8000, 900],
                          "geometry_share": [0.2, 0.02, None]})
    fig = plots.geometry_share_figure(index, 0.10)
    ax = fig.axes[0]
    assert [c.get_offsets().shape[0] for c in ax.collections] == [2]  # a run without a share is not drawn
    assert [line.get_ydata()[0] for line in ax.lines] == [0.10]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["405k", "target: 10%"]
    plt.close(fig)


def test_arm_curves_one_panel_per_task_one_colour_per_arm_up_to_max_step():
    import pandas as pd
    from matplotlib.colors import to_rgb

    rows = []
    for run, task, arm in (("r", "mod", "real"), ("c0", "mod", "control"), ("c1", "mod", "control"),
                           ("a", "add", "control")):
        for step, value in ((0, 5.0), (10, 1.5), (500, 3.0), (2000, 4.0)):
            base = {"run": run, "task": task, "level": "medium", "size": "405k-deep", "seed": 0, "arm": arm,
                    "step": step, "measure": "rankme", "value": value}
            rows += [{**base, "layer": 0, "value": 9.0}, {**base, "layer": 6}]  # the final layer is drawn
    fig = plots.arm_curves(pd.DataFrame(rows), max_step=1000)
    mod, add = [ax for ax in fig.axes if ax.get_visible()]
    assert mod.get_title() == "mod (medium 405k-deep)" and len(mod.lines) == 3 and len(add.lines) == 1
    assert list(mod.lines[0].get_xdata()) == [0, 10, 500] and list(mod.lines[0].get_ydata()) == [5.0, 1.5, 3.0]
    assert [to_rgb(line.get_color()) for line in mod.lines] == [to_rgb(plots.ARM_COLORS[a])
                                                               for a in ("real", "control", "control")]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["real", "control"]



def test_arm_curves_by_size_one_panel_per_preset_and_bad_panels_refused():
    import pandas as pd
    from matplotlib.colors import to_rgb

    rows = []
    for run, size, arm in (("a", "4m", "float32"), ("b", "4m", "bf16"), ("c", "14m", "float32"),
                           ("d", "14m", "float32"), ("e", "14m", "bf16")):
        for step, value in ((0, 5.0), (10, 1.5)):
            rows.append({"run": run, "task": "add", "level": "medium", "size": size, "seed": 0, "arm": arm,
                         "step": step, "measure": "rankme", "layer": 3, "value": value})
    fig = plots.arm_curves(pd.DataFrame(rows), panel="size")
    small, large = [ax for ax in fig.axes if ax.get_visible()]
    assert small.get_title() == "4m (add medium)" and large.get_title() == "14m (add medium)"
    assert [to_rgb(line.get_color()) for line in large.lines] == [to_rgb(plots.ARM_COLORS[a])
                                                                 for a in ("float32", "float32", "bf16")]
    assert plots.ARM_COLORS["float32"] != plots.ARM_COLORS["bf16"]
    with pytest.raises(ValueError, match="panel"):
        plots.arm_curves(pd.DataFrame(rows), panel="seed")

def test_top_down_arms_draws_each_run_and_writes_out_an_empty_arm():
    import numpy as np
    import pandas as pd

    by_arm = pd.DataFrame([
        {"arm": "real", "rho_step": -1.0, "collapse_steps": [12.0, 9.0, 6.0]},
        {"arm": "real", "rho_step": -0.5, "collapse_steps": [10.0, 8.0, 9.0]},
        {"arm": "control", "rho_step": np.nan, "collapse_steps": []}])
    fig = plots.top_down_arms(by_arm, ["real", "control", "warmup 0"])
    ax_rho, ax_step = fig.axes
    assert [t.get_text() for t in ax_rho.get_xticklabels()] == ["real\n(2 runs)", "control\n(1 runs)",
                                                                 "warmup 0\n(0 runs)"]
    assert sorted(ax_rho.collections[0].get_offsets()[:, 1]) == [-1.0, -0.5]  # the undefined rho is not drawn
    assert len(ax_rho.collections) == 1                                      # (nor a point for the control)
    median = [line for line in ax_rho.lines if len(line.get_xdata()) == 2 and line.get_ydata()[0] != 0]
    assert list(median[0].get_ydata()) == [-0.75, -0.75]
    spans = [sorted(line.get_ydata()) for line in ax_step.lines if len(line.get_xdata()) == 2]
    assert spans == [[6.0, 12.0], [8.0, 10.0]] and ax_step.get_yscale() == "log"
    assert any(t.get_text() == "no run" for t in ax_step.texts) and len(ax_step.texts) == 1
    marked = plots.top_down_arms(by_arm, ["real"], warmup=100).axes[1]
    assert [line.get_ydata()[0] for line in marked.lines if line.get_linestyle() == ":"] == [100]
    assert [t.get_text() for t in marked.texts] == ["warmup ends"]


def test_selectivity_layers_one_panel_per_arm_median_per_layer():
    import pandas as pd

    rows = [{"arm": arm, "run": run, "layer": layer, "probe": p + 0.1 * layer, "control": c}
            for arm, run, p, c in (("real", "a", 0.5, 0.2), ("real", "b", 0.7, 0.4), ("control", "c", 0.3, 0.3))
            for layer in range(3)]
    fig = plots.selectivity_layers(pd.DataFrame(rows))
    real, control = [ax for ax in fig.axes if ax.get_visible()]
    assert real.get_title() == "real (2 runs)" and control.get_title() == "control (1 runs)"
    medians = {line.get_label(): list(line.get_ydata()) for line in real.lines if "median" in line.get_label()}
    assert medians["probe: true answer (median)"] == pytest.approx([0.6, 0.7, 0.8])
    assert medians["probe: control task (median)"] == pytest.approx([0.3, 0.3, 0.3])
    assert len(real.lines) == 6  # per run two thin lines, and the two medians
    single = plots.selectivity_layers(pd.DataFrame(rows).drop(columns="arm"))
    assert [ax.get_title() for ax in single.axes if ax.get_visible()] == ["runs (3 runs)"]


def test_acquisition_regime_places_runs_by_recovery_and_counts_the_rest():
    import pandas as pd

    summary = pd.DataFrame({"acquisition_step": pd.array([50, 900, 400, None], dtype="Int64"),
                            "rankme_recovery_step": pd.array([80, 300, None, 40], dtype="Int64")})
    fig = plots.acquisition_regime(summary, pd.Series(["easy", "hard", "intermediate", "not acquired"]))
    ax = fig.axes[0]
    points = {c.get_label(): c.get_offsets().tolist() for c in ax.collections}
    assert points == {"easy (1)": [[80.0, 50.0]], "hard (1)": [[300.0, 900.0]]}
    assert ax.get_title() == "acquired during the collapse: 1 of 3\n(1 acquired without a recovery, not drawn)"
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"


def test_shortcut_curves_one_line_per_class_in_each_builds_panel():
    rows = [{"build": build, "benchmark": "logical_deduction_3", "step": step, "class": name, "items": 5,
             "accuracy": np.nan if name == "shortcut wrong" and build == "b" else 0.5, "chance": 1 / 3}
            for build in ("a", "b") for step in (0, 10, 100) for name in ("all", "shortcut right", "shortcut wrong",
                                                                          "no shortcut")]
    frame = pd.DataFrame(rows)
    fig = plots.shortcut_curves(frame)
    first, second = fig.axes[:2]
    assert [ax.get_title() for ax in (first, second)] == ["a", "b"]
    assert [ln.get_label() for ln in first.get_lines()][:4] == ["all", "shortcut right", "shortcut wrong",
                                                               "no shortcut"]
    assert "shortcut wrong" not in [ln.get_label() for ln in second.get_lines()]  # no item: no line
    levels = sorted(ln.get_ydata()[0] for ln in first.get_lines() if ln.get_linestyle() in (":", "--"))
    assert np.allclose(levels, [1 / 3, 1 / 3 + 0.5 * 2 / 3])  # chance and the acquisition level
    with pytest.raises(ValueError, match="one benchmark"):
        plots.shortcut_curves(pd.concat([frame, frame.assign(benchmark="logical_deduction")]))


def test_a_floor_panel_keeps_its_tick_labels_inside_its_axis():
    """The effects figure's open-ended (floor) axis: ticks only within the values, the view wider than them,
    so no tick label sits on the axis's edge (where it would widen the saved figure)."""
    effects = pd.DataFrame({"claim": "C2", "statistic": "MOD's mean RankMe floor", "arm": ["real", "control"],
                            "value": [1.42, 1.56], "low": [1.31, 1.39], "high": [1.84, 2.216], "runs": [7, 7]})
    fig = plots.claim_effects_figure(effects)
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    ticks = ax.get_xticks()
    assert len(ticks) >= 2 and lo < 1.31 and hi > 2.216
    assert all(1.31 - 0.01 <= t <= 2.216 + 0.01 for t in ticks)
    matplotlib.pyplot.close(fig)
