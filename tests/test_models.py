"""Model presets, shapes, causality, teacher-forced answer scoring."""
import pytest
import torch

from geomcap import tasks
from geomcap.models import (DEPTH_PRESETS, GROKKING_PRESETS, PRESETS, answer_inputs, answer_logits, answer_loss, build,
                            count_parameters, preset_table)


def test_six_presets_span_the_papers_range():
    rows = [r for r in preset_table(tasks.VOCAB_SIZE) if r["preset"] in PRESETS]
    assert [r["preset"] for r in rows] == list(PRESETS) and len(rows) == 6
    counts = [r["parameters"] for r in rows]
    assert counts == sorted(counts)
    assert abs(counts[0] / 405e3 - 1) <= 0.05
    assert abs(counts[-1] / 151e6 - 1) <= 0.05
    ratios = [b / a for a, b in zip(counts, counts[1:])]
    assert all(2.5 < r < 4.5 for r in ratios)  # roughly geometric (370 ** (1/5) ~ 3.3)


def test_depth_variants_are_deep_at_the_same_budget():
    rows = {r["preset"]: r for r in preset_table(tasks.VOCAB_SIZE)}
    assert list(rows) == [*PRESETS, *DEPTH_PRESETS, *GROKKING_PRESETS]
    for deep, base in (("405k-deep", "405k"), ("1.3m-deep", "1.3m")):
        assert rows[deep]["layers"] >= 6 > rows[base]["layers"]
        assert abs(rows[deep]["parameters"] / rows[base]["parameters"] - 1) < 0.1
        assert count_parameters(build(deep, tasks.VOCAB_SIZE)) == rows[deep]["parameters"]


def test_residual_before_the_final_layernorm():
    torch.manual_seed(0)
    model = build("405k", tasks.VOCAB_SIZE).eval()
    idx = torch.randint(tasks.VOCAB_SIZE, (3, 9))
    logits, hidden, residual = model(idx, return_hidden=True, return_residual=True)
    assert len(hidden) == model.n_hidden and residual.shape == hidden[-1].shape
    assert torch.allclose(model.ln_f(residual), hidden[-1])
    assert not torch.allclose(residual, hidden[-1])
    assert torch.equal(logits, model(idx))


def test_vocabulary_enters_only_through_the_tied_embedding():
    small, large = build("405k", 20), build("405k", 30)
    assert count_parameters(large) - count_parameters(small) == 10 * PRESETS["405k"].d_model
    assert small.lm_head.weight is small.tok_emb.weight


def test_forward_shapes_and_hidden_states():
    torch.manual_seed(0)
    model = build("405k", tasks.VOCAB_SIZE)
    idx = torch.randint(0, tasks.VOCAB_SIZE, (3, 10))
    logits, hidden = model(idx, return_hidden=True)
    assert logits.shape == (3, 10, tasks.VOCAB_SIZE)
    assert len(hidden) == model.n_hidden == PRESETS["405k"].n_layer + 1
    assert all(h.shape == (3, 10, 128) for h in hidden)
    # the last hidden state is what the unembedding reads (after the final LayerNorm)
    torch.testing.assert_close(model.lm_head(hidden[-1]), logits)
    torch.testing.assert_close(hidden[0], model.tok_emb(idx) + model.pos_emb(torch.arange(10)))


def test_attention_is_causal():
    torch.manual_seed(0)
    model = build("405k", tasks.VOCAB_SIZE).eval()
    idx = torch.randint(0, tasks.VOCAB_SIZE, (2, 12))
    changed = idx.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % tasks.VOCAB_SIZE
    torch.testing.assert_close(model(idx)[:, :8], model(changed)[:, :8])


def test_same_seed_same_weights():
    torch.manual_seed(7)
    a = build("405k", 25)
    torch.manual_seed(7)
    b = build("405k", 25)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown size 'huge'"):
        build("huge", 25)
    with pytest.raises(ValueError, match="block_size"):
        build("405k", 25)(torch.zeros(1, 65, dtype=torch.long))


def test_answer_scoring_positions():
    torch.manual_seed(0)
    model = build("405k", tasks.VOCAB_SIZE)
    data = tasks.make_task("add", "easy", n_train=50, n_test=8)
    p, a = data.test_prompts, data.test_answers
    assert answer_inputs(p, a).shape == (8, data.prompt_len + data.answer_len - 1)
    logits = answer_logits(model, p, a)
    assert logits.shape == (8, data.answer_len, tasks.VOCAB_SIZE)
    full = model(answer_inputs(p, a))
    # the logit at the last prompt token predicts the first answer token
    torch.testing.assert_close(logits[:, 0], full[:, data.answer_position])
    per_example = answer_loss(model, p, a, reduction="none")
    assert per_example.shape == (8,)
    manual = torch.nn.functional.cross_entropy(logits[3], a[3])
    torch.testing.assert_close(per_example[3], manual)
    torch.testing.assert_close(answer_loss(model, p, a), per_example.mean())


def test_grokking_model_is_nandas_one_layer_relu_model_without_layernorm():
    """grok-1l: one block of width 128 with 4 heads, MLP 512 with ReLU, no LayerNorm, untied unembedding
    (Nanda et al. 2023); its last hidden state is the residual stream itself."""
    torch.manual_seed(0)
    model = build("grok-1l", 138).eval()
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in model.modules())
    assert model.lm_head.weight is not model.tok_emb.weight
    assert model.blocks[0].mlp.fc.out_features == 512 and model.blocks[0].attn.n_head == 4
    d, v, t = 128, 138, 64  # embeddings + attention + MLP (biases included) + the untied unembedding
    assert count_parameters(model) == v * d + t * d + (3 * d * d + 3 * d + d * d + d) + (2 * 4 * d * d + 4 * d + d) + d * v
    idx = torch.randint(v, (5, 3))
    _, hidden, residual = model(idx, return_hidden=True, return_residual=True)
    assert torch.equal(hidden[-1], residual)
    x = torch.randn(4, 3, d)
    assert torch.equal(model.blocks[0].mlp(x), model.blocks[0].mlp.proj(torch.relu(model.blocks[0].mlp.fc(x))))
    # their initialisation: every matrix N(0, 1/d_model), the unembedding N(0, 1/vocab); biases zero
    for name, p in model.named_parameters():
        expected = (1 / v ** 0.5 if name == "lm_head.weight" else 1 / d ** 0.5) if p.ndim == 2 else 0.0
        assert abs(p.std().item() - expected) <= 0.1 * expected + 1e-6, name
