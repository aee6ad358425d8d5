"""The eight algorithmic tasks: vocabulary, level table, data and scoring.

Every task is a fixed-length prompt followed by a fixed-length answer, both in
one shared vocabulary::

    prompt = [marker] + operand tokens + ["="]        e.g. "<add>12+34="
    answer = answer tokens                            e.g. "046"

Numbers are fixed-width digit strings, most significant digit first, with
leading zeros, so every prompt of a (task, level) has the same length, and so
does every answer: a batch is plain tensor indexing, no padding. The marker
token names the task, so prompts never collide across tasks. The hidden state
we track sits at the answer position, ``prompt_len - 1`` (the "=" token), which
predicts the first answer token.

Level table (``LEVEL_TABLE``; n = digits per operand unless stated)::

    task     easy      medium   hard     prompt                  -> answer
    -------  --------  -------  -------  ----------------------  ------------------------------
    copy     n=6       8        16       <copy> d1..dn =         -> d1..dn
    reverse  n=6       8        16       <reverse> d1..dn =      -> dn..d1
    compare  n=3       4        8        <compare> a , b =       -> ">", "<" or "=" (a vs b)
    parity   18 bits   22       26       <parity> b1..bn =       -> running parity: for each
                                                                    prefix b1..bi, sum mod 2
    add      3+3       4+4      6+6      <add> a + b =           -> a+b, n+1 digits
    mod      p=47,60%  47,50%   97,30%   <mod> a + b =           -> (a+b) mod p, w digits
    sort     n=6       8        12       <sort> d1..dn =         -> digits sorted ascending
    mul      4x1       5x1      2x2      <mul> a * b =           -> a*b, digits(a)+digits(b) digits

    mod: a, b in [0, p) written with w = len(str(p - 1)) digits (w = 2); the percentage is the
    share of the p*p pairs used for training (the rest is the test set).

    mod with ``number_tokens: True`` (the grokking setting of Nanda et al. 2023, not a level of the
    table): one token per number, prompt ``a b =`` and the answer ``(a + b) mod p`` as one token; the
    vocabulary is the shared one plus the p number tokens ``#0 .. #p-1`` (:func:`vocabulary`), so
    only such runs have a larger embedding.

The levels were redefined after the first CPU grid (``LEGACY_LEVEL_TABLE`` keeps its
levels, so its runs stay reproducible), for three reasons that grid measured:

* easy levels had the least data and memorised (mod p=11: 60 training pairs; parity
  8 bits: 128 prompts; mul 2x1: 500). Now every easy level has at least as many
  training examples as its medium level (copy, reverse, sort, add at easy have
  >= 10^6 possible prompts, so 100,000 distinct training prompts like medium; mod
  keeps p and lowers the training share with the level; mul easy 4x1 has 10^5 prompts,
  so 99,488 training prompts once the test set is taken, against medium's 100,000).
* parity with a single answer bit stayed at chance at 12 and 16 bits (and sparse
  parity, k = 2 or 3 bits of 16, stayed at chance for 3,000+ steps in a probe): the
  answer is now the running parity, one token per prefix, the scratchpad form that a
  small transformer can learn. This is a departure from the paper, whose format is
  not stated.
* hard should mean what the paper means: acquisition after a long behavioural
  plateau. add at 6+6 digits (5+5 already showed ~600 steps at zero accuracy), mod
  with p = 97 and 30% of the pairs, and mul 2x2 (no longer learnt in 4,000 steps) are
  the candidates. A one-seed pilot (405k) chose mod's: p = 47 with 30% of the pairs was
  acquired at step 233, earlier than 60% (465), and p = 47 with 20% rose gradually from
  step ~100; p = 97 with 30% stayed at chance past step 233 and was learnt by ~800.

Answers are written most significant digit first. ``make_task(..., answer_order="lsd")``
reverses the answer digits of add, mod and mul (a format the paper does not state;
the book's sensitivity page measures what it changes).

Prompt and answer lengths that follow (prompt_len, answer_len)::

    copy, reverse (n+2, n)   compare (2n+3, 1)   parity (n+2, n; legacy 1)   add (2n+3, n+1)
    mod (2w+3, w)            sort (n+2, n)       mul (da+db+3, da+db)

Train/test split (``make_task``). Test prompts never occur among train prompts.

* mod (grokking setting): all p*p pairs are shuffled with the seed; the first
  floor(train_fraction * p*p) are train, all the rest are test. n_train and
  n_test are ignored.
* compare: b is drawn from a by keeping a uniformly random-length prefix of a
  (0..n digits) and resampling the rest uniformly, so the first differing
  position is roughly uniform over 0..n-1 and about 1/(n+1) of pairs are equal
  (with independent a, b the first digit decides 90% of pairs). The test set is
  n_test distinct pairs from this distribution, taking at most half of the pairs
  of any first-differing-position class (this only binds at easy, where only
  100 equal pairs exist). The train set is n_train i.i.d. draws from the same
  distribution with test pairs rejected; train may repeat prompts, because a
  non-uniform distribution over a partly small space can only be expressed by
  repeats.
* every other task draws its operand digits uniformly. If the prompt space has
  at most ``splits.ENUMERATE_LIMIT`` (2**20) prompts it is enumerated and shuffled
  with the seed: test = the first min(n_test, space // 2), train = the next
  min(n_train, rest). Otherwise distinct prompts are sampled: first n_test for
  test, then n_train more for train, rejecting duplicates and test prompts.

The test set is enumerated or drawn before the train set, so it never depends
on n_train (data-size sweeps share one test set). The random stream is numpy's
``default_rng([seed, task index, level index])``: the same arguments give
identical tensors, and tasks sharing a seed do not share operands.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from geomcap import splits

if TYPE_CHECKING:  # tensors in the annotations: torch is imported where tensors are made (make_task)
    import torch

TASKS = ("copy", "reverse", "compare", "parity", "add", "mod", "sort", "mul")
LEVELS = ("easy", "medium", "hard")

MARKER = {task: f"<{task}>" for task in TASKS}  # task -> its marker token
#: the tokens shared by every task: padding, digits, operators, and one marker per task
VOCAB: tuple[str, ...] = (
    ("<pad>",)
    + tuple("0123456789")
    + ("+", "*", ",", "=", ">", "<")
    + tuple(MARKER[task] for task in TASKS)
)
VOCAB_SIZE = len(VOCAB)
TOKEN_ID: dict[str, int] = {tok: i for i, tok in enumerate(VOCAB)}
PAD_ID = TOKEN_ID["<pad>"]

_DIGIT0 = TOKEN_ID["0"]  # digits have consecutive ids, so id = _DIGIT0 + digit
_MULTI_CHAR = tuple(tok for tok in VOCAB if len(tok) > 1)

#: The levels used since the protocol's re-run (see the table in the module docstring).
LEVEL_TABLE: dict[str, dict[str, dict]] = {
    "copy": {"easy": {"n_digits": 6}, "medium": {"n_digits": 8}, "hard": {"n_digits": 16}},
    "reverse": {"easy": {"n_digits": 6}, "medium": {"n_digits": 8}, "hard": {"n_digits": 16}},
    "compare": {"easy": {"n_digits": 3}, "medium": {"n_digits": 4}, "hard": {"n_digits": 8}},
    "parity": {"easy": {"n_bits": 18, "answer": "running"},
               "medium": {"n_bits": 22, "answer": "running"},
               "hard": {"n_bits": 26, "answer": "running"}},
    "add": {"easy": {"n_digits": 3}, "medium": {"n_digits": 4}, "hard": {"n_digits": 6}},
    "mod": {"easy": {"p": 47, "train_fraction": 0.6},
            "medium": {"p": 47, "train_fraction": 0.5},
            "hard": {"p": 97, "train_fraction": 0.3}},
    "sort": {"easy": {"n_digits": 6}, "medium": {"n_digits": 8}, "hard": {"n_digits": 12}},
    "mul": {"easy": {"a_digits": 4, "b_digits": 1},
            "medium": {"a_digits": 5, "b_digits": 1},
            "hard": {"a_digits": 2, "b_digits": 2}},
}

#: The levels of the first CPU grid: runs whose config.json has no ``task_params`` used these,
#: so they stay reproducible.
LEGACY_LEVEL_TABLE: dict[str, dict[str, dict]] = {
    "copy": {"easy": {"n_digits": 4}, "medium": {"n_digits": 8}, "hard": {"n_digits": 16}},
    "reverse": {"easy": {"n_digits": 4}, "medium": {"n_digits": 8}, "hard": {"n_digits": 16}},
    "compare": {"easy": {"n_digits": 2}, "medium": {"n_digits": 4}, "hard": {"n_digits": 8}},
    "parity": {"easy": {"n_bits": 8}, "medium": {"n_bits": 12}, "hard": {"n_bits": 16}},
    "add": {"easy": {"n_digits": 2}, "medium": {"n_digits": 3}, "hard": {"n_digits": 5}},
    "mod": {"easy": {"p": 11, "train_fraction": 0.5},
            "medium": {"p": 23, "train_fraction": 0.5},
            "hard": {"p": 47, "train_fraction": 0.5}},
    "sort": {"easy": {"n_digits": 4}, "medium": {"n_digits": 8}, "hard": {"n_digits": 12}},
    "mul": {"easy": {"a_digits": 2, "b_digits": 1},
            "medium": {"a_digits": 2, "b_digits": 2},
            "hard": {"a_digits": 3, "b_digits": 2}},
}

#: the keys each task's level parameters must have (``answer`` is optional for parity)
PARAM_KEYS = {"copy": ("n_digits",), "reverse": ("n_digits",), "sort": ("n_digits",),
              "compare": ("n_digits",), "add": ("n_digits",), "parity": ("n_bits",),
              "mod": ("p", "train_fraction"), "mul": ("a_digits", "b_digits")}
#: the keys a task's level parameters may add (parity: the answer format; mod: one token per number)
OPTIONAL_PARAM_KEYS = {"parity": ("answer",), "mod": ("number_tokens",)}
PARITY_ANSWERS = ("total", "running")
MAX_NUMBER_TOKENS = 1000



# --- vocabulary ---------------------------------------------------------------

NUMBER_PREFIX = "#"  # number tokens "#0", "#1", ... follow the shared vocabulary (mod with number_tokens)


def vocabulary(task: str, params: dict) -> tuple[str, ...]:
    """The tokens of a (task, level parameters): the shared :data:`VOCAB`, plus ``#0 .. #p-1`` for mod
    with ``number_tokens`` (ids ``VOCAB_SIZE + k`` for number k)."""
    if task == "mod" and params.get("number_tokens"):
        return VOCAB + tuple(f"{NUMBER_PREFIX}{k}" for k in range(params["p"]))
    return VOCAB


def encode(tokens: list[str] | str) -> list[int]:
    """Token strings -> ids.

    A list is taken as tokens (e.g. ``["<mod>", "0", "7", "+", "1", "5", "="]``).
    A str is split into characters, except that the multi-character tokens
    (markers and "<pad>") are recognised where they occur, so
    ``encode(decode(ids)) == list(ids)``.
    """
    if isinstance(tokens, str):
        text, tokens, i = tokens, [], 0
        while i < len(text):
            tok = next((t for t in _MULTI_CHAR if text.startswith(t, i)), text[i])
            if tok == NUMBER_PREFIX:  # a number token: "#" and all the digits that follow
                j = i + 1
                while j < len(text) and text[j].isdigit():
                    j += 1
                tok = text[i:j]
            tokens.append(tok)
            i += len(tok)
    ids = []
    for tok in tokens:
        if tok.startswith(NUMBER_PREFIX) and tok[1:].isdigit():
            ids.append(VOCAB_SIZE + int(tok[1:]))
            continue
        if tok not in TOKEN_ID:
            raise ValueError(f"unknown token {tok!r}; the vocabulary is: {' '.join(VOCAB)}")
        ids.append(TOKEN_ID[tok])
    return ids


def decode(ids) -> str:
    """Ids (list, 1-D numpy array or 1-D tensor) -> the token strings joined with no separator."""
    if hasattr(ids, "detach"):  # a tensor (torch is imported only by who makes tensors)
        ids = ids.detach().cpu().numpy()
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"decode expects a 1-D sequence of ids, got shape {tuple(ids.shape)}")
    return "".join(VOCAB[int(i)] if i < VOCAB_SIZE else f"{NUMBER_PREFIX}{int(i) - VOCAB_SIZE}" for i in ids)


# --- levels -------------------------------------------------------------------

def check_task_level(task: str, level: str) -> None:
    """Raise ValueError (one line naming the bad value and the choices) for an unknown task or level."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of: {', '.join(TASKS)}")
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; choose one of: {', '.join(LEVELS)}")


