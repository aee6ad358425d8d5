"""Pythia code path, offline: stand-in build, hub-cache loading, scoring by hand, run store, CLI.

Everything runs against a tiny stand-in built in a temporary folder; the hub
code path goes through the real ``from_pretrained`` call with a revision,
against a folder laid out as a hub cache (HF_HUB_OFFLINE=1).
"""
import hashlib
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers / huggingface_hub are imported
os.environ["DISABLE_SAFETENSORS_CONVERSION"] = "1"

import numpy as np
import pandas as pd
import pytest
import torch

from geomcap import diagnostics, events, pythia, results, store
from geomcap.analysis.pythia_runs import committed_shortcut_splits, shortcut_split

TINY = dict(steps=12, layers=2, width=32, heads=2, vocab_size=320, seq_len=32, batch_size=8, every=6,
            templates=40, max_chars=60_000, puzzles=20, puzzle_objects=(3,), progress=False)
HUB = "EleutherAI/pythia-160m"


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    return pythia.build_standin(tmp_path_factory.mktemp("standin") / "standin", **TINY)


@pytest.fixture(scope="module")
def small_benchmarks(tmp_path_factory):
    """The committed benchmark files cut to a few items each (fast scoring)."""
    folder = tmp_path_factory.mktemp("benchmarks")
    for name in diagnostics.BENCHMARKS:
        items = diagnostics.load_benchmark(name)[:12]
        (folder / f"{name}.jsonl").write_text(diagnostics.jsonl_text(items))
    return folder


def test_schedule_is_pythias():
    assert len(pythia.REVISIONS) == 154
    assert pythia.REVISIONS[:4] == ("step0", "step1", "step2", "step4")
    assert "step512" in pythia.REVISIONS and "step1000" in pythia.REVISIONS and "step1024" not in pythia.REVISIONS
    assert pythia.REVISIONS[-1] == "step143000"
    assert pythia.TOKENS_PER_STEP == 2_097_152
    log = pythia.select_revisions("log", pythia.REVISIONS)
    assert log[0] == "step0" and log[-1] == "step143000" and len(log) == 19
    every = pythia.select_revisions("every:10000", pythia.REVISIONS)
    assert "step4000" in every and "step10000" in every and "step11000" not in every and every[-1] == "step143000"
    assert pythia.select_revisions("step2000, 1000", pythia.REVISIONS) == ["step1000", "step2000"]
    with pytest.raises(ValueError, match="not in Pythia's schedule"):
        pythia.select_revisions("step3", pythia.REVISIONS)
    with pytest.raises(ValueError, match="revisions: every:K"):
        pythia.select_revisions("every:x", pythia.REVISIONS)


@pytest.mark.parametrize("name, ok", [
    ("EleutherAI/pythia-160m", True), ("EleutherAI/pythia-2.8b-deduped", True), ("EleutherAI/pythia-1.4b", True),
    ("EleutherAI/pythia-160m-v0", False), ("EleutherAI/gpt-neox-20b", False), ("pythia-160m", False), ("", False),
])
def test_hub_names(name, ok):
    if ok:
        assert pythia.check_model(name) == "hub"
    else:
        with pytest.raises(ValueError, match="model:"):
            pythia.check_model(name)


def test_standin_builds_and_reloads(standin, tmp_path):
    info = pythia.standin_info(standin)
    assert info["revisions"] == ["step0", "step1", "step2", "step4", "step6", "step12"]
    assert pythia.local_revisions(standin) == info["revisions"]
    assert pythia.check_model(str(standin)) == "local"
    tok = pythia.load_tokenizer(standin)
    assert tok.convert_ids_to_tokens([0, 1]) == ["<|endoftext|>", "<|padding|>"]
    assert tok.decode(tok(" The capital of France is Paris.")["input_ids"]) == " The capital of France is Paris."
    first, last = pythia.load_revision(standin, "step0"), pythia.load_revision(standin, 12)
    assert type(last).__name__ == "GPTNeoXForCausalLM" and last.dtype == torch.float32 and not last.training
    cfg = last.config
    assert cfg.rope_parameters["partial_rotary_factor"] == 0.25 and cfg.use_parallel_residual
    assert not cfg.tie_word_embeddings
    assert not torch.equal(last.get_output_embeddings().weight, last.gpt_neox.embed_in.weight)
    assert not torch.equal(first.gpt_neox.embed_in.weight, last.gpt_neox.embed_in.weight)  # it trained
    # geomcap's training step trained it: the untrained model's loss is ~ln(vocabulary), then it falls
    assert info["first_loss"] == pytest.approx(math.log(cfg.vocab_size), abs=0.1)
    assert info["final_loss"] < info["first_loss"] - 0.2
    assert pythia.build_standin(standin, **TINY) == standin  # same build: reused
    assert info["puzzles"] == 20 and info["puzzle_objects"] == [3]
    assert 0 < info["puzzle_chars"] < info["corpus_chars"]
    (tmp_path / "x").write_text("occupied")
    with pytest.raises(ValueError, match="exists and is not empty"):
        pythia.build_standin(tmp_path, **TINY)


def test_standin_corpus_mixes_in_held_out_puzzles():
    docs = pythia.standin_corpus(seed=0, templates=8, puzzles=12, puzzle_objects=(3,))
    text = " ".join(docs)
    assert text.count("Question: Which statement is true?") == 12
    assert text.count("a set of three objects") == 12 and "five objects" not in text
    benchmark = [i["context"] for name in diagnostics.HARD for i in diagnostics.load_benchmark(name)]
    assert not any(c in text for c in benchmark)
    assert pythia.standin_corpus(seed=0, templates=8, puzzles=12, puzzle_objects=(3,)) == docs  # seeded
    assert pythia.standin_corpus(seed=1, templates=8, puzzles=12, puzzle_objects=(3,)) != docs


