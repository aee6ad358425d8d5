"""Diagnostic benchmarks for the Pythia validation (claim C7), generated offline from templates.

Seven easy-to-moderate diagnostics and one hard deduction task, each a list of
multiple-choice items::

    {"id": "capitals-0007", "kind": "choice", "context": "The capital of France is",
     "choices": [" Rome", " Paris", " Berlin", " Madrid"], "answer": 1}

* ``kind == "choice"``: the choices are continuations of the context, scored
  by the log-likelihood of the choice's tokens given the context (the sum, and
  the sum per byte of the choice: :mod:`geomcap.pythia`).
* ``kind == "pair"``: a minimal pair of sentences ``context + choice`` that
  differ only in the choice; scored by whole-sentence log-probability.

The context never ends with a space and every choice starts with one, so the
context and the choice tokenize separately exactly as they do together for a
byte-level BPE (Pythia's tokenizer, and the stand-in's). The gold answer's
index is random: a scorer that always picks the first choice scores chance.

=====================  ========  ==========  ===================================================
benchmark              level     kind        what it tests (choices)
=====================  ========  ==========  ===================================================
agreement              easy      pair        subject-verb agreement across an attractor (2)
category               easy      choice      category membership, "A robin is a kind of" (4)
negation               easy      pair        "A robin is not a kind of fish." vs "... bird." (2)
arithmetic             easy      choice      one-digit-ish addition and subtraction (4)
capitals               easy      choice      capital cities (4)
pronoun                easy      choice      pronoun resolution by gender (2)
induction              easy      choice      continue a repeated word sequence (4)
logical_deduction      hard      choice      ordering puzzles, 3, 5 and 7 objects (3, 5, 7)
=====================  ========  ==========  ===================================================

``logical_deduction`` follows BIG-bench's logical_deduction: a paragraph
describes n objects in a fixed order (books on a shelf, golfers' finishing
places, fruit prices) through relations and a few absolute positions, enough
to fix the order uniquely (checked by brute force over all n! orders, then
pruned to a minimal set of clues); the question asks which object is at one
position that no clue states directly.

Every generator is a pure function of ``(n, seed)`` (Python's
``random.Random(seed)``): the same arguments give the same items. The
committed files ``data/pythia/benchmarks/<name>.jsonl`` are
``write_benchmarks(dir)`` at the defaults; ``training_documents`` writes
*correct* sentences of the same families with another seed, the text the
offline stand-in model learns from.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from itertools import permutations
from pathlib import Path

import numpy as np

__all__ = ["BENCHMARKS", "EASY", "HARD", "generate", "write_benchmarks", "load_benchmark",
           "benchmark_dir", "chance", "file_sha", "training_documents", "training_puzzles", "training_puzzle_items",
           "SHORTCUT_CLASSES", "deduction_shortcut", "accuracy_by_shortcut", "PUZZLE_SHORTCUTS"]


# ---------------------------------------------------------------------------
# vocabularies
# ---------------------------------------------------------------------------

NOUNS = [  # singular, plural (no singular ends in "s": the checker reads number from the ending)
    ("key", "keys"), ("book", "books"), ("author", "authors"), ("teacher", "teachers"), ("dog", "dogs"),
    ("house", "houses"), ("car", "cars"), ("picture", "pictures"), ("student", "students"), ("box", "boxes"),
    ("letter", "letters"), ("window", "windows"), ("farmer", "farmers"), ("bottle", "bottles"),
    ("painting", "paintings"), ("doctor", "doctors"), ("table", "tables"), ("chair", "chairs"),
    ("lamp", "lamps"), ("flower", "flowers"), ("bird", "birds"), ("road", "roads"), ("ship", "ships"),
    ("girl", "girls"), ("boy", "boys"),
]
PREPOSITIONS = ["near", "behind", "next to", "beside", "under", "above", "of"]
VERB_FRAMES = [  # (singular, plural, continuations that fit both)
    ("is", "are", [" on the table.", " very old.", " in the garden.", " broken."]),
    ("was", "were", [" here yesterday.", " very expensive."]),
    ("has", "have", [" a red cover.", " a long history."]),
    ("seems", "seem", [" new.", " quite small."]),
]

CATEGORIES = {
    "bird": ["sparrow", "robin", "eagle", "owl", "parrot", "crow", "pigeon", "swan"],
    "fish": ["salmon", "trout", "tuna", "cod", "shark", "herring", "carp", "sardine"],
    "fruit": ["apple", "banana", "cherry", "grape", "lemon", "mango", "peach", "pear"],
    "vegetable": ["carrot", "potato", "onion", "cabbage", "lettuce", "spinach", "celery", "turnip"],
    "tree": ["oak", "maple", "pine", "birch", "willow", "cedar", "elm", "spruce"],
    "tool": ["hammer", "wrench", "saw", "screwdriver", "chisel", "drill", "shovel", "rake"],
    "vehicle": ["car", "truck", "bus", "bicycle", "tractor", "van", "train", "motorcycle"],
    "insect": ["ant", "bee", "beetle", "wasp", "moth", "butterfly", "mosquito", "grasshopper"],
    "instrument": ["piano", "violin", "guitar", "flute", "trumpet", "drum", "cello", "harp"],
    "flower": ["rose", "tulip", "daisy", "lily", "orchid", "sunflower", "daffodil", "poppy"],
}

CAPITALS = {  # ASCII spellings; countries whose capital is disputed or renamed since 2020 left out
    "France": "Paris", "Germany": "Berlin", "Italy": "Rome", "Spain": "Madrid", "Portugal": "Lisbon",
    "Greece": "Athens", "Poland": "Warsaw", "Austria": "Vienna", "Hungary": "Budapest",
    "Sweden": "Stockholm", "Norway": "Oslo", "Finland": "Helsinki", "Denmark": "Copenhagen",
    "Ireland": "Dublin", "the Netherlands": "Amsterdam", "Belgium": "Brussels", "Russia": "Moscow",
    "Turkey": "Ankara", "Egypt": "Cairo", "Kenya": "Nairobi", "Nigeria": "Abuja", "Morocco": "Rabat",
    "Japan": "Tokyo", "China": "Beijing", "Thailand": "Bangkok", "Vietnam": "Hanoi",
    "Indonesia": "Jakarta", "the Philippines": "Manila", "South Korea": "Seoul", "Iran": "Tehran",
    "Iraq": "Baghdad", "Saudi Arabia": "Riyadh", "Canada": "Ottawa", "Cuba": "Havana",
    "Argentina": "Buenos Aires", "Peru": "Lima", "Chile": "Santiago", "Venezuela": "Caracas",
    "Australia": "Canberra", "New Zealand": "Wellington", "the Czech Republic": "Prague",
    "Romania": "Bucharest", "Bulgaria": "Sofia", "Serbia": "Belgrade", "Croatia": "Zagreb",
    "Switzerland": "Bern", "Iceland": "Reykjavik", "Afghanistan": "Kabul", "Syria": "Damascus",
    "Lebanon": "Beirut", "Ethiopia": "Addis Ababa", "Ghana": "Accra", "Senegal": "Dakar",
    "the United Kingdom": "London", "Brazil": "Brasilia",
}

MALE_NAMES = ["John", "David", "Michael", "James", "Robert", "Thomas", "Peter", "Paul", "Mark", "Daniel"]
FEMALE_NAMES = ["Mary", "Sarah", "Emma", "Anna", "Linda", "Susan", "Laura", "Alice", "Julia", "Helen"]
PRONOUN_VERBS = ["called", "visited", "thanked", "emailed", "wrote to", "waited for"]
PRONOUN_REASONS = ["was late", "was sick", "was lonely", "needed help", "had won the prize",
                   "was moving away", "had a question", "was worried"]

INDUCTION_WORDS = [
    "apple", "river", "stone", "cloud", "table", "garden", "window", "candle", "bridge", "forest",
    "mirror", "pocket", "ladder", "basket", "violin", "anchor", "carpet", "button", "castle", "desert",
    "engine", "feather", "hammer", "island", "jacket", "kettle", "lemon", "market", "needle", "orange",
    "pencil", "rabbit", "saddle", "tunnel", "wallet", "yellow", "planet", "silver", "thunder", "winter",
]

NUMBER_WORDS = {3: "three", 5: "five", 7: "seven"}
ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh"]


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: its generator, class and default size (items)."""

    name: str
    level: str           # "easy" or "hard" (the paper's diagnostics vs its deduction task)
    area: str            # what it probes: syntax, semantics, logic, ...
    kind: str            # "choice" or "pair"
    n_default: int
    seed: int            # the committed file's generation seed


