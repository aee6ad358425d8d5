"""C1: collapse -> recovery -> acquisition, for uncentred and centred RankMe, against the negative controls."""

from __future__ import annotations

import pandas as pd

from geomcap.claims.verdicts import CONTROL_MARGIN, HOLDS, PARTLY, bool_share, claim_row, matched, specific


#: the claim this module decides
CLAIM = "C1"
#: its verdict rule, in words, from the thresholds it uses (:data:`~geomcap.claims.table.RULES` collects every claim's)
RULE = (f"reproduced: ordered in >= {HOLDS:.0%} of acquired runs for uncentred and centred RankMe; "
        f"partly: >= {HOLDS:.0%} for one, or >= {PARTLY:.0%} for both; not reproduced: otherwise; "
        f"not specific to learning: the negative controls collapse and recover in at least the share of "
        f"the same settings' real runs minus {CONTROL_MARGIN:.2f}; not testable: no acquired run")


def collapse_recovers(summary: pd.DataFrame) -> pd.Series:
    """Per run: the final layer's RankMe collapsed and recovered (C1's geometric half, which needs no
    acquisition and so can be read on the controls)."""
    collapsed = summary["rankme_collapsed"].fillna(False).astype(bool)
    return collapsed & pd.to_numeric(summary["rankme_recovery_step"], errors="coerce").notna()


def claim_c1(summary: pd.DataFrame, centred: pd.DataFrame | None = None, control: pd.DataFrame | None = None) -> dict:
    """C1 (collapse -> recovery -> acquisition) for uncentred RankMe (``summary``) and, when given, centred
    RankMe (``centred``: :func:`summary_table` with ``measure="rankme_centred"``), with the median share of
    the mean direction in the final layer's energy at the floor; against the controls (``control``: the
    negative controls' summary), in which nothing is acquired, on its geometric half: collapse, then
    recovery."""
    rule = RULE
    acquired = summary["acquisition_step"].notna()
    if not acquired.any():
        return claim_row("C1", f"no acquired run ({len(summary)} runs)", rule=rule)
    k, n = bool_share(summary.loc[acquired, "ordered_collapse_recovery_acquisition"])
    u = k / n
    text = f"uncentred {k}/{n} ordered"
    if centred is None or not centred["acquisition_step"].notna().any():
        return claim_row("C1", text + "; centred RankMe not computed", u, "not testable", rule)
    kc, nc = bool_share(centred.loc[centred["acquisition_step"].notna(), "ordered_collapse_recovery_acquisition"])
    c = kc / nc
    text = f"{text}; centred {kc}/{nc}"
    verdict = ("reproduced" if min(u, c) >= HOLDS else
               "partly reproduced" if max(u, c) >= HOLDS or min(u, c) >= PARTLY else "not reproduced")
    control_text, control_share, real_share = "no negative control", None, None
    if control is not None and len(control):
        same = matched(summary, control)
        real_share, control_share = float(collapse_recovers(same).mean()), float(collapse_recovers(control).mean())
        control_text = (f"collapse then recovery: controls {int(collapse_recovers(control).sum())}/{len(control)}, "
                        f"same settings real {int(collapse_recovers(same).sum())}/{len(same)}")
    return claim_row("C1", text, u, specific(real_share or 0.0, control_share, verdict), rule, control_text)
