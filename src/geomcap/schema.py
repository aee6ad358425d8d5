"""One parameter schema: every setting declared once (type, range or choices, default, help), checked once.

A setting is a :class:`Param`, one row of a declarative table, as scikit-learn's
``utils/_param_validation`` declares an estimator's constraints:

* ``type`` -- int, float, bool, str, tuple (of ``item`` values), dict, or list: a selection, one value or
  several (a list, comma-separated text or a list literal), each an ``item`` checked by ``interval`` or
  ``choices``, or ``"all"`` where ``every`` says what it means, or one of the ``words`` taken as it is
  (a notebook's ``layers``: ``"final"``);
* ``interval`` -- the range of a number, written as in mathematics (``"[0, 1)"``, ``"(0, inf)"``), or
  ``choices`` -- the values a string (or a number without a range) may take;
* ``default`` -- :data:`REQUIRED` when there is none;
* ``none`` -- where ``None`` is allowed, what it means (``grad_clip``: no clipping); None: not allowed;
* ``help`` -- one line for ``--help`` and the API page;
* ``sweep_settable`` -- whether ``geomcap sweep --set`` may set it for every run of a grid (the settings the
  paper leaves unstated, the controls; not the grid's own axes, which have their own options).

The tables: :class:`geomcap.config.TrainConfig`'s fields, each declared with :func:`setting` and collected
by :func:`table` (:data:`geomcap.config.SETTINGS`), and every other parameter a person types
(``geomcap.parameters``: the notebooks' parameters, the sweep's grid axes, ``geomcap train``'s device and threads,
``geomcap bench``'s options, the Pythia commands' options and the stand-in's build, reusing the training rows:
a notebook's ``seeds`` are checked as ``TrainConfig.seed`` is). One check reads them all: :meth:`Param.check`
(a value, from Python), :meth:`Param.parse` (text, from ``geomcap train --OPTION`` or ``geomcap sweep --set``)
and :meth:`Param.read` (a value as a person typed it: a command line's text, papermill's ``-p``). A bad value
raises :class:`SettingError`: a ValueError of one line naming the setting, the value and what it may be; its
``reason`` is the same line without the name, which the notebooks write as "parameter NAME: REASON" and the
command as "--NAME: REASON".
"""

from __future__ import annotations

import argparse
import ast
import math
from dataclasses import MISSING, dataclass, field, fields
from typing import Callable

import numpy as np

class _Required:
    """The default of a setting that has none."""

    def __repr__(self) -> str:
        return "REQUIRED"


#: the default of a setting that has none (a required one)
REQUIRED = _Required()
#: the annotations a table's fields may carry -> the Param's type (``| None`` added: ``none`` must say why)
ANNOTATED_TYPES = {"int": int, "float": float, "bool": bool, "str": str, "dict": dict,
                   "tuple[str, ...]": tuple, "tuple[int, int]": tuple}


class SettingError(ValueError):
    """A value outside its setting's type, range or choices. ``name``: the setting; ``reason``: what is wrong
    without the name ("must be a positive integer, got 0"), for callers that name it their own way."""

    def __init__(self, name: str, reason: str, message: str | None = None):
        super().__init__(message or f"{name} {reason}")
        self.name, self.reason = name, reason


def check_number(name: str, value, kind: type, interval: str):
    """``value`` as ``kind`` (int or float) if it is a finite number in ``interval``, else SettingError.

    ``interval`` is written as in mathematics, e.g. ``"[0, 1)"`` or ``"(0, inf)"``. An int setting takes
    integers only (not bools, not 2.0); a float setting takes any real number and returns a float, so
    that ``lr=1`` and ``lr=1.0`` name the same run.
    """
    integral = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    real = integral or (isinstance(value, (float, np.floating)) and not isinstance(value, bool))
    what = {(int, "[1, inf)"): "a positive integer", (int, "[0, inf)"): "a non-negative integer"}.get(
        (kind, interval), f"{'an integer' if kind is int else 'a number'} in {interval}")
    low_text, high_text = (part.strip() for part in interval[1:-1].split(","))
    low, high = float(low_text), float(high_text)
    if (not (integral if kind is int else real) or not math.isfinite(value)
            or (value < low if interval[0] == "[" else value <= low)
            or (value > high if interval[-1] == "]" else value >= high)):
        raise SettingError(name, f"must be {what}, got {value!r}")
    return kind(value)


