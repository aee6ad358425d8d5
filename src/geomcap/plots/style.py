"""The shared style of every figure: colours, the step axis, panels, the paper's reference lines."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns



PAPER_COLOR = "0.35"



LEVEL_COLORS = {"easy": "C2", "medium": "C0", "hard": "C3"}  # green, blue, vermilion: C1 (orange) is too close to C3



CLASS_COLORS = {"easy": "C2", "intermediate": "C1", "hard": "C3", "not acquired": "0.6"}



SIZE_COLORS = ("C0", "C3", "C2", "C4", "C1", "C5")



#: one colour per arm (real runs, negative controls, warmup 0), in every figure that compares them
ARM_COLORS = {"real": "C0", "control": "C3", "warmup 0": "C2"}



def set_style() -> None:
    """The project's figure style (seaborn 'ticks', colour-blind palette)."""
    sns.set_theme(style="ticks", palette="colorblind", font_scale=0.95,
                  rc={"figure.dpi": 110, "savefig.dpi": 150, "axes.spines.top": False,
                      "axes.spines.right": False, "legend.frameon": False})



def step_axis(ax, steps) -> None:
    """Training steps on ``ax``'s x axis: symlog (the collapse lives in the first few percent of training),
    from 0 to the last of ``steps``."""
    steps = np.asarray(steps)
    ax.set_xscale("symlog", linthresh=1, linscale=0.5)
    ax.set_xlim(0, steps.max())
    # 0 and the powers of ten from 10 on: a "10^0" label would overlap the "0" beside it
    ax.set_xticks([0] + [10 ** k for k in range(1, int(np.log10(max(steps.max(), 1))) + 1)])
    ax.set_xlabel("training step")



def panels(n: int, ncols: int, width: float, height: float, **kwargs):
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



def legend_entries(axes) -> dict:
    """label -> handle over every panel, each label once, in the order first drawn (one figure legend
    for panels whose runs draw different entries)."""
    unique = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            unique.setdefault(label, handle)
    return unique



def mark_empty(ax, text: str = "no run") -> None:
    """Say in a panel that it has nothing to draw (``text``, greyed, at its centre)."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")
