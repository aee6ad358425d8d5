"""Figures of the claims across runs: precursor leads, measures aligned on acquisition, the proxy's
trajectories and which proxy predicts which task, the effects per claim beside the controls, the acquisition
regime, grokking."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.ticker import MaxNLocator

from geomcap import events
from geomcap.plots.style import (
    PAPER_COLOR, LEVEL_COLORS, CLASS_COLORS, SIZE_COLORS, ARM_COLORS, set_style, step_axis, panels,
    legend_entries, legend_above, bottom_xlabels, mark_empty, mark_alarms,
)


def lead_strips(summary, measures, groups, title: str = "class"):
    """Each measure's lead over acquisition per run, in checkpoints (top, symlog) and as a share of
    the acquisition step (bottom), one column per measure, coloured by ``groups`` (a Series aligned with
    ``summary``: a difficulty class or a level). Points above 0 lead; the dashed line on the left is the
    paper's reading (a lead of :data:`~geomcap.analysis.protocol.MIN_LEAD_CHECKPOINTS` checkpoints), the dashed line on top. Measures
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
    fig, (ax_c, ax_s) = plt.subplots(2, 1, figsize=(7.2, 6.4), sharex=True)
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
    ax_s.tick_params(axis="x", labelrotation=30)
    for label in ax_s.get_xticklabels():
        label.set_horizontalalignment("right")
    ax_c.set_yscale("symlog", linthresh=2)
    ax_c.axhline(events.MIN_LEAD_CHECKPOINTS, color=PAPER_COLOR, linestyle="--", linewidth=1)
    ax_c.set_ylabel("lead over acquisition\n(checkpoints; > 0: first)")
    ax_s.set_ylabel("lead / acquisition step")
    legend = ax_s.get_legend()
    if legend is not None:
        handles, labels = ax_s.get_legend_handles_labels()
        legend.remove()
        legend_above(fig, handles, labels, ncol=len(labels), title=title, fontsize="small")
    else:
        fig.tight_layout()
    return fig



def aligned_measures(metrics, summary, measures, ncols: int = 2, max_share: float = 2.0):
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
    fig, grid, axes = panels(max(len(present), 1), ncols, 3.7, 2.5, sharex=True, sharey=True)
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
    handles = legend_entries(axes)
    if handles:
        fig.legend(handles.values(), handles.keys(), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=min(len(handles), 3), fontsize="small", frameon=False)
    fig.tight_layout()
    return fig



def proxy_trajectories(metrics, pairs, small: str, large: str, measure: str = "rankme",
                       correlations=None, ncols: int = 2):
    """One panel per task: the final layer's ``measure`` of the small and large preset against
    training step, each divided by its value at step 0 (the presets' widths differ), one line
    per run of a pair (each level and seed of the task). pairs: :func:`geomcap.results.proxy_pairs`; correlations: optional
    :func:`geomcap.results.trajectory_correlation`, whose median Spearman rho titles each panel."""
    set_style()
    task_names = list(dict.fromkeys(pairs["task"]))
    fig, axes, used = panels(max(1, len(task_names)), ncols, 3.7, 2.5, sharey=False)
    paired = set(pairs["run_small"]) | set(pairs["run_large"])
    rank = events.final_layer_rows(metrics[metrics["run"].isin(paired)], measure)  # the axis spans these runs
    for ax, task in zip(used, task_names):
        for pair in pairs[pairs["task"] == task].itertuples():
            for run, size, color in ((pair.run_small, small, SIZE_COLORS[0]), (pair.run_large, large, SIZE_COLORS[1])):
                series = rank[rank["run"] == run].sort_values("step")
                ax.plot(series["step"], series["value"] / series["value"].iloc[0], color=color,
                        linewidth=1.2, alpha=0.85, label=size)
        title = task
        if correlations is not None and len(correlations):
            rho = correlations.loc[correlations["task"] == task, "spearman"].median()
            title = f"{task} (Spearman rho {rho:.2f})"
        ax.set_title(title, fontsize="medium")
        ax.axhline(1, color="0.85", linewidth=0.8)
        step_axis(ax, rank["step"])
        ax.set_ylabel(f"{measure} / {measure} at step 0" if ax in axes[:, 0] else "")
    bottom_xlabels(axes)
    handles, labels = used[0].get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    fig.tight_layout()
    # below the panels: above them, a one-row figure's legend ran into the panel titles
    fig.legend(unique.values(), unique.keys(), loc="upper center", ncol=len(unique), bbox_to_anchor=(0.5, 0.0),
               fontsize="small", title="final layer of", frameon=False)
    return fig



