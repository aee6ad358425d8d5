"""The parameters a person types, one schema row each: the notebooks' parameters, the sweep's grid axes and the
Pythia commands' options (:data:`PARAMETERS`), ``geomcap train``'s own options beside the config's
(:data:`TRAIN_OPTIONS`), ``geomcap sweep``'s own options beside its grid axes (:data:`SWEEP`), the stand-in's
build (:data:`STANDIN_BUILD`), ``geomcap bench``'s options (:data:`BENCH`), ``geomcap checkpoints``' options
(:data:`CHECKPOINTS`), and the notebooks' own parameters of a generic kind (:data:`KINDS`).

A row is a :class:`geomcap.schema.Param`, as a training setting is (:data:`geomcap.config.SETTINGS`), and
reuses the training rows where a parameter holds training settings: a notebook's ``tasks`` and ``geomcap sweep
--tasks`` are each a selection of ``TrainConfig.task`` values, ``seeds`` of ``TrainConfig.seed`` values. Every
entry point checks a value through its row (:meth:`geomcap.schema.Param.read`) and words the row's one-line
reason its own way: "parameter NAME: REASON" in a notebook (:class:`ParameterError`), "--NAME: REASON" on the
command line.

Every section notebook declares its parameters in a cell tagged ``parameters``
whose first line is ``# parameters``; papermill (``-p name value``) injects
the values given after it, in a cell whose first line is ``# Parameters``.
The notebook's first code cell after them calls::

    from geomcap import parameters
    parameters.check(globals())

which

* refuses a name papermill injected that the notebook does not declare
  (papermill itself only warns, then runs the defaults);
* checks every declared parameter through its row (:func:`check_value`) and writes the normalised value
  back: a selection also takes a comma-separated string (``-p tasks "mod,sort"``) or a list literal
  (``-p seeds "[0, 1]"``), a flag must be True or False, a number a number.

A bad parameter raises :class:`ParameterError`, shown by Jupyter as its one
line (no traceback: the error is the user's value, not the code). In a kernel
the line also goes to the kernel's own stderr, which papermill's command shows
as it runs: before papermill's traceback of its own code.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import replace

import numpy as np

from geomcap import diagnostics, measures
from geomcap.analysis.pythia_revisions import revision_spec
from geomcap.config import DEFAULT_LEVEL_STEPS_TEXT, SETTINGS, parse_steps
from geomcap.schema import Param, SettingError, as_list  # noqa: F401 (parameters.as_list: the notebooks' reading)


def level_steps(value) -> str:
    """The ``steps`` of a selection's runs as text: an int for every level (given back as its text), or per
    level as ``"easy:2000,medium:4000,hard:8000"`` (``=`` for ``:`` too); each level and number checked as
    ``TrainConfig.level`` and ``TrainConfig.steps`` are (:func:`geomcap.config.parse_steps`)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        try:
            return str(SETTINGS["steps"].check(value))
        except SettingError:
            raise SettingError("steps", f"must be a positive integer, or per level as '{DEFAULT_LEVEL_STEPS_TEXT}', "
                                        f"got {value!r}") from None
    if not isinstance(value, str):
        raise SettingError("steps", f"must be a string, got {value!r}")
    parse_steps(value)
    return value


def device_name(value) -> str:
    """A device as :func:`geomcap.models.resolve_device` takes it (the ``device`` row's check): auto (cuda when
    present), cpu, cuda or cuda:N, the last two where CUDA is available; SettingError otherwise."""
    if not isinstance(value, str):
        raise SettingError("device", f"must be a string, got {value!r}")
    if value not in ("auto", "cpu", "cuda") and not re.fullmatch(r"cuda:\d+", value):
        allowed = "auto, cpu, cuda, cuda:N"
        raise SettingError("device", f"unknown value {value!r}; choose one of: {allowed}",
                           f"unknown device {value!r}; choose one of: {allowed}")
    if value.startswith("cuda"):
        import torch  # only here: the rows are read without torch

        if not torch.cuda.is_available():
            raise SettingError("device", f"{value!r} requested but CUDA is not available")
    return value


