"""Figures. One style for the whole project; notebooks call these functions.

Every function takes data (a tidy metrics table or arrays), draws on a given
or new matplotlib Axes, and returns the Figure. Training steps go on a
symlog axis: the collapse lives in the first few percent of training.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from geomcap import events, paper

PAPER_COLOR = "0.35"


def set_style() -> None:
    """The project's figure style (seaborn 'ticks', colour-blind palette)."""
    sns.set_theme(style="ticks", palette="colorblind", font_scale=0.95,
                  rc={"figure.dpi": 110, "savefig.dpi": 150, "axes.spines.top": False,
                      "axes.spines.right": False, "legend.frameon": False})


def _step_axis(ax, steps) -> None:
    steps = np.asarray(steps)
    ax.set_xscale("symlog", linthresh=1, linscale=0.5)
    ax.set_xlim(0, steps.max())
    # 0 and the powers of ten from 10 on: a "10^0" label would overlap the "0" beside it
    ax.set_xticks([0] + [10 ** k for k in range(1, int(np.log10(max(steps.max(), 1))) + 1)])
    ax.set_xlabel("training step")


def _panels(n: int, ncols: int, width: float, height: float, **kwargs):
    """A grid of n panels (the unused ones hidden): (fig, axes 2-D array, used axes list)."""
    ncols = max(1, min(ncols, n))
    nrows = int(np.ceil(n / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, **kwargs)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    return fig, axes, list(axes.flat)[:n]


def paper_line(ax, value: float, label: str, axis: str = "y") -> None:
    """The paper's value as a dashed reference line."""
    draw = ax.axhline if axis == "y" else ax.axvline
    draw(value, color=PAPER_COLOR, linestyle="--", linewidth=1, label=label)


def run_curves(metrics, summary: dict | None = None, title: str | None = None, measure: str = "rankme"):
    """Accuracy (top) and per-layer ``measure`` (bottom) of one run against training step.

    With ``summary`` (:func:`geomcap.events.summarize_run` of the same metrics) marks its
    acquisition step and, when it summarises ``measure``, the final layer's collapse floor
    and recovery. Draws what it is given: it computes no event.
    """
    set_style()
    fig, (ax_acc, ax_rank) = plt.subplots(2, 1, figsize=(7, 5.6), sharex=True,
                                          gridspec_kw={"height_ratios": [1, 1.4]})
    steps, acc = events.tidy_series(metrics, "accuracy")
    ax_acc.plot(steps, acc, label="test accuracy (exact match)", color="k")
    if "train_accuracy" in set(metrics["measure"]):  # absent from a monitor's table
        train_steps, train_acc = events.tidy_series(metrics, "train_accuracy")
        ax_acc.plot(train_steps, train_acc, label="train accuracy", color="0.6", linewidth=1)
    ax_acc.axhline(0.5, color="0.8", linewidth=0.8)
    ax_acc.set_ylabel("accuracy")
    ax_acc.set_ylim(-0.02, 1.02)

    layers, l_steps, values = events.layer_matrix(metrics, measure)
    colors = sns.color_palette("viridis", len(layers))
    for layer, row, color in zip(layers, values, colors):
        name = "embeddings" if layer == 0 else ("final (after ln_f)" if layer == layers[-1] else f"block {layer}")
        ax_rank.plot(l_steps, row, color=color, label=f"layer {layer}: {name}")
    ax_rank.set_ylabel(f"{measure} (effective dimensions)")

    summary = summary or {}
    acq = summary.get("acquisition_step")
    for ax in (ax_acc, ax_rank):
        if acq is not None:
            ax.axvline(acq, color="C3", linewidth=1, label="acquisition" if ax is ax_acc else None)
    c = summary.get("collapse")
    if c is not None and summary.get("measure", "rankme") == measure:
        ax_rank.plot([c["floor_step"]], [c["floor_value"]], "v", color="C3", label="final layer: floor")
        if c["recovery_step"] is not None:
            rec = values[-1][np.searchsorted(l_steps, c["recovery_step"])]
            ax_rank.plot([c["recovery_step"]], [rec], "^", color="C2", label="final layer: recovery")
    _step_axis(ax_rank, steps)
    ax_acc.legend(loc="upper left", fontsize="small")
    ax_rank.legend(loc="best", fontsize="small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


LEVEL_COLORS = {"easy": "C2", "medium": "C0", "hard": "C3"}  # green, blue, vermilion: C1 (orange) is too close to C3


def collapse_grid(metrics, measure: str = "rankme", paper_floor: dict | None = None):
    """One panel per task: the final layer's ``measure`` (solid) and test accuracy (dashed, right axis)
    against training step, one colour per level, one line per seed.

    metrics: tidy table with run columns (``geomcap.results.load_metrics``).
    paper_floor: {task: value} drawn as a dotted reference line (the paper's collapse floor).
    """
    set_style()
    task_names = list(dict.fromkeys(metrics["task"]))
    fig, axes, _ = _panels(len(task_names), 4, 3.3, 2.7)
    rank = events.final_layer_rows(metrics, measure)
    acc = metrics[metrics["measure"] == "accuracy"]
    for ax, task in zip(axes.flat, task_names):
        twin = ax.twinx()
        for (level, run), group in rank[rank["task"] == task].groupby(["level", "run"], sort=False):
            ax.plot(group["step"], group["value"], color=LEVEL_COLORS.get(level, "k"), linewidth=1.2,
                    label=level)
            a = acc[acc["run"] == run]
            twin.plot(a["step"], a["value"], color=LEVEL_COLORS.get(level, "k"), linewidth=0.9,
                      linestyle="--", alpha=0.7)
        if paper_floor and task in paper_floor:
            ax.axhline(paper_floor[task], color=PAPER_COLOR, linestyle=":", linewidth=1, label="paper's floor")
        twin.set_ylim(-0.02, 1.02)
        twin.set_ylabel("accuracy (dashed)" if ax in axes[:, -1] else "")
        if ax not in axes[:, -1]:
            twin.tick_params(right=False, labelright=False)
        ax.set_title(task)
        _step_axis(ax, metrics["step"].to_numpy())
        ax.set_ylabel(f"{measure}, final layer" if ax in axes[:, 0] else "")
        twin.spines["right"].set_visible(True)
    # one legend for every panel: the levels in their order, then the paper's line (wherever it is drawn)
    unique = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            unique.setdefault(label, handle)
    order = [lv for lv in LEVEL_COLORS if lv in unique] + [lb for lb in unique if lb not in LEVEL_COLORS]
    fig.legend([unique[lb] for lb in order], order, loc="upper center", ncol=len(order), bbox_to_anchor=(0.5, 1.02))
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    return fig


def layer_heatmaps(metrics, runs, measure: str = "rankme", relative: bool = True, ncols: int = 4):
    """One panel per run: ``measure`` by layer (rows, 0 = embeddings at the bottom) and step (symlog).

    With ``relative`` each layer is divided by its value at initialisation, so
    the colour says how far that layer has collapsed (< 1, red) or expanded
    (> 1, blue); the colour scale is logarithmic and centred on 1.
    """
    from matplotlib.colors import LogNorm

    set_style()
    runs = list(runs.itertuples())
    fig, axes, _ = _panels(len(runs), ncols, 3.4, 2.4)
    mesh = None
    for ax, run in zip(axes.flat, runs):
        m = metrics[metrics["run"] == run.run]
        layers, steps, values = events.layer_matrix(m, measure)
        if relative:
            values = values / values[:, :1]
        # cell edges halfway between checkpoints (steps are irregular)
        edges = np.concatenate([[0], (steps[1:] + steps[:-1]) / 2, [steps[-1]]])
        mesh = ax.pcolormesh(edges, np.arange(len(layers) + 1) - 0.5, values, cmap="RdBu",
                             norm=LogNorm(vmin=1 / 8, vmax=8) if relative else None, shading="flat")
        _step_axis(ax, steps)  # symlog, ticks at 0 and the powers of ten from 10 (no "0" beside "10^0")
        ax.set_yticks(range(len(layers)), [str(layer) for layer in layers])
        ax.set_title(f"{run.task}/{run.level} {run.size} s{run.seed}", fontsize="small")
        ax.set_ylabel("layer" if ax in axes[:, 0] else "")
    fig.tight_layout()
    if mesh is not None:
        label = f"{measure} / its value at step 0" if relative else measure
        bar = fig.colorbar(mesh, ax=axes.ravel().tolist(), shrink=0.8, label=label)
        if relative:
            ticks = [1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8]
            bar.set_ticks(ticks, labels=["1/8", "1/4", "1/2", "1", "2", "4", "8"])
            bar.minorticks_off()
    return fig


def probe_curves(metrics, runs, ncols: int = 4):
    """One panel per run: the model's exact-match and first-token accuracy against the linear
    probes' accuracy at each layer (first answer token, held-out half of the probe batch)."""
    set_style()
    runs = list(runs.itertuples())
    fig, axes, _ = _panels(len(runs), ncols, 3.4, 2.6, sharey=True)
    probes = metrics[(metrics["measure"] == "probe_accuracy") & metrics["run"].isin([r.run for r in runs])]
    # one colour per layer across every panel (runs of different depths side by side)
    palette = sns.color_palette("viridis", int(probes["layer"].max()) + 1 if len(probes) else 1)
    for ax, run in zip(axes.flat, runs):
        m = metrics[metrics["run"] == run.run]
        layers, steps, probe = events.layer_matrix(m, "probe_accuracy")
        for layer, row in zip(layers, probe):
            ax.plot(steps, row, color=palette[int(layer)], linewidth=1, label=f"probe, layer {layer}")
        s, acc = events.tidy_series(m, "accuracy")
        ax.plot(s, acc, color="k", linewidth=1.6, label="model, exact match")
        s, first = events.tidy_series(m, "first_token_accuracy")
        ax.plot(s, first, color="k", linewidth=1.2, linestyle="--", label="model, first token")
        _step_axis(ax, steps)
        ax.set_title(f"{run.task}/{run.level} {run.size} s{run.seed}", fontsize="small")
        ax.set_ylabel("accuracy" if ax in axes[:, 0] else "")
    unique = _legend_entries(axes.flat)  # the deepest run's layers too; probe layers in depth order
    labels = sorted((lb for lb in unique if lb.startswith("probe")), key=lambda lb: int(lb.rsplit(" ", 1)[1]))
    labels += [lb for lb in unique if not lb.startswith("probe")]
    fig.legend([unique[lb] for lb in labels], labels, loc="upper center", ncol=min(5, len(labels)),
               bbox_to_anchor=(0.5, 1.03), fontsize="small")
    fig.tight_layout(rect=(0, 0, 1, 0.94 - 0.03 * (len(labels) > 5)))
    return fig


def _legend_entries(axes) -> dict:
    """label -> handle over every panel, each label once, in the order first drawn (one figure legend
    for panels whose runs draw different entries)."""
    unique = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            unique.setdefault(label, handle)
    return unique


CLASS_COLORS = {"easy": "C2", "intermediate": "C1", "hard": "C3", "not acquired": "0.6"}


def lead_strips(summary, measures, groups, title: str = "class"):
    """Each measure's lead over acquisition per run, in checkpoints (left, symlog) and as a share of
    the acquisition step (right), one column per measure, coloured by ``groups`` (a Series aligned with
    ``summary``: a difficulty class or a level). Points above 0 lead; the dashed line on the left is the
    paper's reading (a lead of :data:`geomcap.events.MIN_LEAD_CHECKPOINTS` checkpoints). Measures
    without a ``<m>_gap_checkpoints`` column, or without any defined value, are left out; draws nothing
    but the axes (and says so) when none is left."""
    import pandas as pd

    set_style()
    rows = []
    for measure in measures:
        if f"{measure}_gap_checkpoints" not in summary:
            continue
        ckpt = pd.to_numeric(summary[f"{measure}_gap_checkpoints"], errors="coerce")
        share = pd.to_numeric(summary.get(f"{measure}_gap_share", pd.Series(np.nan, index=summary.index)),
                              errors="coerce")
        for c, s, g in zip(ckpt, share, pd.Series(groups).to_numpy()):
            if pd.notna(c):
                rows.append({"measure": measure, "checkpoints": float(c), "share": float(s), "group": g})
    data = pd.DataFrame(rows, columns=["measure", "checkpoints", "share", "group"])
    fig, (ax_c, ax_s) = plt.subplots(1, 2, figsize=(10, 3.8), sharex=True)
    present = set(data["group"])
    # easy -> hard, in the classes' order or the levels' ("easy" and "hard" name both); else by name
    names = next((list(n) for n in (CLASS_COLORS, LEVEL_COLORS) if present <= set(n)), sorted(present, key=str))
    order = [g for g in names if g in present]
    palette = {g: CLASS_COLORS.get(g, LEVEL_COLORS.get(g, "0.3")) for g in order}
    for ax, column in ((ax_c, "checkpoints"), (ax_s, "share")):
        if len(data):
            sns.stripplot(data=data, x="measure", y=column, hue="group", hue_order=order, palette=palette,
                          dodge=True, jitter=0.2, size=4, ax=ax, legend=ax is ax_s)
        else:
            ax.text(0.5, 0.5, "no measure with a defined lead", ha="center", va="center", transform=ax.transAxes)
        ax.axhline(0, color="0.3", linewidth=1)
        ax.set_xlabel("")
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
    ax_c.set_yscale("symlog", linthresh=2)
    ax_c.axhline(events.MIN_LEAD_CHECKPOINTS, color=PAPER_COLOR, linestyle="--", linewidth=1)
    ax_c.set_ylabel("lead over acquisition (checkpoints)\n> 0: the measure's transition first")
    ax_s.set_ylabel("lead / acquisition step")
    if ax_s.get_legend() is not None:
        ax_s.legend(title=title, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    fig.tight_layout()
    return fig


def aligned_measures(metrics, summary, measures, ncols: int = 3, max_share: float = 2.0):
    """Each measure of several runs on one clock: one panel per measure, one line per run of
    ``summary`` (a summary table: ``run``, ``acquisition_step``, task/level/seed), with the step
    divided by the run's acquisition step (1 = acquisition, the red line) up to ``max_share``, and
    the value min-max scaled within the run (0 = its lowest, 1 = its highest). Per-layer measures at
    their final layer. A dot at every recorded checkpoint: the costly measures are recorded more
    sparsely, and a transition can only be read where a dot is. Runs never acquired are left out."""
    import pandas as pd

    set_style()
    acquired = summary[pd.to_numeric(summary["acquisition_step"], errors="coerce") > 0]
    present = [m for m in measures if m in set(metrics["measure"])]
    fig, grid, axes = _panels(max(len(present), 1), ncols, 3.6, 2.6, sharex=True, sharey=True)
    colors = sns.color_palette("tab10", max(len(acquired), 1))
    for ax, measure in zip(axes, present):
        rows = events.final_layer_rows(metrics, measure)
        for color, row in zip(colors, acquired.itertuples()):
            series = rows[rows["run"] == row.run].sort_values("step")
            x = series["step"].to_numpy(float) / float(row.acquisition_step)
            y = series["value"].to_numpy(float)
            keep = (x <= max_share) & np.isfinite(y)
            if keep.sum() < 2:
                continue
            x, y = x[keep], y[keep]
            span = np.ptp(y)
            y = (y - y.min()) / span if span else np.zeros_like(y)
            ax.plot(x, y, color=color, linewidth=1, marker="o", markersize=2,
                    label=f"{row.task}/{row.level} seed {row.seed}")
        ax.axvline(1.0, color="C3", linewidth=1)
        ax.set_title(measure, fontsize="medium")
        ax.set_xlim(0, max_share)
    if not present:
        axes[0].text(0.5, 0.5, "none of these measures was recorded", ha="center", va="center",
                     transform=axes[0].transAxes)
    for ax in grid[-1]:
        ax.set_xlabel("step / acquisition step")
    for ax in grid[:, 0]:
        ax.set_ylabel("scaled value (0-1)")
    handles = _legend_entries(axes)
    if handles:
        fig.legend(handles.values(), handles.keys(), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=min(len(handles), 4), fontsize="small", frameon=False)
    fig.tight_layout()
    return fig


SIZE_COLORS = ("C0", "C3", "C2", "C4", "C1", "C5")


def proxy_trajectories(metrics, pairs, small: str, large: str, measure: str = "rankme",
                       correlations=None, ncols: int = 4):
    """One panel per task: the final layer's ``measure`` of the small and large preset against
    training step, each divided by its value at step 0 (the presets' widths differ), one line
    per seed. pairs: :func:`geomcap.results.proxy_pairs`; correlations: optional
    :func:`geomcap.results.trajectory_correlation`, whose median Spearman rho titles each panel."""
    set_style()
    task_names = list(dict.fromkeys(pairs["task"]))
    fig, axes, used = _panels(max(1, len(task_names)), ncols, 3.3, 2.6, sharey=False)
    rank = events.final_layer_rows(metrics, measure)
    for ax, task in zip(used, task_names):
        for pair in pairs[pairs["task"] == task].itertuples():
            for run, size, color in ((pair.run_small, small, SIZE_COLORS[0]), (pair.run_large, large, SIZE_COLORS[1])):
                series = rank[rank["run"] == run].sort_values("step")
                ax.plot(series["step"], series["value"] / series["value"].iloc[0], color=color,
                        linewidth=1.2, alpha=0.85, label=size)
        title = task
        if correlations is not None and len(correlations):
            rho = correlations.loc[correlations["task"] == task, "spearman"].median()
            title = f"{task}  (Spearman rho {rho:.2f})"
        ax.set_title(title, fontsize="medium")
        ax.axhline(1, color="0.85", linewidth=0.8)
        _step_axis(ax, rank["step"])
        ax.set_ylabel(f"{measure} / {measure} at step 0")
    handles, labels = used[0].get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    fig.tight_layout()
    # below the panels: above them, a one-row figure's legend ran into the panel titles
    fig.legend(unique.values(), unique.keys(), loc="upper center", ncol=len(unique), bbox_to_anchor=(0.5, 0.0),
               fontsize="small", title="final layer of", frameon=False)
    return fig


# --- Sensitivity to the unstated training settings ---

def setting_curves(metrics, runs, measure: str = "rankme"):
    """Two rows of panels, one column per task: the final layer's ``measure`` (top) and
    test accuracy (bottom) against training step, one line per training setting.
    runs: :func:`geomcap.results.setting_runs` (its ``setting`` column); the default in black."""
    set_style()
    tasks = list(dict.fromkeys(runs["task"]))
    settings = ["default"] + sorted(s for s in runs["setting"].unique() if s != "default")
    colors = {s: ("black" if s == "default" else f"C{i}") for i, s in enumerate(settings)}
    fig, axes = plt.subplots(2, len(tasks), figsize=(3.3 * len(tasks), 5.4), squeeze=False, sharex="col")
    rank = events.final_layer_rows(metrics, measure)
    accuracy = metrics[metrics["measure"] == "accuracy"]
    for col, task in enumerate(tasks):
        for run in runs[runs["task"] == task].itertuples():
            style = {"color": colors[run.setting], "linewidth": 1.6 if run.setting == "default" else 1.1,
                     "label": run.setting}
            r = rank[rank["run"] == run.run].sort_values("step")
            a = accuracy[accuracy["run"] == run.run].sort_values("step")
            axes[0, col].plot(r["step"], r["value"], **style)
            axes[1, col].plot(a["step"], a["value"], **style)
        axes[0, col].set_title(f"{task}/{runs.loc[runs['task'] == task, 'level'].iloc[0]}", fontsize="medium")
        axes[1, col].set_ylim(-0.02, 1.02)
        for row in (0, 1):
            _step_axis(axes[row, col], rank["step"])
        axes[0, col].set_xlabel("")
    axes[0, 0].set_ylabel(f"{measure}, final layer")
    axes[1, 0].set_ylabel("test accuracy (exact match)")
    unique = {}  # one entry per setting, from whichever panel has it (not every task has every setting)
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            unique.setdefault(label, handle)
    fig.legend([unique[s] for s in settings if s in unique], [s for s in settings if s in unique],
               loc="upper center", ncol=len(unique), bbox_to_anchor=(0.5, 1.02), fontsize="small",
               title="training setting")
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    return fig


# --- Pythia (claim C7) ---

def pythia_curves(metrics, table, measure: str = "rankme", ncols: int = 4):
    """One panel per benchmark: accuracy (black, left axis; dotted: chance) and ``measure`` at the
    layers of ``table`` (right axis, one colour per layer) against the revision's training step.

    metrics: tidy table with a ``task`` column (the benchmark), e.g. ``results.load_metrics``;
    table: :func:`geomcap.pythia.gap_table`. Vertical lines: acquisition (red, solid) and the
    deepest shown layer's ``measure`` transition (blue, dashed).
    """
    import pandas as pd

    set_style()
    benchmarks = list(dict.fromkeys(table["benchmark"]))
    fig, axes, used = _panels(len(benchmarks), ncols, 3.5, 2.8)
    first_twin = None
    for ax, bench in zip(used, benchmarks):
        rows = table[table["benchmark"] == bench]
        m = metrics[metrics["task"] == bench]
        steps, acc = events.tidy_series(m, "accuracy")
        ax.plot(steps, acc, color="k", linewidth=1.5, label="accuracy")
        ax.axhline(rows["chance"].iloc[0], color="0.6", linestyle=":", linewidth=1, label="chance")
        ax.set_ylim(-0.02, 1.02)
        twin = ax.twinx()
        layers, l_steps, values = events.layer_matrix(m, measure)
        colors = sns.color_palette("viridis", len(rows))
        for layer, color in zip(rows["layer"], colors):
            twin.plot(l_steps, values[list(layers).index(layer)], color=color, linewidth=1.1,
                      label=f"{measure}, layer {layer}")
        deepest = rows.iloc[-1]
        if pd.notna(deepest["acquisition_step"]):
            ax.axvline(int(deepest["acquisition_step"]), color="C3", linewidth=1.2, label="acquisition")
        if pd.notna(deepest["transition_step"]):
            ax.axvline(int(deepest["transition_step"]), color="C0", linestyle="--", linewidth=1.2,
                       label=f"{measure} transition")
        first_twin = twin if ax is used[0] else first_twin
        _step_axis(ax, steps)
        ax.set_title(f"{bench} ({deepest['level']})", fontsize="medium")
        ax.set_ylabel("accuracy" if ax in axes[:, 0] else "")
        twin.set_ylabel(measure if ax in axes[:, -1] or ax is used[-1] else "")
        twin.spines["right"].set_visible(True)
    handles, labels = [], []
    for a in (used[0], first_twin):
        h, l = a.get_legend_handles_labels()
        handles, labels = handles + h, labels + l
    unique = dict(zip(labels, handles))
    fig.legend(unique.values(), unique.keys(), loc="upper center", ncol=min(6, len(unique)),
               bbox_to_anchor=(0.5, 1.03), fontsize="small")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return fig


def pythia_gaps(table, paper_gap_steps: int = paper.CLAIMS["C7"]["values"]["gap_steps"],
                paper_last_step: int = paper.CLAIMS["C7"]["values"]["training_steps"]):
    """The precursor gap (acquisition - transition) of each benchmark as a fraction of the run's
    training steps, beside the paper's (~49K of Pythia-2.8B's 143K steps on logical deduction).
    One marker per benchmark and layer of ``table`` (:func:`geomcap.pythia.gap_table`);
    benchmarks never acquired have no gap and are listed under the axis."""
    import pandas as pd

    set_style()
    data = table.assign(gap=pd.to_numeric(table["gap_fraction"], errors="coerce"))
    fig, ax = plt.subplots(figsize=(9, 3.6))
    order = list(dict.fromkeys(data["benchmark"]))
    shown = data.dropna(subset=["gap"])
    if len(shown):
        sns.stripplot(data=shown, x="benchmark", y="gap", hue="level", order=order, jitter=0.15, size=7,
                      palette={"easy": "C2", "hard": "C3"}, ax=ax)
    ax.set_xticks(range(len(order)), [name.replace("_", "\n") for name in order], rotation=30, ha="right")
    ax.set_xlim(-0.5, len(order) - 0.5)
    ax.axhline(0, color="0.3", linewidth=1)
    paper_line(ax, paper_gap_steps / paper_last_step,
               f"paper: ~{paper_gap_steps // 1000}K of {paper_last_step // 1000}K steps (Pythia-2.8B, deduction)")
    missing = [b for b in order if b not in set(shown["benchmark"])]
    ax.set_xlabel("no gap (never acquired): " + ", ".join(missing) if missing else "", fontsize="small",
                  color="0.4")
    ax.set_ylim(min(-0.1, ax.get_ylim()[0]), max(0.5, ax.get_ylim()[1]))
    ax.set_ylabel("gap / training steps\n> 0: RankMe leads")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    fig.tight_layout()
    return fig


# --- Benchmarks ---

BENCH_MODEL_LABELS = {"geomcap": "geomcap", "peer": "transformers peer (same shape)",
                      "geomcap_compiled": "geomcap + torch.compile"}


def llc_calibration_figure(calibration: dict):
    """The ``llc_calibration`` bench part: the LLC at each checkpoint of its run, one line per
    (chains x draws) setting, the mean over SGLD seeds with their standard deviation as error bars
    (x: the checkpoints, evenly spaced and labelled by step; the settings are offset a little so that
    their bars do not overlap)."""
    import pandas as pd

    set_style()
    rows = pd.DataFrame(calibration["rows"])
    steps = sorted(rows["step"].unique())
    settings = list(dict.fromkeys(zip(rows["chains"], rows["draws"])))
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    for i, (chains, draws) in enumerate(settings):
        one = rows[(rows["chains"] == chains) & (rows["draws"] == draws)].groupby("step")["llc"]
        x = np.arange(len(steps)) + (i - (len(settings) - 1) / 2) * 0.08
        ax.errorbar(x, one.mean().reindex(steps), yerr=one.std(ddof=1).reindex(steps), marker="o", ms=4,
                    capsize=3, color=f"C{i}", label=f"{chains} x {draws}")
    ax.set_xticks(np.arange(len(steps)), [str(s) for s in steps])
    ax.set(xlabel="training step (checkpoint)", ylabel="LLC estimate",
           title=f"{calibration['task']}/{calibration['level']} {calibration['size']}, seed {calibration['seed']}")
    ax.legend(title="chains x draws", fontsize="small", frameon=False, loc="best")
    fig.tight_layout()
    return fig


def geometry_share_figure(index, limit: float):
    """Per committed run (``results.run_index``): the per-checkpoint geometry's share of training time
    against the steps the run trained (log x), one colour per preset; the dashed line is ``limit``."""
    set_style()
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    for i, (size, runs) in enumerate(index.dropna(subset=["geometry_share"]).groupby("size", sort=False)):
        ax.scatter(runs["trained_steps"], runs["geometry_share"], s=16, alpha=0.8,
                   color=SIZE_COLORS[i % len(SIZE_COLORS)], label=size)
    ax.axhline(limit, color=PAPER_COLOR, linestyle="--", linewidth=1, label=f"target: {limit:.0%}")
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(plt.matplotlib.ticker.LogLocator(base=2))
    ax.xaxis.set_major_formatter(plt.matplotlib.ticker.StrMethodFormatter("{x:.0f}"))
    ax.xaxis.set_minor_formatter(plt.matplotlib.ticker.NullFormatter())
    ax.yaxis.set_major_formatter(plt.matplotlib.ticker.PercentFormatter(1.0))
    ax.set(xlabel="steps trained (a run stops a margin after acquisition)",
           ylabel="geometry / training time")
    ax.legend(fontsize="small", frameon=False, ncols=2)
    fig.tight_layout()
    return fig


def bench_figure(result, title: str | None = None):
    """Four panels of one ``geomcap bench`` result (``geomcap.bench.run_bench``).

    (a) training tokens/s per preset, geomcap vs its transformers peer (and
    compiled), with the median per-round ratio geomcap / peer written above;
    (b) achieved FLOP/s as a fraction of the matmul peak of the same rounds,
    with the 40% target; (c) time spent measuring as a share of training time
    per preset (per-checkpoint geometry, whole checkpoint, and the costly
    measures on every 4th checkpoint), with the 10% target; (d) RankMe's time
    against a naive float64 SVD for each N x d (both axes log). A part missing
    from the result leaves its panel empty with a note.
    """
    set_style()
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.4))
    (ax_tp, ax_peak), (ax_share, ax_rank) = axes
    tp = result.get("throughput") or {}
    presets = [r["preset"] for r in tp.get("presets", [])]
    models = [m for m in BENCH_MODEL_LABELS if any(m in r["models"] for r in tp.get("presets", []))]
    width = 0.8 / max(1, len(models))
    x = np.arange(len(presets))
    for i, model in enumerate(models):
        tokens = [r["models"].get(model, {}).get("tokens_per_s", np.nan) for r in tp["presets"]]
        fractions = [r["models"].get(model, {}).get("peak_fraction", np.nan) for r in tp["presets"]]
        offset = (i - (len(models) - 1) / 2) * width
        ax_tp.bar(x + offset, tokens, width, label=BENCH_MODEL_LABELS[model], color=f"C{i}")
        ax_peak.bar(x + offset, fractions, width, color=f"C{i}")
    for xi, row in zip(x, tp.get("presets", [])):
        if row.get("peer_ratio") is not None:
            top = max(m["tokens_per_s"] for m in row["models"].values())
            ax_tp.annotate(f"x{row['peer_ratio']:.2f}", (xi, top), textcoords="offset points", xytext=(0, 3),
                           ha="center", fontsize="small")
    if presets:
        ax_tp.set_yscale("log")
        ax_tp.set_xticks(x, presets)
        ax_peak.set_xticks(x, presets)
        ax_tp.legend(fontsize="small", loc="upper right")
        ax_peak.axhline(0.40, color=PAPER_COLOR, linestyle="--", linewidth=1, label="target: 40%")
        ax_peak.legend(fontsize="small")
    else:
        for ax in (ax_tp, ax_peak):
            ax.text(0.5, 0.5, "no throughput part", ha="center", va="center", transform=ax.transAxes)
    ax_tp.set_ylabel("training tokens / s\n(label: geomcap / peer)")
    ax_tp.set_title("(a) throughput", loc="left", fontsize="medium")
    ax_peak.set_ylabel("achieved FLOP/s / matmul peak")
    ax_peak.set_title("(b) fraction of the same-run matmul peak", loc="left", fontsize="medium")

    geo = (result.get("geometry") or {}).get("presets", [])
    costly = result.get("costly") or {}
    bars = []  # (preset, label, share)
    for row in geo:
        sched = row["schedules"][0]
        bars.append((row["preset"], f"geometry: RankMe x 4 + probes ({sched['steps']}-step run)",
                     sched["geometry_share"]))
        bars.append((row["preset"], f"whole checkpoint: + eval forward ({sched['steps']}-step run)",
                     sched["eval_share"]))
    if costly.get("run"):
        bars.append((costly["size"], f"costly measures, every {costly['run']['costly_every']}th checkpoint "
                                     f"({costly['run']['steps']}-step run)", costly["run"]["run_share"]))
    if bars:
        share_presets = list(dict.fromkeys(b[0] for b in bars))
        labels = list(dict.fromkeys(b[1] for b in bars))
        w = 0.8 / len(labels)
        for j, label in enumerate(labels):
            xs = [share_presets.index(p) + (j - (len(labels) - 1) / 2) * w for p, lab, _ in bars if lab == label]
            ys = [s for _, lab, s in bars if lab == label]
            ax_share.bar(xs, ys, w, label=label, color=f"C{j + 3}")
        ax_share.set_xticks(range(len(share_presets)), share_presets)
        ax_share.set_yscale("log")
        ax_share.axhline(0.10, color=PAPER_COLOR, linestyle="--", linewidth=1, label="target: 10% (geometry)")
        ax_share.set_ylabel("time measuring / time training")
        ax_share.legend(fontsize="x-small", loc="upper left")
    else:
        ax_share.text(0.5, 0.5, "no geometry or costly part", ha="center", va="center", transform=ax_share.transAxes)
    ax_share.set_title("(c) cost of measuring", loc="left", fontsize="medium")

    sizes = (result.get("rankme") or {}).get("sizes", [])
    if sizes:
        work = np.array([r["n"] * r["d"] * min(r["n"], r["d"]) for r in sizes], dtype=float)
        order = np.argsort(work)
        ours = np.array([r["geomcap_s"] for r in sizes])[order]
        naive = np.array([r["naive_s"] for r in sizes])[order]
        ax_rank.plot(work[order], naive, "s", color="0.5", label="naive float64 SVD")
        ax_rank.plot(work[order], ours, "o", color="C0", label="geomcap.geometry.rankme")
        for k in order:
            r = sizes[k]
            ax_rank.annotate(f"{r['n']}x{r['d']}: x{r['speedup']:.2f}", (work[k], r["geomcap_s"]),
                             textcoords="offset points", xytext=(5, -3), ha="left", fontsize="xx-small")
        ax_rank.set_xscale("log")
        ax_rank.set_yscale("log")
        ax_rank.set_xlim(work.min() / 2, work.max() * 30)  # room for the labels
        ax_rank.set_xlabel("N d min(N, d)")
        ax_rank.legend(fontsize="small")
    else:
        ax_rank.text(0.5, 0.5, "no rankme part", ha="center", va="center", transform=ax_rank.transAxes)
    ax_rank.set_ylabel("seconds per RankMe")
    ax_rank.set_title("(d) RankMe vs a naive SVD (label: speed-up)", loc="left", fontsize="medium")
    if title:
        fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    return fig


# --- Top-down (claim C3) ---

def layer_collapse_steps(by_series, ncols: int = 3):
    """One panel per series of :func:`geomcap.results.top_down_by_series`: each informative layer's
    half-drop step (log y) against its depth (``collapse_layers``), one line per run, coloured by task. Lines that fall from
    left to right are top-down (deeper layers collapse first). Panel titles count the top-down runs
    among those with a defined statistic."""
    set_style()
    series = list(dict.fromkeys(by_series["series"]))
    fig, axes, used = _panels(max(1, len(series)), ncols, 3.4, 2.9, sharey=True)
    tasks = list(dict.fromkeys(by_series["task"]))
    colors = dict(zip(tasks, sns.color_palette("colorblind", len(tasks))))
    for ax, name in zip(used, series):
        rows = by_series[by_series["series"] == name]
        for row in rows.itertuples():
            ax.plot(row.collapse_layers, row.collapse_steps, marker="o", markersize=3, linewidth=1,
                    color=colors[row.task], alpha=0.8, label=row.task)
        defined = rows["is_top_down"].dropna()
        ax.set_title(f"{name}: top-down {int(defined.astype(bool).sum())}/{len(defined)}", fontsize="medium")
        ax.set_yscale("log")
        ax.set_xlabel("layer (1 = first block)")
        ax.set_ylabel("half-drop step" if ax in axes[:, 0] else "")
    unique = _legend_entries(used)
    fig.legend(unique.values(), unique.keys(), loc="upper center", ncol=min(8, len(unique)),
               bbox_to_anchor=(0.5, 1.04), fontsize="small")
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    return fig


#: one colour per arm (real runs, negative controls, warmup 0), in every figure that compares them
ARM_COLORS = {"real": "C0", "control": "C3", "warmup 0": "C2"}


def claim_effects_figure(effects):
    """Per claim, the effect in the real runs beside the controls, each a point with its 95% interval over
    settings (:func:`geomcap.results.claim_effects`): one panel per claim, one row per arm; an arm with no
    run is written out, not drawn."""
    claims = list(dict.fromkeys(effects["claim"]))
    fig, axes = plt.subplots(1, len(claims), figsize=(3.0 * len(claims), 2.6), squeeze=False)
    colours = ARM_COLORS
    for ax, claim in zip(axes[0], claims):
        rows = effects[effects["claim"] == claim].reset_index(drop=True)
        for i, row in rows.iterrows():
            y = len(rows) - 1 - i
            colour = colours.get(row["arm"], "0.3")
            if np.isfinite(row["value"]):
                low, high = row["low"], row["high"]
                if np.isfinite(low) and np.isfinite(high):
                    ax.plot([low, high], [y, y], color=colour, linewidth=2, alpha=0.6)
                ax.plot(row["value"], y, "o", color=colour)
            else:
                ax.text(0.5, y, "no run", transform=ax.get_yaxis_transform(), ha="center", va="center",
                        color="0.4", fontsize="small")
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([f"{arm} ({n})" for arm, n in zip(rows["arm"][::-1], rows["runs"][::-1])],
                           fontsize="small")
        ax.set_ylim(-0.6, len(rows) - 0.4)
        statistic = rows["statistic"].iloc[0]
        if "floor" not in statistic:
            ax.set_xlim(-0.05, 1.05)
        ax.set_title(claim, fontsize="medium")
        ax.set_xlabel(statistic, fontsize="small")
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


# --- The negative controls beside the real runs (claims C1-C4) ---


def _no_run(ax, text: str = "no run") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")


def arm_curves(metrics, measure: str = "rankme", max_step: int = 1000, ncols: int = 4):
    """One panel per task: the final layer's ``measure`` against training step up to ``max_step``, one
    thin line per run (seed), coloured by its arm (``metrics``' ``arm`` column: "real", "control", "warmup
    0"), so the negative controls are seen beside the real runs of the same settings. Panel titles name
    the task's level(s) and size(s); one legend lists the arms drawn."""
    set_style()
    rows = events.final_layer_rows(metrics, measure)
    rows = rows[rows["step"] <= max_step]
    tasks = list(dict.fromkeys(rows["task"]))
    fig, axes, used = _panels(max(1, len(tasks)), ncols, 3.3, 2.6)
    for ax, task in zip(used, tasks):
        sel = rows[rows["task"] == task]
        for (arm, _), run in sel.groupby(["arm", "run"], sort=False):
            run = run.sort_values("step")
            ax.plot(run["step"], run["value"], color=ARM_COLORS.get(arm, "0.3"), linewidth=0.9, alpha=0.8,
                    label=arm)
        settings = ", ".join(f"{level} {size}" for level, size in
                             sel[["level", "size"]].drop_duplicates().itertuples(index=False))
        ax.set_title(f"{task} ({settings})", fontsize="medium")
        _step_axis(ax, sel["step"].to_numpy())
        ax.set_ylabel(f"{measure}, final layer" if ax in axes[:, 0] else "")
    if not tasks:
        _no_run(used[0], f"no run records {measure}")
    unique = _legend_entries(used)
    if unique:
        fig.legend(unique.values(), unique.keys(), loc="upper center", ncol=len(unique), bbox_to_anchor=(0.5, 1.02),
                   fontsize="small", title="one line per run")
    fig.tight_layout(rect=(0, 0, 1, 0.88 if len(used) <= ncols else 0.94))
    return fig


def top_down_arms(by_arm, arms, warmup: float | None = None):
    """C3's statistic per arm (rows of :func:`geomcap.results.top_down_by_series` with an ``arm`` column),
    every arm of ``arms`` in that order, an arm with no run written out: left, each run's ``rho_step``
    (< 0: top-down; the bar is the arm's median); right, each run's half-drop steps (the line spans its
    informative layers' earliest to latest, the dot is their median; log scale), with ``warmup`` (the
    step the real runs' learning-rate warmup ends) as a dotted line."""
    set_style()
    fig, (ax_rho, ax_step) = plt.subplots(1, 2, figsize=(9.5, 3.4))
    rng = np.random.default_rng(0)  # the jitter that keeps equal values apart, the same at every draw
    for x, arm in enumerate(arms):
        rows = by_arm[by_arm["arm"] == arm]
        colour = ARM_COLORS.get(arm, "0.3")
        if rows.empty:
            for ax in (ax_rho, ax_step):
                ax.text(x, 0.75, "no run", transform=ax.get_xaxis_transform(), ha="center", color="0.4")
            continue
        rho = rows["rho_step"].to_numpy(float)
        defined = np.isfinite(rho)
        if defined.any():
            ax_rho.scatter(x + rng.uniform(-0.2, 0.2, defined.sum()), rho[defined], s=14, color=colour, alpha=0.7)
            ax_rho.plot([x - 0.3, x + 0.3], [np.median(rho[defined])] * 2, color="k", linewidth=1.5)
        offsets = np.linspace(-0.3, 0.3, len(rows)) if len(rows) > 1 else [0.0]
        for dx, run in zip(offsets, rows.itertuples()):
            steps = np.asarray(run.collapse_steps, dtype=float)
            if steps.size:
                ax_step.plot([x + dx] * 2, [steps.min(), steps.max()], color=colour, linewidth=1, alpha=0.7)
                ax_step.plot(x + dx, np.median(steps), "o", color=colour, markersize=3)
    for ax in (ax_rho, ax_step):
        ax.set_xticks(range(len(arms)))
        ax.set_xticklabels([f"{arm}\n({int((by_arm['arm'] == arm).sum())} runs)" for arm in arms])
        ax.set_xlim(-0.6, len(arms) - 0.4)
    ax_rho.axhline(0, color="0.3", linewidth=1)
    ax_rho.set_ylim(-1.1, 1.1)
    ax_rho.set_ylabel("rho_step (depth vs half-drop step)\n< 0: top-down")
    ax_step.set_yscale("log")
    ax_step.set_ylabel("half-drop step (informative layers)")
    if warmup:
        ax_step.axhline(warmup, color=PAPER_COLOR, linestyle=":", linewidth=1)
        ax_step.text(len(arms) - 0.45, warmup, "warmup ends", ha="right", va="bottom", fontsize="small",
                     color=PAPER_COLOR)
    fig.tight_layout()
    return fig


def selectivity_layers(selectivity, ncols: int = 3):
    """C4's control task (:func:`geomcap.results.selectivity_table`, with an optional ``arm`` column): one
    panel per arm, the probe's accuracy on the true answer (blue) and on the control task (red, dashed) per
    layer, averaged over the checkpoints below 50% exact match; thin lines one per run, thick the median
    over runs. Selectivity is the gap between the two."""
    set_style()
    table = selectivity if "arm" in selectivity else selectivity.assign(arm="runs")
    arms = list(dict.fromkeys(table["arm"]))
    fig, axes, used = _panels(max(1, len(arms)), ncols, 3.6, 2.8, sharey=True)
    for ax, arm in zip(used, arms):
        rows = table[table["arm"] == arm]
        for column, colour, style, label in (("probe", "C0", "-", "probe: true answer"),
                                             ("control", "C3", "--", "probe: control task")):
            for _, run in rows.groupby("run", sort=False):
                run = run.sort_values("layer")
                ax.plot(run["layer"], run[column], color=colour, linestyle=style, linewidth=0.7, alpha=0.35)
            median = rows.groupby("layer")[column].median()
            ax.plot(median.index, median.to_numpy(), color=colour, linestyle=style, linewidth=2.2,
                    marker="o", markersize=3, label=f"{label} (median)")
        ax.set_title(f"{arm} ({rows['run'].nunique()} runs)", fontsize="medium")
        ax.set_xlabel("layer (0 = embeddings)")
        ax.set_ylabel("probe accuracy" if ax in axes[:, 0] else "")
        ax.set_ylim(-0.02, 1.02)
    if not arms:
        _no_run(used[0], "no run records the control task")
    unique = _legend_entries(used)
    if unique:
        fig.legend(unique.values(), unique.keys(), loc="upper center", ncol=len(unique), bbox_to_anchor=(0.5, 1.03),
                   fontsize="small")
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    return fig


def acquisition_regime(summary, classes):
    """C6's regime: each acquired run's acquisition step against its final-layer RankMe recovery step (log
    axes), coloured by ``classes`` (a Series aligned with ``summary``: the difficulty from behaviour). On or
    below the diagonal a run was acquired by the time RankMe recovered: during the collapse, the paper's
    easy regime. Acquired runs whose collapse never recovered cannot be placed; the title counts them."""
    import pandas as pd

    set_style()
    acq = pd.to_numeric(summary["acquisition_step"], errors="coerce")
    rec = pd.to_numeric(summary["rankme_recovery_step"], errors="coerce")
    groups = pd.Series(np.asarray(classes), index=summary.index)
    placed = acq.notna() & rec.notna() & (acq > 0) & (rec > 0)
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    for name in [c for c in CLASS_COLORS if c in set(groups[placed])]:
        sel = placed & (groups == name)
        ax.scatter(rec[sel].astype(float), acq[sel].astype(float), s=18, color=CLASS_COLORS[name], alpha=0.8,
                   label=f"{name} ({int(sel.sum())})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    if placed.any():
        low = float(min(acq[placed].min(), rec[placed].min())) / 1.5
        high = float(max(acq[placed].max(), rec[placed].max())) * 1.5
        ax.plot([low, high], [low, high], color="0.3", linewidth=1, linestyle="--",
                label="acquired when RankMe recovers")
        ax.set_xlim(low, high)
        ax.set_ylim(low, high)
        ax.legend(title="class (behaviour)", fontsize="small", loc="lower right")  # below the diagonal: few runs
    else:
        _no_run(ax, "no acquired run with a RankMe recovery")
    during = int((placed & (acq <= rec)).sum())
    unplaced = int((acq.notna() & ~placed).sum())
    ax.set_title(f"acquired during the collapse: {during} of {int(acq.notna().sum())}"
                 + (f"\n({unplaced} acquired without a recovery, not drawn)" if unplaced else ""), fontsize="medium")
    ax.set_xlabel("RankMe recovery step (final layer)")
    ax.set_ylabel("acquisition step")
    fig.tight_layout()
    return fig


def grokking_curves(metrics_by_seed: dict, phases, nanda: dict):
    """The grokking runs' curves on one step axis: train and test accuracy, test loss (log), parameter norm,
    and RankMe of each layer at the answer position, one line style per seed (``metrics_by_seed``: seed ->
    one run's tidy metrics); solid vertical lines at each run's memorisation and acquisition
    (``phases``: :func:`geomcap.grokking.phase_table`), dotted grey ones at Nanda et al.'s phase ends
    (``nanda``: name -> step)."""
    import pandas as pd

    fig, axes = plt.subplots(1, 4, figsize=(15, 3.3))
    styles = ["-", "--", ":", "-."]
    for i, (seed, m) in enumerate(sorted(metrics_by_seed.items())):
        style = styles[i % len(styles)]
        for name, colour in (("train_accuracy", "0.5"), ("accuracy", "C0")):
            s, v = events.tidy_series(m, name)
            axes[0].plot(s, v, style, color=colour, lw=1, label=f"{name.replace('_', ' ')} (seed {seed})")
        s, v = events.tidy_series(m, "test_loss")
        axes[1].plot(s, v, style, color="C1", lw=1, label=f"seed {seed}")
        if (m["measure"] == "param_norm").any():
            s, v = events.tidy_series(m, "param_norm")
            axes[2].plot(s, v, style, color="C2", lw=1, label=f"seed {seed}")
        layers, s, values = events.layer_matrix(m, "rankme")
        for layer, row in zip(layers, values):
            axes[3].plot(s, row, style, color=f"C{3 + int(layer)}", lw=1,
                         label=f"layer {layer}" if i == 0 else None)
    for ax, title in zip(axes, ("accuracy", "test loss", "parameter norm", "RankMe at '='")):
        for row in phases.itertuples():
            for step, colour in ((row.memorised_step, "0.4"), (row.acquisition_step, "C3")):
                if not pd.isna(step):
                    ax.axvline(int(step), color=colour, lw=0.8, alpha=0.7)
        for step in nanda.values():
            ax.axvline(step, color="0.6", ls=":", lw=1)
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel("step")
    axes[1].set_yscale("log")
    axes[0].legend(fontsize="x-small", loc="center right")
    axes[3].legend(fontsize="x-small", loc="upper right")
    fig.tight_layout()
    return fig
