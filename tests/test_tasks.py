"""Tests for geomcap.tasks: answers are checked against brute-force Python, not the module's code."""

import itertools
import re

import numpy as np
import pytest
import torch

from geomcap import tasks
from geomcap.tasks import LEVELS, TASKS, VOCAB_SIZE, make_task

PAIRS = list(itertools.product(TASKS, LEVELS))
N_CHECK = 300  # rows per split checked by brute force
TABLES = ("current", "legacy")  # LEVEL_TABLE, and the first grid's LEGACY_LEVEL_TABLE

# (prompt_len, answer_len), written out by hand from the level tables.
EXPECTED_LENS = {
    "current": {
        ("copy", "easy"): (8, 6), ("copy", "medium"): (10, 8), ("copy", "hard"): (18, 16),
        ("reverse", "easy"): (8, 6), ("reverse", "medium"): (10, 8), ("reverse", "hard"): (18, 16),
        ("compare", "easy"): (9, 1), ("compare", "medium"): (11, 1), ("compare", "hard"): (19, 1),
        ("parity", "easy"): (20, 18), ("parity", "medium"): (24, 22), ("parity", "hard"): (28, 26),
        ("add", "easy"): (9, 4), ("add", "medium"): (11, 5), ("add", "hard"): (15, 7),
        ("mod", "easy"): (7, 2), ("mod", "medium"): (7, 2), ("mod", "hard"): (7, 2),
        ("sort", "easy"): (8, 6), ("sort", "medium"): (10, 8), ("sort", "hard"): (14, 12),
        ("mul", "easy"): (8, 5), ("mul", "medium"): (9, 6), ("mul", "hard"): (7, 4),
    },
    "legacy": {
        ("copy", "easy"): (6, 4), ("copy", "medium"): (10, 8), ("copy", "hard"): (18, 16),
        ("reverse", "easy"): (6, 4), ("reverse", "medium"): (10, 8), ("reverse", "hard"): (18, 16),
        ("compare", "easy"): (7, 1), ("compare", "medium"): (11, 1), ("compare", "hard"): (19, 1),
        ("parity", "easy"): (10, 1), ("parity", "medium"): (14, 1), ("parity", "hard"): (18, 1),
        ("add", "easy"): (7, 3), ("add", "medium"): (9, 4), ("add", "hard"): (13, 6),
        ("mod", "easy"): (7, 2), ("mod", "medium"): (7, 2), ("mod", "hard"): (7, 2),
        ("sort", "easy"): (6, 4), ("sort", "medium"): (10, 8), ("sort", "hard"): (14, 12),
        ("mul", "easy"): (6, 3), ("mul", "medium"): (7, 4), ("mul", "hard"): (8, 5),
    },
}
MOD_P = {"current": {"easy": 47, "medium": 47, "hard": 97}, "legacy": {"easy": 11, "medium": 23, "hard": 47}}
MOD_TRAIN_FRACTION = {"current": {"easy": 0.6, "medium": 0.5, "hard": 0.3},
                      "legacy": {"easy": 0.5, "medium": 0.5, "hard": 0.5}}
COMPARE_N = {"current": {"easy": 3, "medium": 4, "hard": 8}, "legacy": {"easy": 2, "medium": 4, "hard": 8}}
RUNNING_PARITY = {"current": True, "legacy": False}

_cache = {}


def params_for(task, level, table):
    return tasks.level_params(task, level, legacy=table == "legacy")


def data_for(task, level, table="current"):
    """make_task at the defaults, generated once per session."""
    if (task, level, table) not in _cache:
        _cache[task, level, table] = tasks.make_task(task, level, seed=0, params=params_for(task, level, table))
    return _cache[task, level, table]


