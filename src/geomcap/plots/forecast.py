"""The forecast figure: recall against false alarms per signal, with the baselines (notebook 04)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from geomcap.plots.style import PANEL_WIDTH, legend_above, legend_entries, mark_alarms, set_style

#: one colour per signal of the forecast figure, behaviour in greys and oranges, geometry in blues
SIGNAL_COLORS = {"rankme": "C0", "rankme (any layer)": "C9", "rankme_centred": "C4", "test_loss": "C1",
                 "train_accuracy": "0.35", "first_token_accuracy": "C5", "param_norm": "C2"}


def forecast_figure(sensitivity, random_curve, horizon: int):
    """Two panels, recall at ``horizon`` on the y axis of both, one line per signal through the band's scales
    (``sensitivity``: :func:`geomcap.results.band_sensitivity`; the protocol's scale 1 drawn as a large
    marker): (a) against false alarms per 1,000 steps on the shuffled-answer controls, where nothing is
    learnt; (b) against alarms per 1,000 armed steps before acquisition on the real runs, beside the recall
    of random alarms at that rate (``random_curve``: :func:`geomcap.results.random_recall_curve`, dashed). A
    signal with skill sits above the dashed line in (b) and to the left in (a)."""
    set_style()
    fig, axes = plt.subplots(1, 2, figsize=(1.75 * PANEL_WIDTH, 3.2), sharey=True)  # shown at its own size
    for signal, rows in sensitivity.groupby("signal", sort=False):
        rows = rows.sort_values("scale")
        colour = SIGNAL_COLORS.get(signal, "0.6")
        for ax, x in zip(axes, ("control_alarms_per_1000", "alarms_per_1000_armed")):
            ax.plot(rows[x], rows["recall"], "-o", color=colour, ms=3, lw=1, label=signal.replace("_", " "))
            protocol = rows[rows["scale"] == 1.0]
            ax.plot(protocol[x], protocol["recall"], "o", color=colour, ms=8, mfc="white", mew=1.5)
    axes[1].plot(random_curve["alarms_per_1000"], random_curve["recall"], "--", color="0.5", lw=1,
                 label="random alarms at that rate")
    axes[0].set_xlabel("false alarms per 1,000 steps\n(shuffled-answer controls)")
    axes[1].set_xlabel("alarms per 1,000 armed steps\nbefore acquisition (hard runs)")
    axes[0].set_ylabel(f"recall: acquisitions with an alarm\nwithin {horizon} steps before")
    for ax in axes:
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlim(left=-0.05)
    entries = legend_entries(axes)
    entries["the protocol's band (scale 1)"] = plt.Line2D([], [], marker="o", ls="", color="0.3", mfc="white", ms=8)
    legend_above(fig, entries.values(), entries.keys(), ncol=3)
    return fig


def alarm_curves(metrics, alarms, measures=("rankme", "test_loss"), armed_from=None, acquisition=None,
                 title: str = ""):
    """One panel per measure of one run (``metrics``: tidy; a per-layer measure at its final layer): its series
    on the step axis, a triangle at each of its alarms (``alarms``: {measure: [alarm dict]}, as
    ``geomcap show --json`` lists them, or a monitor's ``alarms`` list with a ``measure`` key), a grey line where
    the alarms were armed (``armed_from``) and a red one at ``acquisition``."""
    from geomcap import events
    from geomcap.plots.style import panels, step_axis

    set_style()
    if isinstance(alarms, list):  # a monitor's list: one dict per alarm, with its measure
        grouped = {}
        for a in alarms:
            grouped.setdefault(a["measure"], []).append(a)
        alarms = grouped
    present = [m for m in measures if (metrics["measure"] == m).any()]
    fig, _, axes = panels(len(present), 2, PANEL_WIDTH, 2.6)
    for ax, measure in zip(axes, present):
        layer = events.final_layer(metrics, measure)
        steps, values = events.tidy_series(metrics, measure, layer=layer)
        ax.plot(steps, values, color=SIGNAL_COLORS.get(measure, "C0"), lw=1)
        raised = [a["step"] for a in alarms.get(measure, []) if a["layer"] == layer]
        mark_alarms(ax, raised, SIGNAL_COLORS.get(measure, "C0"))
        for step, colour in ((armed_from, "0.5"), (acquisition, "C3")):
            if step is not None:
                ax.axvline(step, color=colour, lw=0.8, ls="--" if colour == "0.5" else "-")
        step_axis(ax, steps)
        ax.set_title(f"{measure.replace('_', ' ')}" + (f", layer {layer}" if layer >= 0 else "")
                     + f": {len(raised)} alarm(s)", fontsize="medium")
    if title:
        fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    return fig


def paper_scale_value(claim: str, statistic: str) -> float | None:
    """The paper's figure (:data:`geomcap.paper.CLAIMS`) for a statistic of :func:`geomcap.results.claims_by_size`,
    where it states one."""
    from geomcap.paper import CLAIMS

    v = CLAIMS[claim]["values"]
    if (claim, statistic) == ("C1", "ordered"):
        return v["ordered"] / v["combinations"]
    if (claim, statistic) == ("C3", "top-down"):
        return v["top_down"] / v["pairs"]
    key = {("C2", "MOD floor"): "mod_floor", ("C5", "recall"): "rankme_rate",
           ("C8", "trajectory rho"): "rho"}.get((claim, statistic))
    return None if key is None else v[key]


def claims_by_size_figure(table, statistics=None, reference: str = "405k"):
    """Each claim's statistic against the preset's parameters (log axis, the same range in every panel), one
    panel per statistic (``table``: :func:`geomcap.results.claims_by_size`; ``statistics``: the (claim,
    statistic) pairs to draw, default every one present): the real runs as a line with their 95% intervals
    over settings, the negative controls beside them as open markers, the paper's figure dashed where it
    states one (``paper_scale_value``, from the paper's figures in :data:`geomcap.paper.CLAIMS`); each point's preset named on the x axis.
    C8's panel greys the sizes under :data:`~geomcap.claims.c8.MIN_SIZE_RATIO` times the ``reference`` proxy,
    outside the claim's regime."""
    from geomcap.claims.c8 import MIN_SIZE_RATIO
    from geomcap.plots.style import ARM_COLORS, paper_line, panels

    set_style()
    keys = statistics or list(dict.fromkeys(zip(table["claim"], table["statistic"])))
    fig, _, axes = panels(len(keys), 2, PANEL_WIDTH, 2.4)
    span = table["parameters"].dropna()
    xlim = (span.min() / 1.6, span.max() * 1.6) if len(span) else None
    proxy = table.loc[table["size"] == reference, "parameters"].dropna()
    for ax, (claim, statistic) in zip(axes, keys):
        rows = table[(table["claim"] == claim) & (table["statistic"] == statistic)].sort_values("parameters")
        for arm, marker in (("real", "o"), ("control", "s")):
            at = rows[rows["arm"] == arm]
            if at.empty:
                continue
            x, y = at["parameters"].to_numpy(float), at["value"].to_numpy(float)
            err = np.vstack([y - at["low"].to_numpy(float), at["high"].to_numpy(float) - y])
            colour = ARM_COLORS.get(arm, "0.5")
            ax.errorbar(x, y, yerr=np.where(np.isfinite(err), np.abs(err), 0), fmt=marker + ("-" if arm == "real" else ""),
                        color=colour, ms=4, lw=1, capsize=2, mfc="white" if arm == "control" else colour, label=arm)
        ax.set_xscale("log")
        if xlim is not None:
            ax.set_xlim(*xlim)
        if claim == "C8" and len(proxy) and xlim is not None:
            ax.axvspan(xlim[0], MIN_SIZE_RATIO * proxy.iloc[0], color="0.9", lw=0, zorder=0,
                       label=f"under {MIN_SIZE_RATIO}x the proxy")
        paper = paper_scale_value(claim, statistic)
        if paper is not None:
            paper_line(ax, paper, "the paper")
        named = rows.drop_duplicates("size")
        ax.set_xticks(named["parameters"], [f"{s}" for s in named["size"]], rotation=45, fontsize="small")
        ax.minorticks_off()
        ax.set_title(f"{claim}: {statistic}", fontsize="medium")
    entries = legend_entries(axes)
    legend_above(fig, entries.values(), entries.keys())
    return fig


def c2_floor_figure(floors, reference: str = "405k"):
    """C2's collapse floors against the preset's parameters, one panel per task, one line per level
    (``floors``: :func:`geomcap.results.c2_floors_by_level`), with their 95% intervals over seeds; the paper's
    MOD floor dashed. Each point's preset named on the x axis."""
    from geomcap.plots.style import LEVEL_COLORS, panels, paper_line

    set_style()
    tasks = list(dict.fromkeys(floors["task"]))
    fig, _, axes = panels(len(tasks), 2, PANEL_WIDTH, 2.6)
    span = floors["parameters"].dropna()
    for ax, task in zip(axes, tasks):
        at_task = floors[floors["task"] == task]
        for level, at in at_task.groupby("level", sort=False):
            x, y = at["parameters"].to_numpy(float), at["value"].to_numpy(float)
            err = np.vstack([y - at["low"].to_numpy(float), at["high"].to_numpy(float) - y])
            ax.errorbar(x, y, yerr=np.where(np.isfinite(err), np.abs(err), 0), fmt="o-", ms=4, lw=1, capsize=2,
                        color=LEVEL_COLORS.get(level, "0.5"), label=level)
        if task == "mod":
            paper_line(ax, paper_scale_value("C2", "MOD floor"), "the paper (MOD)")
        ax.set_xscale("log")
        if len(span):
            ax.set_xlim(span.min() / 1.6, span.max() * 1.6)
        named = at_task.drop_duplicates("size").sort_values("parameters")
        ax.set_xticks(named["parameters"], list(named["size"]), rotation=45, fontsize="small")
        ax.minorticks_off()
        ax.set_title(f"{task.upper()}: collapse floor", fontsize="medium")
        ax.set_ylabel("RankMe at the floor")
    entries = legend_entries(axes)
    legend_above(fig, entries.values(), entries.keys(), ncol=len(entries))
    return fig


def c1_recovery_figure(thresholds):
    """C1 against the recovery threshold (``thresholds``: :func:`geomcap.results.c1_recovery_thresholds`):
    left, the median final-layer RankMe at initialisation and at the floor per preset (what a recovery is
    measured from); right, the share of acquired runs ordered collapse, recovery, acquisition, one line per
    ``recovery_fraction``, the protocol's solid. Presets on a log axis of parameters, each named."""
    from geomcap.analysis.protocol import RECOVERY_FRACTION
    from geomcap.plots.style import panels

    set_style()
    fig, _, (levels, ordered) = panels(2, 2, PANEL_WIDTH, 2.6)
    sizes = thresholds.drop_duplicates("size").sort_values("parameters")
    for column, marker in (("initial", "o"), ("floor", "s")):
        levels.plot(sizes["parameters"], sizes[column], marker + "-", ms=4, lw=1, label=f"RankMe {column}")
    levels.set_ylim(bottom=0)
    levels.set_title("final layer's RankMe", fontsize="medium")
    for k, (fraction, at) in enumerate(thresholds.groupby("recovery_fraction")):
        protocol = np.isclose(fraction, RECOVERY_FRACTION)
        ordered.plot(at["parameters"], at["ordered"], marker="o", ms=4, lw=1.6 if protocol else 1,
                     ls="-" if protocol else ":", color=f"C{k + 2}",
                     label=f"recovery at {fraction:g} of the drop" + (" (protocol)" if protocol else ""))
    ordered.set_ylim(-0.05, 1.05)
    ordered.set_title("C1: acquired runs ordered", fontsize="medium")
    for ax in (levels, ordered):
        ax.set_xscale("log")
        ax.set_xticks(sizes["parameters"], list(sizes["size"]), rotation=45, fontsize="small")
        ax.minorticks_off()
    entries = legend_entries([levels, ordered])
    legend_above(fig, entries.values(), entries.keys(), ncol=2)
    return fig
