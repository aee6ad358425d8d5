"""Watch the geometry of any training run: a monitor for plain PyTorch loops and a Trainer callback.

In a plain loop::

    from geomcap.monitor import GeometryMonitor
    monitor = GeometryMonitor(model, probe_ids, steps=2000, labels=next_tokens)
    for step in range(2001):
        monitor.maybe_record(step)          # measures on the schedule only
        ...                                 # one training step
    monitor.metrics                         # tidy DataFrame: step, layer, measure, value
    monitor.events                          # collapse / floor / recovery of the final layer, once certain

With the Hugging Face ``Trainer``: ``Trainer(..., callbacks=[GeometryCallback(probe_ids)])``.

What is measured, at each recorded step, on a fixed batch of probe inputs
(``probe_inputs``: a (B, T) tensor of token ids, or a dict of tensors such as
a tokenizer's output with ``input_ids`` and ``attention_mask``):

* per layer, from the hidden states at the selected position, computed by the recorders of geomcap's
  own runs (:func:`geomcap.recorders.state_rows`): ``rankme`` (uncentred, eps 1e-7) and
  ``mean_energy_share`` (the share of the states' energy in their mean row: near 1, uncentred RankMe
  measures little more than that shared direction); with ``labels`` (one int per probe row, e.g. the
  next token) ``probe_accuracy`` (held-out ridge probe), and at layer -1 the model's own ``accuracy``
  and ``test_loss`` (cross-entropy) on those labels at the same position, when the model returns logits.

Hidden states come from ``output_hidden_states=True`` for a Hugging Face
model (layer 0 = the embeddings, the last = after the final LayerNorm), or,
with ``layers=`` (module names as in ``model.named_modules()``), from forward
hooks on those modules (layer k = the k-th name; a module returning a tuple
contributes its first element). The selected position (``position``):

* an int: that position of every row; with an ``attention_mask`` in
  ``probe_inputs`` a negative index counts back from each row's last attended
  token (-1 = the last real token, for left or right padding);
* ``"mean"``: the mean over positions (attended ones with a mask);
* a boolean (B, T) mask: the selected positions, stacked (N = mask.sum()).

Every measurement runs under ``torch.no_grad`` in eval mode, and the model's
mode is restored afterwards. ``monitor.seconds`` is the wall time spent in it.

Non-finite hidden states (a diverging run: NaN or inf in a layer) are found
before any SVD: that layer's measures at that step are recorded as NaN
(written ``nan`` by :meth:`GeometryMonitor.save`), a :class:`NonFiniteWarning`
says so once per monitor, and ``monitor.nonfinite`` counts such (step, layer)
records. Non-finite logits give NaN ``accuracy`` and ``test_loss``.

Events (no look-ahead). After each recorded step the final layer's RankMe
series so far is passed to :func:`geomcap.events.confirmed_events`, the
analysis protocol's own rule: the floor (with its peak and onset) is reported
once it is certain (``floor_certain_step``: no later checkpoint can move it),
and the recovery once it is certain (``recovery_certain_step``: regained half
of the drop and held it). A report is final: later steps never revise it, and
it equals what :func:`geomcap.events.collapse` finds on the whole series, so a
reader of a live run sees only what is certain. ``monitor.events`` holds it;
the ``geomcap.monitor`` logger logs one line per event; a ``writer`` and the
Trainer's log get ``geometry/events/...`` scalars. Saved checkpoint series: :mod:`geomcap.checkpoints`.

Alarms (no look-ahead either). Once the reading is armed (the collapse window is over and the collapse, if
there was one, has recovered: :func:`geomcap.events.reading_start`), every recorded series (each layer's
RankMe, mean-energy share and probe accuracy, and the test loss) is watched by the alarm rule of
:func:`geomcap.events.alarms`, the one the book scores as a forecast: an alarm is raised at the step where
a departure from the series' course becomes certain, and the rule re-arms after it. Each alarm is in
``monitor.alarms`` (and ``monitor.events["alarms"]``), logged as one line that says what such an alarm was
worth in this book's hard runs (:func:`geomcap.results.alarm_note`: the share followed by
acquisition within the verdict's horizon), and sent as ``geometry/alarms/<measure>[/layer_<k>]`` (value +1
above the course, -1 below) to the writer and the Trainer's log.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

from geomcap import events, recorders, store
from geomcap.analysis.forecast import alarm_note, alarm_precision
from geomcap.config import checkpoint_steps

try:  # the callback needs transformers (pip install geomcap[monitor]); the monitor does not
    from transformers import TrainerCallback
except ImportError:  # pragma: no cover - exercised only without transformers
    TrainerCallback = object

__all__ = ["GeometryMonitor", "GeometryCallback", "format_events", "collapse_summary", "confirmed_collapse", "capture",
           "select_positions",
           "EVENT_FIELDS", "NonFiniteWarning"]

logger = logging.getLogger(__name__)

#: the floor's fields of ``monitor.events``, reported together once the floor is certain
FLOOR_FIELDS = ("peak_step", "peak_value", "onset_step", "floor_step", "floor_value", "collapsed",
                "floor_certain_step")
#: the recovery's fields of ``monitor.events``, reported together once the recovery is certain
RECOVERY_FIELDS = ("recovery_step", "recovery_certain_step")
#: the measures a monitor records per layer (``probe_accuracy`` with labels), computed by the recorders of
#: geomcap's own runs (:func:`geomcap.recorders.state_rows`)
MONITORED = ("rankme", "mean_energy_share", "probe_accuracy")
#: the series the alarms watch: every layer of the monitored measures, and the test loss (with labels)
ALARMED = (*MONITORED, "test_loss")
#: the fields of ``monitor.events`` (``layer`` = the final layer; the others None until that event is certain)
EVENT_FIELDS = ("layer", *FLOOR_FIELDS, *RECOVERY_FIELDS)


class NonFiniteWarning(RuntimeWarning):
    """A layer's hidden states held NaN or inf: its measures at that step are recorded as NaN."""


