"""Tables as the book shows them: every row and column, whole cells, fitting the text column."""

from __future__ import annotations

import html
import os
import re
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd


def book_table(table: pd.DataFrame, digits: int = 3, index: bool = False):
    """``table`` as the book shows it: every row and column, whole cells, fitting the text column.

    Whole-number columns print as integers (``200``, not ``200.0``), other numbers
    to ``digits`` significant digits (never in e-notation above 1), and so do the numbers of a column that is
    not numeric as a whole (numbers beside text); missing values (NaN, None, ``<NA>``) as "–"; headers and text cells wrap at spaces and after underscores (``rankme_floor_step``),
    never inside a word, so a table of many columns may still be wider than the
    text column: show fewer. Text is HTML-escaped. Returns a pandas ``Styler`` (its
    HTML is the whole table: pandas' display options do not elide it).
    """
    formats = {}
    for column in table.columns:
        values = table[column]
        if pd.api.types.is_bool_dtype(values) or not pd.api.types.is_numeric_dtype(values):
            continue
        present = pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float)
        whole = len(present) and np.all(np.isfinite(present)) and np.all(present == np.round(present)) \
            and np.all(np.abs(present) < 1e15)
        formats[column] = "{:,.0f}" if whole else partial(_book_number, digits=digits)
    styler = table.style.format(formats, na_rep="–")
    styler = styler.format(partial(_book_cell, digits=digits), subset=[c for c in table.columns if c not in formats],
                           na_rep="–")
    if not index:
        styler = styler.hide(axis="index")
    styler = styler.format_index(_breakable, axis="columns")
    return styler.set_table_styles([
        # no max-width: a table wider than the column overflows it (and the book's browser test fails),
        # rather than being squeezed until its words break letter by letter
        {"selector": "", "props": "font-size: 0.7em; table-layout: auto;"},
        {"selector": "th, td", "props": "white-space: normal; overflow-wrap: break-word; padding: 0.2em 0.3em;"},
    ])


def _breakable(text) -> str:
    """``text`` as HTML that may break after an underscore: ``rankme_<wbr>floor_<wbr>step``."""
    return html.escape(str(text)).replace("_", "_<wbr>")


def _book_cell(value, digits: int = 3) -> str:
    """A cell of a column that is not numeric as a whole (text, or numbers beside missing values or text):
    "–" when missing, a number as the numeric columns print it, else the text, breakable."""
    if value is None or value is pd.NA or (isinstance(value, (float, np.floating)) and np.isnan(value)):
        return "–"
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        return f"{value:,.0f}" if np.isfinite(value) and value == round(value) else _book_number(value, digits)
    return _breakable(value)


def _book_number(value, digits: int = 3) -> str:
    if value is None or value is pd.NA or not np.isfinite(value):
        return "–"
    return f"{value:,.0f}" if abs(value) >= 10 ** digits else f"{value:.{digits}g}"


def shown_path(path) -> str:
    """``path`` as a page may print it, without the machine it was built on: relative to the repository
    (``data/grokking``) when inside the checkout whose committed data this is, ``~/...`` when inside the home
    folder (the user stores, ``~/.cache/geomcap/runs``), else as given."""
    from geomcap.store import committed_data

    target = Path(path).expanduser()
    try:
        checkout = committed_data().resolve().parent
    except FileNotFoundError:
        checkout = None
    resolved = target.resolve() if target.is_absolute() else target
    if checkout is not None and resolved.is_absolute() and resolved.is_relative_to(checkout):
        return resolved.relative_to(checkout).as_posix() or "."
    home = Path(os.path.expanduser("~")).resolve()
    if resolved.is_absolute() and resolved.is_relative_to(home):
        return "~/" + resolved.relative_to(home).as_posix()
    return str(path)


#: an absolute path in a line of text (a command recorded with a result): "/" at the start of a word,
#: followed by at least one more folder
ABSOLUTE_PATH = re.compile(r"(?<![\w.~:/-])/(?:[\w.@+-]+/)+[\w.@+-]*")


def without_machine_paths(text: str) -> str:
    """``text`` (a recorded command line, a message) with every absolute path as :func:`shown_path` gives
    it, and a path outside the repository and the home folder as ``.../<its last part>``: the folder of the
    machine that wrote it says nothing to a reader."""
    def shown(match) -> str:
        path = match.group(0)
        short = shown_path(path)
        return short if not short.startswith("/") else ".../" + (Path(path).name or path.strip("/"))
    return ABSOLUTE_PATH.sub(shown, str(text))
