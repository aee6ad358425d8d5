"""geomcap.monitor: capture, position selection, schedule, streaming events, Trainer callback, saved checkpoints."""
import json
import logging
import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers / huggingface_hub are imported
os.environ["DISABLE_SAFETENSORS_CONVERSION"] = "1"

import numpy as np
import pandas as pd
import pytest
import torch

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from geomcap import checkpoints, cli, events, geometry, monitor, plots, pythia, store
from geomcap.monitor import GeometryCallback, GeometryMonitor, select_positions
from geomcap.train import checkpoint_steps

V, N_DIGITS = 12, 4  # toy task: N_DIGITS tokens from 2..V-1, separator 1, then the first token again


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def copy_task(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(2, V, (n, N_DIGITS), generator=g)
    return torch.cat([x, torch.ones(n, 1, dtype=torch.long), x[:, :1]], dim=1)


def tiny_gpt2(seed=0, n_layer=2):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=8, n_embd=32, n_layer=n_layer, n_head=2))


class Blocks(torch.nn.Module):
    """A plain model (no output_hidden_states): embedding, two residual MLP blocks, a head."""

    def __init__(self, d=8, vocab=V):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(vocab, d)
        self.blocks = torch.nn.ModuleList([torch.nn.Sequential(torch.nn.Linear(d, d), torch.nn.Dropout(0.5))
                                           for _ in range(2)])
        self.head = torch.nn.Linear(d, vocab)

    def forward(self, ids):
        h = self.embed(ids)
        for block in self.blocks:
            h = h + block(h)
        return self.head(h)


# --------------------------------------------------------------------- positions


def test_select_positions_known_answers():
    h = torch.arange(2 * 4 * 1, dtype=torch.float32).reshape(2, 4, 1)  # h[b, t] = 4b + t
    assert select_positions(h, -1).ravel().tolist() == [3, 7]
    assert select_positions(h, 1).ravel().tolist() == [1, 5]
    assert select_positions(h, "mean").ravel().tolist() == [1.5, 5.5]
    right = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])  # right padding: row 0 has 2 real tokens
    assert select_positions(h, -1, right).ravel().tolist() == [1, 7]
    assert select_positions(h, -2, right).ravel().tolist() == [0, 6]
    left = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])
    assert select_positions(h, -1, left).ravel().tolist() == [3, 7]
    assert select_positions(h, "mean", right).ravel().tolist() == [0.5, 5.5]
    mask = torch.tensor([[True, False, True, False], [False, False, False, True]])
    assert select_positions(h, mask).ravel().tolist() == [0, 2, 7]
    flat = torch.ones(3, 5)
    assert select_positions(flat, -1) is flat  # one vector per example already
    with pytest.raises(ValueError, match="fewer than 3 attended"):
        select_positions(h, -3, right)
    with pytest.raises(ValueError, match="outside"):
        select_positions(h, 4)
    with pytest.raises(ValueError, match="position must be"):
        GeometryMonitor(Blocks(), torch.zeros(2, 3, dtype=torch.long), position="last", layers=["embed"])


# --------------------------------------------------------------------- plain module, hooks


def test_hook_capture_on_a_plain_module_matches_a_manual_forward():
    model = Blocks()
    ids = copy_task(64, 1)[:, :N_DIGITS]
    mon = GeometryMonitor(model, ids, layers=["embed", "blocks.0", "blocks.1"], labels=ids[:, 0].numpy())
    model.train()
    mon.record(0)
    assert model.training  # mode restored
    assert all(p.grad is None for p in model.parameters())
    with torch.no_grad():  # the same states by hand, in eval mode (dropout off)
        model.eval()
        h0 = model.embed(ids)
        h1 = h0 + model.blocks[0](h0)
        h2 = h1 + model.blocks[1](h1)
        logits = model.head(h2)[:, -1]
    m = mon.metrics
    rank = m[m.measure == "rankme"].sort_values("layer")
    # a hooked block's output is the block itself (before the residual add), as named
    expected = [geometry.rankme(h0[:, -1]), geometry.rankme(model.blocks[0](h0)[:, -1]),
                geometry.rankme(model.blocks[1](h1)[:, -1])]
    np.testing.assert_allclose(rank.value, expected, rtol=1e-6)
    share = m[(m.measure == "mean_energy_share") & (m.layer == 0)].value.item()
    assert share == pytest.approx(geometry.mean_energy_share(h0[:, -1]), rel=1e-6)
    acc = (logits.argmax(-1) == ids[:, 0]).float().mean().item()
    assert m[m.measure == "accuracy"].value.item() == pytest.approx(acc)
    assert set(m.layer[m.measure == "probe_accuracy"]) == {0, 1, 2}
    with pytest.raises(ValueError, match="layers: unknown module name 'blocks.7'"):
        GeometryMonitor(model, ids, layers=["blocks.7"])
    with pytest.raises(ValueError, match="no output_hidden_states"):
        GeometryMonitor(model, ids).record(0)
    with pytest.raises(ValueError, match="not after the last recorded step"):
        mon.record(0)