def brute_force(task, level, prompt, table="current"):
    """Decoded prompt text -> expected answer text, by plain Python."""
    m = re.fullmatch(r"<(\w+)>(.*)=", prompt)
    assert m is not None, prompt
    assert m.group(1) == task
    body = m.group(2)
    if task in ("copy", "reverse", "sort", "parity"):
        assert body.isdigit()
        if task == "copy":
            return body
        if task == "reverse":
            return "".join(reversed(body))
        if task == "sort":
            return "".join(sorted(body))
        assert set(body) <= {"0", "1"}
        if RUNNING_PARITY[table]:
            return "".join(str(sum(int(c) for c in body[:i + 1]) % 2) for i in range(len(body)))
        return str(sum(int(c) for c in body) % 2)
    a_text, b_text = re.split(r"[,+*]", body)
    a, b = int(a_text), int(b_text)
    if task == "compare":
        assert len(a_text) == len(b_text) == COMPARE_N[table][level]
        return ">" if a > b else ("<" if a < b else "=")
    if task == "add":
        n = len(a_text)
        assert len(b_text) == n
        return f"{a + b:0{n + 1}d}"
    if task == "mod":
        p = MOD_P[table][level]
        assert 0 <= a < p and 0 <= b < p and len(a_text) == len(b_text) == 2
        return f"{(a + b) % p:02d}"
    if task == "mul":
        return f"{a * b:0{len(a_text) + len(b_text)}d}"
    raise AssertionError(task)


def rows_as_bytes(t):
    return {row.tobytes() for row in t.numpy()}


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("task,level", PAIRS)
def test_answers_match_brute_force(task, level, table):
    data = data_for(task, level, table)
    params = params_for(task, level, table)
    splits = ((data.train_prompts, data.train_answers), (data.test_prompts, data.test_answers))
    for prompts, answers in splits:
        for i in range(min(N_CHECK, len(prompts))):
            prompt = tasks.decode(prompts[i])
            assert tasks.decode(answers[i]) == brute_force(task, level, prompt, table), prompt
            assert tasks.solve(task, level, prompts[i], params=params) == answers[i].tolist()


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("task,level", PAIRS)
def test_test_prompts_never_in_train(task, level, table):
    data = data_for(task, level, table)
    assert data.n_test > 0 and data.n_train > 0
    assert not rows_as_bytes(data.test_prompts) & rows_as_bytes(data.train_prompts)
    # test prompts are distinct
    assert len(rows_as_bytes(data.test_prompts)) == data.n_test


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("task,level", PAIRS)
def test_shapes_and_layout(task, level, table):
    data = data_for(task, level, table)
    prompt_len, answer_len = EXPECTED_LENS[table][task, level]
    assert (data.prompt_len, data.answer_len) == (prompt_len, answer_len)
    assert tasks.sequence_lengths(task, level, params_for(task, level, table)) == (prompt_len, answer_len)
    assert prompt_len + answer_len <= tasks.MAX_SEQ_LEN
    assert data.answer_position == prompt_len - 1
    assert data.params == params_for(task, level, table)
    for t, n in ((data.train_prompts, data.n_train), (data.train_answers, data.n_train),
                 (data.test_prompts, data.n_test), (data.test_answers, data.n_test)):
        assert t.dtype == torch.int64 and t.shape[0] == n
        assert 0 <= t.min() and t.max() < tasks.VOCAB_SIZE
    for p in (data.train_prompts, data.test_prompts):
        assert p.shape[1] == prompt_len
        assert (p[:, 0] == tasks.TOKEN_ID[f"<{task}>"]).all()
        assert (p[:, -1] == tasks.TOKEN_ID["="]).all()
        assert (p != tasks.PAD_ID).all()