# ---------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------


def _article(word: str, capital: bool = True) -> str:
    a = "an" if word[0] in "aeiou" else "a"
    return a.capitalize() if capital else a


def _shuffled_choices(rng: random.Random, gold: str, distractors: list[str]) -> tuple[list[str], int]:
    choices = [gold, *distractors]
    rng.shuffle(choices)
    return choices, choices.index(gold)


def _take(rng: random.Random, pool: list, n: int) -> list:
    """n distinct elements of pool in random order (all of it when n >= len(pool))."""
    pool = list(pool)
    rng.shuffle(pool)
    return pool[:n]


# ---------------------------------------------------------------------------
# the seven easy diagnostics
# ---------------------------------------------------------------------------


def gen_agreement(n: int = 200, seed: int = 0) -> list[dict]:
    """Minimal pairs: "The keys near the cabinet" + " are on the table." / " is on the table."

    The attractor noun disagrees in number with the head noun in 3 of 4 items
    (the harder case for a model that agrees with the nearest noun).
    """
    rng = random.Random(seed)
    items, seen = [], set()
    while len(items) < n:
        head, attractor = rng.choice(NOUNS), rng.choice(NOUNS)
        if head == attractor:
            continue
        plural = rng.random() < 0.5
        attractor_plural = (not plural) if rng.random() < 0.75 else plural
        prep = rng.choice(PREPOSITIONS)
        singular_verb, plural_verb, rests = rng.choice(VERB_FRAMES)
        rest = rng.choice(rests)
        context = f"The {head[plural]} {prep} the {attractor[attractor_plural]}"
        good, bad = (plural_verb, singular_verb) if plural else (singular_verb, plural_verb)
        if (context, rest) in seen:
            continue
        seen.add((context, rest))
        choices, answer = _shuffled_choices(rng, f" {good}{rest}", [f" {bad}{rest}"])
        items.append({"kind": "pair", "context": context, "choices": choices, "answer": answer})
    return items