#: the order of an arithmetic answer's digits: "msd" (most significant first, as written; the
#: default) or "lsd" (least significant first, the order in which carries are computed)
ANSWER_ORDERS = ("msd", "lsd")
#: the tasks whose answer is a number, the only ones where "lsd" is a different format of the same task
NUMERIC_ANSWER_TASKS = ("add", "mod", "mul")


def check_answer_order(task: str, answer_order: str) -> None:
    """Raise ValueError (one line) for an unknown answer order, or "lsd" on a non-numeric task."""
    if answer_order not in ANSWER_ORDERS:
        raise ValueError(f"unknown answer_order {answer_order!r}; choose one of: {', '.join(ANSWER_ORDERS)}")
    if answer_order == "lsd" and task not in NUMERIC_ANSWER_TASKS:
        raise ValueError(f"answer_order 'lsd' applies to {', '.join(NUMERIC_ANSWER_TASKS)} only, not {task!r}")


def level_params(task: str, level: str, legacy: bool = False) -> dict:
    """The (task, level) row of ``LEVEL_TABLE`` (``LEGACY_LEVEL_TABLE`` with ``legacy``), as a fresh dict."""
    check_task_level(task, level)
    return dict((LEGACY_LEVEL_TABLE if legacy else LEVEL_TABLE)[task][level])


