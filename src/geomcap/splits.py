"""Drawing a task's examples: train and test splits of digit rows that never overlap.

Examples are handled as digit rows d: (N, k) int64, the operands' digits concatenated, most significant
first. A row's integer key (the digits read in base ``base``) is used for enumeration, deduplication and
test-set rejection; every level's space is < 2**63, so keys fit in int64. :func:`geomcap.tasks.make_task`
draws with these from its seeded generator and turns the rows into prompts and answers.
"""

from __future__ import annotations

import numpy as np

#: prompt spaces up to this size are enumerated (and shuffled), larger ones sampled
ENUMERATE_LIMIT = 2**20


def place_values(base: int, k: int) -> np.ndarray:
    """The place values of k digits in ``base``, most significant first: (k,) int64."""
    return base ** np.arange(k - 1, -1, -1, dtype=np.int64)


def keys_to_digits(keys: np.ndarray, base: int, k: int) -> np.ndarray:
    """Keys (N,) -> their k digits in ``base``, most significant first: (N, k) int64."""
    return (keys[:, None] // place_values(base, k)) % base


def unique_in_order(keys: np.ndarray) -> np.ndarray:
    """Distinct keys, each at its first occurrence, in their original order."""
    _, first = np.unique(keys, return_index=True)
    return keys[np.sort(first)]


def draw_distinct(rng, space: int, n: int, exclude: np.ndarray) -> np.ndarray:
    """n distinct uniform keys in [0, space), none of them in `exclude`."""
    keys = np.empty(0, dtype=np.int64)
    while len(keys) < n:
        new = rng.integers(0, space, size=(n - len(keys)) * 21 // 20 + 16, dtype=np.int64)
        keys = unique_in_order(np.concatenate([keys, new[~np.isin(new, exclude)]]))
    return keys[:n]


def split_uniform(rng, base: int, k: int, n_train: int, n_test: int):
    """Test and train digit rows for uniformly random operands (k digits in `base`)."""
    space = base**k
    if space <= ENUMERATE_LIMIT:
        perm = rng.permutation(space)
        n_te = min(n_test, space // 2)
        test_keys, train_keys = perm[:n_te], perm[n_te:n_te + n_train]
    else:
        if n_train + n_test > space // 2:  # rejection sampling would crawl
            raise ValueError(f"n_train + n_test = {n_train + n_test} is more than half of the "
                             f"{space} possible prompts")
        test_keys = draw_distinct(rng, space, n_test, np.empty(0, dtype=np.int64))
        train_keys = draw_distinct(rng, space, n_train, test_keys)
    return keys_to_digits(test_keys, base, k), keys_to_digits(train_keys, base, k)


def sample_compare(rng, n: int, size: int) -> np.ndarray:
    """(size, 2n) digit rows [a | b], b = a random-length prefix of a + uniform digits."""
    a = rng.integers(0, 10, size=(size, n))
    keep = rng.integers(0, n + 1, size=size)  # prefix length 0..n, uniform
    fresh = rng.integers(0, 10, size=(size, n))
    b = np.where(np.arange(n) < keep[:, None], a, fresh)
    return np.concatenate([a, b], axis=1)


def first_difference(d: np.ndarray, n: int) -> np.ndarray:
    """Compare digit rows (N, 2n) -> (N,) first position where a and b differ; n where a == b."""
    differ = d[:, :n] != d[:, n:]
    return np.where(differ.any(axis=1), differ.argmax(axis=1), n)


def split_compare(rng, n: int, n_train: int, n_test: int):
    """Test and train digit rows for compare; see the module docstring."""
    place = place_values(10, 2 * n)
    # Pairs whose first difference is at c < n: 10^n choices of a, 9 of b's digit c,
    # 10^(n-c-1) of b's tail; 10^n equal pairs. Test takes at most half of each class.
    class_size = np.array([10**n * 9 * 10 ** (n - c - 1) for c in range(n)] + [10**n], dtype=np.int64)
    cap = class_size // 2
    target = int(min(n_test, cap.sum()))
    pool = 2 * n_test + 1024
    while True:
        d = sample_compare(rng, n, pool)
        _, first = np.unique(d @ place, return_index=True)
        d = d[np.sort(first)]
        cls = first_difference(d, n)
        rank = np.zeros(len(d), dtype=np.int64)  # rank of each row within its class
        for c in range(n + 1):
            rank[cls == c] = np.arange(np.count_nonzero(cls == c))
        test_d = d[rank < cap[cls]][:target]
        if len(test_d) == target:
            break
        pool *= 2
    test_keys = test_d @ place

    chunks, have = [], 0
    while have < n_train:
        d = sample_compare(rng, n, (n_train - have) * 3 // 2 + 64)
        d = d[~np.isin(d @ place, test_keys)][: n_train - have]
        chunks.append(d)
        have += len(d)
    train_d = np.concatenate(chunks) if chunks else np.zeros((0, 2 * n), dtype=np.int64)
    return test_d, train_d


def split_mod(rng, p: int, train_fraction: float, as_numbers: bool = False):
    """Train and test digit rows [a | b] for mod: all p*p pairs, shuffled and split (``as_numbers``:
    rows [a, b] of the numbers themselves, for one token per number; the same split)."""
    width = len(str(p - 1))
    perm = rng.permutation(p * p)
    n_tr = int(train_fraction * p * p)
    if as_numbers:
        pairs = np.stack([perm // p, perm % p], axis=1).astype(np.int64)
        return pairs[:n_tr], pairs[n_tr:]

    def digits(idx):
        a, b = idx // p, idx % p
        return np.concatenate([keys_to_digits(a, 10, width), keys_to_digits(b, 10, width)], axis=1)

    return digits(perm[:n_tr]), digits(perm[n_tr:])