CATEGORY_TEMPLATES = ["{A} {x} is a kind of", "{A} {x} is a type of", "Everyone knows that {a} {x} is a kind of"]


def gen_category(n: int = 200, seed: int = 0) -> list[dict]:
    """ "A sparrow is a kind of" + one of four category names (one correct)."""
    rng = random.Random(seed)
    pool = [(t, cat, x) for t in CATEGORY_TEMPLATES for cat, members in CATEGORIES.items() for x in members]
    items = []
    for template, cat, x in _take(rng, pool, n):
        context = template.format(A=_article(x), a=_article(x, capital=False), x=x)
        others = rng.sample([c for c in CATEGORIES if c != cat], 3)
        choices, answer = _shuffled_choices(rng, f" {cat}", [f" {c}" for c in others])
        items.append({"kind": "choice", "context": context, "choices": choices, "answer": answer})
    return items


NEGATION_TEMPLATES = [  # (template, negated)
    ("{A} {x} is not a kind of", True),
    ("{A} {x} is not a type of", True),
    ("It is false that {a} {x} is a kind of", True),
    ("It is true that {a} {x} is a kind of", False),
]


def gen_negation(n: int = 200, seed: int = 0) -> list[dict]:
    """Minimal pairs whose truth depends on the negation.

    "A sparrow is not a kind of fish." (true) vs "A sparrow is not a kind of
    bird." (false); three of four templates are negated, the fourth ("It is
    true that ...") is the unnegated control with the same words.
    """
    rng = random.Random(seed)
    pool = [(t, neg, cat, x) for t, neg in NEGATION_TEMPLATES for cat, members in CATEGORIES.items()
            for x in members]
    items = []
    for template, negated, cat, x in _take(rng, pool, n):
        context = template.format(A=_article(x), a=_article(x, capital=False), x=x)
        other = rng.choice([c for c in CATEGORIES if c != cat])
        true_cat, false_cat = (other, cat) if negated else (cat, other)
        choices, answer = _shuffled_choices(rng, f" {true_cat}.", [f" {false_cat}."])
        items.append({"kind": "pair", "context": context, "choices": choices, "answer": answer})
    return items