# --- capture and selection ------------------------------------------------------------------------


def _model_device(model) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _is_hf_model(model) -> bool:
    config = getattr(model, "config", None)
    return config is not None and hasattr(config, "output_hidden_states")


def _first_tensor(output):
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    raise TypeError(f"a hooked module returned {type(output).__name__}, not a tensor or a tuple starting with one")


def _logits_of(output):
    """The logits in a model's output (a Hugging Face output's ``.logits``, or a plain 3-D tensor), else None."""
    logits = getattr(output, "logits", None)
    if logits is None and isinstance(output, torch.Tensor) and output.ndim == 3:
        logits = output
    return logits


def _forward(model, inputs, kwargs=None):
    kwargs = kwargs or {}
    if isinstance(inputs, Mapping):
        return model(**inputs, **kwargs)
    return model(inputs, **kwargs)


def capture(model, probe_inputs, layers=None, logits: bool = True) -> tuple[list[torch.Tensor], torch.Tensor | None]:
    """Hidden states (one tensor per layer, (B, T, d) or (B, d)) and logits (or None) of one forward pass.

    With ``layers`` (module names), from forward hooks on those modules; else
    from ``output_hidden_states=True`` (a Hugging Face model). With
    ``logits=False`` a Hugging Face model runs without its output head (its
    ``base_model``: the same hidden states, without the (B, T, vocab) logits,
    which for GPT-2 small are ~30% of the forward FLOPs). The caller handles
    no_grad and the model's mode.
    """
    if layers is None:
        if not _is_hf_model(model):
            raise ValueError("layers: this model has no output_hidden_states; name the modules whose outputs to "
                             "measure, e.g. layers=['blocks.0', 'blocks.1'] (names from model.named_modules())")
        body = model if logits else getattr(model, "base_model", model)
        out = _forward(body, probe_inputs, {"output_hidden_states": True})
        return list(out.hidden_states), _logits_of(out)
    modules = dict(model.named_modules())
    captured: dict[str, torch.Tensor] = {}
    handles = []
    try:
        for name in layers:
            def hook(module, args, output, name=name):
                captured[name] = _first_tensor(output)
            handles.append(modules[name].register_forward_hook(hook))
        out = _forward(model, probe_inputs)
    finally:
        for h in handles:
            h.remove()
    missing = [name for name in layers if name not in captured]
    if missing:
        raise ValueError(f"layers: module {missing[0]!r} did not run in the forward pass")
    return [captured[name] for name in layers], _logits_of(out)


