"""Figures. One style for the whole project; notebooks call these functions.

Every function takes data (a tidy metrics table or arrays), draws on a given
or new matplotlib Axes, and returns the Figure. Training steps go on a
symlog axis: the collapse lives in the first few percent of training.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from geomcap import events

PAPER_COLOR = "0.35"


def set_style() -> None:
    """The project's figure style (seaborn 'ticks', colour-blind palette)."""
    sns.set_theme(style="ticks", palette="colorblind", font_scale=0.95,
                  rc={"figure.dpi": 110, "savefig.dpi": 150, "axes.spines.top": False,
                      "axes.spines.right": False, "legend.frameon": False})


def _step_axis(ax, steps) -> None:
    ax.set_xscale("symlog", linthresh=max(1, int(np.min(np.asarray(steps)[np.asarray(steps) > 0], initial=1))))
    ax.set_xlim(0, np.max(steps))
    ax.set_xlabel("training step")


def paper_line(ax, value: float, label: str, axis: str = "y") -> None:
    """The paper's value as a dashed reference line."""
    draw = ax.axhline if axis == "y" else ax.axvline
    draw(value, color=PAPER_COLOR, linestyle="--", linewidth=1, label=label)


def run_curves(metrics, title: str | None = None, measure: str = "rankme"):
    """Accuracy (top) and per-layer RankMe (bottom) of one run against training step.

    Marks the acquisition step (accuracy > 0.5 for 3 checkpoints) and the final
    layer's collapse floor and recovery.
    """
    set_style()
    fig, (ax_acc, ax_rank) = plt.subplots(2, 1, figsize=(7, 5.6), sharex=True,
                                          gridspec_kw={"height_ratios": [1, 1.4]})
    steps, acc = events.tidy_series(metrics, "accuracy")
    _, train_acc = events.tidy_series(metrics, "train_accuracy")
    ax_acc.plot(steps, acc, label="test accuracy (exact match)", color="k")
    ax_acc.plot(steps, train_acc, label="train accuracy", color="0.6", linewidth=1)
    ax_acc.axhline(0.5, color="0.8", linewidth=0.8)
    ax_acc.set_ylabel("accuracy")
    ax_acc.set_ylim(-0.02, 1.02)

    layers, l_steps, values = events.layer_matrix(metrics, measure)
    colors = sns.color_palette("viridis", len(layers))
    for layer, row, color in zip(layers, values, colors):
        name = "embeddings" if layer == 0 else ("final (after ln_f)" if layer == layers[-1] else f"block {layer}")
        ax_rank.plot(l_steps, row, color=color, label=f"layer {layer}: {name}")
    ax_rank.set_ylabel(f"{measure} (effective dimensions)")

    summary = events.summarize_run(metrics)
    acq = summary["acquisition_step"]
    for ax in (ax_acc, ax_rank):
        if acq is not None:
            ax.axvline(acq, color="C3", linewidth=1, label="acquisition" if ax is ax_acc else None)
    c = summary["collapse"]
    if c is not None and measure == "rankme":
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