def check_params(task: str, params: dict) -> dict:
    """Validate one task's level parameters (keys and ranges); returns them as a fresh dict."""
    params = dict(params)
    missing = [k for k in PARAM_KEYS[task] if k not in params]
    optional = OPTIONAL_PARAM_KEYS.get(task, ())
    extra = set(params) - set(PARAM_KEYS[task]) - set(optional)
    if missing or extra:
        raise ValueError(f"{task} parameters need exactly {', '.join(PARAM_KEYS[task])}"
                         f"{f' (and optionally {chr(44).join(optional)})' if optional else ''}, got {sorted(params)}")
    for key in PARAM_KEYS[task]:
        if key == "train_fraction":
            if not 0 < params[key] < 1:
                raise ValueError(f"mod train_fraction must be in (0, 1), got {params[key]!r}")
        elif not isinstance(params[key], (int, np.integer)) or isinstance(params[key], bool) or params[key] < 1:
            raise ValueError(f"{task} {key} must be a positive integer, got {params[key]!r}")
    if task == "mod" and not isinstance(params.get("number_tokens", False), bool):
        raise ValueError(f"mod number_tokens must be True or False, got {params['number_tokens']!r}")
    if task == "mod" and params.get("number_tokens"):
        if not 2 <= params["p"] <= MAX_NUMBER_TOKENS:
            raise ValueError(f"mod p with number_tokens must be in [2, {MAX_NUMBER_TOKENS}], got {params['p']!r}")
    elif task == "mod" and not 2 <= params["p"] <= 100:
        raise ValueError(f"mod p must be in [2, 100] (operands are written with two digits), got {params['p']!r}")
    if task == "parity" and params.get("answer", "total") not in PARITY_ANSWERS:
        raise ValueError(f"parity answer must be one of {', '.join(PARITY_ANSWERS)}, got {params['answer']!r}")
    return params


