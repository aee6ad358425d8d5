"""Diagnostic benchmarks: deterministic generators, committed files, gold answers checked independently.

The checkers below re-derive every gold answer from the item's *text* (they
parse the sentence; for the ordering puzzles they solve them by brute force
over all orders), not from the generators' internal state.
"""
import json
import re
from itertools import permutations

import pytest

from geomcap import diagnostics as d


@pytest.fixture(scope="module")
def committed():
    return {name: d.load_benchmark(name) for name in d.BENCHMARKS}


def test_registry_matches_the_paper_layout():
    assert len(d.EASY) == 7 and d.HARD == ("logical_deduction", "logical_deduction_3")
    areas = {d.BENCHMARKS[n].area for n in d.EASY}
    assert {"syntax", "semantics", "logic", "arithmetic"} <= areas


@pytest.mark.parametrize("name", list(d.BENCHMARKS))
def test_generators_are_deterministic_and_the_committed_files_are_theirs(name, committed):
    small = 30 if name == "logical_deduction" else 50
    assert d.generate(name, n=small, seed=3) == d.generate(name, n=small, seed=3)
    assert d.generate(name, n=small, seed=3) != d.generate(name, n=small, seed=4)
    items = committed[name]
    assert items == d.generate(name), f"data/pythia/benchmarks/{name}.jsonl differs from the generator"
    assert len({json.dumps([i["context"], i["choices"]]) for i in items}) == len(items), "duplicate items"
    for item in items:
        assert item["kind"] == d.BENCHMARKS[name].kind
        assert not item["context"].endswith(" ") and item["context"]
        assert all(c.startswith(" ") for c in item["choices"]) and len(set(item["choices"])) == len(item["choices"])
        assert 0 <= item["answer"] < len(item["choices"])
    # the gold index is spread over the positions (a first-choice scorer scores chance)
    first = sum(i["answer"] == 0 for i in items) / len(items)
    assert first < 0.6


def test_unknown_benchmark_and_bad_size():
    with pytest.raises(ValueError, match="unknown benchmark 'chess'"):
        d.generate("chess")
    with pytest.raises(ValueError, match="n must be a positive integer"):
        d.generate("capitals", n=0)
    with pytest.raises(FileNotFoundError, match="geomcap pythia benchmarks"):
        d.load_benchmark("capitals", directory="/nonexistent")


def test_chance():
    assert d.chance([{"choices": [" a", " b"]}, {"choices": [" a", " b", " c", " d"]}]) == pytest.approx(0.375)


# ---------------------------------------------------------------------------
# independent checkers: one per benchmark, from the text
# ---------------------------------------------------------------------------

SINGULAR_VERBS, PLURAL_VERBS = {"is", "was", "has", "seems"}, {"are", "were", "have", "seem"}


def check_agreement(item):
    head = item["context"].split()[1]
    plural = head.endswith("s")
    gold, other = item["choices"][item["answer"]], item["choices"][1 - item["answer"]]
    assert gold.split()[0] in (PLURAL_VERBS if plural else SINGULAR_VERBS)
    assert other.split()[0] in (SINGULAR_VERBS if plural else PLURAL_VERBS)
    assert gold.split()[1:] == other.split()[1:]


def _category_of(word):
    owners = [cat for cat, members in d.CATEGORIES.items() if word in members]
    assert len(owners) == 1, f"{word} belongs to {owners}"
    return owners[0]


def check_category(item):
    word = re.search(r"\b(?:a|an|A|An) (\w+) is a (?:kind|type) of$", item["context"]).group(1)
    truth = [c.strip() == _category_of(word) for c in item["choices"]]
    assert truth.count(True) == 1 and truth[item["answer"]]


def check_negation(item):
    word = re.search(r"\b(?:a|an|A|An) (\w+) is (?:not )?a (?:kind|type) of$", item["context"]).group(1)
    negated = " is not " in item["context"] or item["context"].startswith("It is false that")
    truth = [(c.strip(" .") == _category_of(word)) != negated for c in item["choices"]]
    assert truth.count(True) == 1 and truth[item["answer"]]


def check_arithmetic(item):
    a, op, b = re.fullmatch(r"(\d+) ([+-]) (\d+) =", item["context"]).groups()
    value = int(a) + int(b) if op == "+" else int(a) - int(b)
    assert [int(c) == value for c in item["choices"]].count(True) == 1
    assert int(item["choices"][item["answer"]]) == value