def cross_task_matrix(cross, small: str, large: str, level: str | None = None):
    """Which small run predicts which large run: the Spearman rho of every small-preset run's final-layer
    trajectory against every large-preset run's, median over seeds, one cell per (task at ``small``, task at
    ``large``) of one level (default the level with most tasks), the same task's cells outlined. cross:
    :func:`geomcap.results.cross_task_correlation`. A proxy predicts its own task where the outlined
    diagonal stands out of its column; a column of equal cells is a trajectory shape every task shares."""
    set_style()
    if level is None:
        level = cross.groupby("level")["task_large"].nunique().idxmax()
    at = cross[cross["level"] == level]
    matrix = at.pivot_table(index="task_small", columns="task_large", values="spearman", aggfunc="median")
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * matrix.shape[1], 0.9 + 0.45 * matrix.shape[0]))
    mesh = ax.pcolormesh(matrix.to_numpy(float), cmap="RdBu_r", vmin=-1, vmax=1)
    for (i, j), value in np.ndenumerate(matrix.to_numpy(float)):
        if np.isfinite(value):
            ax.text(j + 0.5, i + 0.5, f"{value:.2f}", ha="center", va="center", fontsize="small",
                    color="white" if abs(value) > 0.6 else "black")
        if matrix.index[i] == matrix.columns[j]:
            ax.add_patch(plt.Rectangle((j, i), 1, 1, fill=False, edgecolor="black", linewidth=2))
    ax.set_xticks(np.arange(matrix.shape[1]) + 0.5, matrix.columns)
    ax.set_yticks(np.arange(matrix.shape[0]) + 0.5, matrix.index)
    ax.invert_yaxis()
    ax.set_xlabel(f"task at {large} (the run to predict)")
    ax.set_ylabel(f"task at {small} (the proxy)")
    ax.set_title(f"{level}: Spearman rho of the final layer's RankMe", fontsize="medium")
    fig.colorbar(mesh, ax=ax, label="rho", shrink=0.8)
    fig.tight_layout()
    return fig


# --- Sensitivity to the unstated training settings ---



def _ticks_inside(ax, values) -> None:
    """An open-ended x axis whose tick labels stay inside it: ticks only within the values' range, the view
    15% wider on each side (a label centred on the axis's edge would widen a saved figure by half its own
    width)."""
    values = values[np.isfinite(values)]
    if not len(values):
        return
    lo, hi = float(values.min()), float(values.max())
    pad = 0.15 * (hi - lo) if hi > lo else 0.1 * max(abs(hi), 1.0)
    ticks = MaxNLocator(4).tick_values(lo, hi)
    ax.set_xticks([t for t in ticks if lo - 0.05 * pad <= t <= hi + 0.05 * pad] or [(lo + hi) / 2])
    ax.set_xlim(lo - pad, hi + pad)


def claim_effects_figure(effects):
    """Per claim, the effect in the real runs beside the controls, each a point with its 95% interval over
    settings (:func:`geomcap.results.claim_effects`): one panel per claim, one row per arm; an arm with no
    run is written out, not drawn."""
    set_style()
    claims = list(dict.fromkeys(effects["claim"]))
    fig, _, used = panels(max(1, len(claims)), 2, 3.6, 2.1)
    colours = ARM_COLORS
    for ax, claim in zip(used, claims):
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
        ax.set_yticklabels([f"{arm} ({n})" for arm, n in zip(rows["arm"][::-1], rows["runs"][::-1])])
        ax.set_ylim(-0.6, len(rows) - 0.4)
        statistic = rows["statistic"].iloc[0]
        if "floor" not in statistic:
            ax.set_xlim(-0.05, 1.05)
        else:
            _ticks_inside(ax, rows[["value", "low", "high"]].to_numpy(dtype=float))
        ax.set_title(claim, fontsize="medium")
        ax.set_xlabel(statistic)
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig



# --- The negative controls beside the real runs (claims C1-C4) ---



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
        mark_empty(ax, "no acquired run with a RankMe recovery")
    during = int((placed & (acq <= rec)).sum())
    unplaced = int((acq.notna() & ~placed).sum())
    ax.set_title(f"acquired during the collapse: {during} of {int(acq.notna().sum())}"
                 + (f"\n({unplaced} acquired without a recovery, not drawn)" if unplaced else ""), fontsize="medium")
    ax.set_xlabel("RankMe recovery step (final layer)")
    ax.set_ylabel("acquisition step")
    fig.tight_layout()
    return fig