def _check_position(position):
    if isinstance(position, str):
        if position != "mean":
            raise ValueError(f"position must be an int, 'mean' or a boolean (B, T) mask, got {position!r}")
        return position
    if isinstance(position, (int, np.integer)) and not isinstance(position, bool):
        return int(position)
    mask = torch.as_tensor(position)
    if mask.dtype != torch.bool or mask.ndim != 2:
        raise ValueError("position must be an int, 'mean' or a boolean (B, T) mask, got "
                         f"{type(position).__name__} of dtype {mask.dtype} and shape {tuple(mask.shape)}")
    return mask


def _probe_rows(probe_inputs, position) -> int | None:
    """How many rows feed RankMe: the probe batch's size, or the positions a mask selects (None: unknown)."""
    if isinstance(position, torch.Tensor):
        return int(position.sum())
    ids = probe_inputs
    if isinstance(probe_inputs, Mapping):
        ids = probe_inputs.get("input_ids", next(iter(probe_inputs.values()), None))
    return int(ids.shape[0]) if isinstance(ids, torch.Tensor) and ids.ndim >= 1 else None


def select_positions(h: torch.Tensor, position, attention_mask=None) -> torch.Tensor:
    """Rows that feed RankMe from one layer's states h (B, T, d) -> (N, d); a (B, d) h is returned as is.

    See the module docstring for ``position``; ``attention_mask`` (B, T) marks real tokens.
    """
    if h.ndim == 2:
        return h
    if h.ndim != 3:
        raise ValueError(f"hidden states must be (B, T, d) or (B, d), got shape {tuple(h.shape)}")
    mask = None if attention_mask is None else attention_mask.to(device=h.device).bool()
    if isinstance(position, str):  # "mean"
        if mask is None:
            return h.mean(dim=1)
        weights = mask.to(h.dtype).unsqueeze(-1)
        return (h * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)
    if isinstance(position, torch.Tensor):
        if tuple(position.shape) != tuple(h.shape[:2]):
            raise ValueError(f"position: mask shape {tuple(position.shape)} does not match the inputs' "
                             f"(B, T) = {tuple(h.shape[:2])}")
        return h[position.to(h.device)]
    if not -h.shape[1] <= position < h.shape[1]:
        raise ValueError(f"position {position} is outside the sequence length {h.shape[1]}")
    if mask is None or position >= 0:
        return h[:, position]
    rank = mask.long().cumsum(dim=1)  # 1, 2, ... at attended tokens
    target = mask.long().sum(dim=1, keepdim=True) + position + 1
    hit = mask & (rank == target)
    if not bool(hit.any(dim=1).all()):
        raise ValueError(f"position {position}: some probe rows have fewer than {-position} attended tokens")
    return h[torch.arange(h.shape[0], device=h.device), hit.long().argmax(dim=1)]


# --- events as steps arrive -----------------------------------------------------------------------