@pytest.mark.parametrize("kwargs, fragment", [
    ({"puzzle_objects": (4,)}, "puzzle_objects: unknown value 4; choose one of: 3, 5, 7"),
    ({"puzzle_objects": ()}, "puzzle_objects: empty selection"),
    ({"puzzles": -1}, "puzzles must be"), ({"steps": 0}, "steps must be"), ({"lr": float("nan")}, "lr must be"),
    ({"vocab_size": 100}, "vocab_size must be >= 300"), ({"width": 30, "heads": 4}, "not divisible"),
])
def test_standin_bad_build_parameters(kwargs, fragment, tmp_path):
    with pytest.raises(ValueError, match=fragment):
        pythia.build_standin(tmp_path / "s", **{**TINY, **kwargs})


def test_the_standin_builds_on_the_device_asked_and_refuses_another_before_writing(standin, tmp_path, capsys):
    """device "auto" is cuda where present, else cpu (the provenance says which); "cpu" on a CPU machine gives
    the same weights as "auto" there; a device that is not there or not a device is one line, nothing written."""
    from geomcap.models import resolve_device
    from geomcap.schema import SettingError

    assert pythia.standin_info(standin)["provenance"]["device"] == str(resolve_device("auto"))
    if not torch.cuda.is_available():
        on_cpu = pythia.build_standin(tmp_path / "cpu", **TINY, device="cpu")
        for a, b in zip(pythia.load_revision(standin, 12).parameters(), pythia.load_revision(on_cpu, 12).parameters()):
            assert torch.equal(a, b)
    bad = ["tpu"] + ([] if torch.cuda.is_available() else ["cuda"])
    for device in bad:
        with pytest.raises(SettingError, match="device"):
            pythia.build_standin(tmp_path / f"python-{device}", **TINY, device=device)
        code, _, err = geomcap(capsys, "standin", "--out", tmp_path / f"command-{device}", "--device", device)
        assert code == 2 and err.startswith("geomcap: error: --device: ") and err.count("\n") == 1
        assert not (tmp_path / f"python-{device}").exists() and not (tmp_path / f"command-{device}").exists()


def test_missing_local_revision_is_a_clear_message(standin):
    with pytest.raises(pythia.RevisionUnavailable, match=r"revision step7 missing: no folder .*step7 "
                                                         r"\(6 revisions there, step0 \.\. step12\)"):
        pythia.load_revision(standin, "step7")


def test_broken_revision_is_reported(standin, tmp_path):
    import shutil

    root = tmp_path / "root"
    shutil.copytree(standin / "step6", root / "step6")
    (root / "step6" / "model.safetensors").write_bytes(b"not a tensor file")
    with pytest.raises(pythia.RevisionUnavailable, match="step6 unavailable"):
        pythia.load_revision(root, "step6")


# ---------------------------------------------------------------------------
# the hub code path, against a folder laid out as a hub cache
# ---------------------------------------------------------------------------


def legacy_config(folder) -> dict:
    """The config.json of a Pythia step branch (written by transformers 4.24), at the stand-in's size."""
    c = json.loads((folder / "config.json").read_text())
    return {"architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "gelu",
            "hidden_size": c["hidden_size"], "initializer_range": 0.02, "intermediate_size": c["intermediate_size"],
            "layer_norm_eps": 1e-05, "max_position_embeddings": c["max_position_embeddings"],
            "model_type": "gpt_neox", "num_attention_heads": c["num_attention_heads"],
            "num_hidden_layers": c["num_hidden_layers"], "rotary_emb_base": 10000, "rotary_pct": 0.25,
            "tie_word_embeddings": False, "torch_dtype": "float16", "transformers_version": "4.24.0",
            "use_cache": True, "use_parallel_residual": True, "vocab_size": c["vocab_size"]}


def make_hub_cache(standin, cache, repo=HUB, revisions=("step0", "step4")):
    """models--ORG--NAME/{refs/stepN -> snapshots/SHA/, blobs/} holding what a Pythia step branch holds:
    pytorch_model.bin in fp16 with the old `embed_out` head name, and an old-style config.json;
    `main` also holds the tokenizer."""
    from safetensors.torch import load_file

    root = cache / ("models--" + repo.replace("/", "--"))
    for sub in ("blobs", "refs", "snapshots"):
        (root / sub).mkdir(parents=True, exist_ok=True)

    def put(snapshot, name, data):
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / name).symlink_to(os.path.relpath(blob, snapshot))

    for revision in [*revisions, "main"]:
        source = standin / (revisions[-1] if revision == "main" else revision)
        sha = hashlib.sha1(f"{repo}@{revision}".encode()).hexdigest()
        (root / "refs" / revision).write_text(sha)
        snapshot = root / "snapshots" / sha
        snapshot.mkdir()
        state = {("embed_out.weight" if k == "lm_head.weight" else k): v.half()
                 for k, v in load_file(source / "model.safetensors").items()}
        buf = io.BytesIO()
        torch.save(state, buf)
        put(snapshot, "pytorch_model.bin", buf.getvalue())
        put(snapshot, "config.json", json.dumps(legacy_config(source)).encode())
        if revision == "main":
            for name in ("tokenizer.json", "tokenizer_config.json"):
                put(snapshot, name, (source / name).read_bytes())
    return root


def test_hub_path_through_a_hub_cache(standin, tmp_path):
    cache = tmp_path / "hub"
    make_hub_cache(standin, cache)
    tok = pythia.load_tokenizer(HUB, cache_dir=cache)
    assert tok.convert_ids_to_tokens([0]) == ["<|endoftext|>"]
    net = pythia.load_revision(HUB, "step4", cache_dir=cache)
    local = pythia.load_revision(standin, "step4")
    assert net.dtype == torch.float32  # float32 on CPU, whatever the checkpoint's dtype
    for (name, a), (_, b) in zip(net.state_dict().items(), local.state_dict().items()):
        assert torch.equal(a, b.half().float()), name  # embed_out -> lm_head included
    with pytest.raises(pythia.RevisionUnavailable, match="step1000 unavailable"):
        pythia.load_revision(HUB, "step1000", cache_dir=cache)
    freed = pythia.delete_cached_revision(HUB, "step0", cache_dir=cache)
    assert freed > 0 and not (cache / "models--EleutherAI--pythia-160m" / "refs" / "step0").exists()
    with pytest.raises(pythia.RevisionUnavailable):
        pythia.load_revision(HUB, "step0", cache_dir=cache)
    assert pythia.load_revision(HUB, "step4", cache_dir=cache) is not None  # the other revision survives