# --------------------------------------------------------------------- a plain loop on a Hugging Face model


class Writer:
    def __init__(self):
        self.calls = []

    def add_scalar(self, tag, value, step):
        self.calls.append((tag, value, step))


def test_monitor_in_a_plain_loop_on_a_hugging_face_model(tmp_path):
    model = tiny_gpt2()
    train, test = copy_task(512, 0), copy_task(64, 1)
    writer = Writer()
    steps = 40
    mon = GeometryMonitor(model, test[:, :-1], steps=steps, labels=test[:, -1].numpy(), writer=writer)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    recorded = []
    for step in range(steps + 1):
        if mon.maybe_record(step):
            recorded.append(step)
        if step == steps:
            break
        batch = train[torch.randint(len(train), (32,), generator=g)]
        loss = model(batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert recorded == checkpoint_steps(steps).tolist()
    assert not mon.maybe_record(steps)  # already recorded
    m = mon.metrics
    assert list(m.columns) == list(store.METRIC_COLUMNS)
    assert m.dtypes["step"] == np.int64 and m.dtypes["layer"] == np.int64
    assert sorted(m.layer[m.measure == "rankme"].unique()) == [0, 1, 2]  # embeddings, block 1, final
    assert sorted(m.measure[m.layer == -1].unique()) == ["accuracy", "test_loss"]
    assert mon.chance == pytest.approx(np.bincount(test[:, -1]).max() / 64)
    summary = events.summarize_run(m, chance=mon.chance)  # the events code works on it unchanged
    assert summary["final_layer"] == 2 and summary["collapse"] is not None
    fig = plots.run_curves(m, summary)  # and the plots
    assert len(fig.axes[1].lines) >= 3
    plt.close(fig)
    assert ("geometry/rankme/layer_2", m[(m.measure == "rankme") & (m.layer == 2)].value.iloc[-1], steps) in writer.calls
    path = mon.save(tmp_path / "run")
    pd.testing.assert_frame_equal(store.read_metrics(tmp_path / "run"), m)
    assert path == tmp_path / "run" / store.METRICS_FILE
    assert mon.seconds > 0


def test_schedule_options():
    model, ids = Blocks(), torch.zeros(4, 3, dtype=torch.long)
    every = GeometryMonitor(model, ids, every=5, layers=["embed"])
    assert [s for s in range(12) if every.due(s)] == [0, 5, 10]
    chosen = GeometryMonitor(model, ids, schedule=[3, 7], layers=["embed"])
    assert [s for s in range(12) if chosen.due(s)] == [3, 7]
    with pytest.raises(ValueError, match="give one of every, schedule or steps"):
        GeometryMonitor(model, ids, every=5, steps=100, layers=["embed"])
    with pytest.raises(ValueError, match="every must be a positive integer"):
        GeometryMonitor(model, ids, every=0, layers=["embed"])
    with pytest.raises(ValueError, match="needs a schedule"):
        GeometryMonitor(model, ids, layers=["embed"]).maybe_record(0)


# --------------------------------------------------------------------- streaming events, no look-ahead


class Spectrum(torch.nn.Module):
    """Scales the columns of its input by ``s``: the RankMe of its output is set by s."""

    def __init__(self, d):
        super().__init__()
        self.s = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * self.s


def synthetic_rankme_curve():
    """Spectra giving a clean collapse (steps 0-6), a floor (6), a recovery (7-12) and a plateau."""
    steps = list(range(0, 21 * 25, 25))  # the floor is sought in the protocol's first 300 steps
    k = [1.0, 0.8, 0.6, 0.4, 0.25, 0.12, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.8] + [0.8] * 8  # spread of the tail
    return steps, k


def test_streamed_collapse_is_reported_once_certain_and_never_revised(caplog):
    d = 16
    x = torch.linalg.qr(torch.randn(64, d, generator=torch.Generator().manual_seed(0)))[0] * 8  # orthogonal columns
    layer = Spectrum(d)
    mon = GeometryMonitor(torch.nn.Sequential(layer), x, layers=["0"])
    steps, k = synthetic_rankme_curve()
    reports, logged_at = [], []
    with caplog.at_level(logging.INFO, logger="geomcap.monitor"):
        for step, spread in zip(steps, k):
            with torch.no_grad():
                layer.s.copy_(torch.tensor([1.0] + [spread] * (d - 1)))
            if "geometry/events/floor_step" in mon.record(step):
                logged_at.append(step)
            reports.append(mon.events)
    s, v = mon.final_rankme
    whole = events.collapse(s, v, window=events.COLLAPSE_WINDOW, smooth=events.SMOOTH)
    assert whole.collapsed and whole.floor_step == 150 and whole.recovery_step is not None
    floor_at = next(i for i, r in enumerate(reports) if r["floor_step"] is not None)
    recovery_at = next(i for i, r in enumerate(reports) if r["recovery_step"] is not None)
    # each event is reported at the step it becomes certain ...
    assert steps[floor_at] == whole.floor_certain_step and steps[recovery_at] == whole.recovery_certain_step
    assert floor_at <= recovery_at and logged_at == [steps[floor_at]]
    # ... equals the whole series' event, and is never revised
    for r in reports[recovery_at:]:
        assert r == reports[recovery_at]
    for r in reports[floor_at:]:
        assert (r["floor_step"], r["onset_step"]) == (whole.floor_step, whole.onset_step)
        assert r["floor_value"] == pytest.approx(whole.floor_value)
    assert reports[recovery_at]["recovery_step"] == whole.recovery_step
    for i in range(floor_at):  # nothing before
        assert reports[i]["floor_step"] is None
    assert sum("floor step" in rec.getMessage() for rec in caplog.records) == 1 + (recovery_at > floor_at)
    # the prefix rule itself: every prefix past the certain step gives the whole series' floor
    for end in range(floor_at + 1, len(s) + 1):
        assert monitor.confirmed_collapse(s[:end], v[:end])["floor_step"] == whole.floor_step
    assert monitor.confirmed_collapse(s[:floor_at], v[:floor_at])["floor_step"] is None


def test_the_monitor_raises_the_alarms_of_the_book_s_rule_live_with_what_they_were_worth(caplog):
    """After the collapse has recovered the monitor watches each series with the alarm rule the book scores:
    a later drop of the spectrum's spread raises one alarm on RankMe at the step it becomes certain, the same
    alarm the rule finds on the whole series, logged with the share of such alarms the book found followed
    by acquisition, and sent to the writer."""
    d = 16
    x = torch.linalg.qr(torch.randn(64, d, generator=torch.Generator().manual_seed(0)))[0] * 8
    layer, writer = Spectrum(d), Writer()
    mon = GeometryMonitor(torch.nn.Sequential(layer), x, layers=["0"], writer=writer)
    mon._precision = {"horizon": 500, "signals": {"rankme": {"precision": 0.25, "alarms": 8, "hits": 2}}}
    steps, k = synthetic_rankme_curve()
    steps = steps + list(range(steps[-1] + 25, 1600, 25))
    k = k + [0.8] * (len(steps) - len(k))
    k = [0.1 if step >= 1100 else spread for step, spread in zip(steps, k)]  # the spread falls for good at 1100
    with caplog.at_level(logging.INFO, logger="geomcap.monitor"):
        for step, spread in zip(steps, k):
            with torch.no_grad():
                layer.s.copy_(torch.tensor([1.0] + [spread] * (d - 1)))
            mon.record(step)
    start = mon.armed_from()
    assert start == 300
    s, v = mon.final_rankme
    offline = events.alarms(s, v, start=start, layer=0)
    live = [a for a in mon.alarms if a["measure"] == "rankme"]
    assert [a.step for a in offline] == [a["step"] for a in live] and len(live) == 1
    assert 1100 <= live[0]["step"] <= 1200 and live[0]["side"] == -1
    assert live[0]["note"] == ("in this book's hard runs, 25% of rankme's alarms (2 of 8) were followed by "
                               "acquisition within 500 steps")
    assert mon.events["alarms"] == mon.alarms
    assert ("geometry/alarms/rankme/layer_0", -1.0, live[0]["step"]) in writer.calls
    assert any("alarm on rankme layer 0" in r.getMessage() and "25% of rankme" in r.getMessage()
               for r in caplog.records)


# --------------------------------------------------------------------- Hugging Face Trainer


class Recorder:
    """Stands where a report_to logger (TensorBoard, ...) stands in the Trainer's callback list."""

    def __init__(self):
        self.seen = []

    def __getattr__(self, name):  # every other event: no-op
        if name.startswith("on_"):
            return lambda *a, **k: None
        raise AttributeError(name)

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.seen.append((state.global_step, dict(logs)))


def test_callback_in_a_real_trainer_run(tmp_path):
    from transformers import Trainer, TrainingArguments

    model = tiny_gpt2()
    train, test = copy_task(256, 0), copy_task(64, 1)
    labels = train.clone()
    labels[:, :-1] = -100  # loss on the answer only
    data = [{"input_ids": x, "labels": y} for x, y in zip(train, labels)]
    callback = GeometryCallback(test[:, :-1], labels=test[:, -1].numpy())
    max_steps = 24
    args = TrainingArguments(str(tmp_path / "trainer"), max_steps=max_steps, per_device_train_batch_size=16,
                             learning_rate=3e-3, logging_steps=5, report_to="none", save_strategy="no",
                             use_cpu=True, disable_tqdm=True, seed=0)
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[callback])
    recorder = Recorder()
    trainer.callback_handler.callbacks.insert(0, recorder)  # a reporting callback, first in line
    callback.attach(trainer)  # ... moves the geometry callback ahead of it
    assert trainer.callback_handler.callbacks.count(callback) == 1
    trainer.train()
    m = callback.metrics
    recorded = sorted(m.step.unique())
    assert recorded == checkpoint_steps(max_steps).tolist()
    final = m[(m.measure == "rankme") & (m.layer == 2)].set_index("step").value
    logged = {h["step"]: h for h in trainer.state.log_history if "geometry/rankme/layer_2" in h}
    assert sorted(logged) == recorded[1:]  # step 0 precedes the first update: no Trainer log there
    for step, h in logged.items():
        assert h["geometry/rankme/layer_2"] == final[step]
    seen = {step: logs for step, logs in recorder.seen if "geometry/rankme/layer_2" in logs}
    assert sorted(seen) == recorded[1:]
    assert any("loss" in h for h in trainer.state.log_history)
    assert callback.events["layer"] == 2
    with pytest.raises(ValueError, match="unknown option 'evry'"):
        GeometryCallback(test, evry=3)


