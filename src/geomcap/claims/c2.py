"""C2: MOD's collapse floor (final layer) per size, against the paper's ~2.0; collapse floors per task and
size."""

from __future__ import annotations

import pandas as pd

from geomcap import paper
from geomcap.claims.verdicts import claim_row
from geomcap.config import ALL_PRESETS


#: C2: MOD's floor within this relative distance of the paper's ~2.0
FLOOR_TOLERANCE = 0.25

#: C2's band: MOD's floor within :data:`~geomcap.claims.c2.FLOOR_TOLERANCE` of the paper's ~2.0
FLOOR_BAND = (paper.CLAIMS["C2"]["values"]["mod_floor"] * (1 - FLOOR_TOLERANCE),
              paper.CLAIMS["C2"]["values"]["mod_floor"] * (1 + FLOOR_TOLERANCE))

#: the claim this module decides
CLAIM = "C2"
#: its verdict rule, in words, from the thresholds it uses (:data:`~geomcap.claims.table.RULES` collects every claim's)
RULE = (f"reproduced: MOD's mean floor within [{FLOOR_BAND[0]:.2f}, {FLOOR_BAND[1]:.2f}] at every size, >= 2 sizes; partly: within "
        "it at some sizes (or at the only size run: size-independence untested); not reproduced: at no size; "
        "not specific to learning: the negative controls' MOD floor is within the same band; not testable: "
        "no MOD run")


def collapse_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Collapse floor (final layer) per task x size: mean and spread over levels and seeds, with run counts."""
    grouped = summary.groupby(["task", "size"], sort=False)
    table = grouped.agg(runs=("run", "count"),
                        collapsed=("rankme_collapsed", lambda v: int(pd.Series(v).fillna(False).astype(bool).sum())),
                        floor_mean=("rankme_floor_value", "mean"),
                        floor_min=("rankme_floor_value", "min"),
                        floor_max=("rankme_floor_value", "max"),
                        initial_mean=("rankme_initial_value", "mean"))
    return table.reset_index()


def mean_floor_by_size(runs: pd.DataFrame) -> pd.Series:
    """Mean collapse floor (final layer) per size, presets in their table's order (depth variants after)."""
    floors = runs.groupby("size", sort=False)["rankme_floor_value"].apply(lambda v: pd.to_numeric(v).mean())
    order = list(ALL_PRESETS)
    return floors.sort_index(key=lambda sizes: sizes.map(lambda s: order.index(s) if s in order else len(order)),
                             kind="stable")


def claim_c2(summary: pd.DataFrame, centred: pd.DataFrame | None = None, control: pd.DataFrame | None = None) -> dict:
    """C2: MOD's collapse floor (final layer) per size, against the paper's ~2.0, uncentred (and centred); in
    the controls, MOD's floor where nothing is learnt (their mean decides, as in the rule; per size beside
    it when they span several)."""
    lo, hi = FLOOR_BAND
    rule = RULE
    mod = summary[summary["task"] == "mod"]
    if mod.empty:
        return claim_row("C2", "no MOD run selected", rule=rule)
    floors = mean_floor_by_size(mod)
    within = (floors >= lo) & (floors <= hi)
    text = "MOD floor " + ", ".join(f"{size} {value:.2f}" for size, value in floors.items())
    if centred is not None:
        cm = pd.to_numeric(centred.loc[centred["task"] == "mod", "rankme_floor_value"], errors="coerce")
        if len(cm.dropna()):
            text += f"; centred {cm.mean():.2f}"
    verdict = ("reproduced" if within.all() and len(floors) >= 2 else
               "partly reproduced" if within.any() else "not reproduced")
    control_text = "no negative control"
    if control is not None and (control["task"] == "mod").any():
        mod_controls = control[control["task"] == "mod"]
        by_size = mean_floor_by_size(mod_controls)
        cf = pd.to_numeric(mod_controls["rankme_floor_value"], errors="coerce").mean()
        control_text = f"MOD floor in the controls {cf:.2f}"
        if len(by_size) > 1:
            control_text += " (" + ", ".join(f"{size} {value:.2f}" for size, value in by_size.items()) + ")"
        if lo <= cf <= hi and verdict != "not reproduced":
            verdict = "reproduced, not specific to learning"
    return claim_row("C2", text, float(floors.mean()), verdict, rule, control_text)


#: the columns of :func:`~geomcap.results.control_leave_one_out`
LEAVE_ONE_OUT_COLUMNS = ("run", "size", "seed", "floor", "pooled", "verdict")


def control_leave_one_out(summary: pd.DataFrame, control: pd.DataFrame, centred: pd.DataFrame | None = None
                          ) -> pd.DataFrame:
    """Does C2's verdict rest on one control run? :func:`claim_c2` read again with each MOD negative control
    left out in turn: one row per MOD control (``run``, ``size``, ``seed``, its ``floor``), with ``pooled``,
    the other controls' mean MOD floor, and ``verdict``, C2's verdict without it. Empty (those columns)
    without a MOD control."""
    rows = []
    is_mod = control["task"] == "mod" if len(control) else pd.Series(dtype=bool)
    for index in control.index[is_mod]:
        rest = control.drop(index=index)
        floors = pd.to_numeric(rest.loc[rest["task"] == "mod", "rankme_floor_value"], errors="coerce")
        rows.append({"run": control.at[index, "run"], "size": control.at[index, "size"],
                     "seed": control.at[index, "seed"],
                     "floor": float(pd.to_numeric(control.at[index, "rankme_floor_value"], errors="coerce")),
                     "pooled": float(floors.mean()) if len(floors.dropna()) else float("nan"),
                     "verdict": claim_c2(summary, centred, rest)["verdict"]})
    return pd.DataFrame(rows, columns=list(LEAVE_ONE_OUT_COLUMNS))


def leave_one_out_text(table: pd.DataFrame, verdict: str) -> str:
    """:func:`control_leave_one_out`'s table in a sentence, against the verdict with every control (``verdict``):
    the range of the pooled floor, and which single runs move the verdict when left out."""
    if table.empty:
        return "There is no MOD control to leave out."
    lo, hi = FLOOR_BAND
    text = (f"With each of the {len(table)} MOD controls left out in turn, the others' pooled floor goes from "
            f"{table['pooled'].min():.2f} to {table['pooled'].max():.2f} (the band is [{lo:.2f}, {hi:.2f}])")
    moved = table[table["verdict"] != verdict]
    if moved.empty:
        return text + ": the verdict holds without any one of them."
    return (text + "; without " + ", ".join(f"the {r.size} control of seed {r.seed} (floor {r.floor:.2f}) the "
                                             f"verdict is {r.verdict}" for r in moved.itertuples())
            + f": the verdict rests on {'that run' if len(moved) == 1 else 'each of these runs'}.")
