"""The training options added for the controls and for grokking: each changes what it says and nothing else."""
import json

import numpy as np
import pandas as pd
import pytest
import torch

from geomcap import store, tasks
from geomcap.models import build
from geomcap.train import (TrainConfig, learning_rate, parameter_norm, perturb_weights, task_data, train,
                           training_setup)

TINY = dict(steps=24, dense_steps=8, n_linear_checkpoints=4, n_train=2000, n_test=128, probe_size=64,
            train_eval_size=64, batch_size=32)
GROKKING = dict(task="mod", level="hard", size="grok-1l", task_params={"p": 23, "train_fraction": 0.3,
                                                                      "number_tokens": True},
                full_batch=True, schedule="constant", warmup_steps=10, weight_decay=1.0, grad_clip=None)


def test_new_fields_at_their_defaults_leave_the_hash_alone():
    """A run that uses none of the new options hashes as before (every committed run keeps its directory)."""
    cfg = TrainConfig(task="add", level="hard")
    for name in ("control", "schedule", "full_batch", "stop_at", "perturb", "perturb_seed"):
        assert name not in cfg.to_dict()
    changed = {"control": "shuffled_answers", "schedule": "constant", "full_batch": True, "stop_at": 100,
               "perturb": 1e-6}
    hashes = {store.config_hash(TrainConfig(task="add", level="hard", **{k: v}).to_dict()) for k, v in changed.items()}
    assert len(hashes) == len(changed) and store.config_hash(cfg.to_dict()) not in hashes
    twin = TrainConfig(task="add", level="hard", perturb=1e-6, perturb_seed=3).to_dict()
    assert twin["perturb_seed"] == 3 and TrainConfig.from_dict(twin).to_dict() == twin


@pytest.mark.parametrize("kwargs, message", [
    ({"control": "shuffle"}, "unknown control 'shuffle'; choose one of: none, shuffled_answers"),
    ({"schedule": "linear"}, "unknown schedule 'linear'"),
    ({"full_batch": 1}, "full_batch must be True or False"),
    ({"stop_at": 0}, "stop_at must be a positive integer"),
    ({"stop_at": 5000, "steps": 4000}, "stop_at must be at most steps"),
    ({"perturb": -1e-6}, "perturb must be a number in"),
    ({"grad_clip": 0.0}, "grad_clip must be a number in"),
])
def test_new_fields_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(task="add", level="hard", **kwargs)


def test_shuffled_answers_permute_each_set_and_keep_its_marginals():
    real = TrainConfig(task="add", level="easy", **TINY)
    control = TrainConfig(task="add", level="easy", control="shuffled_answers", **TINY)
    a, b = task_data(real), task_data(control)
    assert torch.equal(a.train_prompts, b.train_prompts) and torch.equal(a.test_prompts, b.test_prompts)
    for x, y in ((a.train_answers, b.train_answers), (a.test_answers, b.test_answers)):
        assert not torch.equal(x, y)
        assert (x == y).all(dim=1).float().mean() < 0.05  # almost every prompt has another prompt's answer
        rows = lambda t: sorted(map(tuple, t.tolist()))  # noqa: E731
        assert rows(x) == rows(y)  # the same answers, so the same marginals and the same chance level
    assert tasks.chance_accuracy(a.test_answers) == tasks.chance_accuracy(b.test_answers)
    assert torch.equal(task_data(control).train_answers, b.train_answers)  # seeded: a fixed permutation


def test_perturbed_twins_differ_by_the_stated_relative_size():
    torch.manual_seed(0)
    model = build("405k", tasks.VOCAB_SIZE)
    before = [p.detach().clone() for p in model.parameters()]
    perturb_weights(model, 1e-6, seed=1)
    rel = torch.cat([((p - q) / q)[q != 0].flatten() for p, q in zip(model.parameters(), before)])
    assert 0.5e-6 < rel.std().item() < 2e-6 and rel.abs().max().item() < 1e-5
    twin = TrainConfig(task="add", level="easy", perturb=1e-6, perturb_seed=1, **TINY)
    other = TrainConfig(task="add", level="easy", perturb=1e-6, perturb_seed=2, **TINY)
    w1, w2 = (training_setup(c, torch.device("cpu"))[1].tok_emb.weight for c in (twin, other))
    w0 = training_setup(TrainConfig(task="add", level="easy", **TINY), torch.device("cpu"))[1].tok_emb.weight
    assert not torch.equal(w1, w0) and not torch.equal(w1, w2) and torch.allclose(w1, w0, rtol=1e-5, atol=0)


def test_constant_schedule_holds_the_rate_after_warmup():
    cfg = TrainConfig(task="add", level="easy", steps=1000, warmup_steps=10, schedule="constant")
    assert learning_rate(0, cfg) == pytest.approx(1e-4)
    assert [learning_rate(s, cfg) for s in (9, 10, 500, 999)] == [1e-3] * 4
    cosine = TrainConfig(task="add", level="easy", steps=1000, warmup_steps=10)
    assert learning_rate(999, cosine) == pytest.approx(1e-4, rel=1e-3)