def check_capitals(item):
    country = re.search(r"capital (?:city )?of (.+?)(?: is|\?)", item["context"]).group(1)
    truth = [c.strip() == d.CAPITALS[country] for c in item["choices"]]
    assert truth.count(True) == 1 and truth[item["answer"]]


def check_pronoun(item):
    before, after = item["context"].split(" because ")
    names = re.findall(r"\b[A-Z][a-z]+\b", before)
    pronoun = after.split()[0]
    assert len(names) == 2 and pronoun in ("he", "she")
    gender = {n: ("he" if n in d.MALE_NAMES else "she") for n in names}
    assert gender[names[0]] != gender[names[1]]
    referent = [n for n in names if gender[n] == pronoun][0]
    assert item["choices"][item["answer"]].strip() == referent


def check_induction(item):
    words = item["context"].split()
    first = words.index(words[-1])
    assert first < len(words) - 1
    assert item["choices"][item["answer"]].strip() == words[first + 1]
    assert all(c.strip() in words for c in item["choices"])


NUMBERS = {"three": 3, "five": 5, "seven": 7}
ORDINAL = {w: i + 1 for i, w in enumerate(["first", "second", "third", "fourth", "fifth", "sixth", "seventh"])}


def _position(phrase, n):
    """0-based position from a position phrase of any domain."""
    phrase = phrase.removeprefix("the ")
    fixed = {"leftmost": 0, "rightmost": n - 1, "first": 0, "last": n - 1, "cheapest": 0, "most expensive": n - 1}
    if phrase in fixed:
        return fixed[phrase]
    m = re.fullmatch(r"(\w+) from the (left|right)", phrase)
    if m:
        return ORDINAL[m.group(1)] - 1 if m.group(2) == "left" else n - ORDINAL[m.group(1)]
    m = re.fullmatch(r"(\w+)-to-last", phrase)
    if m:
        return n - ORDINAL[m.group(1)]
    m = re.fullmatch(r"(\w+)-cheapest", phrase)
    if m:
        return ORDINAL[m.group(1)] - 1
    m = re.fullmatch(r"(\w+)-most expensive", phrase)
    if m:
        return n - ORDINAL[m.group(1)]
    return ORDINAL[phrase] - 1  # golf: "finished third"


def _constraint(sentence, n):
    """(kind, a, b): 'lt' a before b, or 'at' a at position b, from one sentence."""
    s = sentence.rstrip(".")
    for pattern, kind in ((r"The (\w+) book is to the left of the (\w+) book", "lt"),
                          (r"The (\w+) book is to the right of the (\w+) book", "gt"),
                          (r"(\w+) finished above (\w+)", "lt"), (r"(\w+) finished below (\w+)", "gt"),
                          (r"The (\w+) are cheaper than the (\w+)", "lt"),
                          (r"The (\w+) are more expensive than the (\w+)", "gt")):
        m = re.fullmatch(pattern, s)
        if m:
            a, b = m.groups()
            return ("lt", a, b) if kind == "lt" else ("lt", b, a)
    m = (re.fullmatch(r"The (\w+) book is (.+)", s) or re.fullmatch(r"(\w+) finished (.+)", s)
         or re.fullmatch(r"The (\w+) are (.+)", s))
    return ("at", m.group(1), _position(m.group(2), n))


def _holds(c, order):
    return order[c[1]] < order[c[2]] if c[0] == "lt" else order[c[1]] == c[2]


def check_logical_deduction(item):
    body = item["context"].split("\nQuestion:")[0]
    sentences = re.split(r"(?<=\.) ", body)
    n = NUMBERS[re.search(r"a set of (\w+) objects", sentences[0]).group(1)]
    listed = re.search(r": (.+)\.$", sentences[2]).group(1).replace(", and ", ", ").split(", ")
    objects = [re.sub(r"^(?:a|an) (\w+) book$", r"\1", x) for x in listed]
    assert len(objects) == n == len(item["choices"]) == item["n_objects"]
    clues = [_constraint(s, n) for s in sentences[3:]]
    assert all(c[1] in objects and (c[0] == "at" or c[2] in objects) for c in clues)
    solutions = []
    for perm in permutations(range(n)):
        order = dict(zip(objects, perm))
        if all(_holds(c, order) for c in clues):
            solutions.append(order)
    assert len(solutions) == 1, f"{len(solutions)} orders satisfy the clues"
    truth = [_holds(_constraint(c.strip(), n), solutions[0]) for c in item["choices"]]
    assert truth.count(True) == 1 and truth[item["answer"]]
    # the question is never answered by a clue verbatim
    assert item["choices"][item["answer"]].strip() not in sentences


