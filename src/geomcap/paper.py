"""The paper's numbers, in one place: what each claim states and the figures it reports.

Billa, "The Geometric Anatomy of Capability Acquisition in Transformers"
(arXiv:2602.15997). Every table, verdict and notebook that quotes the paper
reads it from :data:`CLAIMS`; nothing else in geomcap restates a figure of the
paper.

Each entry: ``statement`` (the claim, in one line), ``figure`` (the paper's
figure as the paper states it, for tables), ``values`` (the same figures
as numbers, for the verdict rules of :mod:`geomcap.results`) and, where the
first version of the paper gives another figure, ``v1`` (its words). The
figures are those of :data:`VERSION`; the versions differ (v1 gives 32/32
top-down, a 75-100% precursor rate and 27% concordance; v1-v3 report no
per-task precursor on Pythia).
"""

from __future__ import annotations

#: the version of the paper whose figures :data:`CLAIMS` holds
VERSION = "arXiv:2602.15997v4"

#: claim -> {statement, figure, values}: the paper's claims C1-C8 and their figures
CLAIMS = {
    "C1": {"statement": "RankMe collapses, recovers, then accuracy rises",
           "figure": "144/144 combinations ordered",
           "values": {"ordered": 144, "combinations": 144}},
    "C2": {"statement": "the collapse floor is task-specific, not size-specific: MOD floors at ~2.0 for every size",
           "figure": "MOD floor ~2.0",
           "values": {"mod_floor": 2.0}},
    "C3": {"statement": "the collapse propagates top-down (task x size pairs)",
           "figure": "28/32 top-down",
           "values": {"top_down": 28, "pairs": 32}, "v1": "32/32"},
    "C4": {"statement": "a linear probe decodes the answer while the model is below 50%",
           "figure": "probe > model while model < 50%",
           "values": {"model_below": 0.5}},
    "C5": {"statement": "only RankMe precedes acquisition on hard tasks",
           "figure": "RankMe 100% precursor on hard tasks; LLC 0/24",
           "values": {"rankme_rate": 1.0, "rankme_rate_v1_low": 0.75, "llc_precursors": 0, "llc_runs": 24},
           "v1": "RankMe 75-100%"},
    "C6": {"statement": "a precursor gap only when the task is hard for the model",
           "figure": "easy tasks show no precursor",
           "values": {"easy_rate": 0.0}},
    "C7": {"statement": "Pythia-2.8B: RankMe precedes logical deduction; no gap on easy diagnostics",
           "figure": "~49K steps gap on deduction; none on the 7 easy diagnostics",
           "values": {"gap_steps": 49_000, "training_steps": 143_000, "easy_precursors": 0},
           "v1": "no per-task precursor reported"},
    "C8": {"statement": "a small proxy's RankMe trajectory predicts a larger model's",
           "figure": "rho > 0.92; timing concordance 52-69%",
           "values": {"rho": 0.92, "concordance_low": 0.52, "concordance_high": 0.69}, "v1": "concordance 27%"},
}


def figure_text(claim: str) -> str:
    """A claim's figure as a table quotes it: :data:`VERSION`'s, with v1's where it differs."""
    entry = CLAIMS[claim]
    return entry["figure"] + (f" (v4; v1: {entry['v1']})" if "v1" in entry else " (v4)")