# --------------------------------------------------------------------- saved checkpoints


PROMPTS = ["the cat sat on the mat", "a dog ran", "the bird sang a song today", "two cats", "one mat and a dog",
           "song of the bird", "the dog sat", "a cat ran on the mat today"]


def make_tokenizer():
    return pythia.train_tokenizer(PROMPTS * 5, vocab_size=300)


def make_root(root, style, tokenizer):
    """Three checkpoints of a random tiny causal LM, saved as a Trainer or a Pythia-style run."""
    from transformers import GPT2Config, GPT2LMHeadModel, GPTNeoXConfig, GPTNeoXForCausalLM

    root.mkdir()
    for i, step in enumerate((0, 5, 20)):
        torch.manual_seed(i)
        if style == "trainer":
            net = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=32, n_embd=16, n_layer=2,
                                             n_head=2))
            folder = root / f"checkpoint-{step}"
        else:
            net = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2,
                                                   num_attention_heads=2, intermediate_size=32,
                                                   max_position_embeddings=32))
            folder = root / f"step{step}"
        net.save_pretrained(folder)
        if style == "pythia":
            tokenizer.save_pretrained(folder)  # tokenizer in each folder
    if style == "trainer":
        tokenizer.save_pretrained(root)  # tokenizer in the root
        (root / "runs").mkdir()  # other folders are ignored
    return root