def deadline(value, now: float | None = None) -> float:
    """A sweep's deadline as Unix seconds (the ``until`` row's check): Unix seconds as a number, a
    ``datetime``, or text: ``HH:MM`` (its next occurrence in local time), a time from now (``+2h40m``,
    ``+90m``, ``+3h``) or an ISO 8601 date and time (``2026-12-07T20:10``, local time unless it names its
    offset, ``Z`` for UTC); SettingError for anything else, or for a time already past (``now``: the present
    as Unix seconds, default the clock)."""
    import datetime as dt
    import math
    import time

    now = time.time() if now is None else now
    if isinstance(value, dt.datetime):
        when = value.timestamp()
    elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        when = float(value)
    elif isinstance(value, str) and re.fullmatch(r"\s*\d{1,2}:\d{2}\s*", value):
        hours, minutes = map(int, value.split(":"))
        if hours > 23 or minutes > 59:
            raise SettingError("until", f"{value!r} is not a time of day (HH:MM, 00:00 to 23:59)")
        today = dt.datetime.fromtimestamp(now)
        at = today.replace(hour=hours, minute=minutes, second=0, microsecond=0)
        return (at if at.timestamp() > now else at + dt.timedelta(days=1)).timestamp()
    elif isinstance(value, str) and (ahead := re.fullmatch(r"\s*\+(?:(\d+)h)?(?:(\d+)m)?\s*", value)) and any(
            ahead.groups()):
        hours, minutes = ahead.groups()
        when = now + 3600 * int(hours or 0) + 60 * int(minutes or 0)
    elif isinstance(value, str):
        try:
            when = dt.datetime.fromisoformat(value.strip()).timestamp()
        except ValueError:
            raise SettingError("until", f"must be a time of day (HH:MM), a time from now (+2h40m) or an ISO "
                                        f"date and time (2026-12-07T20:10), got {value!r}") from None
    else:
        raise SettingError("until", f"must be a time of day (HH:MM), an ISO date and time or Unix seconds, "
                                    f"got {value!r}")
    if not math.isfinite(when) or when <= now:
        raise SettingError("until", f"{value!r} is already past: a sweep until then would start nothing")
    return when


def token_position(value):
    """A token position as ``geomcap checkpoints --position`` takes it (the ``position`` row's check): an index
    into each prompt's tokens (-1: the last) or ``"mean"`` (the mean over them); SettingError otherwise."""
    if isinstance(value, str) and value == "mean":
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    raise SettingError("position", f"must be an integer or 'mean', got {value!r}")


def _selection(name: str, setting: Param, default, every: str, help: str) -> Param:
    """A selection of a training setting's values (``tasks``: of ``TrainConfig.task``), checked by its row."""
    return Param(name, list, default, interval=setting.interval, choices=setting.choices, item=setting.type,
                 every=every, help=help)


#: the rows of a notebook's own parameters, by kind (``parameters.check(globals(), kinds={"p": "count"})``)
KINDS = {"flag": Param("flag", bool), "text": Param("text", str),
         "fraction": Param("fraction", float, interval="(0, 1]"),
         "count": Param("count", int, interval="[0, inf)"), "positive": Param("positive", int, interval="[1, inf)"),
         "number": Param("number", float, interval="[0, inf)")}


def _positive(name: str, default, help: str, none: str | None = None) -> Param:
    """A positive integer (the ``positive`` kind's row) of this name, default and help."""
    return replace(KINDS["positive"], name=name, default=default, help=help, none=none)