def gen_arithmetic(n: int = 200, seed: int = 0) -> list[dict]:
    """ "7 + 5 =" + four numbers: the result and three within +-3 of it."""
    rng = random.Random(seed)
    pool = [(a, "+", b) for a in range(13) for b in range(13)]
    pool += [(a, "-", b) for a in range(13) for b in range(a + 1)]
    items = []
    for a, op, b in _take(rng, pool, n):
        result = a + b if op == "+" else a - b
        near = [r for r in (result - 2, result - 1, result + 1, result + 2, result + 3) if r >= 0]
        others = rng.sample(near, 3)
        choices, answer = _shuffled_choices(rng, f" {result}", [f" {r}" for r in others])
        items.append({"kind": "choice", "context": f"{a} {op} {b} =", "choices": choices, "answer": answer})
    return items


CAPITAL_TEMPLATES = ["The capital of {c} is", "The capital city of {c} is",
                     "The city that is the capital of {c} is", "Q: What is the capital of {c}?\nA:"]


def gen_capitals(n: int = 200, seed: int = 0) -> list[dict]:
    """ "The capital of France is" + four capital cities (one correct)."""
    rng = random.Random(seed)
    pool = [(t, c) for t in CAPITAL_TEMPLATES for c in CAPITALS]
    items = []
    for template, country in _take(rng, pool, n):
        others = rng.sample([v for k, v in CAPITALS.items() if k != country], 3)
        choices, answer = _shuffled_choices(rng, f" {CAPITALS[country]}", [f" {c}" for c in others])
        items.append({"kind": "choice", "context": template.format(c=country), "choices": choices,
                      "answer": answer})
    return items


def gen_pronoun(n: int = 200, seed: int = 0) -> list[dict]:
    """ "John called Mary because she was late. The one who was late was" + " Mary" / " John".

    The two people differ in gender, so the pronoun decides; which of them it
    refers to (subject or object) is random.
    """
    rng = random.Random(seed)
    items, seen = [], set()
    while len(items) < n:
        male, female = rng.choice(MALE_NAMES), rng.choice(FEMALE_NAMES)
        first, second = (male, female) if rng.random() < 0.5 else (female, male)
        referent = rng.choice([first, second])
        pronoun = "he" if referent in MALE_NAMES else "she"
        verb, reason = rng.choice(PRONOUN_VERBS), rng.choice(PRONOUN_REASONS)
        context = f"{first} {verb} {second} because {pronoun} {reason}. The one who {reason} was"
        if context in seen:
            continue
        seen.add(context)
        other = second if referent == first else first
        choices, answer = _shuffled_choices(rng, f" {referent}", [f" {other}"])
        items.append({"kind": "choice", "context": context, "choices": choices, "answer": answer})
    return items


def gen_induction(n: int = 200, seed: int = 0, length: int = 6) -> list[dict]:
    """A sequence of ``length`` distinct words, then its first k words again (1 <= k < length):
    continue with word k+1 (four choices, all from the sequence)."""
    rng = random.Random(seed)
    items = []
    for _ in range(n):
        words = rng.sample(INDUCTION_WORDS, length)
        k = rng.randrange(1, length)
        context = " ".join(words + words[:k])
        others = rng.sample([w for w in words if w != words[k]], 3)
        choices, answer = _shuffled_choices(rng, f" {words[k]}", [f" {w}" for w in others])
        items.append({"kind": "choice", "context": context, "choices": choices, "answer": answer})
    return items


# ---------------------------------------------------------------------------
# the hard task: logical deduction (ordering puzzles)
# ---------------------------------------------------------------------------

# Position 0 is the leftmost / first / cheapest; n-1 the rightmost / last / most expensive.
DOMAINS = {
    "shelf": {
        "objects": ["red", "blue", "green", "white", "black", "orange", "yellow", "brown", "gray", "purple"],
        "intro": "On a shelf, there are {N} books: {list}.",
        "list_item": "{a} {x} book",
        "subject": "The {x} book",
        "before": "{S} is to the left of the {y} book.",
        "after": "{S} is to the right of the {y} book.",
        "verb": "is",
    },
    "golf": {
        "objects": ["Ana", "Amy", "Eli", "Eve", "Joe", "Mel", "Rob", "Dan", "Ada", "Mya"],
        "intro": "In a golf tournament, there were {N} golfers: {list}.",
        "list_item": "{x}",
        "subject": "{x}",
        "before": "{S} finished above {y}.",
        "after": "{S} finished below {y}.",
        "verb": "finished",
    },
    "fruit": {
        "objects": ["apples", "plums", "mangoes", "kiwis", "pears", "peaches", "oranges", "watermelons",
                    "loquats", "cantaloupes"],
        "intro": "A fruit stand sells {N} fruits: {list}.",
        "list_item": "{x}",
        "subject": "The {x}",
        "before": "{S} are cheaper than the {y}.",
        "after": "{S} are more expensive than the {y}.",
        "verb": "are",
    },
}
DEDUCTION_PREAMBLE = ("The following paragraphs each describe a set of {N} objects arranged in a fixed order. "
                      "The statements are logically consistent within each paragraph.")