@pytest.mark.parametrize("style", ["trainer", "pythia"])
def test_checkpoints_command_on_trainer_and_pythia_roots(style, tmp_path, capsys):
    tokenizer = make_tokenizer()
    root = make_root(tmp_path / "root", style, tokenizer)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n\n")
    out = tmp_path / "out"
    assert cli.main(["checkpoints", str(root), "--prompts", str(prompts), "--out", str(out)]) == 0
    m = store.read_metrics(out)
    assert sorted(m.step.unique()) == [0, 5, 20]
    assert sorted(m.layer[m.measure == "rankme"].unique()) == [0, 1, 2]
    # known answer, computed prompt by prompt (no padding): the last token's final hidden state
    folder = root / ("checkpoint-5" if style == "trainer" else "step5")
    net = pythia.load_pretrained(folder)
    with torch.no_grad():
        last = [net(**tokenizer(p, return_tensors="pt"), output_hidden_states=True).hidden_states[-1][0, -1]
                for p in PROMPTS]
    expected = geometry.rankme(torch.stack(last))
    got = m[(m.step == 5) & (m.layer == 2) & (m.measure == "rankme")].value.item()
    assert got == pytest.approx(expected, rel=1e-5)
    printed = capsys.readouterr().out
    assert "3 checkpoints, steps 0 .. 20" in printed and "rankme final layer" in printed