def confirmed_collapse(steps, values, window: int = events.COLLAPSE_WINDOW) -> dict:
    """The events of a RankMe series so far that are certain ({field: value}, fields of
    ``FLOOR_FIELDS`` and ``RECOVERY_FIELDS``: the fields of :data:`EVENT_FIELDS` but ``layer``; None where not yet
    certain).

    The single place where streamed events are decided: the protocol's
    :func:`geomcap.events.confirmed_events` on the prefix.
    """
    steps, values = np.asarray(steps), np.asarray(values, dtype=float)
    if np.isfinite(values).sum() < 2:
        return dict.fromkeys(FLOOR_FIELDS + RECOVERY_FIELDS)
    known = events.confirmed_events(steps, values, window=window)
    return {k: known[k] for k in FLOOR_FIELDS + RECOVERY_FIELDS}


def format_events(ev: dict) -> str:
    """One line for ``monitor.events``."""
    head = f"rankme layer {ev.get('layer')} (final): "
    if ev.get("floor_step") is None:
        return head + "no certain floor yet"
    line = (head + f"{'collapse' if ev['collapsed'] else 'no collapse'} {ev['peak_value']:.2f} -> "
            f"{ev['floor_value']:.2f} (onset step {ev['onset_step']}, floor step {ev['floor_step']}, "
            f"certain at step {ev['floor_certain_step']})")
    if ev.get("recovery_step") is None:
        return line + "; no certain recovery yet"
    return line + f"; recovery at step {ev['recovery_step']} (certain at step {ev['recovery_certain_step']})"


# --- the monitor ----------------------------------------------------------------------------------


