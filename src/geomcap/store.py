"""The run store: one directory per run, named by the hash of its config.

A run directory holds

* ``config.json``   -- the training config, plus ``provenance`` (package
  version, git commit, torch version, device) which is not hashed;
* ``metrics.csv``   -- the tidy table ``step, layer, measure, value``
  (layer -1 for model-level measures such as accuracy and loss, the layer
  index, 0 = embeddings, for per-layer measures such as rankme);
* ``status.json``   -- written last, when the run is complete (wall time,
  throughput, time spent on measures);
* ``state.pt``      -- while the run is in progress only: the training state
  (weights, optimizer, data RNG, the metrics so far; saved at most once a minute,
  ``geomcap.train.STATE_EVERY_S``), so a run killed at any point resumes from it,
  measuring the checkpoints after it again. Removed when the run completes:
  the store keeps metrics, not weights.
* ``digests.json``  -- for a series of saved checkpoints (a Pythia run, ``geomcap checkpoints``): the content
  digest of each revision measured (:mod:`geomcap.digests`), rewritten after each one;
* ``lock``          -- while a process writes the run only: its pid and host
  (:func:`run_lock`). A run directory has one writer at a time; a lock left
  by a killed process is recovered by the next writer.

Every file is written atomically (a temporary file in the same directory,
then ``os.replace``), so a kill -9 leaves either the old or the new file.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import hashlib
import io
import json
import math
import os
import platform
import socket
import subprocess
import tempfile
import warnings
from pathlib import Path

import pandas as pd

import geomcap

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.csv"
STATUS_FILE = "status.json"
STATE_FILE = "state.pt"
LOCK_FILE = "lock"
DIGESTS_FILE = "digests.json"
METRIC_COLUMNS = ("step", "layer", "measure", "value")


def default_root() -> Path:
    """The run store's root: $GEOMCAP_RUNS, else ./runs."""
    return Path(os.environ.get("GEOMCAP_RUNS", "runs"))


def committed_data(*parts: str) -> Path:
    """A path under the committed data directory (the repository's ``data/``).

    Resolved once, here, in this order: ``$GEOMCAP_DATA``; the ``data/`` folder of the
    checkout this package was imported from (an editable install or ``PYTHONPATH=src``);
    ``./data`` when the current directory is a geomcap checkout (a non-editable install
    run from the repository). ``parts`` are joined below it, e.g.
    ``committed_data("runs")`` or ``committed_data("pythia", "benchmarks")``.

    Raises
    ------
    FileNotFoundError
        when none of these exists, naming ``$GEOMCAP_DATA`` as the way to point at it.
    """
    candidates = []
    if os.environ.get("GEOMCAP_DATA"):
        candidates.append(Path(os.environ["GEOMCAP_DATA"]))
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file():
        candidates.append(checkout / "data")
    if (Path.cwd() / "pyproject.toml").is_file() and (Path.cwd() / "src" / "geomcap").is_dir():
        candidates.append(Path.cwd() / "data")
    for base in candidates:
        if base.is_dir():
            return base.joinpath(*parts)
    raise FileNotFoundError("geomcap's committed data/ directory was not found: set GEOMCAP_DATA to "
                            "the data/ folder of a geomcap checkout")


def user_root(kind: str = "runs") -> Path:
    """Where the notebooks put the runs they compute (``recompute=True``): ``$GEOMCAP_RUNS`` (for
    ``kind="runs"``), else ``$XDG_CACHE_HOME/geomcap/<kind>``, by default ``~/.cache/geomcap/<kind>``.
    Outside the repository, so that the committed ``data/`` (and the book built from it) changes only
    when a root inside it is given explicitly."""
    if kind == "runs" and os.environ.get("GEOMCAP_RUNS"):
        return Path(os.environ["GEOMCAP_RUNS"])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "geomcap" / kind


def config_hash(config: dict) -> str:
    """First 12 hex digits of the SHA-256 of the config's canonical JSON (keys sorted)."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=list)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def run_dir_for(config: dict, root: str | Path | None = None) -> Path:
    """The run directory of ``config`` (a ``TrainConfig.to_dict()``): ``root`` (default :func:`default_root`)
    / its :func:`config_hash`."""
    return Path(root if root is not None else default_root()) / config_hash(config)


class CheckpointUnavailable(Exception):
    """A checkpoint cannot be loaded: absent or unreadable, or its weights are incomplete or non-finite
    (raised by :func:`geomcap.checkpoints.load_pretrained`; ``geomcap.pythia.RevisionUnavailable`` is this
    class: a Pythia revision that cannot be loaded). Defined here, beside the store's other errors, so that
    the names of Pythia's revisions need no loader."""


