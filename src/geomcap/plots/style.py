"""The shared style of every figure: colours, the step axis, panels, the paper's reference lines."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns



PAPER_COLOR = "0.35"



LEVEL_COLORS = {"easy": "C2", "medium": "C0", "hard": "C3"}  # green, blue, vermilion: C1 (orange) is too close to C3



CLASS_COLORS = {"easy": "C2", "intermediate": "C1", "hard": "C3", "not acquired": "0.6"}



SIZE_COLORS = ("C0", "C3", "C2", "C4", "C1", "C5")



#: one colour per arm (real runs, negative controls, warmup 0; float32 and bf16 training), in every figure that
#: compares them
ARM_COLORS = {"real": "C0", "control": "C3", "warmup 0": "C2", "float32": "C0", "bf16": "C1"}



#: the width, in CSS pixels, at which the book shows a figure: its text column at a 1280 px window (Jupyter
#: Book's theme; tests/test_book.py measures it in a browser). A wider figure is scaled down to it.
BOOK_FIGURE_PX = 688

#: the dots per inch a notebook's figure is rendered at (the inline backend uses the figure's dpi)
FIGURE_DPI = 110

#: the smallest text a figure may show on screen, in points (CSS: 96 px per inch, 72 pt per inch)
MIN_SCREEN_PT = 9.0

#: the width of one panel, in inches, in a grid of panels: two panels per row fit the book's column
PANEL_WIDTH = 3.4


def screen_points(size_pt: float, width_in: float, column_px: float = BOOK_FIGURE_PX,
                  dpi: float = FIGURE_DPI) -> float:
    """The on-screen size, in points, of text of ``size_pt`` in a figure ``width_in`` inches wide, shown in the
    book's column: the figure is rendered at ``dpi`` and scaled down to ``column_px`` when wider."""
    natural_px = width_in * dpi
    scale = min(1.0, column_px / natural_px) if natural_px > 0 else 1.0
    return size_pt * dpi / 96 * scale


def smallest_text_pt() -> float:
    """The smallest font size the style gives any text, in points: the "small" size (a legend's or a panel
    title's), relative to the style's font size."""
    from matplotlib import font_manager

    set_style()
    return font_manager.FontProperties(size="small").get_size_in_points()


def max_figure_width(column_px: float = BOOK_FIGURE_PX, dpi: float = FIGURE_DPI) -> float:
    """The widest a figure may be, in inches, for its smallest text (:func:`smallest_text_pt`) to show at
    :data:`MIN_SCREEN_PT` in the book's column (about two :data:`PANEL_WIDTH` panels and their labels)."""
    natural_ok = column_px / dpi  # up to here a figure is shown at its own size
    if smallest_text_pt() * dpi / 96 < MIN_SCREEN_PT:
        return 0.0
    return max(natural_ok, smallest_text_pt() * column_px / (96 * MIN_SCREEN_PT))


def readability(fig, column_px: float = BOOK_FIGURE_PX) -> list[str]:
    """What in ``fig`` is too small to read in the book: one line per text (tick label, legend, title, label)
    whose size on screen (:func:`screen_points`, the figure's tight bounding box shown at ``column_px``) is
    under :data:`MIN_SCREEN_PT`; empty when every text is readable."""
    from matplotlib.text import Text

    fig.canvas.draw()
    box = fig.get_tightbbox(fig.canvas.get_renderer())
    width = box.width  # inches: what the inline backend saves (bbox_inches="tight")
    problems = []
    for text in fig.findobj(Text):
        if not text.get_text().strip() or not text.get_visible():
            continue
        if text.axes is not None and not text.axes.get_visible():
            continue
        shown = screen_points(text.get_fontsize(), width, column_px, fig.dpi)
        if shown < MIN_SCREEN_PT - 1e-6:
            problems.append(f"{text.get_text()[:40]!r}: {text.get_fontsize():.1f} pt in a {width:.1f} in figure "
                            f"shows at {shown:.1f} pt")
    return sorted(set(problems))


def set_style() -> None:
    """The project's figure style (seaborn 'ticks', colour-blind palette)."""
    sns.set_theme(style="ticks", palette="colorblind", font_scale=0.95,
                  rc={"figure.dpi": FIGURE_DPI, "savefig.dpi": 150, "axes.spines.top": False,
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



def bottom_xlabels(grid) -> None:
    """In a grid of panels (:func:`panels`' 2-D array), the x-axis label only under the lowest panel of each
    column: a label repeated on every row costs a line of height per row and says nothing new."""
    nrows = grid.shape[0]
    for (row, col), ax in np.ndenumerate(grid):
        if row + 1 < nrows and grid[row + 1, col].get_visible():
            ax.set_xlabel("")



def legend_above(fig, handles, labels, ncol: int | None = None, **kwargs):
    """One legend for the whole figure, centred above its panels (``fig.tight_layout`` is applied first, so
    the panels fill the figure and the legend sits outside it, kept by the book's tight bounding box).
    ``ncol``: entries per row (default: all on one row, at most 3); ``kwargs`` go to ``fig.legend``."""
    fig.tight_layout()
    handles, labels = list(handles), list(labels)
    ncol = ncol or max(1, min(3, len(labels)))
    return fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=ncol,
                      bbox_transform=fig.transFigure, **kwargs)



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


def mark_alarms(ax, steps, colour: str, y: float = 1.0) -> None:
    """Alarms as small triangles along the top of ``ax`` (``y`` in axes coordinates) at ``steps``."""
    steps = np.asarray(list(steps))
    if steps.size:
        ax.plot(steps, np.full(steps.size, y), "v", color=colour, ms=4, transform=ax.get_xaxis_transform(),
                clip_on=False)