def test_default_sizes():
    legacy = {pair: (data_for(*pair, "legacy").n_train, data_for(*pair, "legacy").n_test) for pair in PAIRS}
    assert legacy["parity", "easy"] == (128, 128)  # 256 prompts, half for test
    assert legacy["mul", "easy"] == (500, 500)
    assert legacy["copy", "easy"] == (10_000 - 512, 512)
    assert legacy["copy", "hard"] == (100_000, 512)
    assert legacy["compare", "easy"] == (100_000, 512)
    assert legacy["mod", "hard"] == (2209 // 2, 2209 - 2209 // 2)
    current = {pair: (data_for(*pair).n_train, data_for(*pair).n_test) for pair in PAIRS}
    assert current["mod", "easy"] == (int(0.6 * 2209), 2209 - int(0.6 * 2209))
    assert current["mod", "hard"] == (int(0.3 * 97**2), 97**2 - int(0.3 * 97**2))
    assert current["mul", "easy"] == (100_000 - 512, 512)  # 10^5 prompts


def test_easy_never_has_less_data_than_medium():
    # up to the 512 test prompts that mul easy (10^5 prompts) gives up: 99,488 against 100,000
    for task in TASKS:
        assert data_for(task, "easy").n_train >= 0.99 * data_for(task, "medium").n_train, task
    assert data_for("mul", "easy").n_train == 100_000 - 512


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("level", LEVELS)
def test_mod_is_the_whole_table_split(level, table):
    p = MOD_P[table][level]
    data = data_for("mod", level, table)

    def pairs(prompts):
        out = []
        for row in prompts:
            a, b = tasks.decode(row)[len("<mod>"):-1].split("+")
            out.append((int(a), int(b)))
        return out

    train, test = pairs(data.train_prompts), pairs(data.test_prompts)
    assert len(set(train)) == len(train) and len(set(test)) == len(test)
    assert set(train) | set(test) == {(a, b) for a in range(p) for b in range(p)}
    assert not set(train) & set(test)
    assert len(train) == int(MOD_TRAIN_FRACTION[table][level] * p * p)
    # n_train / n_test do not change the grokking split
    small = tasks.make_task("mod", level, n_train=10, n_test=3, params=params_for("mod", level, table))
    assert torch.equal(small.train_prompts, data.train_prompts)
    assert torch.equal(small.test_prompts, data.test_prompts)


def _first_difference(prompt):
    a, b = prompt[len("<compare>"):-1].split(",")
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), len(a))


@pytest.mark.parametrize("level", LEVELS)
def test_compare_is_balanced(level):
    n = COMPARE_N["current"][level]
    data = data_for("compare", level)
    for prompts, answers in ((data.train_prompts[:5000], data.train_answers[:5000]),
                             (data.test_prompts, data.test_answers)):
        symbols = [tasks.decode(a) for a in answers]
        for s in (">", "<", "="):
            assert symbols.count(s) / len(symbols) > 0.05, (s, level)
        # where do a and b first differ? uniform-ish over 0..n-1, not 90% at digit 0
        first = np.array([_first_difference(tasks.decode(p)) for p in prompts])
        for i in range(n):
            assert np.mean(first == i) > 0.4 / (n + 1), (i, level)
        assert np.mean(first == 0) < 0.5


def test_determinism():
    for task, level in [("copy", "medium"), ("compare", "easy"), ("compare", "hard"), ("add", "easy"),
                        ("mod", "medium"), ("sort", "hard")]:
        a = tasks.make_task(task, level, seed=3, n_train=2000, n_test=100)
        b = tasks.make_task(task, level, seed=3, n_train=2000, n_test=100)
        c = tasks.make_task(task, level, seed=4, n_train=2000, n_test=100)
        for name in ("train_prompts", "train_answers", "test_prompts", "test_answers"):
            assert torch.equal(getattr(a, name), getattr(b, name)), (task, name)
        assert not torch.equal(a.train_prompts, c.train_prompts)
        assert not torch.equal(a.test_prompts, c.test_prompts)


def test_test_set_does_not_depend_on_n_train():
    for task, level in [("copy", "hard"), ("compare", "medium"), ("parity", "medium"), ("add", "medium")]:
        a = tasks.make_task(task, level, seed=1, n_train=50, n_test=64)
        b = tasks.make_task(task, level, seed=1, n_train=5000, n_test=64)
        assert torch.equal(a.test_prompts, b.test_prompts)


def test_tasks_sharing_a_seed_do_not_share_operands():
    copy = tasks.make_task("copy", "medium", n_train=100, n_test=10)
    rev = tasks.make_task("reverse", "medium", n_train=100, n_test=10)
    assert not torch.equal(copy.train_prompts[:, 1:], rev.train_prompts[:, 1:])


def test_check_task_level_names_the_bad_value():
    with pytest.raises(ValueError, match="unknown task 'foo'") as e:
        tasks.check_task_level("foo", "easy")
    assert "copy, reverse, compare" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError, match="unknown level 'extreme'") as e:
        tasks.check_task_level("copy", "extreme")
    assert "easy, medium, hard" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError, match="'foo'"):
        tasks.make_task("foo", "easy")
    with pytest.raises(ValueError, match="'Easy'"):
        tasks.level_params("add", "Easy")
    tasks.check_task_level("mul", "hard")  # no error