def test_run_from_the_hub_deletes_downloads_when_asked(standin, small_benchmarks, tmp_path):
    cache = tmp_path / "hub"
    make_hub_cache(standin, cache)
    report = pythia.run(HUB, revisions="step0,step4", benchmarks=["arithmetic"], root=tmp_path / "runs",
                        cache_dir=cache, delete_downloads=True, benchmark_dir=small_benchmarks, progress=False,
                        log=lambda msg: None)
    assert report["stored"] == ["step0", "step4"] and not report["skipped"]
    refs = {p.name for p in (cache / "models--EleutherAI--pythia-160m" / "refs").iterdir()}
    assert refs == {"main"}
    config = store.read_config(report["run_dirs"]["arithmetic"])
    assert config["model"] == HUB and config["size"] == "160m" and config["tokens_per_step"] == 2_097_152
    # each revision is pinned by the commit its branch pointed to when downloaded (the cache's ref)
    recorded = store.read_digests(report["run_dirs"]["arithmetic"])
    assert {r: d["commit"] for r, d in recorded.items()} == {
        r: hashlib.sha1(f"{HUB}@{r}".encode()).hexdigest() for r in ("step0", "step4")}
    assert list(recorded["step4"]["files"]) == ["pytorch_model.bin"] and recorded["step4"]["tensors"] > 0


def test_where_the_hub_answers_a_copy_is_known_before_it_is_downloaded(standin, small_benchmarks, tmp_path,
                                                                        monkeypatch):
    """The hub's record of each branch (commit, LFS sha256 per weight file) is read first where it is reachable:
    a branch serving an earlier branch's file is neither downloaded nor scored, and the others load at the
    recorded commit. The hub is not reachable here: its answer is given by hand, the cache serves the rest."""
    from types import SimpleNamespace

    import huggingface_hub
    import huggingface_hub.constants

    cache = tmp_path / "hub"
    make_hub_cache(standin, cache, revisions=("step0", "step4"))
    commit = {r: hashlib.sha1(f"{HUB}@{r}".encode()).hexdigest() for r in ("step0", "step2", "step4")}
    snapshots = cache / "models--EleutherAI--pythia-160m" / "snapshots"
    lfs = {r: (snapshots / commit[r] / "pytorch_model.bin").resolve().name for r in ("step0", "step4")}  # blob = sha256
    lfs["step2"] = lfs["step0"]  # step2 serves step0's file (and is not in the cache: it must not be needed)

    def model_info(self, repo_id, revision=None, files_metadata=False):
        assert repo_id == HUB and files_metadata
        return SimpleNamespace(sha=commit[revision], siblings=[
            SimpleNamespace(rfilename="pytorch_model.bin", lfs={"sha256": lfs[revision]}),
            SimpleNamespace(rfilename="config.json", lfs=None)])

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    assert pythia.hub_record(HUB, "step2") == {"step": 2, "commit": commit["step2"], "files": {
        "pytorch_model.bin": lfs["step0"]}}
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # the loads read the cache only
    monkeypatch.setattr(pythia.runs, "hub_record", lambda model, revision: {
        "step": pythia.revision_step(revision), "commit": commit[revision],
        "files": {"pytorch_model.bin": lfs[revision]}})
    report = pythia.run(HUB, revisions="step0,step2,step4", benchmarks=["arithmetic"], root=tmp_path / "runs",
                        cache_dir=cache, benchmark_dir=small_benchmarks, progress=False, log=lambda msg: None)
    assert report["stored"] == ["step0", "step4"] and report["duplicates"] == {"step2": "step0"}
    recorded = store.read_digests(report["run_dirs"]["arithmetic"])
    assert recorded["step2"] == {"step": 2, "commit": commit["step2"], "files": {"pytorch_model.bin": lfs["step0"]}}
    assert recorded["step0"]["files"] == {"pytorch_model.bin": lfs["step0"]}  # the download is what the hub records
    assert recorded["step4"]["commit"] == commit["step4"] and "weights" in recorded["step4"]


# ---------------------------------------------------------------------------
# revision integrity: a local root whose revisions are partly copies
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def copied_root(standin, tmp_path_factory):
    """A local root of 30 revisions step0 .. step29, three of them copies: step20 a byte copy of step19, step21
    step19's weights re-saved in shards (other files, the same tensors), step25 a byte copy of step24. The
    others each hold weights of their own: the stand-in's last checkpoint with one output weight moved by a
    different amount (distinct checkpoints without training 30)."""
    import shutil

    from transformers import GPTNeoXForCausalLM

    root = tmp_path_factory.mktemp("copied") / "root"
    net = GPTNeoXForCausalLM.from_pretrained(standin / "step12")
    for step in range(30):
        folder = root / f"step{step}"
        if step in (20, 25):
            shutil.copytree(root / f"step{step - 1}", folder)
        elif step == 21:
            GPTNeoXForCausalLM.from_pretrained(root / "step19").save_pretrained(folder, max_shard_size="40KB")
        else:
            with torch.no_grad():
                net.get_output_embeddings().weight[0, 0] += 0.01
            net.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(standin / "step12" / name, root / "step29" / name)
    return root


COPIES = {"step20": "step19", "step21": "step19", "step25": "step24"}
OWN = [f"step{s}" for s in range(30) if f"step{s}" not in COPIES]


