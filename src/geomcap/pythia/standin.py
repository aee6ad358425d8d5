"""The offline stand-in: a small GPT-NeoX trained here on offline text, saved at Pythia-like revisions."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import numpy as np
import torch

from geomcap import diagnostics, store
from geomcap.analysis.pythia_revisions import STANDIN_FILE, STANDIN_NAME, standin_info
from geomcap.checkpoints import quiet_transformers
from geomcap.config import lr_schedule
from geomcap.models import LogitsOnly, resolve_device
from geomcap.parameters import STANDIN_BUILD
from geomcap.store import check_writable
from geomcap.train import make_optimizer, train_step

#: what a stand-in's build records (``standin.json``): the rows of its options
STANDIN_BUILD_KEYS = tuple(STANDIN_BUILD)
#: each option's default, from its row
_DEFAULT = {name: row.default for name, row in STANDIN_BUILD.items()}


def recorded_build(values: dict) -> dict:
    """The build parameters a stand-in records (``standin.json``; a run's config): those of
    :data:`STANDIN_BUILD_KEYS` that ``values`` holds, ``puzzle_shortcut`` only where it is not "kept", so that
    the builds made before it existed keep their records and their runs' names."""
    build = {k: values[k] for k in STANDIN_BUILD_KEYS if k in values}
    if build.get("puzzle_shortcut") == "kept":
        del build["puzzle_shortcut"]
    return build


#: one solved ordering puzzle in the stand-in's text (its share of the corpus is recorded)
_PUZZLE = re.compile(r"The following paragraphs each describe.*?\nAnswer: [^.]*\.", re.S)


def standin_steps(steps: int, every: int) -> list[int]:
    """Pythia-like checkpoint steps: 0, the powers of two below ``every``, then every ``every`` steps."""
    log_part = [0] + [2 ** k for k in range(20) if 2 ** k < min(every, steps)]
    return sorted(set(log_part + list(range(every, steps + 1, every)) + [steps]))


def standin_corpus(seed: int = 0, templates: int = 400, max_chars: int | None = None, puzzles: int | None = None,
                   puzzle_objects=(3, 5, 7), puzzle_shortcut: str = "kept") -> list[str]:
    """Text available offline: Python's documentation topics (pydoc_data.topics, ~465K characters),
    ``templates`` correct sentences per easy benchmark family and ``puzzles`` solved ordering
    puzzles with ``puzzle_objects`` objects (default ``templates // 4``), generated with other seeds
    than the benchmarks' and never a benchmark item, their shortcut ``puzzle_shortcut``
    (:func:`geomcap.diagnostics.training_documents`).
    ``max_chars`` truncates the shuffled documents."""
    import random

    from pydoc_data.topics import topics

    docs = [topics[k] for k in sorted(topics)] + diagnostics.training_documents(
        seed=seed + 1, per_benchmark=templates, puzzles=puzzles, puzzle_objects=puzzle_objects,
        puzzle_shortcut=puzzle_shortcut)
    random.Random(seed).shuffle(docs)
    if max_chars is not None:
        kept, total = [], 0
        for d in docs:
            if total >= max_chars:
                break
            kept.append(d[: max_chars - total])
            total += len(kept[-1])
        docs = kept
    return docs


def train_tokenizer(docs: list[str], vocab_size: int):
    """A byte-level BPE tokenizer like Pythia's: ``<|endoftext|>`` = 0, ``<|padding|>`` = 1, no prefix space."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>", "<|padding|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(docs, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   unk_token="<|endoftext|>", pad_token="<|padding|>")


def neox_config(tokenizer_size: int, layers: int, width: int, heads: int, eot: int, max_positions: int = 2048):
    """The stand-in's ``GPTNeoXConfig``: Pythia's architecture (rotary embeddings on 25% of each head, base
    10000; parallel residual; untied input and output embeddings; MLP 4 x width; no dropout) at ``layers`` x
    ``width`` with ``heads`` heads, the vocabulary padded to a multiple of 64 (as Pythia's), ``eot`` the
    ``<|endoftext|>`` id."""
    from transformers import GPTNeoXConfig

    return GPTNeoXConfig(vocab_size=64 * math.ceil(tokenizer_size / 64), hidden_size=width,
                         num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=4 * width,
                         rotary_pct=0.25, rotary_emb_base=10000, max_position_embeddings=max_positions,
                         use_parallel_residual=True, tie_word_embeddings=False, bos_token_id=eot,
                         eos_token_id=eot, attention_dropout=0.0, hidden_dropout=0.0)


def build_standin(out, steps: int = _DEFAULT["steps"], layers: int = _DEFAULT["layers"], width: int = _DEFAULT["width"],
                  heads: int = _DEFAULT["heads"], vocab_size: int = _DEFAULT["vocab_size"],
                  seq_len: int = _DEFAULT["seq_len"], batch_size: int = _DEFAULT["batch_size"],
                  lr: float = _DEFAULT["lr"], every: int = _DEFAULT["every"], seed: int = _DEFAULT["seed"],
                  templates: int = _DEFAULT["templates"], max_chars: int | None = _DEFAULT["max_chars"],
                  puzzles: int | None = _DEFAULT["puzzles"], puzzle_objects=_DEFAULT["puzzle_objects"],
                  puzzle_shortcut: str = _DEFAULT["puzzle_shortcut"], device: str = "auto",
                  progress: bool = True) -> Path:
    """Train a small GPT-NeoX (Pythia's architecture: rotary on 25% of each head, parallel residual,
    untied embeddings) on offline text and save it at Pythia-like revisions under ``out/stepN``.

    Each revision folder holds ``save_pretrained`` output of the model and its
    tokenizer; ``out/standin.json`` (written last) records the build, the
    revisions and ``tokens_per_step`` (batch_size x seq_len). Trained with
    geomcap's one training step (:func:`geomcap.train.train_step`,
    :func:`geomcap.train.make_optimizer`, :func:`geomcap.config.lr_schedule`):
    AdamW (betas 0.9, 0.95; weight decay 0.01 on the matrices) with 1% linear
    warmup then cosine decay to 10% of ``lr`` (Pythia's schedule), gradient norm
    clipped at 1. ``first_loss``: the training loss (nats/token) of the first
    batch, before any update (~ln of the model's vocabulary); ``final_loss``: the
    mean of the last 10 steps.
    A folder already holding a stand-in with the same build is reused. Each argument is checked through its
    row (``geomcap.parameters.STANDIN_BUILD``, which also gives the defaults): a ValueError of one line.

    The text (``standin_corpus``): Python's documentation, ``templates``
    sentences per easy family and ``puzzles`` solved ordering puzzles with
    ``puzzle_objects`` objects (None: ``templates // 4`` of 3, 5 and 7 objects,
    the first stand-in's text), none of them a benchmark item. The defaults mix
    3000 three-object puzzles into the text (41% of its tokens), meant to make
    a hard task (``logical_deduction_3``) learnable; ``seq_len`` 128 holds a
    whole puzzle (75 tokens on average, at most 92). Seeded: the same arguments
    on the same machine give the same weights.

    ``device``: "auto" (cuda when present, else cpu), "cpu" or "cuda"; it is not a build parameter (a folder
    built on either is reused), and ``standin.json``'s provenance records it. The batches are drawn on the CPU
    either way, so a GPU build trains on the same windows; its weights differ from a CPU build's by
    floating-point rounding.
    """
    given = {"steps": steps, "layers": layers, "width": width, "heads": heads, "vocab_size": vocab_size,
             "seq_len": seq_len, "batch_size": batch_size, "lr": lr, "every": every, "seed": seed,
             "templates": templates, "max_chars": max_chars, "puzzles": puzzles, "puzzle_objects": puzzle_objects,
             "puzzle_shortcut": puzzle_shortcut}
    build = {name: row.check(given[name]) for name, row in STANDIN_BUILD.items()}  # each through its row
    build["puzzle_objects"] = sorted(set(build["puzzle_objects"]))
    build = recorded_build(build)
    dev = resolve_device(device)
    if width % heads:
        raise ValueError(f"width {width} is not divisible by heads {heads}")
    if vocab_size < 300:
        raise ValueError(f"vocab_size must be >= 300 (256 bytes + 2 special tokens + merges), got {vocab_size}")
    out = Path(out)
    info = standin_info(out) if out.is_dir() else None
    if info is not None and recorded_build(info) == build:
        return out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"--out {out} exists and is not empty (nor a stand-in with this build): choose a new folder")
    check_writable(out)
    from transformers import GPTNeoXForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    quiet_transformers()

    t0 = time.perf_counter()
    docs = standin_corpus(seed, templates, max_chars, puzzles, build["puzzle_objects"], puzzle_shortcut)
    tokenizer = train_tokenizer(docs, vocab_size)
    eot = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    stream = []
    for ids in tokenizer(docs, add_special_tokens=False)["input_ids"]:
        stream += [eot, *ids]
    stream = torch.tensor(stream, dtype=torch.long)
    if len(stream) <= seq_len + 1:
        raise ValueError(f"corpus of {len(stream)} tokens is shorter than seq_len {seq_len}")

    torch.manual_seed(seed)
    net = GPTNeoXForCausalLM(neox_config(len(tokenizer), layers, width, heads, eot)).to(dev)
    # geomcap's one training step (train.make_optimizer, train.train_step, train.lr_schedule) with Pythia's
    # settings: AdamW betas (0.9, 0.95), weight decay 0.01 on the matrices, 1% warmup, cosine to 10%,
    # gradient norm clipped at 1; the loss is next-token cross-entropy over the whole window (the
    # window's first token as the prompt, the rest as the answer)
    opt = make_optimizer(net, lr, weight_decay=0.01, betas=(0.9, 0.95))
    warmup, step_model = max(1, steps // 100), LogitsOnly(net)

    save_at = set(standin_steps(steps, every))
    gen = torch.Generator().manual_seed(seed)

    def save(step):
        folder = out / f"step{step}"
        net.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    from tqdm import tqdm

    t_train = time.perf_counter()
    save(0)
    net.train()
    losses = []
    for step in tqdm(range(1, steps + 1), desc="stand-in", unit="step", disable=not progress):
        starts = torch.randint(0, len(stream) - seq_len - 1, (batch_size,), generator=gen)
        batch = torch.stack([stream[s: s + seq_len] for s in starts.tolist()]).to(dev)
        loss = train_step(net, opt, batch[:, :1], batch[:, 1:], lr_schedule(step - 1, lr, warmup, steps, 0.1),
                          1.0, dev, step_model=step_model)
        losses.append(float(loss.detach()))
        if step in save_at:
            net.eval()
            save(step)
            net.train()
    info = {"name": STANDIN_NAME, **build, "tokens_per_step": batch_size * seq_len,
            "revisions": [f"step{s}" for s in sorted(save_at)],
            "parameters": sum(p.numel() for p in net.parameters()), "tokenizer_vocab": len(tokenizer),
            "corpus_chars": sum(map(len, docs)), "corpus_tokens": int(len(stream)),
            "puzzle_chars": sum(len(p) for d in docs for p in re.findall(_PUZZLE, d)),
            "first_loss": losses[0], "final_loss": float(np.mean(losses[-10:])),
            "train_seconds": round(time.perf_counter() - t_train, 2),
            "build_seconds": round(time.perf_counter() - t0, 2), "provenance": store.provenance(str(dev))}
    store.atomic_write_json(out / STANDIN_FILE, info)
    return out
