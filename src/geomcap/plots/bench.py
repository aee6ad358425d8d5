"""Figures of the performance page: the LLC calibration, the geometry's share, the benchmark."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from geomcap.plots.style import PAPER_COLOR, SIZE_COLORS, set_style


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