#: every parameter a person types outside ``geomcap train``'s options, by name; a notebook's parameter and a
#: command's option of the same name are the same row (the defaults are the command's: each notebook sets its own)
PARAMETERS = {row.name: row for row in [
    # a selection of runs: the notebooks' parameters, and the grid axes of ``geomcap sweep``
    _selection("tasks", SETTINGS["task"], "all", "every task", "tasks, comma-separated, or all"),
    _selection("levels", SETTINGS["level"], "all", "every level", "levels, comma-separated, or all"),
    _selection("sizes", SETTINGS["size"], ["405k"], "every preset", "model presets, comma-separated"),
    _selection("seeds", SETTINGS["seed"], [0], "every seed stored", "seeds, comma-separated"),
    Param("steps", str, DEFAULT_LEVEL_STEPS_TEXT, convert=level_steps,
          help="steps, or per level: easy=1000,medium=3000,hard=6000"),
    Param("recompute", bool, False, help="train the selection's missing runs first"),
    Param("root", str, "", help='run store ("": the committed runs)'),
    Param("measure", str, "rankme", choices=measures.RANKME_VARIANTS, help="the RankMe variant read"),
    replace(SETTINGS["size"], name="small", default="405k", help="the proxy preset"),
    replace(SETTINGS["size"], name="large", default="1.3m", help="the preset the proxy should predict"),
    Param("timing", str, "rankme_transition_step", help="the step whose order the proxy should predict"),
    # Pythia (notebook 06, ``geomcap pythia run`` and ``show``)
    Param("model", str, "standin", help="standin, a Pythia hub name or a local checkpoint root"),
    Param("revisions", list, "all", convert=revision_spec,
          help="all, log (step 0 then doubling), every:K, or revisions such as step0,step1000"),
    Param("benchmarks", list, "all", choices=tuple(diagnostics.BENCHMARKS), every="every benchmark",
          help="benchmarks, comma-separated, or all"),
    Param("layers", list, "final", item=int, interval="[0, inf)", every="every recorded layer", words=("final",),
          help="final, all, or layer indices, comma-separated (0: the embeddings)"),
    Param("device", str, "auto", convert=device_name, help="auto (cuda when present), cpu or cuda"),
    Param("delete_downloads", bool, False, help="remove each hub revision once its metrics are stored"),
    _positive("batch_tokens", None, "padded tokens per forward pass", none="4096 on CPU, 16384 on GPU"),
]}

#: ``geomcap train``'s own options beside the config's (TrainConfig's rows, :data:`geomcap.config.SETTINGS`): where
#: and how a run trains, not what; not given, ``--from`` takes the recorded run's
TRAIN_OPTIONS = {row.name: row for row in [
    replace(PARAMETERS["device"], default=None, none="auto; with --from, the recorded run's"),
    Param("threads", int, None, "[1, inf)", none="1; with --from, the recorded run's",
          help="torch CPU threads (1 does not collapse when other work shares the cores, and gives the same "
               "metrics on every machine)"),
]}

#: the offline Pythia stand-in's build: the keywords of :func:`geomcap.pythia.build_standin` (their defaults are
#: these rows') and the options of ``geomcap pythia standin``
STANDIN_BUILD = {row.name: row for row in [
    Param("steps", int, 2000, "[1, inf)", help="training steps"),
    Param("layers", int, 2, "[1, inf)", help="GPT-NeoX layers"),
    Param("width", int, 64, "[1, inf)", help="hidden size, a multiple of heads"),
    Param("heads", int, 4, "[1, inf)", help="attention heads"),
    Param("vocab_size", int, 1024, "[1, inf)",
          help="BPE vocabulary size, at least 300 (256 bytes, 2 special tokens, merges)"),
    Param("seq_len", int, 128, "[1, inf)", help="tokens per training sequence"),
    Param("batch_size", int, 16, "[1, inf)", help="sequences per step"),
    Param("lr", float, 3e-3, "(0, inf)", help="peak learning rate"),
    Param("every", int, 50, "[1, inf)", help="a revision every K steps, after step 0 and the powers of two below K"),
    Param("seed", int, 0, "(-inf, inf)", help="the text's, the initialisation's and the batches' seed"),
    Param("templates", int, 1500, "[1, inf)", help="templated sentences per easy benchmark family in the text"),
    Param("max_chars", int, None, "[1, inf)", none="all of it", help="truncate the training text"),
    Param("puzzles", int, 3000, "[0, inf)", none="templates // 4, of 3, 5 and 7 objects",
          help="solved ordering puzzles in the text, never a benchmark item"),
    Param("puzzle_objects", list, (3,), item=int, choices=tuple(sorted(diagnostics.NUMBER_WORDS)),
          help="object counts of those puzzles, comma-separated"),
    Param("puzzle_shortcut", str, "kept", choices=diagnostics.PUZZLE_SHORTCUTS,
          help="kept: the puzzles as generated; balanced: where one object goes unnamed by the clues, it is the "
               "answer at chance rate (diagnostics.deduction_shortcut), so the shortcut tells nothing"),
]}