def test_checkpoints_bad_input(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    prompts = tmp_path / "p.txt"
    prompts.write_text("a\nb\n")
    assert cli.main(["checkpoints", str(tmp_path / "empty"), "--prompts", str(prompts), "--out",
                     str(tmp_path / "o")]) == 2
    assert "no checkpoint-<N> or step<N> subfolder" in capsys.readouterr().err
    (tmp_path / "twice" / "step5").mkdir(parents=True)
    (tmp_path / "twice" / "checkpoint-5").mkdir()
    with pytest.raises(ValueError, match="both step 5"):
        checkpoints.checkpoint_folders(tmp_path / "twice")
    prompts.write_text("only one\n")
    with pytest.raises(ValueError, match="at least 2 prompts"):
        checkpoints.read_prompts(prompts)


@pytest.mark.parametrize("keyword, value", [("position", "last"), ("position", "x"), ("device", "tpu"),
                                            ("device", "cuda:1")])
def test_measure_checkpoints_refuses_what_the_command_refuses(tmp_path, capsys, monkeypatch, keyword, value):
    """measure_checkpoints checks an index or 'mean' and a device's name through the rows of `geomcap checkpoints
    --position/--device` (parameters.CHECKPOINTS): the same reason, before anything is read (a bad position was
    found only once the first checkpoint had loaded)."""
    from geomcap.schema import SettingError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SettingError) as from_python:
        checkpoints.measure_checkpoints(tmp_path / "root", ["a b", "c d"], tmp_path / "python", **{keyword: value})
    assert cli.main(["checkpoints", str(tmp_path / "root"), "--prompts", str(tmp_path / "prompts.txt"),
                     "--out", str(tmp_path / "command"), f"--{keyword}", value]) == 2
    assert capsys.readouterr().err == f"geomcap: error: --{keyword}: {from_python.value.reason}\n"
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def trainer_root(tmp_path_factory):
    """A Trainer-style checkpoint root (three checkpoints) and a prompts file, shared by the tests below."""
    folder = tmp_path_factory.mktemp("checkpoints")
    prompts = folder / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n")
    return make_root(folder / "root", "trainer", make_tokenizer()), prompts