class RunLockedError(RuntimeError):
    """The run directory is being written by another process: ``run_dir`` (a Path) and ``owner`` (its
    lock file's "pid N on HOST") say which and by whom."""

    def __init__(self, message: str, run_dir=None, owner: str | None = None):
        super().__init__(message)
        self.run_dir = None if run_dir is None else Path(run_dir)
        self.owner = owner


@contextlib.contextmanager
def run_lock(run_dir):
    """Hold the run directory's lock file for the duration of the ``with`` block.

    The lock is ``run_dir/lock``, holding the owner's pid and host, with an
    exclusive ``flock`` on it: the kernel releases the flock when its process
    dies however it dies, so a lock file left by a killed writer is stale and the
    next writer takes it over. The directory must exist. Raises
    :class:`RunLockedError` (naming the owner) if another live process holds it.
    """
    path = Path(run_dir) / LOCK_FILE
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(fd, 200).decode(errors="replace").strip() or "a process starting up"
            os.close(fd)
            raise RunLockedError(f"{run_dir} is being written by another process ({owner}; lock file {path}): "
                                 "wait for it to finish, or write to another directory", run_dir, owner) from None
        try:  # the previous owner may have removed the file between our open and our flock
            current = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        os.close(fd)


def lock_owner(run_dir) -> str | None:
    """Who writes a run directory now: its lock file's "pid N on HOST" while another process holds the lock
    (:func:`run_lock`), else None (no lock file, or one left by a writer that died). Asks the kernel with a
    shared flock released at once: a writer taking the lock in that instant would find it held and skip the
    run (rerunning it then resumes it)."""
    try:
        fd = os.open(Path(run_dir) / LOCK_FILE, os.O_RDONLY)
    except OSError:  # no lock file (or no directory): nobody writes it
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.read(fd, 200).decode(errors="replace").strip() or "a process starting up"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def current_umask() -> int:
    """The process's umask (read from /proc on Linux; elsewhere set and restored at once)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def _naming(path):
    """An OSError raised in the block names ``path`` (a write's "File too large" or "No space left on
    device" names no file: a one-line report of it should)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = str(path)
        raise


def atomic_write_bytes(path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder: a reader sees the old
    file or the new one, never a part. An OSError it raises names ``path``."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with _naming(path):
            os.fchmod(fd, 0o666 & ~current_umask())  # mkstemp makes 0600: give the mode open() would
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_write_bytes`)."""
    atomic_write_bytes(Path(path), text.encode())


def atomic_write_json(path, obj) -> None:
    """Write ``obj`` as indented JSON with sorted keys and a final newline, atomically: the same object, the
    same bytes."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def atomic_torch_save(obj, path) -> None:
    """``torch.save(obj)`` to ``path`` atomically (serialised in memory, then :func:`atomic_write_bytes`)."""
    import torch  # only who saves a training state needs torch: a reader of the store does not

    buf = io.BytesIO()
    torch.save(obj, buf)
    atomic_write_bytes(Path(path), buf.getvalue())


def load_state(path) -> dict:
    """A training state saved by :func:`atomic_torch_save`, on the CPU, loaded with ``weights_only=True`` (no
    arbitrary pickles); errors as torch raises them (:func:`read_state` reads one safely)."""
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


#: what a training state holds (see geomcap.train)
STATE_KEYS = ("model", "optimizer", "batch_gen", "step", "rows", "timers")


def read_state(path) -> dict | None:
    """The training state at ``path``; None if there is none, or if it cannot be read.

    An unreadable state (truncated, corrupted, not a training state, or a pickle
    ``weights_only`` refuses) is removed with a warning naming it: the run then
    trains from step 0, to the same metrics, since a run is deterministic.
    """
    path = Path(path)
    if not path.exists():
        return None
    try:
        state = load_state(path)
        if not isinstance(state, dict) or any(key not in state for key in STATE_KEYS):
            raise ValueError("not a geomcap training state")
    except Exception as exc:  # torch raises RuntimeError, UnpicklingError, EOFError, ... on a bad file
        reason = (str(exc).strip().splitlines() or [""])[0][:120]
        warnings.warn(f"discarding the unreadable training state {path} ({type(exc).__name__}: {reason}); "
                      "the run restarts from step 0", stacklevel=2)
        path.unlink(missing_ok=True)
        return None
    return state


def check_writable(path) -> None:
    """Raise ValueError if a run directory could not be created/written at ``path`` (creates nothing)."""
    path = Path(path).resolve()
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write run directory {path}: {probe} is not a writable directory")


def remove_temporary_files(run_dir) -> list[Path]:
    """Remove the temporary files (``.NAME.*.tmp``) an atomic write killed midway left in ``run_dir``.

    Call it only while holding the run's lock (:func:`run_lock`): another writer's files in flight
    look the same. Returns the paths removed.
    """
    removed = []
    for path in Path(run_dir).glob(".*.tmp"):
        if path.is_file():
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def format_value(value: float) -> str:
    """Shortest round-trip text of a float (repr), 'nan' for NaN: same value -> same bytes."""
    value = float(value)
    return "nan" if math.isnan(value) else repr(value)


def metrics_csv_text(rows, header: bool = True) -> str:
    """rows: iterable of (step, layer, measure, value) -> CSV text with a header (without: the rows alone)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    if header:
        writer.writerow(METRIC_COLUMNS)
    for step, layer, measure, value in rows:
        writer.writerow((int(step), int(layer), measure, format_value(value)))
    return buf.getvalue()


def write_metrics(run_dir, rows) -> None:
    """``run_dir``/metrics.csv from rows (step, layer, measure, value), atomically (:func:`metrics_csv_text`)."""
    atomic_write_text(Path(run_dir) / METRICS_FILE, metrics_csv_text(rows))


def append_metrics(run_dir, rows) -> None:
    """Append rows (step, layer, measure, value) to ``run_dir``/metrics.csv, which :func:`write_metrics`
    began, in one write: a checkpoint costs its own rows, not the whole file's. A kill in the middle of it
    leaves at most a partial last line, which a run resumed from its state.pt rewrites (``write_metrics``)."""
    path = Path(run_dir) / METRICS_FILE
    with _naming(path), open(path, "a", encoding="utf-8") as f:
        f.write(metrics_csv_text(rows, header=False))


class StoreWarning(UserWarning):
    """A run directory of the store could not be read and was left out."""


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    """A :class:`StoreWarning`, once per process and message: a command reads a run's files several times
    (planning, then before and under the run's lock)."""
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, StoreWarning, stacklevel=3)


def _unreadable(path, exc) -> ValueError:
    """The ValueError for a file ``exc`` kept from being read: one line naming it and the cause."""
    reason = (str(exc).strip().splitlines() or [""])[0][:160]
    return ValueError(f"{path} is unreadable ({type(exc).__name__}{': ' + reason if reason else ''})")


def read_metrics(run_dir) -> pd.DataFrame:
    """The tidy metrics table of a run directory (columns step, layer, measure, value).

    FileNotFoundError when there is none; ValueError naming the file when it is
    truncated, has no rows, or has other columns.
    """
    path = Path(run_dir) / METRICS_FILE
    if not path.exists():
        raise FileNotFoundError(f"no {METRICS_FILE} in {run_dir}: not a geomcap run directory, or the run has not reached its first checkpoint")
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() and (f.seek(-1, os.SEEK_END), f.read(1))[1] != b"\n":
                raise ValueError(f"{path} is truncated (its last line is incomplete)")
        metrics = pd.read_csv(path, dtype={"step": "int64", "layer": "int64", "measure": str, "value": "float64"})
    except ValueError as exc:  # pandas' ParserError and EmptyDataError are ValueErrors
        raise exc if str(exc).startswith(str(path)) else _unreadable(path, exc) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _unreadable(path, exc) from None
    if list(metrics.columns) != list(METRIC_COLUMNS):
        raise ValueError(f"{path} has columns {', '.join(map(str, metrics.columns))}; "
                         f"expected {', '.join(METRIC_COLUMNS)}")
    if metrics.empty:
        raise ValueError(f"{path} has a header but no rows")
    return metrics


#: keys every run's config.json holds (training and Pythia runs alike)
REQUIRED_CONFIG_KEYS = ("task", "level", "size", "seed")


def read_config(run_dir, required=REQUIRED_CONFIG_KEYS) -> dict:
    """A run's config.json as a dict. FileNotFoundError when there is none; ValueError naming the file
    when it is not valid JSON or lacks a ``required`` key."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.exists():
        raise FileNotFoundError(f"no {CONFIG_FILE} in {run_dir}: not a geomcap run directory")
    config = _read_json(path)
    missing = [key for key in required if key not in config]
    if missing:
        raise ValueError(f"{path} lacks {', '.join(missing)}: not a complete geomcap run config")
    return config


def _read_json(path: Path) -> dict:
    """A JSON object from ``path``; ValueError naming the file when it is unreadable or not an object."""
    try:
        value = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _unreadable(path, exc) from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} is not a JSON object")
    return value


def read_status(run_dir) -> dict | None:
    """A run's status.json (None while the run has none); ValueError naming the file when unreadable."""
    path = Path(run_dir) / STATUS_FILE
    return _read_json(path) if path.exists() else None


def read_digests(run_dir) -> dict:
    """The content digest of each revision a series of checkpoints recorded (``digests.json``: {revision:
    :func:`geomcap.digests.revision_digest`}); {} when it recorded none. ValueError naming the file when it is
    unreadable."""
    path = Path(run_dir) / DIGESTS_FILE
    return _read_json(path) if path.exists() else {}


def write_digests(run_dir, digests: dict) -> None:
    """Write ``digests.json`` (atomically; keys sorted, as every JSON file of the store)."""
    atomic_write_json(Path(run_dir) / DIGESTS_FILE, digests)


def last_metrics_step(run_dir) -> int | None:
    """The step of the last row of a run's metrics.csv (rows are in step order), read from the file's
    end; None when there is no complete row to read."""
    path = Path(run_dir) / METRICS_FILE
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            tail = f.read().decode(errors="replace")
    except OSError:
        return None
    lines = tail.split("\n")
    if len(lines) < 3 or lines[-1] != "":  # a header and a row, each ending with a newline
        return None
    try:
        return int(lines[-2].split(",")[0])
    except ValueError:
        return None


def final_step(run_dir, status: dict | None = None) -> int | None:
    """The step a run's last checkpoint is at: status.json's ``stopped_at`` when the run stopped early,
    the last of its ``revisions`` for a Pythia run (the revisions scored), else its config's ``steps``."""
    status = read_status(run_dir) if status is None else status
    if status and status.get("stopped_at") is not None:
        return int(status["stopped_at"])
    if status and "revisions" in status:
        return max(status["revisions"]) if status["revisions"] else None
    steps = read_config(run_dir, required=()).get("steps")
    return int(steps) if steps is not None else None


def is_complete(run_dir) -> bool:
    """Whether a run is complete: status.json says so and metrics.csv reaches its last checkpoint
    (:func:`final_step`). An unreadable status.json or config.json: not complete, with a warning."""
    try:
        status = read_status(run_dir)
        if not (status and status.get("complete")):
            return False
        last = final_step(run_dir, status)
    except (ValueError, FileNotFoundError) as exc:
        _warn_once(f"{exc}; the run counts as incomplete")
        return False
    if last is None:
        return True
    reached = last_metrics_step(run_dir)
    return reached is not None and reached >= last


def git_commit() -> str | None:
    """The commit of the source tree geomcap is imported from, if it is a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    commit = out.stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                           capture_output=True, text=True, timeout=5).stdout.strip()
    return commit + ("-dirty" if dirty else "")


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else platform.processor()."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def provenance(device: str) -> dict:
    """What a run's config.json records of where it was made: versions, git commit, device, threads, and the
    CPU (model and the instruction-set level torch's kernels use: runs agree byte for byte only on the same
    kind of CPU at the same thread count)."""
    import torch

    return {
        "geomcap_version": geomcap.__version__,
        "git_commit": git_commit(),
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "device": device,
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }


def list_runs(root=None) -> pd.DataFrame:
    """One row per run directory under root: hash, its config keys, and whether it is complete.

    A run whose config.json or status.json cannot be read is left out, with a
    :class:`StoreWarning` naming the file: one bad file does not hide the store.
    """
    root = Path(root if root is not None else default_root())
    rows = []
    for cfg_path in sorted(root.glob(f"*/{CONFIG_FILE}")):
        try:
            cfg = read_config(cfg_path.parent)
            read_status(cfg_path.parent)
        except (ValueError, OSError) as exc:
            warnings.warn(f"skipping run {cfg_path.parent}: {exc}", StoreWarning, stacklevel=2)
            continue
        cfg.pop("provenance", None)
        rows.append({"run": cfg_path.parent.name, "path": str(cfg_path.parent), **cfg,
                     "complete": is_complete(cfg_path.parent)})
    return pd.DataFrame(rows)
