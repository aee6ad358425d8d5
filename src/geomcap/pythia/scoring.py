"""Scoring a benchmark's items by log-likelihood, and the hidden states at the scored position."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from geomcap import geometry


@dataclass(frozen=True)
class Scores:
    """Scores of one benchmark at one revision (see :func:`score_items`).

    - ``logprob``: (n_items, max_choices) float64, summed log-probability in nats of each
      choice (pairs: of the whole sentence); NaN where an item has fewer choices.
    - ``n_tokens``, ``n_bytes``: (n_items, max_choices) tokens scored and UTF-8 bytes of the
      scored text.
    - ``answer``: (n_items,) int, the gold choice.
    - ``hidden``: (n_layers + 1, n_items, d) float32 hidden states at the last context token
      (0 = embeddings, the last after the final LayerNorm), or None.
    """

    logprob: np.ndarray
    n_tokens: np.ndarray
    n_bytes: np.ndarray
    answer: np.ndarray
    hidden: np.ndarray | None


def _special_ids(tokenizer) -> tuple[int, int]:
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    if bos is None:
        raise ValueError("the tokenizer has neither a bos nor an eos token (Pythia's is <|endoftext|>, id 0)")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else bos
    return int(bos), int(pad)


def encode_items(tokenizer, items: list[dict]) -> list[dict]:
    """One sequence per (item, choice): ids, the first scored index, the scored position.

    ``ids = [<|endoftext|>] + context + choice``; tokens ``ids[score_from:]`` are
    scored (1 for pairs: the whole sentence; after the context for choices);
    ``position = len(context)`` is the last context token's index.
    """
    bos, _ = _special_ids(tokenizer)
    contexts = tokenizer([it["context"] for it in items], add_special_tokens=False)["input_ids"]
    flat_choices = [c for it in items for c in it["choices"]]
    choice_ids = iter(tokenizer(flat_choices, add_special_tokens=False)["input_ids"])
    sequences = []
    for i, (item, ctx) in enumerate(zip(items, contexts)):
        if not ctx:
            raise ValueError(f"item {item.get('id', i)}: empty context")
        for j, choice in enumerate(item["choices"]):
            ch = next(choice_ids)
            pair = item["kind"] == "pair"
            text = item["context"] + choice if pair else choice
            sequences.append({"item": i, "choice": j, "ids": [bos, *ctx, *ch], "position": len(ctx),
                              "score_from": 1 if pair else 1 + len(ctx), "n_bytes": len(text.encode())})
    return sequences


def fitting_items(items: list[dict], sequences: list[dict], max_positions: int) -> tuple[list[dict], list[dict], int]:
    """The items each of whose sequences (:func:`encode_items`) fits in ``max_positions`` tokens, their
    sequences (items renumbered in order), and the number of items left out (longer than the context)."""
    too_long = {s["item"] for s in sequences if len(s["ids"]) > max_positions}
    index = {old: new for new, old in enumerate(i for i in range(len(items)) if i not in too_long)}
    return ([items[i] for i in index], [{**s, "item": index[s["item"]]} for s in sequences if s["item"] in index],
            len(too_long))


def _batches(sequences: list[dict], batch_tokens: int) -> list[list[dict]]:
    """Longest first, as many sequences per batch as fit in batch_tokens (padded)."""
    order = sorted(sequences, key=lambda s: -len(s["ids"]))
    batches, current = [], []
    for seq in order:
        if current and (len(current) + 1) * len(current[0]["ids"]) > batch_tokens:
            batches.append(current)
            current = []
        current.append(seq)
    if current:
        batches.append(current)
    return batches


@torch.no_grad()
def score_items(model, tokenizer, items: list[dict], batch_tokens: int = 4096, hidden: bool = True,
                sequences: list[dict] | None = None, head_chunk: int = 2048) -> Scores:
    """Log-likelihood of every choice of every item, and the hidden states at the scored position.

    ``model``: a GPTNeoXForCausalLM on its device; ``batch_tokens``: padded
    tokens per forward pass (memory ~ batch_tokens x width x layers with
    ``hidden``); ``sequences``: :func:`encode_items` output, to reuse across revisions.
    The output head runs on ``head_chunk`` scored positions at a time.
    """
    device = next(model.parameters()).device
    base = getattr(model, model.base_model_prefix)
    head = model.get_output_embeddings()
    head_weight = head.weight.float()  # log-likelihoods in float32 even when the model runs in bf16
    head_bias = None if head.bias is None else head.bias.float()
    _, pad = _special_ids(tokenizer)
    sequences = encode_items(tokenizer, items) if sequences is None else sequences
    max_len = max(len(s["ids"]) for s in sequences)
    if max_len > model.config.max_position_embeddings:
        raise ValueError(f"a sequence of {max_len} tokens exceeds the model's "
                         f"{model.config.max_position_embeddings} positions")
    n_items, n_choices = len(items), max(len(it["choices"]) for it in items)
    logprob = np.full((n_items, n_choices), np.nan)
    n_tokens = np.zeros((n_items, n_choices), dtype=np.int64)
    n_bytes = np.zeros((n_items, n_choices), dtype=np.int64)
    states = None
    for batch in _batches(sequences, batch_tokens):
        width = len(batch[0]["ids"])
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, seq in enumerate(batch):
            ids[r, : len(seq["ids"])] = torch.tensor(seq["ids"])
            mask[r, : len(seq["ids"])] = 1
        keep = [r for r, seq in enumerate(batch) if seq["choice"] == 0] if hidden else []
        out = base(input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=bool(keep),
                   use_cache=False)
        if keep:
            rows = torch.tensor(keep, device=device)
            cols = torch.tensor([batch[r]["position"] for r in keep], device=device)
            picked = torch.stack([h[rows, cols] for h in out.hidden_states]).float().cpu().numpy()
            if states is None:
                states = np.zeros((picked.shape[0], n_items, picked.shape[2]), dtype=np.float32)
            states[:, [batch[r]["item"] for r in keep]] = picked
        # the head only where a scored token is predicted: position t predicts token t + 1
        rows, cols, targets = [], [], []
        for r, seq in enumerate(batch):
            t = range(seq["score_from"] - 1, len(seq["ids"]) - 1)
            rows += [r] * len(t)
            cols += list(t)
            targets += seq["ids"][seq["score_from"]:]
        rows_t, cols_t = torch.tensor(rows, device=device), torch.tensor(cols, device=device)
        targets_t = torch.tensor(targets, device=device)
        token_lp = torch.empty(len(rows), dtype=torch.float64)
        for start in range(0, len(rows), head_chunk):
            sl = slice(start, start + head_chunk)
            logits = torch.nn.functional.linear(out.last_hidden_state[rows_t[sl], cols_t[sl]].float(),
                                                head_weight, head_bias)
            token_lp[sl] = logits.log_softmax(-1).gather(1, targets_t[sl, None])[:, 0].double().cpu()
        per_row = torch.zeros(len(batch), dtype=torch.float64).index_add_(0, torch.tensor(rows), token_lp)
        for r, seq in enumerate(batch):
            i, j = seq["item"], seq["choice"]
            logprob[i, j] = float(per_row[r])
            n_tokens[i, j] = len(seq["ids"]) - seq["score_from"]
            n_bytes[i, j] = seq["n_bytes"]
        del out
    answer = np.array([it["answer"] for it in items], dtype=np.int64)
    return Scores(logprob, n_tokens, n_bytes, answer, states)


def accuracy(scores: Scores) -> dict:
    """accuracy (argmax of the summed log-probability), accuracy_norm (per byte) and nll (mean
    per-token negative log-likelihood of the gold choice, nats)."""
    idx = np.arange(len(scores.answer))
    with np.errstate(invalid="ignore", divide="ignore"):
        per_byte = scores.logprob / scores.n_bytes
    gold_tokens = np.maximum(scores.n_tokens[idx, scores.answer], 1)
    return {"accuracy": float(np.mean(np.nanargmax(scores.logprob, axis=1) == scores.answer)),
            "accuracy_norm": float(np.mean(np.nanargmax(per_byte, axis=1) == scores.answer)),
            "nll": float(np.mean(-scores.logprob[idx, scores.answer] / gold_tokens))}


def benchmark_rows(step: int, scores: Scores) -> list[tuple]:
    """Tidy rows (step, layer, measure, value) of one benchmark at one revision."""
    rows = [(step, -1, name, value) for name, value in accuracy(scores).items()]
    if scores.hidden is not None:
        for centre, name in ((False, "rankme"), (True, "rankme_centred")):
            for layer, value in enumerate(geometry.rankme_by_layer(scores.hidden, centre=centre)):
                rows.append((step, layer, name, value))
    return rows