def test_a_full_batch_step_is_the_gradient_of_the_whole_training_set(tmp_path, one_thread):
    cfg = TrainConfig(seed=0, steps=20, stop_margin=None, **GROKKING)
    data, model, optimizer, _ = training_setup(cfg, torch.device("cpu"))
    from geomcap.train import make_optimizer, train_until
    reference = build("grok-1l", data.vocab_size)
    reference.load_state_dict(model.state_dict())
    train_until(1, 0, model, optimizer, data.train_prompts, data.train_answers, torch.Generator(), cfg,
                 torch.device("cpu"))
    ref_opt = make_optimizer(reference, cfg.lr, cfg.weight_decay, (cfg.beta1, cfg.beta2))
    for group in ref_opt.param_groups:
        group["lr"] = learning_rate(0, cfg)
    from geomcap.models import answer_loss
    answer_loss(reference, data.train_prompts, data.train_answers).backward()  # no clipping: grad_clip None
    ref_opt.step()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.equal(p, q)


def test_grokking_setting_trains_and_records_the_new_measures(tmp_path, one_thread):
    cfg = TrainConfig(seed=0, steps=40, dense_steps=8, n_linear_checkpoints=4, stop_margin=None, **GROKKING)
    run = train(cfg, out=tmp_path / "grok", progress=False)
    metrics = store.read_metrics(run)
    status = json.loads((run / store.STATUS_FILE).read_text())
    data = task_data(cfg)
    assert status["batch_rows"] == data.n_train == int(0.3 * 23 * 23)
    assert status["chance_accuracy"] == pytest.approx(tasks.chance_accuracy(data.test_answers))
    norm = metrics[metrics.measure == "param_norm"].sort_values("step")
    assert len(norm) == len(metrics[metrics.measure == "accuracy"]) and (norm.value > 0).all()
    assert norm.value.iloc[0] != norm.value.iloc[-1]  # the weights moved
    assert set(metrics[metrics.measure == "probe_control_accuracy"].layer) == {0, 1}


def test_parameter_norm_counts_tied_weights_once():
    torch.manual_seed(0)
    model = build("405k", tasks.VOCAB_SIZE)
    unique = {id(p): p for p in model.parameters()}.values()
    assert parameter_norm(model) == pytest.approx(float(torch.sqrt(sum((p.double() ** 2).sum() for p in unique))))


def test_stop_at_gives_the_prefix_of_the_full_run(tmp_path, one_thread):
    full = train(TrainConfig(task="copy", level="easy", stop_margin=None, **TINY), out=tmp_path / "full",
                 progress=False)
    cut = train(TrainConfig(task="copy", level="easy", stop_margin=None, stop_at=12, **TINY), out=tmp_path / "cut",
                progress=False)
    a, b = store.read_metrics(full), store.read_metrics(cut)
    assert b.step.max() == 12 and json.loads((cut / store.STATUS_FILE).read_text())["stopped_at"] == 12
    pd.testing.assert_frame_equal(a[a.step <= 12].reset_index(drop=True), b.reset_index(drop=True))


def test_the_llc_settings_default_to_the_estimators_and_enter_the_hash_only_with_the_llc():
    """``llc_chains`` and ``llc_draws`` are devinterp's chains and draws: at LLC_DEFAULTS' values every
    committed run keeps its name; a cheaper setting names a new run, but only where the LLC is measured."""
    from geomcap.dynamics import LLC_DEFAULTS

    default = TrainConfig(task="add", level="hard", measures=("llc",))
    assert (default.llc_chains, default.llc_draws) == (LLC_DEFAULTS["num_chains"], LLC_DEFAULTS["num_draws"])
    assert "llc_chains" not in default.to_dict() and "llc_draws" not in default.to_dict()
    cheap = TrainConfig(task="add", level="hard", measures=("llc",), llc_chains=1, llc_draws=100)
    assert cheap.to_dict()["llc_chains"] == 1 and TrainConfig.from_dict(cheap.to_dict()).to_dict() == cheap.to_dict()
    assert store.config_hash(cheap.to_dict()) != store.config_hash(default.to_dict())
    without = TrainConfig(task="add", level="hard", measures=("hessian_top",), llc_chains=1)
    assert "llc_chains" not in without.to_dict()
    with pytest.raises(ValueError, match="llc_draws"):  # all draws would be burn-in
        TrainConfig(task="add", level="hard", llc_draws=LLC_DEFAULTS["burn_in"])


def test_a_run_estimates_the_llc_with_its_chains_and_draws(monkeypatch, tmp_path):
    from geomcap import dynamics

    seen = []
    real = dynamics.local_learning_coefficient

    def spy(*args, **kwargs):
        seen.append((kwargs["num_chains"], kwargs["num_draws"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(dynamics, "local_learning_coefficient", spy)
    cfg = TrainConfig(task="add", level="easy", measures=("llc",), costly_every=100, dynamics_size=32,
                      llc_chains=1, llc_draws=60, **{**TINY, "steps": 4, "dense_steps": 2, "n_linear_checkpoints": 1})
    metrics = store.read_metrics(train(cfg, out=tmp_path, progress=False))
    assert seen and set(seen) == {(1, 60)}
    assert metrics[metrics["measure"] == "llc"]["value"].notna().all()
