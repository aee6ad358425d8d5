"""Notebook parameters: checked at once, each bad one reported in one line naming it.

Every section notebook declares its parameters in a cell tagged ``parameters``
whose first line is ``# parameters``; papermill (``-p name value``) injects
the values given after it, in a cell whose first line is ``# Parameters``.
The notebook's first code cell after them calls::

    from geomcap import parameters
    parameters.check(globals())

which

* refuses a name papermill injected that the notebook does not declare
  (papermill itself only warns, then runs the defaults);
* checks every declared parameter by its name (:data:`KINDS`) and writes
  the normalised value back: a list parameter also takes a comma-separated
  string (``-p tasks "mod,sort"``) or a list literal (``-p seeds "[0, 1]"``),
  a flag must be True or False, a number a number.

A bad parameter raises :class:`ParameterError`, shown by Jupyter as its one
line (no traceback: the error is the user's value, not the code). In a kernel
the line also goes to the kernel's own stderr, which papermill's command shows
as it runs: before papermill's traceback of its own code.
"""

from __future__ import annotations

import ast
import math
import sys

#: what each notebook parameter holds: "names" (a value, a list, a comma-separated string, or "all"),
#: "seeds" (the same with integers), "flag" (True or False), "fraction" (a number in (0, 1]),
#: "text" (a string; its values are checked where it is used), "preset" (one model preset),
#: "choice" (one string, checked where it is used), "selection" (a keyword string such as "all" or
#: "every:K", or a list), "layers" ("final", "all", or a list of layer indices), "steps" (a positive int
#: for every level, normalised to its text, or per level as "easy:2000,medium:4000,hard:8000")
KINDS = {
    "tasks": "names", "levels": "names", "sizes": "names", "benchmarks": "names", "seeds": "seeds",
    "recompute": "flag", "delete_downloads": "flag",
    "fraction": "fraction",
    "small": "preset", "large": "preset",
    "measure": "choice", "timing": "choice", "model": "choice", "device": "choice",
    "steps": "steps", "root": "text", "revisions": "selection", "layers": "layers",
}


class ParameterError(ValueError):
    """A notebook parameter has a bad name or value (one line, naming it)."""

    def _render_traceback_(self):  # IPython shows these lines instead of a traceback
        line = f"ParameterError: {self}"
        # papermill's command prints the kernel's stderr as it comes, and its own 30-line traceback only at
        # the end: there the line comes first. IPython renders an error twice: echo it once.
        if _in_kernel() and not getattr(self, "_echoed", False):
            self._echoed = True
            try:
                sys.__stderr__.write(f"\n{line}\n")
                sys.__stderr__.flush()
            except (AttributeError, OSError, ValueError):  # no usable stderr
                pass
        return [line]


