"""The verdict words, the thresholds every claim's rule shares, and one row of the paper-vs-ours table.

Each claim's own rule is stated in its module (``RULE``: :mod:`geomcap.claims.c1` .. :mod:`geomcap.claims.c8`);
the claims table (:mod:`geomcap.claims.table`) collects them in :data:`~geomcap.claims.table.RULES`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from geomcap import paper
from geomcap.analysis.protocol import SETTING_KEYS


#: the five verdicts a claim can get
VERDICTS = ("reproduced", "reproduced, not specific to learning", "partly reproduced", "not reproduced",
            "not testable")

#: a share at or above this "holds" (C1, C4)
HOLDS = 0.9

#: a share at or above this is "partly reproduced" (C1, C4; C3 above it), and so is a rate gap of at least
#: this between C6's hard runs and those acquired during the collapse
PARTLY = 0.5

#: C5: RankMe's rate must reach the lower end of the paper's (v1: 75-100%; later versions 100%) ...
RATE_HIGH = paper.CLAIMS["C5"]["values"]["rankme_rate_v1_low"]

#: ... and the LLC's stay at or below this (the paper: 0/24)
RATE_LOW = 0.25

#: C5/C6: fewest runs in a class for a rate to be read; C8: fewest proxy pairs for a preset to be compared
MIN_RUNS = 3

#: a claim's effect is specific to learning only where the negative controls (nothing learnable) show it
#: weaker by at least this much (a share, or C2's relative distance); else "reproduced, not specific to learning"
CONTROL_MARGIN = 0.25


def claim_row(claim: str, ours: str, value=np.nan, verdict: str = "not testable", rule: str = "",
              control: str = "") -> dict:
    """One line of a paper-vs-ours table: the claim, the paper's figure (:data:`geomcap.paper.CLAIMS`),
    ours (text: the deciding numbers), our headline number (``value``, for the book's glue), what the
    controls show (``control``), the verdict and its rule."""
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}, got {verdict!r}")
    entry = paper.CLAIMS[claim]
    return {"claim": claim, "statement": entry["statement"], "paper": paper.figure_text(claim), "ours": ours,
            "value": value, "control": control, "verdict": verdict, "rule": rule}


def bool_share(values) -> tuple[int, int]:
    """``(k, n)``: how many of the non-missing ``values`` are true, of how many."""
    values = pd.Series(values).dropna().astype(bool)
    return int(values.sum()), len(values)


def specific(real: float, control: float | None, verdict: str) -> str:
    """The verdict once the controls are read: an effect present in the real runs (``verdict`` reproduced or
    partly) that the controls show as strongly (within :data:`~geomcap.claims.verdicts.CONTROL_MARGIN`) is not specific to learning."""
    if verdict in ("reproduced", "partly reproduced") and control is not None and np.isfinite(control) \
            and control >= real - CONTROL_MARGIN:
        return "reproduced, not specific to learning"
    return verdict


def matched(real: pd.DataFrame, control: pd.DataFrame | None) -> pd.DataFrame:
    """The rows of ``real`` whose task x level x size setting the controls also have."""
    if control is None or control.empty or real.empty:
        return real.iloc[:0]
    keys = list(SETTING_KEYS)
    settings = set(map(tuple, control[keys].to_numpy()))
    return real[[tuple(r) in settings for r in real[keys].to_numpy()]]