def test_copied_revisions_are_found_and_not_scored(copied_root, small_benchmarks, tmp_path, capsys):
    assert len(list((copied_root / "step21").glob("model-*.safetensors"))) > 1  # sharded: other files
    messages = []
    kwargs = dict(benchmarks=["logical_deduction"], root=tmp_path / "runs", benchmark_dir=small_benchmarks,
                  progress=False, log=messages.append)
    report = pythia.run(copied_root, revisions="all", **kwargs)
    assert report["duplicates"] == COPIES and report["stored"] == OWN
    run_dir = report["run_dirs"]["logical_deduction"]
    recorded = store.read_digests(run_dir)
    assert sorted(recorded, key=pythia.revision_step) == [f"step{s}" for s in range(30)]
    assert recorded["step20"]["files"] == recorded["step19"]["files"]
    assert recorded["step21"]["files"] != recorded["step19"]["files"]
    assert recorded["step21"]["weights"] == recorded["step19"]["weights"] != recorded["step22"]["weights"]
    assert len({d["weights"] for d in recorded.values()}) == len(OWN)
    assert sorted(store.read_metrics(run_dir)["step"].unique()) == [int(r[4:]) for r in OWN]
    assert store.read_status(run_dir)["duplicates"] == COPIES
    lines = [m for m in messages if "hold the weights of an earlier one" in m]
    assert len(lines) == 1 and "step20, step21 = step19; step25 = step24" in lines[0]
    again = pythia.run(copied_root, revisions="all", **kwargs)  # resumed: the copies are known, nothing loaded
    assert again["stored"] == [] and again["duplicates"] == COPIES
    from geomcap import cli

    with pytest.warns(UserWarning, match="step20, step21 = step19; step25 = step24"):
        assert cli.main(["show", str(run_dir)]) == 0
    assert "duplicates step20 = step19, step21 = step19, step25 = step24" in capsys.readouterr().out


def test_a_gap_measured_across_copied_revisions_is_refused(copied_root, small_benchmarks, tmp_path):
    """On the stored run of the copied root, a series whose RankMe turns at step 18 and whose accuracy is
    acquired at step 24: read without the digests, a precursor gap; with them, the copies are left out and the
    gap, which spans step19 and its copies, is refused."""
    report = pythia.run(copied_root, revisions="all", benchmarks=["logical_deduction"], root=tmp_path / "runs",
                        benchmark_dir=small_benchmarks, progress=False, log=lambda msg: None)
    runs = pythia.load_benchmark_runs(tmp_path / "runs")
    assert list(runs["path"]) == [str(report["run_dirs"]["logical_deduction"])]
    steps = np.arange(30)
    acc = np.where(steps < 24, 0.0, 1.0)
    rank = np.where(steps < 18, 10.0, 3.0)
    rows = [(s, -1, "accuracy", a) for s, a in zip(steps, acc)]
    rows += [(s, layer, "rankme", r + layer) for s, r in zip(steps, rank) for layer in (0, 1, 2)]
    metrics = pd.DataFrame(rows, columns=store.METRIC_COLUMNS).assign(run=runs["run"].iloc[0],
                                                                     task="logical_deduction")
    # without the digests (no path to read them from): a gap, and it reads as a precursor
    blind = results.gap_table(runs.drop(columns="path"), metrics).iloc[0]
    expected = events.precursor(steps, rank + 2, events.chance_corrected(acc, runs["chance"].iloc[0]))
    assert expected.gap_steps and blind["gap_steps"] == expected.gap_steps and bool(blind["is_precursor"])
    assert results.claim_c7(results.gap_table(runs.drop(columns="path"), metrics))["verdict"] == "reproduced"
    # with them: the copies leave the series, and the gap across step19's and step24's groups is refused
    with pytest.warns(UserWarning, match="step20, step21 = step19; step25 = step24") as caught:
        table = results.gap_table(runs, metrics)
    assert len(caught) == 1
    row = table.iloc[0]
    assert row["revisions"] == 27 and row["left_out"] == 3 and row["acquisition_step"] == 24
    assert pd.isna(row["gap_steps"]) and row["is_precursor"] is None
    assert row["gap_refused"] == "step19, step20, step21, step24"
    c7 = results.claim_c7(table)
    assert c7["verdict"] == "not testable" and "refused" in c7["ours"] and "step19, step20, step21 and 1 more" in c7["ours"]