def test_checkpoints_refuses_an_out_that_holds_a_run(trainer_root, tmp_path, capsys):
    """--out pointed at a finished run replaced its metrics.csv (exit 0) and left its config and status."""
    root, prompts = trainer_root
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    files = {"config.json": '{"task": "copy", "level": "easy", "size": "405k", "seed": 0, "steps": 5}\n',
             "metrics.csv": "step,layer,measure,value\n5,-1,accuracy,1.0\n", "status.json": '{"complete": true}\n'}
    for name, text in files.items():
        (run_dir / name).write_text(text)
    assert cli.main(["checkpoints", str(root), "--prompts", str(prompts), "--out", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--out {run_dir}: holds a geomcap run" in err, err
    assert {p.name: p.read_text() for p in run_dir.iterdir()} == files  # nothing touched
    other = tmp_path / "other"
    other.mkdir()
    (other / "metrics.csv").write_text("not ours\n")
    assert cli.main(["checkpoints", str(root), "--prompts", str(prompts), "--out", str(other)]) == 2
    assert "holds other files (metrics.csv)" in capsys.readouterr().err
    # its own earlier output is rewritten
    out = tmp_path / "out"
    for _ in range(2):
        assert cli.main(["checkpoints", str(root), "--prompts", str(prompts), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["checkpoints.json", "digests.json", "metrics.csv"]
    assert sorted(store.read_metrics(out).step.unique()) == [0, 5, 20]


def test_checkpoints_position_through_its_row_is_what_it_was(trainer_root, tmp_path, capsys):
    """--position read through its row gives measure_checkpoints 'mean' or an int, as before; recorded as given."""
    root, prompts = trainer_root
    for text, position in (("mean", "mean"), ("-2", -2), ("0", 0)):
        out = tmp_path / text
        assert cli.main(["checkpoints", str(root), "--prompts", str(prompts), "--out", str(out),
                         "--position", text]) == 0
        assert json.loads((out / "checkpoints.json").read_text())["position"] == position
    capsys.readouterr()
    assert not store.read_metrics(tmp_path / "mean").equals(store.read_metrics(tmp_path / "-2"))


def test_checkpoints_prompts_file_errors_name_the_option(trainer_root, tmp_path, capsys):
    """A binary prompts file gave the decode error alone ("'utf-8' codec can't decode byte ..."), without --prompts."""
    root, _ = trainer_root
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\x00\x96\xff\xfe prompts\n\x80\x81 more\n")
    for path, fragment in ((binary, "is not UTF-8 text"), (tmp_path / "missing.txt", "no such file"),
                           (tmp_path, "cannot be read")):
        assert cli.main(["checkpoints", str(root), "--prompts", str(path), "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--prompts: {path}" in err and fragment in err, err
    assert not (tmp_path / "out").exists()


def test_checkpoints_leave_out_prompts_longer_than_the_context(trainer_root, tmp_path, capsys):
    """A prompt longer than the model's 32 positions ended the command with a 55-line IndexError."""
    root, prompts = trainer_root
    assert cli.main(["checkpoints", str(root), "--prompts", str(prompts), "--out", str(tmp_path / "short")]) == 0
    capsys.readouterr()
    long = tmp_path / "long.txt"
    long.write_text("the cat sat on the mat and the dog ran " * 8 + "\n" + prompts.read_text())
    assert cli.main(["checkpoints", str(root), "--prompts", str(long), "--out", str(tmp_path / "long")]) == 0
    out, err = capsys.readouterr()
    line = "1 of 9 prompts are longer than the model's 32 positions: left out, the measures are over the other 8"
    assert line in err.splitlines() and "Traceback" not in err, err
    assert "; 8 prompts (1 more left out: longer than the model's 32 positions)" in out
    # the rest are scored as they are alone
    pd.testing.assert_frame_equal(store.read_metrics(tmp_path / "long"), store.read_metrics(tmp_path / "short"))
    assert json.loads((tmp_path / "long" / "checkpoints.json").read_text())["prompts_left_out"] == 1
    long.write_text("the cat sat on the mat and the dog ran " * 8 + "\n" + "a dog ran\n")
    assert cli.main(["checkpoints", str(root), "--prompts", str(long), "--out", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "only 1 of the 2 prompts fit the model's 32 positions" in err, err


def test_checkpoints_summary_counts_the_skipped_ones(trainer_root, tmp_path, capsys):
    """A checkpoint that cannot be loaded was reported while the command ran, but its summary did not count it."""
    import shutil

    root, prompts = trainer_root
    copy = tmp_path / "root"
    shutil.copytree(root, copy)
    (copy / "checkpoint-7").mkdir()  # no config, no weights
    assert cli.main(["checkpoints", str(copy), "--prompts", str(prompts), "--out", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    assert "3 checkpoints scored, 1 skipped as unreadable (checkpoint-7); 8 prompts" in out, out
    assert "skipped: " in err and "checkpoint-7 unavailable" in err
    series = json.loads((tmp_path / "out" / "checkpoints.json").read_text())
    assert series["scored"] == 3 and list(series["skipped"]) == ["checkpoint-7"]


# --------------------------------------------------------------------- non-finite states, too few rows


def test_non_finite_hidden_states_are_recorded_as_nan_never_passed_to_the_svd(tmp_path, capfd):
    """NaN in a hooked layer raised the SVD's LinAlgError (oneMKL errors on stderr); inf gave rankme nan silently."""
    model = Blocks()
    ids = copy_task(64, 1)[:, :N_DIGITS]
    mon = GeometryMonitor(model, ids, layers=["blocks.0", "blocks.1"], labels=ids[:, 0].numpy())
    mon.record(0)
    with pytest.warns(RuntimeWarning, match="step 1: the hidden states of layer\\(s\\) 1 hold NaN or inf") as caught:
        for step, bad in ((1, float("nan")), (2, float("inf")), (3, float("nan"))):
            with torch.no_grad():
                model.blocks[1][0].weight[0, 0] = bad
            mon.record(step)
    assert [w.category for w in caught if "hold NaN or inf" in str(w.message)] == [monitor.NonFiniteWarning]  # once
    assert mon.nonfinite == 3  # (step, layer) records: layer 1 at steps 1, 2, 3
    m = mon.metrics.set_index(["step", "layer", "measure"]).value
    for step in (1, 2, 3):
        assert np.isnan([m[step, 1, "rankme"], m[step, 1, "mean_energy_share"], m[step, 1, "probe_accuracy"],
                         m[step, -1, "accuracy"], m[step, -1, "test_loss"]]).all()
        assert m[step, 0, "rankme"] == m[0, 0, "rankme"]  # the finite layer is measured as before
    assert np.isfinite(m[0]).all()
    assert "MKL" not in capfd.readouterr().err
    saved = store.read_metrics(mon.save(tmp_path / "out").parent)
    assert saved[(saved.step == 2) & (saved.layer == 1) & (saved.measure == "rankme")].value.isna().all()


def test_fewer_than_two_probe_rows_are_refused():
    """0 probe rows recorded nothing and 1 row recorded RankMe 1.0, both silently."""
    ids = copy_task(8, 1)[:, :N_DIGITS]
    for rows in (0, 1):
        with pytest.raises(ValueError, match=f"probe_inputs: RankMe needs at least 2 probe rows, got {rows}"):
            GeometryMonitor(Blocks(), ids[:rows], layers=["embed"])
        with pytest.raises(ValueError, match=f"at least 2 probe rows, got {rows}"):
            GeometryMonitor(tiny_gpt2(), {"input_ids": ids[:rows], "attention_mask": torch.ones_like(ids[:rows])})
    one = torch.zeros(8, N_DIGITS, dtype=torch.bool)
    one[3, 2] = True
    with pytest.raises(ValueError, match="at least 2 probe rows, got 1"):
        GeometryMonitor(Blocks(), ids, position=one, layers=["embed"])
    GeometryMonitor(Blocks(), ids[:2], layers=["embed"]).record(0)  # 2 rows are enough