CHECKERS = {"agreement": check_agreement, "category": check_category, "negation": check_negation,
            "arithmetic": check_arithmetic, "capitals": check_capitals, "pronoun": check_pronoun,
            "induction": check_induction, "logical_deduction": check_logical_deduction,
            "logical_deduction_3": check_logical_deduction}


@pytest.mark.parametrize("name", list(d.BENCHMARKS))
def test_gold_answers_by_an_independent_check(name, committed):
    for item in committed[name]:
        CHECKERS[name](item)


def test_deduction_covers_three_five_seven_objects(committed):
    sizes = [i["n_objects"] for i in committed["logical_deduction"]]
    assert {s: sizes.count(s) for s in set(sizes)} == {3: 100, 5: 100, 7: 100}
    assert len({i["domain"] for i in committed["logical_deduction"]}) == 3


def test_training_documents_use_another_seed(committed):
    docs = " ".join(d.training_documents(seed=1, per_benchmark=50))
    contexts = [i["context"] for i in committed["logical_deduction"]]
    assert not any(c.split("\nQuestion")[0][-200:] in docs for c in contexts)


def test_three_object_deduction_is_its_own_benchmark(committed):
    items = committed["logical_deduction_3"]
    assert len(items) == 200 and {i["n_objects"] for i in items} == {3}
    assert d.chance(items) == pytest.approx(1 / 3)
    assert not {i["context"] for i in items} & {i["context"] for i in committed["logical_deduction"]}


def test_training_puzzles_are_never_benchmark_items(committed):
    benchmark = {i["context"] for name in d.HARD for i in committed[name]}
    # without the exclusion, 3-object puzzles from the training seeds do hit benchmark items
    raw = d.gen_logical_deduction(n=3000, seed=2 + 1000, sizes=(3,))
    assert sum(i["context"] in benchmark for i in raw) >= 1
    texts = d.training_puzzles(3000, seed=2, sizes=(3,))
    assert len(texts) == 3000 and len(set(texts)) > 2900
    assert not any(t.split("\nAnswer:")[0] + "\nAnswer:" in benchmark for t in texts)
    assert all(t.count("Question: Which statement is true?") == 1 for t in texts)
    assert {t.split(" objects arranged")[0].rsplit(" ", 1)[1] for t in texts} == {"three"}
    # an explicit exclusion drops exactly the excluded puzzle and tops up to n
    first = d.gen_logical_deduction(n=3, seed=2 + 1000, sizes=(3,))[0]
    kept = d.training_puzzles(3, seed=2, sizes=(3,), exclude={first["context"]})
    assert len(kept) == 3 and first["context"] + first["choices"][first["answer"]] not in kept
    with pytest.raises(ValueError, match="puzzle_objects"):
        d.training_puzzles(3, sizes=(4,))
    with pytest.raises(ValueError, match="puzzles must be"):
        d.training_puzzles(-1)


def test_training_documents_hold_the_requested_puzzles():
    docs = " ".join(d.training_documents(seed=1, per_benchmark=20, puzzles=30, puzzle_objects=(3,)))
    assert docs.count("Question: Which statement is true?") == 30
    assert docs.count("objects arranged in a fixed order") == docs.count("a set of three objects")
    assert docs.count("The capital") + docs.count("capital of") >= 20


def _shelf_puzzle(clues: str, asked: str, answer: int, objects=("red", "blue", "green")) -> dict:
    listed = ", ".join(f"a {o} book" for o in objects[:-1]) + f", and a {objects[-1]} book"
    context = (d.DEDUCTION_PREAMBLE.format(N="three") + f" On a shelf, there are three books: {listed}. " + clues
               + d.DEDUCTION_QUESTION)
    return {"kind": "choice", "n_objects": 3, "context": context, "answer": answer,
            "choices": [f" The {o} book is the {asked}." for o in objects]}