def test_measuring_checkpoints_leaves_the_copies_out(copied_root, tmp_path, capsys):
    from geomcap import checkpoints, cli

    prompts = ["The capital of France is", "Two plus two is", "A robin is a kind of", "Once upon a time"]
    with pytest.warns(UserWarning, match="step20, step21 = step19; step25 = step24") as caught:
        monitor = checkpoints.measure_checkpoints(copied_root, prompts, tmp_path / "out")
    assert len([w for w in caught if "earlier one" in str(w.message)]) == 1
    assert monitor.checkpoints["duplicates"] == COPIES and monitor.checkpoints["scored"] == len(OWN)
    assert sorted(store.read_metrics(tmp_path / "out")["step"].unique()) == [int(r[4:]) for r in OWN]
    assert len(store.read_digests(tmp_path / "out")) == 30
    checkpoints.check_out(tmp_path / "out")  # its own output: may be written again
    with pytest.warns(UserWarning, match="step25 = step24"):
        assert cli.main(["show", "--json", str(tmp_path / "out")]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["duplicate_of"] == COPIES and shown["shares_files_with"] == {}


# ---------------------------------------------------------------------------
# scoring
# ---------------------------------------------------------------------------


def test_scorer_matches_a_log_likelihood_computed_by_hand(standin):
    net, tok = pythia.load_revision(standin, "step12"), pythia.load_tokenizer(standin)
    items = diagnostics.load_benchmark("capitals")[:3] + diagnostics.load_benchmark("agreement")[:3]
    scores = pythia.score_items(net, tok, items, batch_tokens=64)
    for i, item in enumerate(items):
        ctx = tok(item["context"], add_special_tokens=False)["input_ids"]
        for j, choice in enumerate(item["choices"]):
            ch = tok(choice, add_special_tokens=False)["input_ids"]
            ids = torch.tensor([[0, *ctx, *ch]])
            with torch.no_grad():
                out = net(input_ids=ids, output_hidden_states=True)
            logp = out.logits[0].log_softmax(-1)
            first = 1 if item["kind"] == "pair" else 1 + len(ctx)  # pairs: the whole sentence
            by_hand = sum(float(logp[t - 1, ids[0, t]]) for t in range(first, ids.shape[1]))
            assert scores.logprob[i, j] == pytest.approx(by_hand, abs=1e-4)
            assert scores.n_tokens[i, j] == ids.shape[1] - first
            if j == 0:  # hidden states at the last context token, every layer
                for layer, h in enumerate(out.hidden_states):
                    np.testing.assert_allclose(scores.hidden[layer, i], h[0, len(ctx)].numpy(), atol=1e-5)
    assert scores.hidden.shape == (net.config.num_hidden_layers + 1, len(items), net.config.hidden_size)
    # padding and batching do not change a score
    again = pythia.score_items(net, tok, items, batch_tokens=100_000)
    np.testing.assert_allclose(again.logprob, scores.logprob, atol=1e-4)
    acc = pythia.accuracy(scores)
    assert acc["accuracy"] == np.mean(np.nanargmax(scores.logprob, 1) == scores.answer)  # NaN: fewer choices


def test_benchmark_rows_are_tidy(standin):
    net, tok = pythia.load_revision(standin, "step0"), pythia.load_tokenizer(standin)
    scores = pythia.score_items(net, tok, diagnostics.load_benchmark("induction")[:20])
    rows = pd.DataFrame(pythia.benchmark_rows(0, scores), columns=store.METRIC_COLUMNS)
    assert set(rows["measure"]) == {"accuracy", "accuracy_norm", "nll", "rankme", "rankme_centred"}
    assert set(rows.loc[rows["measure"] == "accuracy", "layer"]) == {-1}
    assert sorted(rows.loc[rows["measure"] == "rankme", "layer"]) == [0, 1, 2]
    assert (rows.loc[rows["measure"] == "rankme", "value"] <= 20 + 1e-6).all()  # <= min(N, d)


# ---------------------------------------------------------------------------
# the run store
# ---------------------------------------------------------------------------


def test_run_stores_resumes_and_skips_a_missing_revision(standin, small_benchmarks, tmp_path):
    messages = []
    kwargs = dict(benchmarks=["capitals", "logical_deduction"], root=tmp_path / "runs",
                  benchmark_dir=small_benchmarks, progress=False, log=messages.append)
    report = pythia.run(standin, revisions="step0,step6,step99", **kwargs)
    assert report["stored"] == ["step0", "step6"]
    assert list(report["skipped"]) == ["step99"] and "revision step99 missing" in report["skipped"]["step99"]
    assert any("step99" in m for m in messages)
    run_dir = report["run_dirs"]["logical_deduction"]
    config = store.read_config(run_dir)
    assert config["family"] == "pythia" and config["model"] == "standin" and config["task"] == "logical_deduction"
    assert config["level"] == "hard" and config["n_items"] == 12 and config["tokens_per_step"] == 8 * 32
    assert config["standin"]["steps"] == 12 and "provenance" in config
    metrics = store.read_metrics(run_dir)
    assert sorted(metrics["step"].unique()) == [0, 6]
    assert set(metrics["measure"]) == set(pythia.MEASURES)
    status = store.read_status(run_dir)
    assert store.is_complete(run_dir) and status["revisions"] == [0, 6] and "step99" in status["skipped"]
    # rerunning recomputes nothing; more revisions extend the same runs
    assert pythia.run(standin, revisions="step0,step6", **kwargs)["stored"] == []
    assert pythia.run(standin, revisions="step0,step6,step12", **kwargs)["stored"] == ["step12"]
    pd.testing.assert_frame_equal(store.read_metrics(run_dir)[lambda m: m["step"] < 12].reset_index(drop=True),
                                  metrics)
    # the generic loaders read it
    runs = results.load_runs(tmp_path / "runs")
    assert sorted(runs["task"]) == ["capitals", "logical_deduction"]
    runs = pythia.load_benchmark_runs(tmp_path / "runs", model="standin")
    assert list(runs["task"]) == ["capitals", "logical_deduction"]  # benchmark order
    table = results.gap_table(runs, results.load_metrics(runs), layers="all")
    assert len(table) == 2 * 3 and table["final_layer"].sum() == 2


def test_items_longer_than_the_context_are_left_out_and_counted(standin, small_benchmarks, tmp_path):
    """A GPT-NeoX root whose context is shorter than a benchmark prompt stopped notebook 06 ("a sequence of
    348 tokens exceeds the model's 256 positions"). Now those items are left out, counted and reported, and
    the measures are over the others: the same as scoring only the items that fit."""
    import shutil

    short = tmp_path / "short-context"
    shutil.copytree(standin, short)
    tokenizer = pythia.load_tokenizer(short)
    items = diagnostics.load_benchmark("logical_deduction", small_benchmarks)
    lengths = sorted({len(s["ids"]) for s in pythia.encode_items(tokenizer, items)})
    positions = lengths[len(lengths) // 2]  # about half of the items do not fit
    for config_file in short.glob("step*/config.json"):
        config = json.loads(config_file.read_text())
        config["max_position_embeddings"] = positions
        config_file.write_text(json.dumps(config))
    messages = []
    report = pythia.run(short, revisions="step0,step6", benchmarks=["logical_deduction"], root=tmp_path / "runs",
                        benchmark_dir=small_benchmarks, progress=False, log=messages.append)
    assert report["stored"] == ["step0", "step6"]
    kept, sequences, n_out = pythia.fitting_items(items, pythia.encode_items(tokenizer, items), positions)
    assert 0 < n_out < len(items) and len(kept) + n_out == len(items)
    run_dir = report["run_dirs"]["logical_deduction"]
    assert store.read_status(run_dir)["items_too_long"] == n_out
    assert any(f"{n_out} of {len(items)} items are longer than the model's {positions} positions" in m for m in messages)
    net = pythia.load_revision(short, "step6", device=torch.device("cpu"))
    expected = pythia.accuracy(pythia.score_items(net, tokenizer, kept, sequences=sequences))["accuracy"]
    metrics = store.read_metrics(run_dir)
    got = metrics[(metrics.step == 6) & (metrics.measure == "accuracy")]["value"].item()
    assert got == expected
    runs = pythia.load_benchmark_runs(tmp_path / "runs")
    assert f"left out: logical_deduction {n_out} of {len(items)}" in pythia.describe(runs, results.load_metrics(runs))


def test_summary_gap_matches_the_events_code():
    steps = np.concatenate([np.arange(20), np.arange(1000, 8001, 500)])
    acc = np.where(steps < 4000, 0.25, 0.9)
    rank = np.where(steps < 1000, 10.0, 4.0)  # leaves its course at 1000, seen through the median of 3 at 1500
    rows = [(s, -1, "accuracy", a) for s, a in zip(steps, acc)]
    rows += [(s, layer, "rankme", r * (layer + 1)) for s, r in zip(steps, rank) for layer in (0, 1)]
    metrics = pd.DataFrame(rows, columns=store.METRIC_COLUMNS).assign(run="r", task="logical_deduction")
    runs = pd.DataFrame([{"run": "r", "model": "m", "task": "logical_deduction", "level": "hard",
                          "chance": 0.25, "tokens_per_step": 100}])
    table = results.gap_table(runs, metrics)
    row = table.iloc[0]
    p = events.precursor(steps, rank * 2, events.chance_corrected(acc, 0.25))
    assert row["layer"] == 1 and row["acquisition_step"] == p.acquisition_step == 4000
    assert row["transition_step"] == 1500 and row["gap_steps"] == 2500 and row["gap_tokens"] == 250_000
    assert row["gap_fraction"] == pytest.approx(2500 / 8000) and bool(row["is_precursor"])
    c7 = results.claim_c7(table)
    assert c7["claim"] == "C7" and c7["value"] == 2500 and "logical_deduction gap 2500 steps" in c7["ours"]
    with pytest.raises(ValueError, match="parameter layers"):
        results.gap_table(runs, metrics, layers=[5])


def test_claim_from_the_committed_standin_says_it_is_not_pythia():
    row = results.c7_from_store()
    assert row["claim"] == "C7" and "NOT Pythia" in row["ours"]
    assert "logical_deduction" in row["ours"]


def test_notebook_parameter_errors():
    with pytest.raises(ValueError, match="parameter model: 'gpt-2'"):
        pythia.check_section(model="gpt-2")
    with pytest.raises(ValueError, match="parameter benchmarks: unknown value 'chess'"):
        pythia.check_section(benchmarks=["chess"])
    with pytest.raises(ValueError, match="parameter revisions"):
        pythia.select_metrics(pd.DataFrame({"step": [0, 1]}), "step5")


def test_section_store_the_committed_one_only_for_the_standin(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert pythia.check_section("standin") == pythia.committed_runs_root()
    assert pythia.check_section(HUB, "step0") == tmp_path / "cache" / "geomcap" / "pythia-runs"
    assert pythia.check_section(HUB, "step0", root=tmp_path / "mine") == tmp_path / "mine"
    with pytest.raises(ValueError, match="no complete run of model 'EleutherAI/pythia-160m'"):
        pythia.model_runs(HUB)  # reads only: nothing stored there, nothing computed


# ---------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------

GEOMCAP = [sys.executable, "-m", "geomcap.cli", "pythia"]


def geomcap(capsys, *args):
    """`geomcap pythia ARGS` in this process (the subprocess test below covers the entry point)."""
    from geomcap import cli

    code = cli.main(["pythia", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_entry_point_bad_model(tmp_path):
    result = subprocess.run(GEOMCAP + ["run", "--model", "gpt-2", "--out", str(tmp_path / "out")],
                            capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "neither a Pythia hub name" in result.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, fragment", [
    (["run", "--model", HUB, "--revisions", "step3"], "--revisions: step3 not in Pythia's schedule"),
    (["run", "--model", HUB, "--revisions", "every:0"], "--revisions: every:K needs a positive integer"),
    (["run", "--model", HUB, "--benchmarks", "chess"], "--benchmarks: unknown value 'chess'"),
    (["run", "--model", HUB, "--benchmarks", ","], "--benchmarks: empty selection"),
    (["run", "--model", HUB, "--device", "tpu"], "--device: unknown value 'tpu'; choose one of: auto, cpu, cuda"),
    (["run", "--revisions", "all"], "required: --model"),
    (["standin", "--steps", "0"], "--steps: must be a positive integer, got 0"),
    (["standin", "--steps", "x"], "--steps: must be a positive integer, got 'x'"),
    (["standin", "--puzzle-objects", "3,4"], "--puzzle-objects: unknown value 4; choose one of: 3, 5, 7"),
    (["standin", "--width", "30", "--heads", "4"], "not divisible"),
])
def test_cli_bad_input_one_line_exit_2(tmp_path, capsys, args, fragment):
    out = tmp_path / "out"
    code, _, err = geomcap(capsys, *args, "--out", out)
    assert code == 2, err
    assert err.count("\n") == 1 and fragment in err, err
    assert not out.exists()


@pytest.mark.parametrize("name, value, command", [
    ("benchmarks", "arithmetic,chess", ["run", "--model", HUB, "--out", "unused"]),
    ("revisions", "every:x", ["run", "--model", HUB, "--out", "unused"]),
    ("revisions", "step3", ["run", "--model", HUB, "--out", "unused"]),
    ("layers", "0,deep", ["show"]),
    ("device", "tpu", ["run", "--model", HUB, "--out", "unused"]),
])
def test_a_bad_pythia_value_is_the_same_line_in_the_notebook_and_the_command(capsys, tmp_path, monkeypatch, name,
                                                                             value, command):
    """Notebook 06 and `geomcap pythia` check benchmarks, revisions, layers and the device through the same rows:
    the same reason, worded "parameter NAME: ..." and "--NAME: ..."."""
    from geomcap import parameters

    monkeypatch.chdir(tmp_path)
    with pytest.raises(parameters.ParameterError) as in_the_notebook:
        parameters.check({name: value}, cells=["", f"# parameters\n{name} = 'all'\n"])
        pythia.check_section(HUB, **{name: parameters.check_value(name, value)} if name != "layers" else {})
    code, _, err = geomcap(capsys, *command, f"--{name}", value)
    reason = str(in_the_notebook.value).removeprefix(f"parameter {name}: ")
    assert code == 2 and err == f"geomcap: error: --{name}: {reason}\n"
    assert not (tmp_path / "unused").exists()


@pytest.mark.parametrize("name, value, text", [("steps", 0, "0"), ("seq_len", -1, "-1"), ("lr", 0.0, "0"),
                                              ("puzzles", -2, "-2"), ("puzzle_objects", [3, 9], "3,9"),
                                              ("max_chars", 0, "0")])
def test_a_bad_standin_option_is_the_same_line_from_python_and_the_command(tmp_path, capsys, name, value, text):
    """build_standin's keywords and `geomcap pythia standin`'s options are the rows of
    parameters.STANDIN_BUILD: the same reason, the command's worded "--NAME: ..." (it said "steps must be ...")."""
    from geomcap.schema import SettingError

    with pytest.raises(SettingError) as from_python:
        pythia.build_standin(tmp_path / "python", **{name: value})
    code, _, err = geomcap(capsys, "standin", "--out", tmp_path / "command", f"--{name.replace('_', '-')}", text)
    assert code == 2 and err == f"geomcap: error: --{name.replace('_', '-')}: {from_python.value.reason}\n"
    assert not (tmp_path / "python").exists() and not (tmp_path / "command").exists()


@pytest.mark.parametrize("value", [0, -5])
def test_a_bad_batch_tokens_is_the_same_line_from_python_and_the_command(tmp_path, capsys, value):
    """pythia.run's batch_tokens and `geomcap pythia run --batch-tokens` are one row: the same reason, before
    anything is loaded or written (run took 0 as its default)."""
    from geomcap.schema import SettingError

    with pytest.raises(SettingError) as from_python:
        pythia.run(HUB, root=tmp_path / "python", batch_tokens=value, progress=False)
    code, _, err = geomcap(capsys, "run", "--model", HUB, "--out", tmp_path / "command", "--batch-tokens", value)
    assert code == 2 and err == f"geomcap: error: --batch-tokens: {from_python.value.reason}\n"
    assert list(tmp_path.iterdir()) == []


def test_cli_run_reports_a_missing_revision(standin, tmp_path, capsys):
    code, out, err = geomcap(capsys, "run", "--model", standin, "--revisions", "step0,step99",
                             "--benchmarks", "arithmetic", "--out", tmp_path / "runs", "--quiet")
    assert code == 1, err
    assert "1 revisions scored now, 1 skipped" in out
    assert "revision step99 missing: no folder" in err
    code, out, _ = geomcap(capsys, "show", "--root", tmp_path / "runs")
    assert code == 0 and "arithmetic" in out
    from geomcap import cli

    assert cli.main(["runs", "--root", str(tmp_path / "runs")]) == 0  # the generic listing reads it too
    assert "arithmetic" in capsys.readouterr().out


def test_bfloat16_path_scores_like_float32(standin):
    """The GPU path loads in bfloat16; on CPU the same code must give nearly the same scores."""
    tok = pythia.load_tokenizer(standin)
    items = diagnostics.load_benchmark("pronoun")[:8]
    full = pythia.score_items(pythia.load_revision(standin, "step12"), tok, items)
    half_net = pythia.load_revision(standin, "step12", dtype=torch.bfloat16)
    assert half_net.dtype == torch.bfloat16
    half = pythia.score_items(half_net, tok, items)
    np.testing.assert_allclose(half.logprob, full.logprob, rtol=0.05)
    assert half.hidden.dtype == np.float32


def test_the_shortcut_split_scores_as_pythia_run_does(standin, tmp_path):
    """scripts/deduction_shortcut.py on the stand-in: per revision, its accuracy over all items is the one
    `pythia run` stores for the benchmark (the same scoring), and its classes partition the items as
    diagnostics.deduction_shortcut does."""
    out = tmp_path / "shortcut.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, str(Path(__file__).parents[1] / "scripts" / "deduction_shortcut.py"),
                    "--model", str(standin), "--out", str(out)], check=True, capture_output=True, env=env)
    record = json.loads(out.read_text())["benchmarks"]["logical_deduction_3"]["revisions"]
    items = diagnostics.load_benchmark("logical_deduction_3")
    classes = [diagnostics.deduction_shortcut(it) for it in items]
    report = pythia.run(standin, revisions="all", benchmarks=["logical_deduction_3"], root=tmp_path / "runs",
                        progress=False, log=lambda msg: None)
    metrics = store.read_metrics(report["run_dirs"]["logical_deduction_3"])
    stored = metrics[metrics["measure"] == "accuracy"].set_index("step")["value"]
    assert sorted(record, key=pythia.revision_step) == [f"step{s}" for s in stored.index]
    for revision, row in record.items():
        assert abs(row["all"]["accuracy"] - stored[pythia.revision_step(revision)]) <= 1 / len(items)
        assert {c: row[c]["items"] for c in diagnostics.SHORTCUT_CLASSES} == {
            c: classes.count(c) for c in diagnostics.SHORTCUT_CLASSES}
    split = shortcut_split(out)  # the book's reading of the same file
    assert len(split) == 4 * len(record) and set(split["build"]) == {"shortcut"}
    read = split[split["class"] == "all"].set_index("revision")["accuracy"]
    assert read.to_dict() == {r: row["all"]["accuracy"] for r, row in record.items()}


def _split_record(table):
    return {"model": "m", "classes": list(diagnostics.SHORTCUT_CLASSES), "rule": "r",
            "benchmarks": {"logical_deduction_3": {"file_sha256": "x", "revisions": table}}}


def test_shortcut_split_reads_a_record_into_tidy_rows(tmp_path):
    """A hand-made record of a shortcut model (right 1, wrong 0, the rest at chance) read back row by row; a class
    without items is NaN; revisions in step order whatever the file's order; other forms refused."""
    shortcut = {"all": {"items": 10, "accuracy": 0.6}, "shortcut right": {"items": 4, "accuracy": 1.0},
                "shortcut wrong": {"items": 2, "accuracy": 0.0}, "no shortcut": {"items": 4, "accuracy": 0.5}}
    empty = {"all": {"items": 4, "accuracy": 0.25}, "shortcut right": {"items": 0, "accuracy": None},
             "shortcut wrong": {"items": 0, "accuracy": None}, "no shortcut": {"items": 4, "accuracy": 0.25}}
    path = tmp_path / "shortcut-toy.json"
    path.write_text(json.dumps(_split_record({"step100": shortcut, "step20": empty})))
    split = shortcut_split(path)
    assert list(split["step"]) == [20] * 4 + [100] * 4
    assert list(split["class"][:4]) == ["all", *diagnostics.SHORTCUT_CLASSES]
    assert set(split["build"]) == {"toy"} and set(split["benchmark"]) == {"logical_deduction_3"}
    late = split[split["step"] == 100].set_index("class")
    assert late.loc["shortcut right", "accuracy"] == 1.0 and late.loc["shortcut wrong", "accuracy"] == 0.0
    assert late.loc["no shortcut", "items"] == 4
    assert split[split["step"] == 20].set_index("class")["accuracy"].isna().tolist() == [False, True, True, False]
    assert np.allclose(split["chance"], 1 / 3)
    assert set(shortcut_split(path, build="named")["build"]) == {"named"}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_split_record({"step1": {**shortcut, "lucky": {"items": 1, "accuracy": 1.0}}})))
    with pytest.raises(ValueError, match="unknown class"):
        shortcut_split(bad)
    bad.write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="not a shortcut split"):
        shortcut_split(bad)