@dataclass(frozen=True)
class Param:
    """One setting: see the module docstring. ``convert``: a further check of a compound value (a tuple,
    a dict) that returns it normalised; ``item``: the type of a tuple's items (text is split on commas),
    ``length``: their number, where it is fixed."""
    name: str
    type: type
    default: object = REQUIRED
    interval: str | None = None
    choices: tuple | None = None
    none: str | None = None
    help: str = ""
    item: type = str
    length: int | None = None
    convert: Callable | None = None
    sweep_settable: bool = False
    every: str | None = None
    words: tuple = ()

    @property
    def required(self) -> bool:
        """Whether the setting has no default."""
        return self.default is REQUIRED

    def check(self, value):
        """``value`` normalised (a float setting's int as a float), or :class:`SettingError`."""
        if value is None and self.none is not None:
            return None
        if self.convert is not None:
            return self.convert(value)
        if self.type is list:
            return self._check_selection(value)
        if self.type in (int, float):
            if self.interval is None:  # a number out of a list of choices
                if isinstance(value, bool) or value not in self.choices:
                    raise self._unknown(value)
                return self.type(value)
            number = check_number(self.name, value, self.type, self.interval)
            if self.choices is not None and number not in self.choices:
                raise self._unknown(value)
            return number
        if self.type is bool:
            if not isinstance(value, bool):
                raise SettingError(self.name, f"must be True or False, got {value!r}")
            return value
        if self.type is str:
            if not isinstance(value, str):
                raise SettingError(self.name, f"must be a string, got {value!r}")
            if self.choices is not None and value not in self.choices:
                raise self._unknown(value)
            return value
        return value

    def _unknown(self, value) -> SettingError:
        allowed = ", ".join(map(str, (["none"] if self.none is not None else []) + list(self.choices)))
        return SettingError(self.name, f"unknown value {value!r}; choose one of: {allowed}",
                            f"unknown {self.name} {value!r}; choose one of: {allowed}")

    def keywords(self) -> tuple[str, ...]:
        """The texts a selection takes as they are: ``"all"`` where it has a meaning, and ``words``."""
        return tuple(self.words) + (("all",) if self.every is not None else ())

    def _check_selection(self, value) -> list | str:
        """A selection: one of :meth:`keywords` as it is, else the list of its items, each checked (text
        read as a number where the items are numbers); SettingError for an empty one or a bad item."""
        if isinstance(value, str) and value.strip() in self.keywords():
            return value.strip()
        alternatives = f" (or {' or '.join(map(repr, self.keywords()))})" if self.keywords() else ""
        items = [v.strip() if isinstance(v, str) else v for v in as_list(value)]
        items = [v for v in items if not (isinstance(v, str) and not v)]
        if not items:
            reason = "empty selection: name one or more values, comma-separated" + alternatives
            raise SettingError(self.name, reason, f"{self.name}: {reason}")
        row = Param(self.name, self.item, interval=self.interval, choices=self.choices)
        checked = []
        for item in items:
            if isinstance(item, str) and self.item is not str:
                try:
                    item = row.parse(item)
                except ValueError:
                    pass  # the check names the text
            try:
                checked.append(row.check(item))
            except SettingError as exc:  # where the item is text, one of the words may have been meant
                reason = exc.reason + (alternatives if isinstance(item, str) else "")
                raise SettingError(self.name, reason, f"{self.name}: {reason}") from None
        return checked

    def read(self, value):
        """A value as a person typed it, checked (:meth:`check`): text where the row wants a number, a flag
        or ``none`` is read first (:meth:`parse`: a command line's ``0.5``, papermill's ``-p x 0.5`` given as a
        string), text it cannot read is checked as it is (the check names it)."""
        if isinstance(value, str) and self.type is not list:
            try:
                value = self.parse(value if self.type is str else value.strip())
            except (ValueError, argparse.ArgumentTypeError):
                pass
        return self.check(value)

    def chosen(self, value) -> list | str:
        """A selection checked (:meth:`read`), its ``"all"`` given as the choices where the row has them."""
        value = self.read(value)
        return list(self.choices) if value == "all" and self.choices is not None else value

    def parse(self, text: str):
        """The value a command line's ``text`` gives (not yet checked: :meth:`check` does that): ``none`` where
        None is allowed, ``true``/``false`` for a flag, comma-separated items for a tuple, ``KEY=VALUE,...``
        for a dict; a selection's text as it is (its check reads it). ValueError when the text is not of the
        type."""
        if self.none is not None and text == "none":
            return None
        if self.type is list:
            return text
        if self.type is bool:
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            return text.lower() == "true"
        if self.type is tuple:
            items = tuple(self.item(word.strip()) for word in text.split(",") if word.strip())
            if self.length is not None and len(items) != self.length:
                raise ValueError(text)
            return items
        if self.type is dict:
            return parse_mapping(text, f"--{self.name.replace('_', '-')}")
        return self.type(text)

    def parser(self) -> Callable[[str], object]:
        """:meth:`parse` for argparse's ``type=``: named after the type, as argparse says "invalid int value"."""
        def parse(text: str):
            return self.parse(text)

        parse.__name__ = ("pair" if self.length == 2 else "list") if self.type in (tuple, list) else self.type.__name__
        return parse

    def default_text(self) -> str:
        """The default as ``--help`` states it: what None means, ``none`` for an empty tuple."""
        if self.default is None:
            return self.none
        if self.default == ():
            return "none"
        return ",".join(map(str, self.default)) if isinstance(self.default, (tuple, list)) else str(self.default)

    def describe(self) -> str:
        """``help``, the choices, then the default (or that the setting is required)."""
        choices = f" (one of: {', '.join(map(str, self.choices))})" if self.choices is not None else ""
        return self.help + choices + (" (required)" if self.required else f"; default {self.default_text()}")