def _check_schedule(every, schedule, steps):
    given = [name for name, value in (("every", every), ("schedule", schedule), ("steps", steps)) if value is not None]
    if len(given) > 1:
        raise ValueError(f"give one of every, schedule or steps, got {' and '.join(given)}")
    for name, value in (("every", every), ("steps", steps)):
        if value is not None and (not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if steps is not None:
        return frozenset(int(s) for s in checkpoint_steps(int(steps)))
    if schedule is not None:
        chosen = frozenset(int(s) for s in schedule)
        if not chosen or min(chosen) < 0:
            raise ValueError("schedule must be a non-empty collection of steps >= 0")
        return chosen
    return None


class GeometryMonitor:
    """Per-layer RankMe (and probes) of a fixed probe batch, recorded as a model trains.

    Parameters
    ----------
    model : torch.nn.Module
        Any model: a Hugging Face model (hidden states from
        ``output_hidden_states``) or a plain module (name its layers).
    probe_inputs : tensor (B, T) or dict of tensors
        The fixed batch the model is run on at every recorded step (moved to
        the model's device each time); at least 2 rows (RankMe of one row is 1).
    every : int, optional
        Record at steps that are multiples of ``every``.
    schedule : collection of int, optional
        Record at exactly these steps.
    steps : int, optional
        Total training steps: record on ``geomcap.config.checkpoint_steps(steps)``,
        the dense-early schedule of geomcap's own runs. Give at most one of
        ``every``, ``schedule``, ``steps``; with none, :meth:`maybe_record` raises
        and only :meth:`record` measures.
    position : int, "mean" or bool tensor (B, T)
        Which positions feed RankMe (module docstring); default -1.
    layers : list of str, optional
        Module names to hook; default: the model's ``output_hidden_states``.
    writer : object with ``add_scalar(tag, value, step)``, optional
        E.g. a ``torch.utils.tensorboard.SummaryWriter``; gets
        ``geometry/<measure>/layer_<k>``, ``geometry/<measure>`` (layer -1)
        and ``geometry/events/<field>``.
    labels : array of int, shape (N,), optional
        One label per RankMe row (e.g. the token that follows the position):
        adds ``probe_accuracy`` per layer and the model's ``accuracy`` and
        ``test_loss``. ``chance`` is then the best constant answer's accuracy.
    collapse_window : int
        Steps after the first record within which the collapse floor is sought
        (``geomcap.events.COLLAPSE_WINDOW`` by default, the protocol's); the
        floor is certain only once the window has closed. Scale it to your run.
    probe_seed : int
        Seed of the probes' fit/score split.
    """

    def __init__(self, model, probe_inputs, *, every=None, schedule=None, steps=None, position=-1,
                 layers=None, writer=None, labels=None, probe_seed: int = 0,
                 collapse_window: int = events.COLLAPSE_WINDOW):
        if not isinstance(model, torch.nn.Module):
            raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(probe_inputs, (torch.Tensor, Mapping)):
            raise ValueError("probe_inputs must be a tensor of token ids (B, T) or a dict of tensors, got "
                             f"{type(probe_inputs).__name__}")
        if layers is not None:
            layers = [layers] if isinstance(layers, str) else list(layers)
            names = dict(model.named_modules())
            unknown = [name for name in layers if name not in names]
            if not layers or unknown:
                raise ValueError(f"layers: unknown module name {unknown[0] if unknown else '(none given)'!r}; "
                                 f"modules are named as in model.named_modules(), e.g. "
                                 f"{[n for n in names if n][:4]}")
        if writer is not None and not callable(getattr(writer, "add_scalar", None)):
            raise ValueError("writer must have an add_scalar(tag, value, step) method (e.g. a SummaryWriter)")
        self.model = model
        self.probe_inputs = probe_inputs
        self.position = _check_position(position)
        rows = _probe_rows(probe_inputs, self.position)
        if rows is not None and rows < 2:
            raise ValueError(f"probe_inputs: RankMe needs at least 2 probe rows, got {rows}")
        self.layers = layers
        self.writer = writer
        self.labels = None if labels is None else np.asarray(labels).ravel()
        if self.labels is not None and (self.labels.dtype.kind not in "iu" or self.labels.size < 4):
            raise ValueError("labels must be at least 4 integers, one per RankMe row")
        self.probe_seed = int(probe_seed)
        if not isinstance(collapse_window, (int, np.integer)) or isinstance(collapse_window, bool) or collapse_window < 1:
            raise ValueError(f"collapse_window must be a positive number of steps, got {collapse_window!r}")
        self.collapse_window = int(collapse_window)
        self._schedule = _check_schedule(every, schedule, steps)
        self._every = None if every is None else int(every)
        self._rows: list[tuple[int, int, str, float]] = []
        self._rankme_final: list[tuple[int, float]] = []
        self._events = dict.fromkeys(EVENT_FIELDS)
        self._series: dict[tuple[str, int], tuple[list, list]] = {}  # (measure, layer) -> (steps, values)
        self._alarms: list[dict] = []
        self._precision = alarm_precision()  # what the book measured of each signal's alarms ({} without it)
        self.seconds = 0.0
        #: the (step, layer) records whose hidden states held NaN or inf (their measures are NaN)
        self.nonfinite = 0
        #: what :func:`geomcap.checkpoints.measure_checkpoints` recorded of the series it measured (None otherwise)
        self.checkpoints: dict | None = None

    # -- schedule -----------------------------------------------------------

    def due(self, step: int) -> bool:
        """Is ``step`` on the schedule (and not recorded yet)?"""
        if self._schedule is None and self._every is None:
            raise ValueError("maybe_record needs a schedule: give every=, schedule= or steps= (or call record)")
        if self._rankme_final and step <= self._rankme_final[-1][0]:
            return False
        return step % self._every == 0 if self._every is not None else int(step) in self._schedule

    def maybe_record(self, step: int) -> bool:
        """Record if ``step`` is on the schedule; returns whether it recorded."""
        if not self.due(step):
            return False
        self.record(step)
        return True

    # -- measuring ----------------------------------------------------------

    @property
    def chance(self) -> float:
        """Accuracy of the best constant answer on ``labels`` (0.0 without labels)."""
        if self.labels is None:
            return 0.0
        return float(np.unique(self.labels, return_counts=True)[1].max() / self.labels.size)

    def _inputs_on_device(self):
        device = _model_device(self.model)
        if isinstance(self.probe_inputs, Mapping):
            return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in self.probe_inputs.items()}
        return self.probe_inputs.to(device)

    def measure(self) -> list[tuple[int, str, float]]:
        """The measures now, as rows (layer, measure, value); records nothing. A layer whose hidden states
        hold NaN or inf gets NaN measures (no warning: :meth:`record` warns and counts)."""
        return self._measure()[0]

    def _measure(self) -> tuple[list[tuple[int, str, float]], list[int]]:
        """(:meth:`measure`'s rows, the layers whose hidden states were not finite)."""
        model = self.model
        was_training = model.training
        inputs = self._inputs_on_device()
        mask = inputs.get("attention_mask") if isinstance(inputs, Mapping) else None
        model.eval()
        try:
            with torch.no_grad():
                hidden, logits = capture(model, inputs, self.layers, logits=self.labels is not None)
                states = [select_positions(h, self.position, mask).float().cpu() for h in hidden]
                if logits is not None and self.labels is not None:
                    logits = select_positions(logits, self.position, mask).float().cpu()
        finally:
            model.train(was_training)
        finite = [bool(torch.isfinite(Z).all()) for Z in states]  # never pass NaN or inf to the SVD
        nonfinite = [layer for layer, ok in enumerate(finite) if not ok]
        if self.labels is not None and self.labels.size != states[0].shape[0]:
            raise ValueError(f"labels: {self.labels.size} given, but the position selects {states[0].shape[0]} rows")
        rows = recorders.state_rows({"answer": states.__getitem__}, len(states), MONITORED,
                                    {"probe": self.labels}, seed=self.probe_seed, skip=nonfinite)
        if self.labels is not None and logits is not None and logits.ndim == 2:
            target = torch.as_tensor(self.labels, dtype=torch.long)
            ok = bool(torch.isfinite(logits).all())
            rows.append((-1, "accuracy", float((logits.argmax(-1) == target).float().mean()) if ok else math.nan))
            rows.append((-1, "test_loss", float(torch.nn.functional.cross_entropy(logits, target)) if ok else math.nan))
        return rows, nonfinite

    def record(self, step: int) -> dict:
        """Measure now and append the rows at ``step``; returns {log key: value} of what was recorded."""
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
            raise ValueError(f"step must be an integer >= 0, got {step!r}")
        step = int(step)
        if self._rankme_final and step <= self._rankme_final[-1][0]:
            raise ValueError(f"step {step} is not after the last recorded step {self._rankme_final[-1][0]}")
        t0 = time.perf_counter()
        rows, nonfinite = self._measure()
        if nonfinite:
            if not self.nonfinite:
                warnings.warn(f"step {step}: the hidden states of layer(s) {', '.join(map(str, nonfinite))} hold NaN "
                              "or inf: their measures are recorded as NaN (monitor.nonfinite counts such records; "
                              "this warning is not repeated)", NonFiniteWarning, stacklevel=2)
            self.nonfinite += len(nonfinite)
        self._rows.extend((step, layer, measure, value) for layer, measure, value in rows)
        for layer, measure, value in rows:
            if measure in ALARMED:
                steps, values = self._series.setdefault((measure, layer), ([], []))
                steps.append(step)
                values.append(value)
        final = max(layer for layer, measure, _ in rows if measure == "rankme")
        self._rankme_final.append((step, next(v for l, m, v in rows if m == "rankme" and l == final)))
        self._events["layer"] = final
        logs = {_log_key(measure, layer): value for layer, measure, value in rows}
        logs.update(self._update_events(step))
        logs.update(self._update_alarms(step))
        self.seconds += time.perf_counter() - t0
        if self.writer is not None:
            for key, value in logs.items():
                self.writer.add_scalar(key, value, step)
        return logs

    def _update_events(self, step: int) -> dict:
        if self._events["recovery_step"] is not None:
            return {}
        found = confirmed_collapse(*self.final_rankme, window=self.collapse_window)
        new = {}
        for fields in (FLOOR_FIELDS, RECOVERY_FIELDS):  # once set, an event is never revised
            if self._events[fields[-1]] is None and found[fields[-1]] is not None:
                new.update({k: found[k] for k in fields})
        if not new:
            return {}
        self._events.update(new)
        logger.info("step %d: %s", step, format_events(self._events))
        return {f"geometry/events/{k}": float(v) for k, v in new.items() if v is not None}

    def armed_from(self) -> int | None:
        """Where the alarms are armed: :func:`geomcap.events.reading_start` of the collapse reported so far
        (None until the floor is certain, and while a collapse has not certainly recovered)."""
        if self._events["floor_step"] is None:
            return None
        if self._events["collapsed"] and self._events["recovery_step"] is None:
            return None
        first = self._rankme_final[0][0]  # the collapse window counts from the first record
        reported = SimpleNamespace(collapsed=bool(self._events["collapsed"]),
                                   recovery_step=(None if self._events["recovery_step"] is None else
                                                  self._events["recovery_step"] - first))
        return first + events.reading_start(reported, self.collapse_window)

    def _update_alarms(self, step: int) -> dict:
        start = self.armed_from()
        if start is None:
            return {}
        logs = {}
        final = self._events["layer"]
        for (measure, layer), (steps, values) in self._series.items():
            found = events.alarms(np.asarray(steps), np.asarray(values, dtype=float), start=start, layer=layer)
            for alarm in found:
                if alarm.step != step:  # the rule is causal: every earlier alarm was raised before
                    continue
                note = alarm_note(self._precision, measure, layer, final)
                entry = {"measure": measure, **alarm.to_dict(), "note": note}
                self._alarms.append(entry)
                where = f"{measure}" + (f" layer {layer}" if layer >= 0 else "")
                logger.info("step %d: alarm on %s (%s its course since step %d)%s", step, where,
                            "above" if alarm.side > 0 else "below", alarm.onset_step, f"; {note}" if note else "")
                logs[f"geometry/alarms/{measure}" + (f"/layer_{layer}" if layer >= 0 else "")] = float(alarm.side)
        return logs

    # -- results ------------------------------------------------------------

    @property
    def metrics(self) -> pd.DataFrame:
        """Tidy table (step, layer, measure, value) of everything recorded so far."""
        frame = pd.DataFrame(self._rows, columns=list(store.METRIC_COLUMNS))
        return frame.astype({"step": "int64", "layer": "int64", "measure": str, "value": "float64"})

    @property
    def events(self) -> dict:
        """The final layer's collapse as reported when it became certain (fields :data:`EVENT_FIELDS`).

        ``layer`` is the final layer's index once a step is recorded; the other
        fields are None until a collapse is reported. ``alarms``: :attr:`alarms`.
        """
        return {**self._events, "alarms": self.alarms}

    @property
    def alarms(self) -> list[dict]:
        """Every alarm raised so far, in order: {measure, step, onset_step, side, layer, note} (``note``: what
        such an alarm was worth in this book's hard runs, "" where the book has no figure for it)."""
        return [dict(a) for a in self._alarms]

    @property
    def final_rankme(self) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of the final layer's RankMe recorded so far."""
        steps = np.array([s for s, _ in self._rankme_final], dtype=np.int64)
        return steps, np.array([v for _, v in self._rankme_final], dtype=np.float64)

    def save(self, path) -> Path:
        """Write the metrics as CSV: ``path`` is a run directory (-> path/metrics.csv) or a .csv file; returns the file."""
        path = Path(path)
        if path.suffix != ".csv":
            path.mkdir(parents=True, exist_ok=True)
            path = path / store.METRICS_FILE
        store.atomic_write_text(path, store.metrics_csv_text(self._rows))
        return path