def test_the_committed_shortcut_splits_are_read_for_the_book():
    split = committed_shortcut_splits()
    assert {"standin-4x256", "standin-4x128-balanced", "probe-4x128-answer"} <= set(split["build"])
    assert set(split["benchmark"]) == {"logical_deduction_3"}
    counts = split[split["step"] == 0].groupby("build")["items"].apply(list)
    for build, items in counts.items():  # the committed benchmark's classes, whatever the build
        classes = [diagnostics.deduction_shortcut(it) for it in diagnostics.load_benchmark("logical_deduction_3")]
        assert items == [len(classes), *(classes.count(c) for c in diagnostics.SHORTCUT_CLASSES)]


def test_a_balanced_puzzle_build_is_recorded_and_a_kept_one_keeps_its_old_record(standin, tmp_path):
    """puzzle_shortcut='balanced' is in the stand-in's record and its runs' configs (another hash); the default,
    'kept', is recorded nowhere, so builds and runs made before the option keep their names."""
    balanced = pythia.build_standin(tmp_path / "balanced", **{**TINY, "puzzle_shortcut": "balanced"})
    assert pythia.standin_info(balanced)["puzzle_shortcut"] == "balanced"
    assert "puzzle_shortcut" not in pythia.standin_info(standin)
    plain, other = (pythia.run_config(root, "logical_deduction_3") for root in (standin, balanced))
    assert "puzzle_shortcut" not in plain["standin"] and other["standin"]["puzzle_shortcut"] == "balanced"
    assert store.config_hash(plain) != store.config_hash(other)
    with pytest.raises(ValueError, match="puzzle_shortcut"):
        pythia.build_standin(tmp_path / "bad", **{**TINY, "puzzle_shortcut": "hidden"})


