"""The bf16 precision check (geomcap.analysis.precision) on synthetic summaries: a bf16 run inside its
float32 twins' range is accepted, one outside any range is refused, a missing value is undecided."""
import pandas as pd
import pytest

from geomcap.analysis.precision import (PRECISION_STATISTICS, exchangeable_inside_probability, precision_check,
                                        precision_runs)


def _runs(bf16_values, held_out=None):
    """Three float32 runs (twins 0-2) of add medium 4m seed 0, a bf16 run with ``bf16_values`` and optionally a
    held-out twin 3; returns (summary, runs) as summary_table and load_runs give them."""
    fp32 = [dict(acquisition_step=600, rankme_floor_value=3.0, rankme_floor_step=20, top_down_rho_step=-1.0),
            dict(acquisition_step=700, rankme_floor_value=3.4, rankme_floor_step=24, top_down_rho_step=-0.9),
            dict(acquisition_step=650, rankme_floor_value=3.2, rankme_floor_step=22, top_down_rho_step=-1.0)]
    rows, configs = [], []
    for twin, values in enumerate(fp32):
        rows.append({"run": f"f{twin}", **values})
        configs.append({"run": f"f{twin}", "perturb": 1e-6 if twin else 0.0, "perturb_seed": twin})
    rows.append({"run": "b", **bf16_values})
    configs.append({"run": "b", "perturb": 0.0, "perturb_seed": 0, "precision": "bf16"})
    if held_out is not None:
        rows.append({"run": "h", **held_out})
        configs.append({"run": "h", "perturb": 1e-6, "perturb_seed": 3})
    setting = dict(task="add", level="medium", size="4m", seed=0)
    return (pd.DataFrame([{**setting, **r} for r in rows]), pd.DataFrame([{**setting, **c} for c in configs]))


def test_a_bf16_run_inside_every_range_is_accepted_and_one_outside_is_refused():
    inside = dict(acquisition_step=620, rankme_floor_value=3.1, rankme_floor_step=21, top_down_rho_step=-1.0)
    check = precision_check(precision_runs(*_runs(inside)))
    assert list(check["role"]) == ["bf16"] and check["range_runs"].iloc[0] == 3
    assert check["accepted"].tolist() == [True]
    assert check["acquisition_step_low"].iloc[0] == 600 and check["acquisition_step_high"].iloc[0] == 700

    late = {**inside, "acquisition_step": 900}  # one statistic outside: refused, and which one says so
    check = precision_check(precision_runs(*_runs(late)))
    assert check["accepted"].tolist() == [False] and check["acquisition_step_inside"].tolist() == [False]
    assert all(check[f"{s}_inside"].iloc[0] for s in PRECISION_STATISTICS if s != "acquisition_step")


def test_a_missing_value_is_undecided_and_a_held_out_twin_is_read_by_the_same_rule():
    never = dict(acquisition_step=None, rankme_floor_value=3.1, rankme_floor_step=21, top_down_rho_step=-1.0)
    held = dict(acquisition_step=800, rankme_floor_value=3.3, rankme_floor_step=23, top_down_rho_step=-1.0)
    check = precision_check(precision_runs(*_runs(never, held_out=held))).set_index("role")
    assert check.loc["bf16", "accepted"] is None and check.loc["bf16", "acquisition_step_inside"] is None
    assert check.loc["held-out twin", "twin"] == 3
    assert check.loc["held-out twin", "accepted"] is False  # a float32 twin can fail the rule too


def test_exchangeable_inside_probability():
    assert exchangeable_inside_probability(3) == pytest.approx(0.5)
    assert exchangeable_inside_probability(1) == 0.0
    assert exchangeable_inside_probability(9) == pytest.approx(0.8)