def _log_key(measure: str, layer: int) -> str:
    return f"geometry/{measure}" if layer < 0 else f"geometry/{measure}/layer_{layer}"


# --- Hugging Face Trainer -------------------------------------------------------------------------


class GeometryCallback(TrainerCallback):
    """A ``transformers.TrainerCallback`` that runs a :class:`GeometryMonitor` on the Trainer's model.

    ``GeometryCallback(probe_inputs, **options)`` takes the monitor's options
    (``every``, ``schedule``, ``steps``, ``position``, ``layers``, ``writer``,
    ``labels``, ``probe_seed``); with no schedule it records on
    ``checkpoint_steps(max_steps)`` of the Trainer, step 0 (before the first
    update) included. At a recorded step it asks the Trainer to log, and adds
    ``geometry/rankme/layer_<k>`` (every measure, and ``geometry/events/...``
    once a collapse is certain) to that log's dict and to
    ``trainer.state.log_history``.

    The Trainer runs the reporting callbacks of ``report_to`` (TensorBoard,
    W&B, ...) before the ones passed in ``callbacks=``, so they would miss
    these values: use :meth:`attach`, which places the callback first
    (or pass ``writer=``).

    ``callback.metrics``, ``callback.events``, ``callback.monitor`` after (or during) training.
    """

    def __init__(self, probe_inputs, **options):
        if TrainerCallback is object:
            raise ImportError("GeometryCallback needs transformers: pip install 'geomcap[monitor]'")
        unknown = set(options) - {"every", "schedule", "steps", "position", "layers", "writer", "labels",
                                  "probe_seed", "collapse_window"}
        if unknown:
            raise ValueError(f"unknown option {sorted(unknown)[0]!r}; GeometryCallback takes GeometryMonitor's options")
        self.probe_inputs = probe_inputs
        self.options = options
        self.monitor: GeometryMonitor | None = None
        self._pending: dict = {}

    def attach(self, trainer):
        """Put this callback first in ``trainer``'s callbacks (ahead of its reporting ones); returns the trainer.

        Works whether or not it was passed in ``callbacks=``.
        """
        callbacks = trainer.callback_handler.callbacks
        if self in callbacks:
            callbacks.remove(self)
        callbacks.insert(0, self)
        return trainer

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        options = dict(self.options)
        if not {"every", "schedule", "steps"} & set(options):
            options["steps"] = int(state.max_steps)
        self.monitor = GeometryMonitor(model, self.probe_inputs, **options)
        if self.monitor.due(state.global_step):  # before the first update: no Trainer log at this step
            self.monitor.record(state.global_step)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if model is not None:
            self.monitor.model = model
        if self.monitor.due(state.global_step):
            self._pending = self.monitor.record(state.global_step)
            control.should_log = True  # the Trainer logs at this step; on_log adds the values

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not self._pending or logs is None:
            return
        logs.update(self._pending)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(self._pending)
        self._pending = {}

    @property
    def metrics(self) -> pd.DataFrame:
        if self.monitor is None:
            return pd.DataFrame(columns=list(store.METRIC_COLUMNS))
        return self.monitor.metrics

    @property
    def events(self) -> dict:
        return self.monitor.events if self.monitor is not None else {**dict.fromkeys(EVENT_FIELDS), "alarms": []}


def collapse_summary(monitor: GeometryMonitor) -> str:
    """Lines for the final layer's RankMe over the whole series: the collapse, and what streaming reported."""
    steps, values = monitor.final_rankme
    lines = [f"{len(steps)} checkpoints, steps {steps[0]} .. {steps[-1]}; final layer {monitor.events['layer']}"]
    if len(steps) >= 2:
        c = events.collapse(steps, values)
        lines.append(f"rankme final layer: initial {c.initial_value:.2f}, peak {c.peak_value:.2f} at step {c.peak_step}, "
                     f"floor {c.floor_value:.2f} at step {c.floor_step} "
                     f"({'collapse' if c.collapsed else 'no collapse'}: drop {100 * c.relative_drop:.0f}%), "
                     f"recovery at step {c.recovery_step}")
    lines.append(format_events(monitor.events))
    return "\n".join(lines)
