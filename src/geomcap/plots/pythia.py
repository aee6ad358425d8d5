"""Figures of the Pythia validation (or its offline stand-in): curves per benchmark and the gaps."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import seaborn as sns

from geomcap import events, paper
from geomcap.plots.style import set_style, step_axis, panels, paper_line, legend_above, bottom_xlabels


def pythia_curves(metrics, table, measure: str = "rankme", ncols: int = 2):
    """One panel per benchmark: accuracy (black, left axis; dotted: chance) and ``measure`` at the
    layers of ``table`` (right axis, one colour per layer) against the revision's training step.

    metrics: tidy table with a ``task`` column (the benchmark), e.g. ``results.load_metrics``;
    table: :func:`geomcap.results.gap_table`. Vertical lines: acquisition (red, solid) and the
    deepest shown layer's ``measure`` transition (blue, dashed).
    """
    import pandas as pd

    set_style()
    benchmarks = list(dict.fromkeys(table["benchmark"]))
    fig, axes, used = panels(len(benchmarks), ncols, 3.7, 2.5)
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
        step_axis(ax, steps)
        ax.set_title(f"{bench} ({deepest['level']})", fontsize="medium")
        ax.set_ylabel("accuracy" if ax in axes[:, 0] else "")
        twin.set_ylabel(measure if ax in axes[:, -1] or ax is used[-1] else "")
        twin.spines["right"].set_visible(True)
    handles, labels = [], []
    for a in (used[0], first_twin):
        h, l = a.get_legend_handles_labels()
        handles, labels = handles + h, labels + l
    unique = dict(zip(labels, handles))
    bottom_xlabels(axes)
    legend_above(fig, unique.values(), unique.keys(), ncol=min(3, len(unique)), fontsize="small")
    return fig



#: one colour per class of :func:`geomcap.diagnostics.deduction_shortcut` (and "all", black)
SHORTCUT_COLORS = {"all": "k", "shortcut right": "C2", "shortcut wrong": "C3", "no shortcut": "C0"}


def shortcut_curves(split, ncols: int = 2):
    """One panel per build: a deduction benchmark's accuracy over revisions, split by the unnamed-object
    shortcut (one line per class: black all items, green where the unnamed object is the answer, red where
    it is not, blue where every object is named), chance dotted, the acquisition level dashed
    (:func:`geomcap.events.acquisition_accuracy`: the protocol's rule on chance-corrected accuracy).

    split: :func:`geomcap.analysis.pythia_runs.shortcut_split` rows of one benchmark (``build``, ``step``,
    ``class``, ``items``, ``accuracy``, ``chance``). A model that deduces keeps the three classes together; one
    that answers with the unnamed object splits them to about 1, 0 and chance."""
    set_style()
    builds = list(dict.fromkeys(split["build"]))
    if split["benchmark"].nunique() != 1:
        raise ValueError(f"one benchmark per figure, got {sorted(split['benchmark'].unique())}")
    fig, axes, used = panels(len(builds), min(ncols, len(builds)), 3.7, 2.6)
    for ax, build in zip(used, builds):
        rows = split[split["build"] == build]
        for name, colour in SHORTCUT_COLORS.items():
            cls = rows[rows["class"] == name].sort_values("step")
            if cls["accuracy"].notna().any():
                items = int(cls["items"].iloc[0])
                ax.plot(cls["step"], cls["accuracy"], color=colour, linewidth=1.6 if name == "all" else 1.1,
                        marker="." if len(cls) < 40 else None, label=f"{name}")
                ax.annotate(f"{items}", (cls["step"].iloc[-1], cls["accuracy"].iloc[-1]), xytext=(3, 0),
                            textcoords="offset points", fontsize="small", color=colour, va="center")
        chance = float(rows["chance"].iloc[0])
        ax.axhline(chance, color="0.6", linestyle=":", linewidth=1, label="chance")
        ax.axhline(events.acquisition_accuracy(chance), color="0.4", linestyle="--", linewidth=1,
                   label="acquisition level")
        step_axis(ax, sorted(rows["step"].unique()))
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(build, fontsize="medium")
        ax.set_ylabel("accuracy" if ax in axes[:, 0] else "")
    bottom_xlabels(axes)
    handles, labels = used[0].get_legend_handles_labels()
    legend_above(fig, handles, labels, ncol=3, fontsize="small")
    return fig


def pythia_gaps(table, paper_gap_steps: int = paper.CLAIMS["C7"]["values"]["gap_steps"],
                paper_last_step: int = paper.CLAIMS["C7"]["values"]["training_steps"]):
    """The precursor gap (acquisition - transition) of each benchmark as a fraction of the run's
    training steps, beside the paper's (~49K of Pythia-2.8B's 143K steps on logical deduction).
    One marker per benchmark and layer of ``table`` (:func:`geomcap.results.gap_table`);
    benchmarks never acquired have no gap and are listed under the axis."""
    import pandas as pd

    set_style()
    data = table.assign(gap=pd.to_numeric(table["gap_fraction"], errors="coerce"))
    fig, ax = plt.subplots(figsize=(7.2, 3.8))
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
    ax.set_xlabel(textwrap.fill("no gap (never acquired): " + ", ".join(missing), 80) if missing else "",
                  fontsize="small", color="0.4")
    ax.set_ylim(min(-0.1, ax.get_ylim()[0]), max(0.5, ax.get_ylim()[1]))
    ax.set_ylabel("gap / training steps\n> 0: RankMe leads")
    handles, labels = ax.get_legend_handles_labels()
    if ax.get_legend() is not None:
        ax.get_legend().remove()
    legend_above(fig, handles, labels, ncol=3, fontsize="small")
    return fig



# --- Benchmarks ---