def test_level_params_is_a_copy():
    p = tasks.level_params("add", "hard")
    assert p == {"n_digits": 6}
    p["n_digits"] = 99
    assert tasks.LEVEL_TABLE["add"]["hard"]["n_digits"] == 6
    assert tasks.level_params("add", "hard", legacy=True) == {"n_digits": 5}


def test_check_params_names_the_bad_parameter():
    with pytest.raises(ValueError, match="n_digits"):
        tasks.make_task("add", "easy", params={"digits": 3})
    with pytest.raises(ValueError, match="train_fraction"):
        tasks.make_task("mod", "easy", params={"p": 47, "train_fraction": 1.5})
    with pytest.raises(ValueError, match="p must be in"):
        tasks.check_params("mod", {"p": 101, "train_fraction": 0.5})
    with pytest.raises(ValueError, match="answer"):
        tasks.check_params("parity", {"n_bits": 8, "answer": "prefix"})
    assert tasks.check_params("parity", {"n_bits": 8}) == {"n_bits": 8}


def test_make_task_rejects_bad_sizes():
    with pytest.raises(ValueError, match="n_train"):
        tasks.make_task("copy", "easy", n_train=-1)
    with pytest.raises(ValueError, match="seed"):
        tasks.make_task("copy", "easy", seed=1.5)


def test_exact_match():
    answers = torch.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9], [0, 0, 0]])
    predicted = torch.tensor([[1, 2, 3], [4, 5, 0], [0, 8, 9], [0, 0, 0]])
    assert exact_match_list(predicted, answers) == [True, False, False, True]
    single = tasks.exact_match(torch.tensor([[3], [4]]), torch.tensor([[3], [5]]))
    assert single.dtype == torch.bool and single.tolist() == [True, False]
    with pytest.raises(ValueError):
        tasks.exact_match(torch.zeros(2, 3), torch.zeros(2, 4))


def exact_match_list(p, a):
    out = tasks.exact_match(p, a)
    assert out.shape == (p.shape[0],) and out.dtype == torch.bool
    return out.tolist()


def test_vocabulary():
    assert tasks.VOCAB[0] == "<pad>"
    assert tasks.VOCAB_SIZE == len(tasks.VOCAB) == len(set(tasks.VOCAB))
    assert all(tasks.VOCAB[i] == tok for tok, i in tasks.TOKEN_ID.items())
    for tok in list("0123456789+*,=><") + [f"<{t}>" for t in TASKS]:
        assert tok in tasks.TOKEN_ID


def test_encode_decode_round_trip():
    assert tasks.decode(tasks.encode("12+3=")) == "12+3="
    assert tasks.encode("<") == [tasks.TOKEN_ID["<"]]
    ids = tasks.encode(["<mod>", "0", "7", "+", "1", "5", "="])
    assert tasks.decode(ids) == "<mod>07+15="
    assert tasks.encode("<mod>07+15=") == ids  # markers are recognised inside a str
    assert tasks.decode(np.array(ids)) == tasks.decode(torch.tensor(ids)) == "<mod>07+15="
    for task, level in PAIRS:
        data = data_for(task, level)
        for row in (data.test_prompts[0], data.train_prompts[-1]):
            assert tasks.encode(tasks.decode(row)) == row.tolist()
        full = torch.cat([data.test_prompts[0], data.test_answers[0]])  # e.g. "<compare>12,34=<"
        assert tasks.encode(tasks.decode(full)) == full.tolist()
    with pytest.raises(ValueError, match="'x'"):
        tasks.encode("12x")
    with pytest.raises(ValueError):
        tasks.decode(torch.zeros(2, 2, dtype=torch.long))


def test_solve_rejects_malformed_prompts():
    with pytest.raises(ValueError):
        tasks.solve("add", "easy", tasks.encode("<add>123+4="))
    with pytest.raises(ValueError):
        tasks.solve("add", "easy", tasks.encode("<mul>12*34="))
    legacy = tasks.level_params("mul", "hard", legacy=True)
    assert tasks.decode(tasks.solve("mul", "hard", tasks.encode("<mul>999*99="), params=legacy)) == "98901"
    assert tasks.decode(tasks.solve("mul", "hard", tasks.encode("<mul>99*99="))) == "9801"
    assert tasks.decode(tasks.solve("compare", "easy", tasks.encode("<compare>007,007="))) == "="
    assert tasks.decode(tasks.solve("parity", "easy", tasks.encode("<parity>" + "1" * 18 + "="))) == "10" * 9