@pytest.mark.parametrize("clues, asked, answer, expected", [
    # red < blue and blue second: green, never named, is the rightmost: the shortcut is right
    ("The red book is to the left of the blue book. The blue book is the second from the left.", "rightmost", 2,
     "shortcut right"),
    # red rightmost, green second: blue goes unnamed but the second from the left is green
    ("The red book is the rightmost. The green book is the second from the left.", "second from the left", 2,
     "shortcut wrong"),
    ("The red book is to the left of the blue book. The green book is the leftmost.", "rightmost", 1,
     "no shortcut"),
])
def test_deduction_shortcut_classes_hand_made_puzzles(clues, asked, answer, expected):
    assert d.deduction_shortcut(_shelf_puzzle(clues, asked, answer)) == expected


def test_deduction_shortcut_counts_whole_words_and_refuses_other_items():
    """'apples' inside 'pineapples' does not name the apples; an easy item is not a puzzle."""
    fruit = {"kind": "choice", "n_objects": 3, "answer": 1,
             "choices": [" The pineapples are the cheapest.", " The apples are the cheapest.",
                         " The plums are the cheapest."],
             "context": d.DEDUCTION_PREAMBLE.format(N="three") + " A fruit stand sells three fruits: pineapples, "
             "apples, and plums. The pineapples are more expensive than the plums. The plums are the second-most "
             "expensive." + d.DEDUCTION_QUESTION}
    assert d.deduction_shortcut(fruit) == "shortcut right"
    with pytest.raises(ValueError, match="not an ordering puzzle"):
        d.deduction_shortcut(d.generate("capitals", n=1)[0])


def test_the_committed_deduction_benchmarks_hold_every_shortcut_class():
    """Each class is present in the 3-object benchmark (a model's accuracy per class is readable) and the
    classes partition it."""
    items = d.generate("logical_deduction_3")
    classes = [d.deduction_shortcut(it) for it in items]
    assert set(classes) == set(d.SHORTCUT_CLASSES) and len(classes) == len(items)


def test_accuracy_by_shortcut_on_known_answers():
    """A model that answers by the shortcut: right on 'shortcut right', wrong on 'shortcut wrong', half on the rest."""
    classes = ["shortcut right"] * 4 + ["shortcut wrong"] * 2 + ["no shortcut"] * 4
    correct = [True] * 4 + [False] * 2 + [True, False, True, False]
    table = d.accuracy_by_shortcut(correct, classes)
    assert table["all"] == {"items": 10, "accuracy": 0.6}
    assert table["shortcut right"] == {"items": 4, "accuracy": 1.0}
    assert table["shortcut wrong"] == {"items": 2, "accuracy": 0.0}
    assert table["no shortcut"] == {"items": 4, "accuracy": 0.5}
    assert d.accuracy_by_shortcut([True], ["no shortcut"])["shortcut right"] == {"items": 0, "accuracy": None}
    with pytest.raises(ValueError, match="unknown shortcut class"):
        d.accuracy_by_shortcut([True], ["lucky"])
    with pytest.raises(ValueError, match="one value per item"):
        d.accuracy_by_shortcut([True, False], ["no shortcut"])


def test_balanced_training_puzzles_give_the_shortcut_no_more_than_chance():
    """As generated, a 3-object puzzle whose clues leave one object unnamed has that object as its answer
    about three times in four; balanced, at most one time in three, and the texts are the items' contexts
    and answers, none a benchmark item."""
    def unnamed_share(items):
        kinds = [d.deduction_shortcut(it) for it in items]
        return kinds.count("shortcut right") / (kinds.count("shortcut right") + kinds.count("shortcut wrong"))

    kept = d.training_puzzle_items(600)
    balanced = d.training_puzzle_items(600, shortcut="balanced")
    assert unnamed_share(kept) > 0.6
    assert 0.25 < unnamed_share(balanced) <= 1 / 3
    assert d.training_puzzles(600, shortcut="balanced") == [it["context"] + it["choices"][it["answer"]]
                                                            for it in balanced]
    benchmark = {it["context"] for name in d.HARD for it in d.generate(name)}
    assert not benchmark & {it["context"] for it in balanced}
    with pytest.raises(ValueError, match="shortcut must be one of"):
        d.training_puzzle_items(10, shortcut="hidden")
