"""Packed training: the batched model, per-run clipping and AdamW, and packed runs against runs trained alone."""

import json

import numpy as np
import pytest
import torch

from geomcap import models, packed, store, tasks
from geomcap.train import TrainConfig, train

torch.set_num_threads(1)

TINY = dict(size="405k", steps=6, batch_size=8, n_train=128, n_test=32, probe_size=16, train_eval_size=32,
            dense_steps=2, n_linear_checkpoints=2, stop_margin=None)
# different prompt and answer lengths, and mod's weight decay of 1.0 against copy's 0.1
PAIR = (("copy", "easy"), ("mod", "easy"))


def _models(seeds, preset="405k"):
    out = []
    for s in seeds:
        torch.manual_seed(s)
        out.append(models.build(preset, tasks.VOCAB_SIZE))
    return out


def test_packed_logits_equal_each_model_alone():
    ms = _models([0, 1, 2], "405k-deep")
    x = torch.randint(0, tasks.VOCAB_SIZE, (3, 4, 11))
    logits = packed.packed_logits(packed.stack_parameters(ms), x, ms[0].cfg)
    assert logits.shape == (3, 4, 11, tasks.VOCAB_SIZE)
    for k, m in enumerate(ms):
        with torch.no_grad():
            torch.testing.assert_close(logits[k], m(x[k]), rtol=1e-6, atol=1e-6)