def twin_acquisition(table, measure: str = "rankme"):
    """The twins (:func:`geomcap.results.twin_table`): per task x level x size one panel, per seed one column
    of points: the acquisition step of the unperturbed run (open circle) and of each twin (dots), and
    ``measure``'s transition step of each (crosses). Twins that never acquired are not drawn; the panel's
    title counts them."""
    import pandas as pd

    set_style()
    groups = list(table.groupby(["task", "level", "size"], sort=False)) if len(table) else []
    fig, _, axes = panels(max(1, len(groups)), 2, 3.7, 3.0)
    column = f"{measure}_transition_step"
    for ax, ((task, level, size), g) in zip(axes, groups):
        acq = pd.to_numeric(g["acquisition_step"], errors="coerce")
        tr = pd.to_numeric(g[column], errors="coerce") if column in g else pd.Series(np.nan, index=g.index)
        seeds = sorted(g["seed"].unique())
        x = g["seed"].map({s: i for i, s in enumerate(seeds)}).astype(float) + (g["twin"] - 1.5) * 0.08
        twin, plain = g["twin"] > 0, g["twin"] == 0
        ax.scatter(x[plain], acq[plain], s=46, facecolors="none", edgecolors="k", label="acquisition, unperturbed")
        ax.scatter(x[twin], acq[twin], s=18, color="k", label="acquisition, twin")
        ax.scatter(x, tr, s=22, marker="x", color=CLASS_COLORS["hard"], label=f"{measure} transition")
        ax.set_xticks(range(len(seeds)), [f"seed {s}" for s in seeds])
        ax.set_xlim(-0.6, len(seeds) - 0.4)
        never = int((acq.isna()).sum())
        ax.set_title(f"{task}/{level} {size}" + (f" ({never} never acquired)" if never else ""), fontsize="medium")
        ax.set_ylabel("step")
    if not groups:
        mark_empty(axes[0], "no twins")
    handles = legend_entries(axes)
    if handles:
        legend_above(fig, handles.values(), handles.keys(), ncol=2, fontsize="small")
    else:
        fig.tight_layout()
    return fig


def grokking_curves(metrics_by_seed: dict, phases, nanda: dict, alarms_by_seed: dict | None = None):
    """The grokking runs' curves on one step axis, one panel each (two per row): train and test accuracy,
    test loss (log), parameter norm, and RankMe of each layer at the answer position, one line style per
    seed (``metrics_by_seed``: seed -> one run's tidy metrics); solid vertical lines at each run's
    memorisation and acquisition (``phases``: :func:`geomcap.grokking.phase_table`), dotted grey ones at
    Nanda et al.'s phase ends (``nanda``: name -> step). ``alarms_by_seed`` (seed -> {measure: [alarm dict]},
    as ``geomcap show --json`` lists them): every alarm of the test loss, the parameter norm and RankMe (any
    layer) as a triangle along the top of its panel, one row per seed. One legend above the panels says which
    is which."""
    import pandas as pd
    from matplotlib.lines import Line2D

    set_style()
    names = ("accuracy", "test loss", "parameter norm", "RankMe at '='")
    fig, _, used = panels(len(names), 2, 3.7, 2.6, sharex=True)
    axes = dict(zip(names, used))  # panel by name: what each one draws, and what is marked on it
    styles = ["-", "--", ":", "-."]
    seeds = sorted(metrics_by_seed)
    for i, seed in enumerate(seeds):
        m, style = metrics_by_seed[seed], styles[i % len(styles)]
        for name, colour, label in (("train_accuracy", "0.5", "train"), ("accuracy", "C0", "test")):
            s, v = events.tidy_series(m, name)
            axes["accuracy"].plot(s, v, style, color=colour, lw=1, label=label if i == 0 else None)
        s, v = events.tidy_series(m, "test_loss")
        axes["test loss"].plot(s, v, style, color="C1", lw=1)
        if (m["measure"] == "param_norm").any():
            s, v = events.tidy_series(m, "param_norm")
            axes["parameter norm"].plot(s, v, style, color="C2", lw=1)
        layers, s, values = events.layer_matrix(m, "rankme")
        for layer, row in zip(layers, values):
            axes["RankMe at '='"].plot(s, row, style, color=f"C{3 + int(layer)}", lw=1,
                                       label=f"layer {layer}" if i == 0 else None)
    for i, seed in enumerate(seeds):
        found = (alarms_by_seed or {}).get(seed) or {}
        for measure, title in (("test_loss", "test loss"), ("param_norm", "parameter norm"),
                               ("rankme", "RankMe at '='")):
            mark_alarms(axes[title], sorted({a["step"] for a in found.get(measure, [])}), "k", y=1.0 - 0.06 * i)
    for title, ax in axes.items():
        for row in phases.itertuples():
            for step, colour in ((row.memorised_step, "0.4"), (row.acquisition_step, "C3")):
                if not pd.isna(step):
                    ax.axvline(int(step), color=colour, lw=0.8, alpha=0.7)
        for step in nanda.values():
            ax.axvline(step, color="0.6", ls=":", lw=1)
        ax.set_title(title, fontsize="medium")
    for ax in used[-2:]:
        ax.set_xlabel("step")
    axes["test loss"].set_yscale("log")
    axes["accuracy"].legend(fontsize="small", loc="center right")
    axes["RankMe at '='"].legend(fontsize="small", loc="upper right")
    keys = [Line2D([], [], color="k", ls=styles[i % len(styles)], lw=1, label=f"seed {seed}")
            for i, seed in enumerate(seeds)]
    keys += [Line2D([], [], color="0.4", lw=0.8, label="memorised"), Line2D([], [], color="C3", lw=0.8, label="acquired"),
             Line2D([], [], color="0.6", ls=":", lw=1, label="Nanda et al.'s phases")]
    if alarms_by_seed:
        keys.append(Line2D([], [], color="k", marker="v", ls="", ms=4, label="alarms (a row per seed)"))
    legend_above(fig, keys, [k.get_label() for k in keys], ncol=3, fontsize="small")
    return fig