def _operands(task: str, params: dict) -> tuple[tuple[int, ...], str | None]:
    """Digit widths of the prompt's operands and the separator token between them."""
    if task == "parity":
        return (params["n_bits"],), None
    if task in ("copy", "reverse", "sort"):
        return (params["n_digits"],), None
    if task == "compare":
        return (params["n_digits"],) * 2, ","
    if task == "add":
        return (params["n_digits"],) * 2, "+"
    if task == "mod":
        return (len(str(params["p"] - 1)),) * 2, "+"
    return (params["a_digits"], params["b_digits"]), "*"  # mul


def _answer_len(task: str, params: dict) -> int:
    widths, _ = _operands(task, params)
    if task in ("copy", "reverse", "sort"):
        return widths[0]
    if task == "parity":
        return widths[0] if params.get("answer") == "running" else 1
    if task == "compare":
        return 1
    if task == "add":
        return widths[0] + 1
    if task == "mod":
        return widths[0]
    return sum(widths)  # mul


def sequence_lengths(task: str, level: str, params: dict | None = None) -> tuple[int, int]:
    """(prompt_len, answer_len) of a (task, level); ``params`` replace the level table's row."""
    params = level_params(task, level) if params is None else check_params(task, params)
    if task == "mod" and params.get("number_tokens"):
        return 3, 1  # "a b =" -> "c"
    widths, _ = _operands(task, params)
    # marker + operands + separators between them + "="
    return 1 + sum(widths) + len(widths) - 1 + 1, _answer_len(task, params)