def _in_kernel() -> bool:
    """Whether this runs in a Jupyter kernel (an IPython shell with a kernel: papermill, Jupyter, the book)."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return getattr(shell, "kernel", None) is not None


def as_list(value) -> list:
    """A list parameter's value as a list: a list or tuple as is; a string "[a, b]" read as a
    Python literal; "a,b" split on commas; any other single value in a list of one."""
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


def check_value(name: str, value, kind: str | None = None):
    """``value`` of the parameter ``name`` normalised by its kind (:data:`KINDS`); ParameterError if bad."""
    kind = kind or KINDS.get(name, "text")
    if kind == "names":
        if isinstance(value, str) and value.strip() == "all":
            return "all"
        values = as_list(value)
        bad = [v for v in values if not isinstance(v, str) or not v.strip()]
        if bad or not values:
            raise ParameterError(f"parameter {name}: expected a name, a list of names, comma-separated names "
                                 f"or 'all', got {value!r}")
        return [v.strip() for v in values]
    if kind == "seeds":
        if isinstance(value, str) and value.strip() == "all":
            return "all"
        seeds = []
        for seed in as_list(value):
            if isinstance(seed, str) and seed.strip().lstrip("-").isdigit():
                seed = int(seed)
            if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
                raise ParameterError(f"parameter {name}: {seed!r} is not a non-negative integer")
            seeds.append(seed)
        if not seeds:
            raise ParameterError(f"parameter {name}: empty selection")
        return seeds
    if kind == "flag":
        if not isinstance(value, bool):
            raise ParameterError(f"parameter {name}: must be True or False, got {value!r}")
        return value
    if kind == "fraction":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not 0 < value <= 1:
            raise ParameterError(f"parameter {name}: must be in (0, 1], got {value!r}")
        return float(value)
    if kind == "preset":
        from geomcap.models import PRESETS

        if value not in PRESETS:
            raise ParameterError(f"parameter {name}: unknown preset {value!r}; choose from: {', '.join(PRESETS)}")
        return value
    if kind in ("selection", "layers"):
        if isinstance(value, str) and not ("," in value or value.strip().startswith("[")) \
                and (kind == "selection" or value in ("final", "all")):
            return value
        values = as_list(value)
        if kind == "layers":
            try:
                values = [int(v) for v in values if not isinstance(v, bool)] if values else []
            except (TypeError, ValueError):
                values = []
            if not values or any(v < 0 for v in values):
                raise ParameterError(f"parameter {name}: {value!r}: expected 'final', 'all' or layer indices")
        return values
    if kind == "number":
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ParameterError(f"parameter {name}: must be a non-negative number, got {value!r}")
        return float(value)
    if kind == "count":
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ParameterError(f"parameter {name}: must be a non-negative integer, got {value!r}")
        return value
    if kind == "steps":  # an int means every level; a string is checked where it is used (section_grid)
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 1:
                raise ParameterError(f"parameter {name}: must be a positive integer, or per level as "
                                     f"'easy:2000,medium:4000,hard:8000', got {value!r}")
            return str(value)
        kind = "text"
    if kind in ("choice", "text"):
        if not isinstance(value, str):
            raise ParameterError(f"parameter {name}: expected a string, got {value!r}")
        return value
    raise ValueError(f"unknown parameter kind {kind!r}")


def check_choice(name: str, value, allowed) -> str:
    """One value of ``allowed`` (not a list, not 'all'); ParameterError naming the parameter otherwise."""
    if not isinstance(value, str) or value not in allowed:
        raise ParameterError(f"parameter {name}: unknown value {value!r}; choose one of: {', '.join(allowed)}")
    return value


def _executed_cells() -> list[str]:
    """The sources of the cells the running IPython kernel has executed, oldest first ([] outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return []
    shell = get_ipython()
    return list(shell.user_ns.get("In", [])) if shell is not None else []


def _assigned(source: str) -> list[str]:
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    names.append(target.id)
    return names


def declared_and_given(cells) -> tuple[list[str], list[str]]:
    """From executed cell sources: the names the last ``# parameters`` cell declares, and those the
    ``# Parameters`` cell papermill injected after it assigns ([] when there is none)."""
    declared, given = [], []
    for source in cells:
        first = source.lstrip().split("\n", 1)[0].strip()
        if first == "# parameters":
            declared, given = _assigned(source), []
        elif first == "# Parameters":  # papermill's injected cell
            given = _assigned(source)
    return declared, given


def check(namespace: dict, cells=None, kinds: dict | None = None) -> None:
    """Check a notebook's parameters in ``namespace`` (its ``globals()``) and write back the normalised
    values. ``cells``: the executed cell sources (default: the running kernel's history); ``kinds``:
    the kinds of this notebook's own parameters (name -> a kind of :data:`KINDS`, or "count")."""
    declared, given = declared_and_given(_executed_cells() if cells is None else cells)
    unknown = [name for name in given if name not in declared]
    if unknown:
        raise ParameterError(f"parameter {unknown[0]}: unknown; this notebook's parameters are: "
                             f"{', '.join(declared)}")
    for name in declared or [n for n in KINDS if n in namespace]:
        if name in namespace:
            namespace[name] = check_value(name, namespace[name], (kinds or {}).get(name))