def test_chance_accuracy_of_the_best_constant_answer():
    answers = torch.tensor([[1, 2], [1, 2], [3, 4], [1, 2]])
    assert tasks.chance_accuracy(answers) == 0.75
    parity = tasks.make_task("parity", "hard", params=tasks.level_params("parity", "hard", legacy=True))
    assert 0.4 < tasks.chance_accuracy(parity.test_answers) < 0.6  # one answer bit
    assert tasks.chance_accuracy(tasks.make_task("parity", "hard").test_answers) < 0.01  # running parity
    assert tasks.chance_accuracy(tasks.make_task("copy", "hard").test_answers) < 0.01


@pytest.mark.parametrize("task", ["add", "mod", "mul"])
def test_lsd_answers_are_the_brute_force_answers_reversed(task):
    data = tasks.make_task(task, "medium", seed=3, n_train=200, n_test=50, answer_order="lsd")
    for prompts, answers in ((data.train_prompts, data.train_answers), (data.test_prompts, data.test_answers)):
        for i in range(min(N_CHECK, len(prompts))):
            prompt = tasks.decode(prompts[i])
            assert tasks.decode(answers[i]) == brute_force(task, "medium", prompt)[::-1], prompt
    msd = tasks.make_task(task, "medium", seed=3, n_train=200, n_test=50)
    assert torch.equal(msd.test_prompts, data.test_prompts)  # same prompts and split, only the answers differ


def test_answer_order_errors_name_the_value():
    with pytest.raises(ValueError, match="unknown answer_order 'backwards'"):
        tasks.make_task("add", "easy", answer_order="backwards")
    with pytest.raises(ValueError, match="applies to add, mod, mul only, not 'sort'"):
        tasks.make_task("sort", "easy", answer_order="lsd")


def test_mod_with_number_tokens_is_nandas_format_with_the_digit_tasks_split():
    """One token per number: prompt "a b =", answer one token; the same pairs split as the digit format
    (the split depends on p, the share and the seed only); answers checked against solve by brute force."""
    params = {"p": 113, "train_fraction": 0.3, "number_tokens": True}
    data = make_task("mod", "hard", seed=1, params=params)
    assert data.vocab_size == VOCAB_SIZE + 113 and tasks.vocabulary("mod", params)[-1] == "#112"
    assert (data.n_train, data.n_test) == (int(0.3 * 113 * 113), 113 * 113 - int(0.3 * 113 * 113))
    assert data.prompt_len == 3 and data.answer_len == 1 and data.answer_position == 2
    for prompts, answers in ((data.train_prompts, data.train_answers), (data.test_prompts, data.test_answers)):
        a, b = (prompts[:, 0] - VOCAB_SIZE), (prompts[:, 1] - VOCAB_SIZE)
        assert torch.equal(answers[:, 0] - VOCAB_SIZE, (a + b) % 113)
        assert all(tasks.solve("mod", "hard", p, params) == ans.tolist() for p, ans in zip(prompts[:50], answers[:50]))
    pairs = lambda t: {(int(x), int(y)) for x, y in t}  # noqa: E731
    train_pairs = pairs(data.train_prompts[:, :2] - VOCAB_SIZE)
    assert not train_pairs & pairs(data.test_prompts[:, :2] - VOCAB_SIZE)
    assert len(train_pairs | pairs(data.test_prompts[:, :2] - VOCAB_SIZE)) == 113 * 113
    assert tasks.encode(tasks.decode(data.test_prompts[0])) == data.test_prompts[0].tolist()
    with pytest.raises(ValueError, match="number_tokens must be in"):
        tasks.check_params("mod", {"p": 5000, "train_fraction": 0.3, "number_tokens": True})
    with pytest.raises(ValueError, match="mod p must be in \\[2, 100\\]"):
        tasks.check_params("mod", {"p": 113, "train_fraction": 0.3})