#: the options of ``geomcap checkpoints`` beside its root, prompts and output, and the keywords of
#: :func:`geomcap.checkpoints.measure_checkpoints` of the same names (their defaults are these rows')
CHECKPOINTS = {row.name: row for row in [
    Param("position", int, -1, convert=token_position,
          help="token position per prompt: an index (-1: the last token) or 'mean'"),
    replace(PARAMETERS["device"], default="cpu"),
]}

#: ``geomcap sweep``'s own options beside its grid axes (:data:`PARAMETERS`) and ``--set``: how the grid trains, not
#: what (``measures``: TrainConfig's row, for every run); the keywords of :func:`geomcap.sweep.run_sweep` of the
#: same names take their defaults from these rows and are checked through them
SWEEP = {row.name: row for row in [
    _positive("workers", None, "local worker processes", none="one per core"),
    replace(PARAMETERS["device"], default="cpu",
            help="auto (cuda when present), cpu or cuda (workers share the device)"),
    replace(TRAIN_OPTIONS["threads"], none="1",
            help="torch threads per worker (1 does not collapse when other work shares the cores, and gives "
                 "byte-identical metrics on a rerun; more only on otherwise idle cores)"),
    SETTINGS["measures"],
    _positive("pack", None, "train up to PACK runs of one preset, steps and batch size as one batched "
                            "computation per worker (metrics as if trained alone, up to rounding); on a 2-core CPU "
                            "packs are not faster (data/bench/packing-2core.json): packing is meant for a GPU",
              none="none, one run per worker"),
    Param("until", str, None, convert=deadline, none="no deadline",
          help="start no run the plan projects to end after this time (HH:MM, its next occurrence; +2h40m from "
               "now; or an ISO date and time): the sweep goes on to the runs that fit, and names each one it "
               "defers (a run without a projection is deferred too); for a session or a job that ends at a known "
               "time"),
    Param("until_margin", float, 1.0, "[1, inf)",
          help="with --until: start a run only where UNTIL_MARGIN times its projected time ends before the deadline "
               "(the book's performance page measures how far real times exceed the projections)"),
]}


def compiled_presets(value) -> list:
    """``geomcap bench --compile``'s presets as a list, each checked as ``TrainConfig.size`` is (the ``compile``
    row's check); none (None, an empty list or blank text, its default) as []."""
    if value is None or (isinstance(value, str) and not value.strip(" ,")) or value in ((), []):
        return []
    return replace(BENCH["compile"], convert=None).check(value)


#: the parts of ``geomcap bench``: those it runs by default (its ``--parts default``), then the optional ones
DEFAULT_BENCH_PARTS = ("throughput", "geometry", "costly", "rankme")
OPTIONAL_BENCH_PARTS = ("threads", "llc_calibration", "scale")