def test_right_padding_changes_nothing_before_it():
    m, = _models([0])
    x = torch.randint(0, tasks.VOCAB_SIZE, (4, 9))
    padded = packed.pad_right(x, 20)
    assert padded.shape == (4, 20) and (padded[:, 9:] == tasks.PAD_ID).all()
    with torch.no_grad():
        short, long = m(x), m(padded)
        long_other = m(packed.pad_right(x, 20, pad_id=3))
    torch.testing.assert_close(long[:, :9], short, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(long_other[:, :9], long[:, :9], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(long_other[:, 9:], long[:, 9:])  # the padding itself is seen after it
    with pytest.raises(ValueError, match="length"):
        packed.pad_right(x, 8)


def test_clipping_and_adamw_match_torch_per_run():
    ms = _models([0, 1])
    P = packed.stack_parameters(ms)
    names = list(P)
    decayed = [P[n].ndim >= 3 for n in names]
    moments = ([torch.zeros_like(P[n]) for n in names], [torch.zeros_like(P[n]) for n in names])
    wd, clip = [0.1, 1.0], [1.0, 1e6]  # run 0 clipped, run 1 not
    opts = [torch.optim.AdamW([{"params": [p for p in m.parameters() if p.ndim >= 2], "weight_decay": w},
                               {"params": [p for p in m.parameters() if p.ndim < 2], "weight_decay": 0.0}],
                              lr=1e-3, betas=(0.9, 0.98)) for m, w in zip(ms, wd)]
    gen = torch.Generator().manual_seed(0)
    for step in range(3):
        grads = [torch.randn(P[n].shape, generator=gen) * 0.1 for n in names]
        lr = [1e-3 * (step + 1), 5e-4]
        for k, (m, opt) in enumerate(zip(ms, opts)):
            for n, p in m.named_parameters():
                p.grad = grads[names.index(n)][k].clone()
            norm = torch.nn.utils.clip_grad_norm_(m.parameters(), clip[k])
            for group in opt.param_groups:
                group["lr"] = lr[k]
            opt.step()
        norms = packed.clip_grad_norms_(grads, torch.tensor(clip))
        assert norms[0] > clip[0]
        torch.testing.assert_close(norms[1], norm, rtol=1e-6, atol=0)
        packed.adamw_step_([P[n] for n in names], grads, *moments, lr=torch.tensor(lr, dtype=torch.float64),
                           weight_decay=torch.tensor(wd, dtype=torch.float64), decayed=decayed,
                           beta1=0.9, beta2=0.98, step=step + 1)
    for k, m in enumerate(ms):
        for n, p in m.named_parameters():
            torch.testing.assert_close(P[n][k], p, rtol=1e-6, atol=1e-8)


def _pair_configs(**kw):
    return [TrainConfig(task=t, level=lv, **{**TINY, **kw}) for t, lv in PAIR]


def _values(run_dir):
    return store.read_metrics(run_dir).set_index(["step", "layer", "measure"])["value"]


def test_packed_runs_match_runs_trained_alone(tmp_path):
    cfgs = _pair_configs()
    alone = [train(c, out=tmp_path / f"alone{i}", progress=False) for i, c in enumerate(cfgs)]
    pack = packed.train_packed(cfgs, outs=[tmp_path / f"pack{i}" for i in range(2)], progress=False)
    for cfg, a, p in zip(cfgs, alone, pack):
        A, B = _values(a), _values(p)
        assert A.index.equals(B.index)  # the same checkpoints, layers and measures
        n_test = min(cfg.n_test, tasks.make_task(cfg.task, cfg.level, n_train=1, n_test=cfg.n_test).n_test)
        acc = A.index.get_level_values("measure") == "accuracy"
        assert np.abs(A[acc] - B[acc]).max() <= 1 / n_test + 1e-12
        for measure in ("rankme", "rankme_centred", "mean_energy_share", "test_loss"):
            sel = A.index.get_level_values("measure") == measure
            np.testing.assert_allclose(B[sel], A[sel], rtol=1e-3)
        config_a, config_p = store.read_config(a), store.read_config(p)
        assert config_p.pop("provenance")["pack"] == 2
        config_a.pop("provenance")
        assert config_a == config_p == cfg.to_dict()
        status = store.read_status(p)
        assert status["complete"] and status["stopped_at"] is None and status["checkpoints"] == len(
            A.index.get_level_values("step").unique())
        assert not (p / store.STATE_FILE).exists()


def test_packed_run_resumes_and_is_reused(tmp_path, monkeypatch):
    from geomcap import train as train_module

    monkeypatch.setattr(train_module, "STATE_EVERY_S", 0.0)  # a state at every checkpoint: resumed where cut
    cfgs = _pair_configs()
    full = packed.train_packed(cfgs, outs=[tmp_path / f"full{i}" for i in range(2)], progress=False)
    outs = [tmp_path / f"cut{i}" for i in range(2)]
    real, calls = packed.train_interval, []

    def killed_after_two(*args):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(args[1])
        return real(*args)

    monkeypatch.setattr(packed, "train_interval", killed_after_two)
    with pytest.raises(KeyboardInterrupt):
        packed.train_packed(cfgs, outs=outs, progress=False)
    assert all((o / store.STATE_FILE).exists() and not store.is_complete(o) for o in outs)
    monkeypatch.setattr(packed, "train_interval", real)
    # one run resumes alone through train.train, the other through a pack of one
    train(cfgs[0], out=outs[0], progress=False)
    packed.train_packed(cfgs[1:], outs=outs[1:], progress=False)
    for f, o in zip(full, outs):
        F, O = _values(f), _values(o)
        assert F.index.equals(O.index)
        np.testing.assert_array_equal(O.loc[:2], F.loc[:2])  # written by the pack before the kill
        np.testing.assert_allclose(O, F, rtol=1e-4)  # then alone (train.train) / as a pack of one
    before = [(o / store.STATUS_FILE).stat().st_mtime_ns for o in outs]
    packed.train_packed(cfgs, outs=outs, progress=False)  # complete: reused, nothing rewritten
    assert [(o / store.STATUS_FILE).stat().st_mtime_ns for o in outs] == before


def test_a_stopped_run_leaves_the_pack(tmp_path, monkeypatch):
    cfgs = _pair_configs()
    full = packed.train_packed(cfgs, outs=[tmp_path / f"full{i}" for i in range(2)], progress=False)
    stop_at = 2
    real = packed.stop_due
    monkeypatch.setattr(packed, "stop_due", lambda rows, chance, cfg, step:
                        (cfg.task == "copy" and step >= stop_at) or real(rows, chance, cfg, step))
    outs = packed.train_packed(cfgs, outs=[tmp_path / f"stop{i}" for i in range(2)], progress=False)
    stopped, other = _values(outs[0]), _values(outs[1])
    assert store.read_status(outs[0])["stopped_at"] == stop_at
    assert stopped.index.get_level_values("step").max() == stop_at
    np.testing.assert_array_equal(stopped, _values(full[0]).loc[:stop_at])
    np.testing.assert_allclose(other, _values(full[1]), rtol=1e-4)  # trained on as a pack of one
    assert store.read_status(outs[1])["stopped_at"] is None


def test_pack_must_share_preset_steps_and_batch():
    a = TrainConfig(task="copy", level="easy", **TINY)
    for change in ({"steps": 7}, {"size": "1.3m"}, {"batch_size": 4}, {"beta2": 0.99}):
        b = TrainConfig(task="mod", level="easy", **{**TINY, **change})
        with pytest.raises(ValueError, match="packed runs must share " + next(iter(change))):
            packed.check_packable([a, b])
    with pytest.raises(ValueError, match="at least one"):
        packed.check_packable([])
    assert packed.pack_key(a) == packed.pack_key(TrainConfig(task="mod", level="hard", seed=3, **TINY))
    with pytest.raises(ValueError, match="distinct"):
        packed.train_packed([a, a], outs=["x", "x"])


def test_config_json_is_strict_json(tmp_path):
    cfg = TrainConfig(task="copy", level="easy", **{**TINY, "steps": 2, "dense_steps": 1, "n_linear_checkpoints": 1})
    out, = packed.train_packed([cfg], outs=[tmp_path / "one"], progress=False)
    assert json.loads((out / store.CONFIG_FILE).read_text())["provenance"]["pack"] == 1


def test_packed_runs_take_the_run_lock(tmp_path, monkeypatch):
    """A pack writes its run directories under the lock train.train takes: a directory another process
    writes refuses the whole pack before anything is written, and while the pack trains each of its
    directories refuses a second writer."""
    cfgs = _pair_configs()
    outs = [tmp_path / f"run{i}" for i in range(2)]
    outs[1].mkdir()
    with store.run_lock(outs[1]):
        with pytest.raises(store.RunLockedError, match="being written by another process"):
            packed.train_packed(cfgs, outs=outs, progress=False)
    assert not (outs[0] / store.CONFIG_FILE).exists() and not (outs[0] / store.LOCK_FILE).exists()

    real, refused = packed.train_interval, []

    def second_writer(*args):
        for out in outs:
            with pytest.raises(store.RunLockedError):
                with store.run_lock(out):
                    pass
            refused.append(out)
        return real(*args)

    monkeypatch.setattr(packed, "train_interval", second_writer)
    packed.train_packed(cfgs, outs=outs, progress=False)
    assert refused and set(refused) == set(outs)
    assert all(store.is_complete(o) and not (o / store.LOCK_FILE).exists() for o in outs)
