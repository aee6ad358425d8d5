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
  a flag must be True or False, a number a number. The values are checked by
  the parameter schema (:mod:`geomcap.schema`), the training settings' rows where a
  parameter is one (a notebook's ``seeds`` as ``TrainConfig.seed``, its
  ``tasks`` as ``TrainConfig.task``, its ``steps`` as ``TrainConfig.steps``).

A bad parameter raises :class:`ParameterError`, shown by Jupyter as its one
line (no traceback: the error is the user's value, not the code). In a kernel
the line also goes to the kernel's own stderr, which papermill's command shows
as it runs: before papermill's traceback of its own code.
"""

from __future__ import annotations

import ast
import sys
from functools import cache

from geomcap.schema import Param, SettingError

#: what each notebook parameter holds: "names" (a value, a list, a comma-separated string, or "all");
#: "tasks", "levels", "sizes", "seeds" (the same, each value a TrainConfig task, level, size or seed);
#: "flag" (True or False), "fraction" (a number in (0, 1]), "count" (a non-negative integer), "number"
#: (a non-negative real), "text" (a string; its values are checked where it is used), "preset" (one model
#: preset), "choice" (one string, checked where it is used), "selection" (a keyword string such as "all" or
#: "every:K", or a list), "layers" ("final", "all", or a list of layer indices), "steps" (a positive int
#: for every level, normalised to its text, or per level as "easy:2000,medium:4000,hard:8000")
KINDS = {
    "tasks": "tasks", "levels": "levels", "sizes": "sizes", "benchmarks": "names", "seeds": "seeds",
    "recompute": "flag", "delete_downloads": "flag",
    "fraction": "fraction",
    "small": "preset", "large": "preset",
    "measure": "choice", "timing": "choice", "model": "choice", "device": "choice",
    "steps": "steps", "root": "text", "revisions": "selection", "layers": "layers",
}


@cache
def kind_rows() -> dict[str, tuple[Param, bool]]:
    """The schema row each kind checks its values with, and whether it takes a list (or "all"): the
    training settings' rows for tasks, levels, sizes, seeds and presets (:data:`geomcap.config.SETTINGS`)."""
    from geomcap.config import SETTINGS

    text = Param("text", str)
    return {"names": (text, True), "tasks": (SETTINGS["task"], True), "levels": (SETTINGS["level"], True),
            "sizes": (SETTINGS["size"], True), "seeds": (SETTINGS["seed"], True), "preset": (SETTINGS["size"], False),
            "flag": (Param("flag", bool), False), "fraction": (Param("fraction", float, interval="(0, 1]"), False),
            "count": (Param("count", int, interval="[0, inf)"), False),
            "number": (Param("number", float, interval="[0, inf)"), False),
            "text": (text, False), "choice": (text, False)}


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


def _checked(name: str, param: Param, value):
    """One value through its schema row (a number may come as text); ParameterError naming the parameter."""
    if isinstance(value, str) and param.type in (int, float):
        try:
            value = param.parse(value.strip())
        except ValueError:
            pass  # the check names the text
    try:
        return param.check(value)
    except SettingError as exc:
        raise ParameterError(f"parameter {name}: {exc.reason}") from None


def check_value(name: str, value, kind: str | None = None):
    """``value`` of the parameter ``name`` normalised by its kind (:data:`KINDS`); ParameterError if bad."""
    kind = kind or KINDS.get(name, "text")
    if kind in kind_rows():
        param, many = kind_rows()[kind]
        if not many:
            return _checked(name, param, value)
        if isinstance(value, str) and value.strip() == "all":
            return "all"
        values = as_list(value)
        if not values:
            raise ParameterError(f"parameter {name}: empty selection")
        if param.type is str and any(not isinstance(v, str) or not v.strip() for v in values):
            raise ParameterError(f"parameter {name}: expected a name, a list of names, comma-separated names "
                                 f"or 'all', got {value!r}")
        return [_checked(name, param, v.strip() if isinstance(v, str) else v) for v in values]
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
    if kind == "steps":  # an int means every level, a string per level; each number a TrainConfig's steps
        from geomcap.config import DEFAULT_LEVEL_STEPS_TEXT, SETTINGS, parse_steps

        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return str(SETTINGS["steps"].check(value))
            except SettingError:
                raise ParameterError(f"parameter {name}: must be a positive integer, or per level as "
                                     f"'{DEFAULT_LEVEL_STEPS_TEXT}', got {value!r}") from None
        if not isinstance(value, str):
            raise ParameterError(f"parameter {name}: must be a string, got {value!r}")
        try:
            parse_steps(value)
        except SettingError as exc:  # the reason alone: the parameter is named here
            raise ParameterError(f"parameter {name}: {exc.reason}") from None
        except ValueError as exc:
            raise ParameterError(f"parameter {name}: {str(exc).removeprefix('--steps: ')}") from None
        return value
    raise ValueError(f"unknown parameter kind {kind!r}")


def check_choice(name: str, value, allowed) -> str:
    """One value of ``allowed`` (not a list, not 'all'), checked as a schema row with these choices;
    ParameterError naming the parameter otherwise."""
    return _checked(name, Param(name, str, choices=tuple(allowed)), value)


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
    the kinds of this notebook's own parameters (name -> a kind: of :data:`KINDS`, or :func:`kind_rows`'s)."""
    declared, given = declared_and_given(_executed_cells() if cells is None else cells)
    unknown = [name for name in given if name not in declared]
    if unknown:
        raise ParameterError(f"parameter {unknown[0]}: unknown; this notebook's parameters are: "
                             f"{', '.join(declared)}")
    for name in declared or [n for n in KINDS if n in namespace]:
        if name in namespace:
            namespace[name] = check_value(name, namespace[name], (kinds or {}).get(name))
