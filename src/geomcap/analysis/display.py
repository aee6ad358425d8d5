"""Tables as the book shows them: every row and column, whole cells, fitting the text column."""

from __future__ import annotations

import html
from functools import partial

import numpy as np
import pandas as pd


def book_table(table: pd.DataFrame, digits: int = 3, index: bool = False):
    """``table`` as the book shows it: every row and column, whole cells, fitting the text column.

    Whole-number columns print as integers (``200``, not ``200.0``), other numbers
    to ``digits`` significant digits (never in e-notation above 1), missing values (NaN, None, ``<NA>``) as
    "–"; headers and text cells wrap at spaces and after underscores (``rankme_floor_step``),
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
    styler = styler.format(lambda v: "–" if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v))
                           else _breakable(v), subset=[c for c in table.columns if c not in formats], na_rep="–")
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


def _book_number(value, digits: int = 3) -> str:
    if value is None or value is pd.NA or not np.isfinite(value):
        return "–"
    return f"{value:,.0f}" if abs(value) >= 10 ** digits else f"{value:.{digits}g}"