def sequence_length(task: str, level: str, params: dict | None = None) -> int:
    """Tokens a training step reads per sequence of a (task, level): prompt + answer - 1 (teacher forcing:
    the last answer token is only a target)."""
    return sum(sequence_lengths(task, level, params)) - 1


# Longest prompt + answer over all tasks and levels of both tables (parity hard: 28 + 26).
MAX_SEQ_LEN = max(sum(sequence_lengths(t, lv, table[t][lv])) for table in (LEVEL_TABLE, LEGACY_LEVEL_TABLE)
                  for t in TASKS for lv in LEVELS)


# --- data ---------------------------------------------------------------------

@dataclass(frozen=True, eq=False)  # eq=False: tensors have no single truth value
class TaskData:
    """Train and test prompts/answers of one (task, level, seed).

    All four tensors are int64 token ids: prompts (n, prompt_len), answers
    (n, answer_len). Row i of a prompt tensor goes with row i of its answers.
    """

    task: str
    level: str
    seed: int
    params: dict
    train_prompts: torch.Tensor = field(repr=False)
    train_answers: torch.Tensor = field(repr=False)
    test_prompts: torch.Tensor = field(repr=False)
    test_answers: torch.Tensor = field(repr=False)

    @property
    def prompt_len(self) -> int:
        return self.train_prompts.shape[1]

    @property
    def answer_len(self) -> int:
        return self.train_answers.shape[1]

    @property
    def vocab_size(self) -> int:
        """Size of the vocabulary the prompts and answers are written in (:func:`vocabulary`)."""
        return len(vocabulary(self.task, self.params))

    @property
    def answer_position(self) -> int:
        """Index of the last prompt token ("="), whose output predicts the first answer token."""
        return self.prompt_len - 1

    @property
    def n_train(self) -> int:
        return self.train_prompts.shape[0]

    @property
    def n_test(self) -> int:
        return self.test_prompts.shape[0]


def make_task(task: str, level: str, seed: int = 0, n_train: int = 100_000,
              n_test: int = 512, answer_order: str = "msd", params: dict | None = None) -> TaskData:
    """Generate the train and test sets of one (task, level); see the module docstring for the split.

    n_train and n_test are upper bounds: small prompt spaces give fewer rows,
    and mod ignores both (half of all p*p pairs train, the rest test).
    answer_order "lsd" writes the answers of add, mod and mul least significant
    digit first (the prompts and the split are unchanged; see :data:`ANSWER_ORDERS`).
    ``params`` replace the level table's row (e.g. ``level_params(task, level, legacy=True)``
    for a run of the first grid); the level name still seeds the random stream.
    The rows are :func:`task_arrays`', as tensors.
    """
    import torch  # the data as tensors, for training; task_arrays gives the same rows without torch

    params, *arrays = task_arrays(task, level, seed, n_train, n_test, answer_order, params)
    train_p, train_a, test_p, test_a = (torch.from_numpy(a) for a in arrays)
    return TaskData(task, level, int(seed), params, train_p, train_a, test_p, test_a)