#: the options of ``geomcap bench`` and the keywords of :func:`geomcap.bench.run_bench` (``compile``: its
#: ``compile_presets``); :mod:`geomcap.bench` reads its parts, peers and RankMe sizes here
BENCH = {row.name: row for row in [
    Param("parts", list, "default", choices=DEFAULT_BENCH_PARTS + OPTIONAL_BENCH_PARTS, every="every part",
          words=("default",), help="parts, comma-separated, all (every part) or default (the first four)"),
    PARAMETERS["device"],
    replace(TRAIN_OPTIONS["threads"], none="one per core",
            help="torch and BLAS threads (use 1 on a CPU shared with other work)"),
    Param("presets", list, "auto", choices=SETTINGS["size"].choices, words=("auto",),
          help="presets, comma-separated, or auto: those whose step fits --max-step-s on this device"),
    Param("max_step_s", float, 2.0, "(0, inf)", help="auto presets: estimated seconds per step"),
    replace(SETTINGS["task"], default="add", help="task whose batches are timed"),
    replace(SETTINGS["level"], default="hard", help="its level"),
    replace(SETTINGS["batch_size"], help="sequences per timed step"),
    _positive("rounds", 7, "interleaved timing rounds (medians over them)"),
    Param("block_s", float, 1.5, "(0, inf)", help="seconds of training steps per timed block"),
    Param("peer", str, "gpt2", choices=("gpt2", "gpt-neox"), none="no peer",
          help="the transformers model of the same shape timed beside geomcap's, or none"),
    Param("compile", list, (), choices=SETTINGS["size"].choices, convert=compiled_presets,
          help="presets also timed under torch.compile, comma-separated"),
    Param("rankme_n", list, (512, 4096, 32768), item=int, interval="[1, inf)",
          help="RankMe sizes N (rows), comma-separated"),
    Param("rankme_d", list, (128, 768, 2560), item=int, interval="[1, inf)",
          help="RankMe sizes d (columns), comma-separated"),
    _positive("rankme_repeats", None, "repetitions per RankMe size", none="by size: 5, 3, or 1 for the largest"),
    _positive("costly_repeats", 3, "repetitions per costly measure"),
    _positive("peak_n", None, "matmul peak: n x n product", none="2048 on the CPU, 8192 on CUDA"),
]}


def row(name: str, kind: str | None = None) -> Param:
    """The row that checks the parameter ``name``: its kind's (a :data:`KINDS` key, or another parameter's
    name), else its own (:data:`PARAMETERS`), else text."""
    key = kind or name
    if kind is not None and key not in KINDS and key not in PARAMETERS:
        raise ValueError(f"unknown parameter kind {kind!r}")
    return replace(KINDS.get(key) or PARAMETERS.get(key) or KINDS["text"], name=name)


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


def refusal(exc: SettingError, name: str | None = None) -> ParameterError:
    """A row's one line as a notebook words it: "parameter NAME: REASON" (NAME: the row's, unless given)."""
    return ParameterError(f"parameter {name or exc.name}: {exc.reason}")


def check_value(name: str, value, kind: str | None = None):
    """``value`` of the parameter ``name`` through its row (:func:`row`), normalised; ParameterError naming
    the parameter if it is bad."""
    try:
        return row(name, kind).read(value)
    except SettingError as exc:
        raise refusal(exc, name) from None


def check_selection(name: str, value):
    """A selection parameter (``tasks``, ``benchmarks``, ...) through its row, its "all" given as the
    row's choices where it has them (:meth:`geomcap.schema.Param.chosen`); ParameterError naming it."""
    try:
        return PARAMETERS[name].chosen(value)
    except SettingError as exc:
        raise refusal(exc) from None


def check_choice(name: str, value, allowed) -> str:
    """One value of ``allowed`` (not a list, not 'all'), checked as a schema row with these choices;
    ParameterError naming the parameter otherwise."""
    try:
        return Param(name, str, choices=tuple(allowed)).read(value)
    except SettingError as exc:
        raise refusal(exc) from None


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
    the kinds of this notebook's own parameters (name -> a :data:`KINDS` key, or the name of the
    :data:`PARAMETERS` row that checks it)."""
    declared, given = declared_and_given(_executed_cells() if cells is None else cells)
    unknown = [name for name in given if name not in declared]
    if unknown:
        raise ParameterError(f"parameter {unknown[0]}: unknown; this notebook's parameters are: "
                             f"{', '.join(declared)}")
    for name in declared or [n for n in PARAMETERS if n in namespace]:
        if name in namespace:
            namespace[name] = check_value(name, namespace[name], (kinds or {}).get(name))