DEDUCTION_QUESTION = "\nQuestion: Which statement is true?\nAnswer:"


def _position_phrase(domain: str, i: int, n: int, from_end: bool) -> str:
    """Words after the verb that put an object at position i (0-based) of n.

    ``from_end`` counts from the other end (ignored at the two ends)."""
    if domain == "shelf":
        if i == 0:
            return "the leftmost"
        if i == n - 1:
            return "the rightmost"
        return f"the {ORDINALS[n - 1 - i]} from the right" if from_end else f"the {ORDINALS[i]} from the left"
    if domain == "golf":
        if i == 0:
            return "first"
        if i == n - 1:
            return "last"
        return f"{ORDINALS[n - 1 - i]}-to-last" if from_end else ORDINALS[i]
    if i == 0:
        return "the cheapest"
    if i == n - 1:
        return "the most expensive"
    return f"the {ORDINALS[n - 1 - i]}-most expensive" if from_end else f"the {ORDINALS[i]}-cheapest"


def _statement(domain: str, obj: str, phrase: str) -> str:
    d = DOMAINS[domain]
    return f"{d['subject'].format(x=obj)} {d['verb']} {phrase}."


def _all_orders(n: int) -> np.ndarray:
    """pos[p, o]: position of object o in order p, for all n! orders; shape (n!, n)."""
    return np.array(list(permutations(range(n))), dtype=np.int8)


def _clue_mask(pos: np.ndarray, clue) -> np.ndarray:
    kind, a, b = clue
    return pos[:, a] < pos[:, b] if kind == "before" else pos[:, a] == b


def _deduction_item(rng: random.Random, n: int, orders: np.ndarray) -> dict:
    domain = rng.choice(sorted(DOMAINS))
    d = DOMAINS[domain]
    objects = rng.sample(d["objects"], n)           # listed in this order in the text and the choices
    truth = list(range(n))
    rng.shuffle(truth)                              # truth[o] = position of object o
    # candidate clues: every true relation, and a few absolute positions
    relations = [("before", a, b) for a in range(n) for b in range(n) if truth[a] < truth[b]]
    absolutes = [("at", a, truth[a]) for a in range(n)]
    candidates = _take(rng, relations, len(relations)) + _take(rng, absolutes, 2)
    rng.shuffle(candidates)
    alive = np.ones(len(orders), dtype=bool)
    clues = []
    for clue in candidates:                         # add clues until one order is left
        mask = alive & _clue_mask(orders, clue)
        if mask.sum() < alive.sum():
            clues.append(clue)
            alive = mask
        if alive.sum() == 1:
            break
    assert alive.sum() == 1, "the candidate clues always fix the order (all relations are there)"
    for clue in _take(rng, clues, len(clues)):      # prune to a minimal set of clues
        rest = [c for c in clues if c is not clue]
        mask = np.ones(len(orders), dtype=bool)
        for c in rest:
            mask &= _clue_mask(orders, c)
        if mask.sum() == 1:
            clues = rest
    pinned = {c[2] for c in clues if c[0] == "at"}
    asked = rng.choice([i for i in range(n) if i not in pinned])
    sentences = []
    for kind, a, b in clues:
        subject = d["subject"].format(x=objects[a])
        if kind == "at":
            sentences.append(_statement(domain, objects[a], _position_phrase(domain, b, n, rng.random() < 0.5)))
        elif rng.random() < 0.5:                    # a before b, said either way round
            sentences.append(d["before"].format(S=subject, y=objects[b]))
        else:
            sentences.append(d["after"].format(S=d["subject"].format(x=objects[b]), y=objects[a]))
    listed = [d["list_item"].format(a=_article(x, capital=False), x=x) for x in objects]
    intro = d["intro"].format(N=NUMBER_WORDS[n], list=", ".join(listed[:-1]) + ", and " + listed[-1])
    context = " ".join([DEDUCTION_PREAMBLE.format(N=NUMBER_WORDS[n]), intro, *sentences]) + DEDUCTION_QUESTION
    phrase = _position_phrase(domain, asked, n, rng.random() < 0.5)
    choices = [" " + _statement(domain, x, phrase) for x in objects]
    return {"kind": "choice", "context": context, "choices": choices, "answer": truth.index(asked),
            "n_objects": n, "domain": domain}