def task_arrays(task: str, level: str, seed: int = 0, n_train: int = 100_000, n_test: int = 512,
                answer_order: str = "msd", params: dict | None = None) -> tuple:
    """:func:`make_task`'s rows as numpy arrays, without torch: ``(params, train_prompts, train_answers,
    test_prompts, test_answers)``, each array int64 of shape (n, prompt_len) or (n, answer_len), and the level
    parameters used. Arguments as :func:`make_task`'s."""
    check_task_level(task, level)
    check_answer_order(task, answer_order)
    for name, value in (("seed", seed), ("n_train", n_train), ("n_test", n_test)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    params = level_params(task, level) if params is None else check_params(task, params)
    rng = np.random.default_rng([int(seed), TASKS.index(task), LEVELS.index(level)])

    if task == "mod" and params.get("number_tokens"):
        train_d, test_d = splits.split_mod(rng, params["p"], params["train_fraction"], as_numbers=True)
    elif task == "mod":
        train_d, test_d = splits.split_mod(rng, params["p"], params["train_fraction"])
    elif task == "compare":
        test_d, train_d = splits.split_compare(rng, params["n_digits"], n_train, n_test)
    else:
        widths, _ = _operands(task, params)
        base = 2 if task == "parity" else 10
        test_d, train_d = splits.split_uniform(rng, base, sum(widths), n_train, n_test)

    def rows(a, flip=False):
        a = np.asarray(a, dtype=np.int64)
        return np.ascontiguousarray(a[:, ::-1] if flip else a)

    lsd = answer_order == "lsd"
    return (params, rows(_prompts(task, params, train_d)), rows(_answers(task, params, train_d), lsd),
            rows(_prompts(task, params, test_d)), rows(_answers(task, params, test_d), lsd))


def exact_match(predicted: torch.Tensor, answers: torch.Tensor) -> torch.Tensor:
    """(B, Ta) predicted ids, (B, Ta) answer ids -> (B,) bool, True where every answer token matches."""
    if predicted.shape != answers.shape or predicted.ndim != 2:
        raise ValueError(f"exact_match needs two (B, Ta) tensors of the same shape, "
                         f"got {tuple(predicted.shape)} and {tuple(answers.shape)}")
    return (predicted == answers).all(dim=1)


def chance_accuracy(answers: torch.Tensor) -> float:
    """Exact-match accuracy of the best constant answer: the share of the most common answer row.

    answers: (N, Ta) ids. For parity (two answers) it is ~0.5, so "accuracy > 0.5"
    alone cannot tell learning from a lucky constant guess; long answers give ~0.
    """
    if hasattr(answers, "detach"):  # a tensor: its rows, counted the same way without torch
        answers = answers.detach().cpu().numpy()
    _, counts = np.unique(np.asarray(answers), axis=0, return_counts=True)
    return float(counts.max()) / answers.shape[0]


def solve(task: str, level: str, prompt_ids, params: dict | None = None) -> list[int]:
    """The reference answer ids for one prompt (list, 1-D array or 1-D tensor of ids).

    Plain Python integer arithmetic on the decoded text, independent of the
    vectorised generator, so it can be used to check it. ``params`` as in :func:`make_task`.
    """
    params = level_params(task, level) if params is None else check_params(task, params)
    if task == "mod" and params.get("number_tokens"):
        ids = [int(i) for i in (prompt_ids.tolist() if hasattr(prompt_ids, "tolist") else prompt_ids)]
        p = params["p"]
        if len(ids) != 3 or ids[2] != TOKEN_ID["="] or not all(0 <= i - VOCAB_SIZE < p for i in ids[:2]):
            raise ValueError(f"not a {task} prompt with number tokens (p={p}): {ids!r}")
        return [VOCAB_SIZE + (ids[0] - VOCAB_SIZE + ids[1] - VOCAB_SIZE) % p]
    widths, sep = _operands(task, params)
    text = decode(prompt_ids)
    marker = MARKER[task]
    body = text[len(marker):-1]
    ops = body.split(sep) if sep else [body]
    alphabet = "01" if task == "parity" else "0123456789"
    if (not text.startswith(marker) or not text.endswith("=") or len(ops) != len(widths)
            or any(len(op) != w or set(op) - set(alphabet) for op, w in zip(ops, widths))):
        raise ValueError(f"not a {task}/{level} prompt: {text!r}")

    if task == "copy":
        answer = ops[0]
    elif task == "reverse":
        answer = ops[0][::-1]
    elif task == "sort":
        answer = "".join(sorted(ops[0]))
    elif task == "parity" and params.get("answer") == "running":
        answer = "".join(str(ops[0][:i + 1].count("1") % 2) for i in range(len(ops[0])))
    elif task == "parity":
        answer = str(ops[0].count("1") % 2)
    elif task == "compare":
        a, b = int(ops[0]), int(ops[1])
        answer = ">" if a > b else "<" if a < b else "="
    else:
        a, b = int(ops[0]), int(ops[1])
        value = a + b if task == "add" else (a + b) % params["p"] if task == "mod" else a * b
        answer = str(value).zfill(_answer_len(task, params))
    return encode(answer)


# --- prompts and answers from digit rows (geomcap.splits draws the rows) ----------

def _prompts(task: str, params: dict, d: np.ndarray) -> np.ndarray:
    """Digit rows (N, k) -> prompt ids (N, prompt_len) int64."""
    if task == "mod" and params.get("number_tokens"):  # rows are [a, b]: "a b ="
        return np.concatenate([VOCAB_SIZE + d, np.full((len(d), 1), TOKEN_ID["="])], axis=1).astype(np.int64)
    widths, sep = _operands(task, params)
    n = len(d)
    cols, start = [np.full((n, 1), TOKEN_ID[MARKER[task]], dtype=np.int64)], 0
    for i, w in enumerate(widths):
        if i:
            cols.append(np.full((n, 1), TOKEN_ID[sep], dtype=np.int64))
        cols.append(d[:, start:start + w] + _DIGIT0)
        start += w
    cols.append(np.full((n, 1), TOKEN_ID["="], dtype=np.int64))
    return np.concatenate(cols, axis=1).astype(np.int64, copy=False)


def _answers(task: str, params: dict, d: np.ndarray) -> np.ndarray:
    """Digit rows (N, k) -> answer ids (N, answer_len) int64, vectorised."""
    if task == "mod" and params.get("number_tokens"):
        return (VOCAB_SIZE + (d[:, :1] + d[:, 1:2]) % params["p"]).astype(np.int64)
    widths, _ = _operands(task, params)
    if task == "copy":
        out = d
    elif task == "reverse":
        out = d[:, ::-1]
    elif task == "sort":
        out = np.sort(d, axis=1)
    elif task == "parity" and params.get("answer") == "running":
        out = np.cumsum(d, axis=1) % 2
    elif task == "parity":
        out = d.sum(axis=1, keepdims=True) % 2
    else:
        wa = widths[0]
        a = d[:, :wa] @ splits.place_values(10, wa)
        b = d[:, wa:] @ splits.place_values(10, widths[1])
        if task == "compare":
            sym = np.where(a > b, TOKEN_ID[">"], np.where(a < b, TOKEN_ID["<"], TOKEN_ID["="]))
            return sym[:, None].astype(np.int64)
        value = a + b if task == "add" else (a + b) % params["p"] if task == "mod" else a * b
        out = splits.keys_to_digits(value, 10, _answer_len(task, params))
    return (out + _DIGIT0).astype(np.int64)