def as_list(value) -> list:
    """A selection's value as a list: a list or tuple as is; a string "[a, b]" read as a Python literal;
    "a,b" split on commas; any other single value in a list of one."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            try:
                parsed = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                parsed = [w.strip().strip("'\"") for w in text[1:-1].split(",")]
            return list(parsed) if isinstance(parsed, (list, tuple)) else [parsed]
        if "," in text:
            return [w.strip() for w in text.split(",") if w.strip()]
        return [text]
    return [value]


def parse_mapping(text: str, option: str) -> dict:
    """``"KEY=VALUE,..."`` -> a dict; a value reads as an int, a float, true/false, or text. argparse's
    ArgumentTypeError (shown as is) naming ``option`` when an item is not KEY=VALUE."""
    mapping = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise argparse.ArgumentTypeError(f"{option} takes KEY=VALUE,... (e.g. p=113,train_fraction=0.3), "
                                             f"got {text!r}")
        value = value.strip()
        for convert in (int, float):
            try:
                mapping[key.strip()] = convert(value)
                break
            except ValueError:
                continue
        else:
            mapping[key.strip()] = {"true": True, "false": False}.get(value.lower(), value)
    return mapping


def setting(default=REQUIRED, interval: str | None = None, *, choices=None, none: str | None = None,
            help: str = "", item: type = str, length: int | None = None, convert: Callable | None = None,
            sweep_settable: bool = False):
    """A dataclass field declaring one row of a table (:func:`table` reads it): its default, and the rest of
    its :class:`Param` (name and type come from the field's name and annotation)."""
    row = {"interval": interval, "choices": None if choices is None else tuple(choices), "none": none,
           "help": help, "item": item, "length": length, "convert": convert, "sweep_settable": sweep_settable}
    return field(default=MISSING if default is REQUIRED else default, metadata={"setting": row})


def table(cls) -> dict[str, Param]:
    """The table a dataclass declares with :func:`setting`: {field name: its Param}, in field order.
    ValueError for a field without a row, or whose annotation and ``none`` disagree on None."""
    rows = {}
    for f in fields(cls):
        if "setting" not in f.metadata:
            raise ValueError(f"{cls.__name__}.{f.name} is not declared with schema.setting")
        annotation = str(f.type)
        nullable = annotation.endswith(" | None")
        row = f.metadata["setting"]
        if nullable != (row["none"] is not None):
            raise ValueError(f"{cls.__name__}.{f.name}: annotated {annotation!r}, but none={row['none']!r}")
        rows[f.name] = Param(name=f.name, type=ANNOTATED_TYPES[annotation.removesuffix(" | None")],
                             default=REQUIRED if f.default is MISSING else f.default, **row)
    return rows