def _deduction_probe():
    import importlib.util

    spec = importlib.util.spec_from_file_location("deduction_probe", Path(__file__).parents[1] / "scripts" /
                                                  "deduction_probe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_deduction_probe_masks_the_context_and_records_each_scoring(standin, tmp_path):
    """scripts/deduction_probe.py: with loss "answer" only the answer's tokens carry labels, with "all" every
    token does, padding never; a tiny run records a row at step 0 and every --every steps, each splitting the
    committed benchmark's items as diagnostics.deduction_shortcut does; bad options are refused in one line."""
    probe = _deduction_probe()
    tok = pythia.load_tokenizer(standin)
    pairs = [("Which is left?\nAnswer:", " The red book is the leftmost."), ("Q?\nAnswer:", " The cat.")]
    ids, mask, labels = probe.batch_tensors(pairs, tok, "answer")
    for r, (context, answer) in enumerate(pairs):
        n_ctx = len(tok(context, add_special_tokens=False)["input_ids"])
        n_ans = len(tok(answer, add_special_tokens=False)["input_ids"])
        assert int(mask[r].sum()) == 1 + n_ctx + n_ans
        assert (labels[r] != -100).sum() == n_ans and torch.equal(labels[r, 1 + n_ctx: 1 + n_ctx + n_ans],
                                                                  ids[r, 1 + n_ctx: 1 + n_ctx + n_ans])
    _, mask_all, labels_all = probe.batch_tensors(pairs, tok, "all")
    assert torch.equal(labels_all != -100, mask_all.bool())
    out = tmp_path / "probe.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    script = str(Path(__file__).parents[1] / "scripts" / "deduction_probe.py")
    subprocess.run([sys.executable, script, "--out", str(out), "--layers", "1", "--width", "32", "--heads", "2",
                    "--steps", "4", "--every", "2", "--batch", "4", "--device", "cpu"], check=True,
                   capture_output=True, env=env)
    record = json.loads(out.read_text())
    assert [row["step"] for row in record["rows"]] == [0, 2, 4]
    assert record["rows"][0]["train_loss"] is None and all(math.isfinite(r["train_loss"]) for r in record["rows"][1:])
    classes = [diagnostics.deduction_shortcut(it) for it in diagnostics.load_benchmark("logical_deduction_3")]
    for row in record["rows"]:
        assert {c: row[c]["items"] for c in diagnostics.SHORTCUT_CLASSES} == {
            c: classes.count(c) for c in diagnostics.SHORTCUT_CLASSES}
    firsts = {}
    for shortcut in diagnostics.PUZZLE_SHORTCUTS:  # the stream is the stand-in's puzzles, with their shortcut
        stream = probe.puzzle_stream(0, shortcut)
        firsts[shortcut] = [next(stream) for _ in range(50)]
        items = diagnostics.training_puzzle_items(probe.CHUNK, seed=0, sizes=(3,), shortcut=shortcut)[:50]
        assert firsts[shortcut] == [(it["context"], it["choices"][it["answer"]]) for it in items]
    assert firsts["kept"] != firsts["balanced"]
    split = shortcut_split(out)  # the book reads a probe's record as a split over its steps
    assert list(split["step"].unique()) == [0, 2, 4] and set(split["build"]) == {"probe"}
    assert split[split["class"] == "all"]["accuracy"].tolist() == [r["all"]["accuracy"] for r in record["rows"]]
    bad = subprocess.run([sys.executable, script, "--out", str(tmp_path / "bad.json"), "--width", "30"],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "not divisible" in bad.stderr and not (tmp_path / "bad.json").exists()