def gen_logical_deduction(n: int = 300, seed: int = 0, sizes=(3, 5, 7)) -> list[dict]:
    """Ordering puzzles, ``n // len(sizes)`` per number of objects (3, 5, 7), as in BIG-bench's
    logical_deduction; n objects -> n choices."""
    rng = random.Random(seed)
    items = []
    for size in sizes:
        orders = _all_orders(size)
        items += [_deduction_item(rng, size, orders) for _ in range(n // len(sizes))]
    return items


def gen_logical_deduction_3(n: int = 200, seed: int = 1) -> list[dict]:
    """The 3-object ordering puzzles alone (BIG-bench's logical_deduction_three_objects): the
    hardest task a small model can learn, for the offline stand-in; 3 choices."""
    return gen_logical_deduction(n=n, seed=seed, sizes=(3,))


#: the classes of :func:`deduction_shortcut`, in the order tables list them
SHORTCUT_CLASSES = ("shortcut right", "shortcut wrong", "no shortcut")


def deduction_shortcut(item: dict) -> str:
    """Where an ordering puzzle stands against the unnamed-object shortcut: answer with the one object
    that none of the puzzle's clues names.

    Returns "shortcut right" when exactly one object goes unnamed by the clues and it is the answer,
    "shortcut wrong" when exactly one goes unnamed and it is not, "no shortcut" otherwise. A model that
    answers by the shortcut scores about 1, 0 and chance on the three classes; one that deduces scores
    alike on all three. The objects are read from the choices (which differ only in the object: the words
    between their common first and last words), the clues from the context after the sentence that lists
    the objects (the one after ``DEDUCTION_PREAMBLE``); a name counts where it stands as a whole word.
    """
    if item.get("kind") != "choice" or "n_objects" not in item:
        raise ValueError(f"not an ordering puzzle (a choice item with n_objects): {item.get('id', item)!r}")
    words = [c.split() for c in item["choices"]]
    start = 0
    while all(len(w) > start and w[start] == words[0][start] for w in words):
        start += 1
    end = 0
    while all(len(w) - end > start and w[-1 - end] == words[0][-1 - end] for w in words):
        end += 1
    names = [" ".join(w[start:len(w) - end]) for w in words]
    preamble = DEDUCTION_PREAMBLE.format(N=NUMBER_WORDS[item["n_objects"]])
    body = item["context"].removesuffix(DEDUCTION_QUESTION)
    if not body.startswith(preamble) or ". " not in body[len(preamble):].strip():
        raise ValueError(f"{item.get('id', 'an item')}: the context is not an ordering puzzle's")
    listing = body[len(preamble):].strip()
    clues = listing[listing.index(". ") + 2:]
    unnamed = [i for i, name in enumerate(names) if not re.search(rf"\b{re.escape(name)}\b", clues)]
    if len(unnamed) != 1:
        return "no shortcut"
    return "shortcut right" if unnamed[0] == item["answer"] else "shortcut wrong"


def accuracy_by_shortcut(correct, classes) -> dict:
    """Accuracy per :func:`deduction_shortcut` class: ``{"all" and each of SHORTCUT_CLASSES: {"items": n,
    "accuracy": share correct, None for a class with no item}}``. ``correct``: bool per item (shape (n,)),
    ``classes``: the class of each item."""
    correct, classes = np.asarray(correct, dtype=bool), np.asarray(classes)
    if correct.shape != classes.shape or correct.ndim != 1:
        raise ValueError(f"correct and classes must be two lists of one value per item, got shapes "
                         f"{correct.shape} and {classes.shape}")
    unknown = set(classes.tolist()) - set(SHORTCUT_CLASSES)
    if unknown:
        raise ValueError(f"unknown shortcut class(es) {sorted(unknown)}; the classes are {SHORTCUT_CLASSES}")
    table = {"all": {"items": int(correct.size), "accuracy": float(correct.mean()) if correct.size else None}}
    for name in SHORTCUT_CLASSES:
        chosen = classes == name
        table[name] = {"items": int(chosen.sum()), "accuracy": float(correct[chosen].mean()) if chosen.any() else None}
    return table


# ---------------------------------------------------------------------------
# registry, files
# ---------------------------------------------------------------------------

BENCHMARKS = {
    "agreement": Benchmark("agreement", "easy", "syntax", "pair", 200, 0),
    "category": Benchmark("category", "easy", "semantics", "choice", 200, 0),
    "negation": Benchmark("negation", "easy", "logic", "pair", 200, 0),
    "arithmetic": Benchmark("arithmetic", "easy", "arithmetic", "choice", 200, 0),
    "capitals": Benchmark("capitals", "easy", "knowledge", "choice", 200, 0),
    "pronoun": Benchmark("pronoun", "easy", "coreference", "choice", 200, 0),
    "induction": Benchmark("induction", "easy", "in-context copying", "choice", 200, 0),
    "logical_deduction": Benchmark("logical_deduction", "hard", "deduction", "choice", 300, 0),
    "logical_deduction_3": Benchmark("logical_deduction_3", "hard", "deduction, 3 objects", "choice", 200, 1),
}
EASY = tuple(name for name, b in BENCHMARKS.items() if b.level == "easy")
HARD = tuple(name for name, b in BENCHMARKS.items() if b.level == "hard")

_GENERATORS = {
    "agreement": gen_agreement, "category": gen_category, "negation": gen_negation,
    "arithmetic": gen_arithmetic, "capitals": gen_capitals, "pronoun": gen_pronoun,
    "induction": gen_induction, "logical_deduction": gen_logical_deduction,
    "logical_deduction_3": gen_logical_deduction_3,
}


def _check_name(name: str) -> Benchmark:
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; choose from: {', '.join(BENCHMARKS)}")
    return BENCHMARKS[name]


def generate(name: str, n: int | None = None, seed: int | None = None) -> list[dict]:
    """The items of one benchmark (default size and seed: those of the committed file), each with an id."""
    bench = _check_name(name)
    n = bench.n_default if n is None else n
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    items = _GENERATORS[name](n=n, seed=bench.seed if seed is None else seed)
    return [{"id": f"{name}-{i:04d}", **item} for i, item in enumerate(items)]


def benchmark_dir() -> Path:
    """The committed benchmark files: data/pythia/benchmarks (:func:`geomcap.store.committed_data`)."""
    from geomcap import store

    return store.committed_data("pythia", "benchmarks")


def jsonl_text(items: list[dict]) -> str:
    return "".join(json.dumps(item, ensure_ascii=True, sort_keys=True) + "\n" for item in items)


def write_benchmarks(out_dir, names=None) -> list[Path]:
    """Write ``<out_dir>/<name>.jsonl`` for each benchmark (all by default), at the default size and seed."""
    from geomcap.store import atomic_write_text

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names or BENCHMARKS:
        path = out_dir / f"{name}.jsonl"
        atomic_write_text(path, jsonl_text(generate(name)))
        paths.append(path)
    return paths


def load_benchmark(name: str, directory=None) -> list[dict]:
    """The items of a benchmark file (default: the committed ``data/pythia/benchmarks``)."""
    _check_name(name)
    path = Path(directory if directory is not None else benchmark_dir()) / f"{name}.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"no benchmark file {path}: regenerate with `geomcap pythia benchmarks --out "
                                f"{path.parent}`")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def file_sha(name: str, directory=None) -> str:
    """First 12 hex digits of the SHA-256 of a benchmark file (identifies the items in a run's config)."""
    path = Path(directory if directory is not None else benchmark_dir()) / f"{name}.jsonl"
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def chance(items: list[dict]) -> float:
    """Expected accuracy of a uniform random guess: mean of 1 / number of choices."""
    return float(np.mean([1.0 / len(item["choices"]) for item in items]))


# ---------------------------------------------------------------------------
# training text for the stand-in
# ---------------------------------------------------------------------------


#: how the stand-in's training puzzles stand against :func:`deduction_shortcut` (:func:`training_puzzles`)
PUZZLE_SHORTCUTS = ("kept", "balanced")


def training_puzzles(n: int, seed: int = 2, sizes=(3,), exclude=None, shortcut: str = "kept") -> list[str]:
    """``n`` solved ordering puzzles (the context followed by the gold choice), none of them a
    benchmark item: the deduction examples of the stand-in's text (:func:`training_puzzle_items`'s items,
    its arguments)."""
    return [it["context"] + it["choices"][it["answer"]]
            for it in training_puzzle_items(n, seed=seed, sizes=sizes, exclude=exclude, shortcut=shortcut)]


def training_puzzle_items(n: int, seed: int = 2, sizes=(3,), exclude=None, shortcut: str = "kept") -> list[dict]:
    """The ``n`` ordering puzzles of :func:`training_puzzles`, as items (the benchmarks' form).

    Generated with ``gen_logical_deduction`` from seeds ``seed + 1000 + round`` (``sizes``:
    the numbers of objects, spread evenly); a puzzle whose context is in ``exclude`` (default: the
    contexts of the committed deduction benchmarks, :func:`generate` at their defaults)
    is dropped and replaced. Small puzzles repeat by chance across seeds (about 1 in 1500 of the
    3-object ones is a benchmark item), so the exclusion is needed, not a formality.

    ``shortcut``: "kept", the puzzles as generated (where the clues leave one object unnamed it is the
    answer about three times in four, so "answer with the unnamed object" pays); "balanced", a puzzle whose
    answer is its one unnamed object is kept only while such puzzles are at most 1/k of the k-object
    puzzles with one unnamed object (:func:`deduction_shortcut`): the shortcut then tells no more than chance.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"puzzles must be a non-negative integer, got {n!r}")
    sizes = tuple(sizes)
    if not sizes or any(s not in NUMBER_WORDS for s in sizes):
        raise ValueError(f"puzzle_objects must be a non-empty subset of {tuple(NUMBER_WORDS)}, got {sizes!r}")
    if shortcut not in PUZZLE_SHORTCUTS:
        raise ValueError(f"shortcut must be one of {PUZZLE_SHORTCUTS}, got {shortcut!r}")
    if exclude is None:
        exclude = {item["context"] for name in HARD for item in generate(name)}
    items, round_ = [], 0
    unnamed = {size: {"shortcut right": 0, "shortcut wrong": 0} for size in sizes}  # kept so far, per size
    while len(items) < n:
        per_size = -(-(n - len(items)) // len(sizes))
        batch = gen_logical_deduction(n=per_size * len(sizes), seed=seed + 1000 + round_, sizes=sizes)
        for it in batch:
            if it["context"] in exclude:
                continue
            if shortcut == "balanced":
                kind, counts = deduction_shortcut(it), unnamed[it["n_objects"]]
                if kind == "shortcut right" and (counts[kind] + 1) * it["n_objects"] > sum(counts.values()) + 1:
                    continue  # one more would make the unnamed object the answer more often than chance
                if kind in counts:
                    counts[kind] += 1
            items.append(it)
        round_ += 1
    return items[:n]


def training_documents(seed: int = 1, per_benchmark: int = 400, puzzles: int | None = None,
                       puzzle_objects=(3, 5, 7), puzzle_shortcut: str = "kept") -> list[str]:
    """Correct sentences of every family (another seed than the benchmarks'): the stand-in's
    templated text. Documents of 10 sentences; for pairs the correct sentence, for choices the
    context followed by the correct choice. Small pools (capitals, categories, arithmetic) are
    covered several times over, so the stand-in can *learn* these facts from its text.

    ``per_benchmark`` sentences per easy family; ``puzzles`` solved ordering puzzles with
    ``puzzle_objects`` objects (default ``per_benchmark // 4``), never a benchmark item, with their
    shortcut ``puzzle_shortcut`` (:func:`training_puzzles`)."""
    rng = random.Random(seed)
    sentences = []
    for name in BENCHMARKS:
        if name == "logical_deduction_3":  # one family of puzzles (below), whatever their sizes
            continue
        if name == "logical_deduction":
            n = per_benchmark // 4 if puzzles is None else puzzles
            sentences += training_puzzles(n, seed=seed, sizes=puzzle_objects, shortcut=puzzle_shortcut)
            continue
        n, family, round_ = per_benchmark, [], 0
        while len(family) < n:  # small pools (capitals: 220 sentences) repeat, in new orders
            family += [it["context"] + it["choices"][it["answer"]]
                       for it in _GENERATORS[name](n=n, seed=seed + 1000 + round_)]
            round_ += 1
        sentences += family[:n]
    rng.shuffle(sentences)
    return [" ".join(sentences[i:i + 10]) for i in range(0, len(sentences), 10)]
