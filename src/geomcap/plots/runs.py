"""Figures of runs: curves, per-layer heatmaps and probes, the collapse of each layer, and the arms
(real, control, warmup 0) side by side."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from geomcap import events
from geomcap.plots.style import (
    PAPER_COLOR, LEVEL_COLORS, ARM_COLORS, set_style, step_axis, panels, legend_entries, legend_above,
    bottom_xlabels, mark_empty,
)


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
    step_axis(ax_rank, steps)
    ax_acc.legend(loc="upper left", fontsize="small")
    ax_rank.legend(loc="best", fontsize="small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig



def collapse_grid(metrics, measure: str = "rankme", paper_floor: dict | None = None, ncols: int = 2):
    """One panel per task: the final layer's ``measure`` (solid) and test accuracy (dashed, right axis)
    against training step, one colour per level, one line per seed.

    metrics: tidy table with run columns (``geomcap.results.load_metrics``).
    paper_floor: {task: value} drawn as a dotted reference line (the paper's collapse floor).
    ncols: panels per row (two fit the book's column).
    """
    set_style()
    task_names = list(dict.fromkeys(metrics["task"]))
    fig, axes, _ = panels(len(task_names), ncols, 3.7, 2.5)
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
        step_axis(ax, metrics["step"].to_numpy())
        ax.set_ylabel(f"{measure}, final layer" if ax in axes[:, 0] else "")
        twin.spines["right"].set_visible(True)
    # one legend for every panel: the levels in their order, then the paper's line (wherever it is drawn)
    unique = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            unique.setdefault(label, handle)
    order = [lv for lv in LEVEL_COLORS if lv in unique] + [lb for lb in unique if lb not in LEVEL_COLORS]
    bottom_xlabels(axes)
    legend_above(fig, [unique[lb] for lb in order], order, ncol=len(order))
    return fig



def layer_heatmaps(metrics, runs, measure: str = "rankme", relative: bool = True, ncols: int = 3):
    """One panel per run: ``measure`` by layer (rows, 0 = embeddings at the bottom) and step (symlog).

    With ``relative`` each layer is divided by its value at initialisation, so
    the colour says how far that layer has collapsed (< 1, red) or expanded
    (> 1, blue); the colour scale is logarithmic and centred on 1.
    """
    from matplotlib.colors import LogNorm

    set_style()
    runs = list(runs.itertuples())
    fig, axes, _ = panels(len(runs), ncols, 2.3, 2.0)
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
        step_axis(ax, steps)  # symlog, ticks at 0 and the powers of ten from 10 (no "0" beside "10^0")
        ax.set_yticks(range(len(layers)), [str(layer) for layer in layers])
        ax.set_title(f"{run.task}/{run.level} {run.size} s{run.seed}", fontsize="small")
        ax.set_ylabel("layer" if ax in axes[:, 0] else "")
    bottom_xlabels(axes)
    fig.tight_layout()
    if mesh is not None:
        label = f"{measure} / its value at step 0" if relative else measure
        bar = fig.colorbar(mesh, ax=axes.ravel().tolist(), shrink=0.8, label=label)
        if relative:
            ticks = [1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8]
            bar.set_ticks(ticks, labels=["1/8", "1/4", "1/2", "1", "2", "4", "8"])
            bar.minorticks_off()
    return fig



def probe_curves(metrics, runs, ncols: int = 3):
    """One panel per run: the model's exact-match and first-token accuracy against the linear
    probes' accuracy at each layer (first answer token, held-out half of the probe batch)."""
    set_style()
    runs = list(runs.itertuples())
    fig, axes, _ = panels(len(runs), ncols, 2.45, 2.1, sharey=True)
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
        step_axis(ax, steps)
        ax.set_title(f"{run.task}/{run.level} {run.size} s{run.seed}", fontsize="small")
        ax.set_ylabel("accuracy" if ax in axes[:, 0] else "")
    bottom_xlabels(axes)
    unique = legend_entries(axes.flat)  # the deepest run's layers too; probe layers in depth order
    labels = sorted((lb for lb in unique if lb.startswith("probe")), key=lambda lb: int(lb.rsplit(" ", 1)[1]))
    labels += [lb for lb in unique if not lb.startswith("probe")]
    legend_above(fig, [unique[lb] for lb in labels], labels, ncol=min(4, len(labels)), fontsize="small")
    return fig



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
            step_axis(axes[row, col], rank["step"])
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



def layer_collapse_steps(by_series, ncols: int = 2):
    """One panel per series of :func:`geomcap.results.top_down_by_series`: each informative layer's
    half-drop step (log y) against its depth (``collapse_layers``), one line per run, coloured by task.
    Lines that fall from left to right are top-down (deeper layers collapse first). Panel titles count the top-down runs
    among those with a defined statistic."""
    set_style()
    series = list(dict.fromkeys(by_series["series"]))
    fig, axes, used = panels(max(1, len(series)), ncols, 3.7, 2.8, sharey=True)
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
    unique = legend_entries(used)
    legend_above(fig, unique.values(), unique.keys(), ncol=min(4, len(unique)), fontsize="small")
    return fig



#: one colour per arm (real runs, negative controls, warmup 0), in every figure that compares them



def arm_curves(metrics, measure: str = "rankme", max_step: int = 1000, ncols: int = 2, panel: str = "task"):
    """One panel per task (``panel``: or per value of another column, "size" for one setting at several
    presets): the final layer's ``measure`` against training step up to ``max_step``, one thin line per run
    (seed), coloured by its arm (``metrics``' ``arm`` column: "real", "control", "warmup 0", "float32",
    "bf16"), so the negative controls are seen beside the real runs of the same settings. Panel titles name
    the panel's value and the other settings in it (task, level, size); one legend lists the arms drawn."""
    set_style()
    rows = events.final_layer_rows(metrics, measure)
    rows = rows[rows["step"] <= max_step]
    if panel not in ("task", "level", "size"):
        raise ValueError(f"panel must be 'task', 'level' or 'size', got {panel!r}")
    keys = list(dict.fromkeys(rows[panel]))
    others = [c for c in ("task", "level", "size") if c != panel]
    fig, axes, used = panels(max(1, len(keys)), ncols, 3.7, 2.5)
    for ax, key in zip(used, keys):
        sel = rows[rows[panel] == key]
        for (arm, _), run in sel.groupby(["arm", "run"], sort=False):
            run = run.sort_values("step")
            ax.plot(run["step"], run["value"], color=ARM_COLORS.get(arm, "0.3"), linewidth=0.9, alpha=0.8,
                    label=arm)
        settings = ", ".join(" ".join(map(str, setting))
                             for setting in sel[others].drop_duplicates().itertuples(index=False))
        ax.set_title(textwrap.fill(f"{key} ({settings})", 36), fontsize="medium")  # many settings: lines, not width
        step_axis(ax, sel["step"].to_numpy())
        ax.set_ylabel(f"{measure}, final layer" if ax in axes[:, 0] else "")
    if not keys:
        mark_empty(used[0], f"no run records {measure}")
    bottom_xlabels(axes)
    unique = legend_entries(used)
    if unique:
        legend_above(fig, unique.values(), unique.keys(), ncol=len(unique), title="one line per run")
    else:
        fig.tight_layout()
    return fig



def top_down_arms(by_arm, arms, warmup: float | None = None):
    """C3's statistic per arm (rows of :func:`geomcap.results.top_down_by_series` with an ``arm`` column),
    every arm of ``arms`` in that order, an arm with no run written out: left, each run's ``rho_step``
    (< 0: top-down; the bar is the arm's median); right, each run's half-drop steps (the line spans its
    informative layers' earliest to latest, the dot is their median; log scale), with ``warmup`` (the
    step the real runs' learning-rate warmup ends) as a dotted line."""
    set_style()
    fig, (ax_rho, ax_step) = plt.subplots(1, 2, figsize=(7.4, 3.4))
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
    ax_rho.set_ylabel("rho_step (depth vs\nhalf-drop step; < 0: top-down)")
    ax_step.set_yscale("log")
    ax_step.set_ylabel("half-drop step\n(informative layers)")
    if warmup:
        ax_step.axhline(warmup, color=PAPER_COLOR, linestyle=":", linewidth=1)
        ax_step.text(len(arms) - 0.45, warmup, "warmup ends", ha="right", va="bottom", fontsize="small",
                     color=PAPER_COLOR)
    fig.tight_layout()
    return fig



def selectivity_layers(selectivity, ncols: int = 2):
    """C4's control task (:func:`geomcap.results.selectivity_table`, with an optional ``arm`` column): one
    panel per arm, the probe's accuracy on the true answer (blue) and on the control task (red, dashed) per
    layer, averaged over the checkpoints below 50% exact match; thin lines one per run, thick the median
    over runs. Selectivity is the gap between the two."""
    set_style()
    table = selectivity if "arm" in selectivity else selectivity.assign(arm="runs")
    arms = list(dict.fromkeys(table["arm"]))
    fig, axes, used = panels(max(1, len(arms)), ncols, 3.7, 2.8, sharey=True)
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
        mark_empty(used[0], "no run records the control task")
    unique = legend_entries(used)
    if unique:
        legend_above(fig, unique.values(), unique.keys(), ncol=len(unique), fontsize="small")
    else:
        fig.tight_layout()
    return fig
