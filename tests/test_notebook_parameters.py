"""The section notebooks' parameters: a bad one fails with one clear message naming it.

The bad-parameter cases run in one IPython shell (tests/run_notebook_cells.py: papermill's own
parameterisation, then the cells in order until the first error); a few cases run through
papermill's command end to end, to check what a reader of its output sees.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
RUNNER = Path(__file__).resolve().parent / "run_notebook_cells.py"

BAD_PARAMETERS = [
    ("01_collapse.ipynb", "tasks", "nope", "parameter tasks: unknown value 'nope'"),
    ("01_collapse.ipynb", "sizes", "7b", "parameter sizes: unknown value '7b'"),
    ("01_collapse.ipynb", "seeds", "-1", "parameter seeds: must be an integer in [0, 4294967295], got -1"),
    ("01_collapse.ipynb", "measure", "volume", "parameter measure: unknown value 'volume'"),
    ("02_top_down.ipynb", "levels", "trivial", "parameter levels: unknown value 'trivial'"),
    ("03_probing.ipynb", "tasks", "chess", "parameter tasks: unknown value 'chess'"),
    ("04_precursors.ipynb", "steps", "easy:0", "parameter steps: must be a positive integer, got 0"),
    ("05_difficulty.ipynb", "sizes", "huge", "parameter sizes: unknown value 'huge'"),
    ("06_pythia.ipynb", "model", "gpt-7", "parameter model: 'gpt-7' is neither a Pythia hub name"),
    ("06_pythia.ipynb", "benchmarks", "chess", "parameter benchmarks: unknown value 'chess'"),
    ("06_pythia.ipynb", "layers", "deep", "parameter layers: must be a non-negative integer, got 'deep'"),
    ("06_pythia.ipynb", "revisions", "every:0", "parameter revisions: every:K needs a positive integer K"),
    ("07_proxy.ipynb", "large", "405k", "parameters small and large: must be two different presets"),
    ("07_proxy.ipynb", "timing", "lunch", "parameter timing: unknown value 'lunch'"),
    ("08_monitor.ipynb", "width", "30", "parameter width: must be a multiple of the 4 attention heads"),
    # each of these ran the defaults with exit 0, trained, or failed obscurely or blaming another parameter
    ("01_collapse.ipynb", "taks", "mod", "parameter taks: unknown; this notebook's parameters are: tasks, levels"),
    ("01_collapse.ipynb", "recompute", "no", "parameter recompute: must be True or False, got 'no'"),
    ("01_collapse.ipynb", "measure", "all", "parameter measure: unknown value 'all'; choose one of: rankme"),
    # the horizon fraction of an earlier protocol (its rules read the acquisition step): gone, and said so
    ("04_precursors.ipynb", "fraction", "0.5", "parameter fraction: unknown; this notebook's parameters are"),
    ("09_grokking.ipynb", "weight_decay", "-1", "parameter weight_decay: must be"),
    ("09_grokking.ipynb", "seeds", "x", "parameter seeds:"),
    ("07_proxy.ipynb", "large", "999m", "parameter large: unknown value '999m'"),
    ("06_pythia.ipynb", "delete_downloads", "yes", "parameter delete_downloads: must be True or False"),
]


@pytest.fixture(scope="module")
def first_errors(tmp_path_factory):
    """(notebook, parameter, value) -> the first error of that notebook run with that one parameter."""
    folder = tmp_path_factory.mktemp("cells")
    cases = [[str(NOTEBOOKS / notebook), {parameter: value}] for notebook, parameter, value, _ in BAD_PARAMETERS]
    (folder / "cases.json").write_text(json.dumps(cases))
    result = subprocess.run([sys.executable, str(RUNNER), str(folder / "cases.json"), str(folder / "errors.json")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    errors = json.loads((folder / "errors.json").read_text())
    return {tuple(case[:3]): error for case, error in zip(BAD_PARAMETERS, errors)}


@pytest.mark.parametrize("notebook, parameter, value, fragment", BAD_PARAMETERS)
def test_bad_parameter_fails_clearly(first_errors, notebook, parameter, value, fragment):
    error = first_errors[notebook, parameter, value]
    assert error is not None, "the notebook ran to its end"
    assert fragment in error["message"], error
    assert error["type"] == "ParameterError" and error["one_line"], error  # shown as one line, no traceback


def test_the_cell_runner_reports_a_notebook_that_runs(tmp_path):
    """The runner's 'no error' is real: a notebook whose cells all run reports null, one that fails
    reports its error (so a bad-parameter case cannot pass on a notebook that never ran)."""
    import nbformat

    cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
             nbformat.v4.new_code_cell("assert x == 1, 'x was %r' % x")]
    kernel = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata=kernel), tmp_path / "tiny.ipynb")
    cases = [[str(tmp_path / "tiny.ipynb"), {}], [str(tmp_path / "tiny.ipynb"), {"x": "2"}]]
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    subprocess.run([sys.executable, str(RUNNER), str(tmp_path / "cases.json"), str(tmp_path / "out.json")],
                   check=True, capture_output=True)
    ran, failed = json.loads((tmp_path / "out.json").read_text())
    assert ran is None
    assert failed == {"type": "AssertionError", "message": "x was 2", "one_line": False}


@pytest.mark.parametrize("notebook, parameter, value, fragment", [BAD_PARAMETERS[0], BAD_PARAMETERS[15]])
def test_bad_parameter_through_papermill(tmp_path, notebook, parameter, value, fragment):
    result = subprocess.run([sys.executable, "-m", "papermill", str(NOTEBOOKS / notebook),
                             str(tmp_path / "out.ipynb"), "-p", parameter, value, "--cwd", str(NOTEBOOKS)],
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert fragment in result.stderr
    # the cell's error is the one line (papermill's own traceback of its command may precede it)
    cell_error = result.stderr.split('Exception encountered at "In [')[-1]
    assert "Traceback" not in cell_error and "----> " not in cell_error, cell_error
    # and that line comes first, on a line of its own, before papermill's traceback (it came only after it)
    first = next(line for line in result.stderr.splitlines() if "Error" in line or "Traceback" in line)
    assert first.startswith("ParameterError: ") and fragment in first, result.stderr


def test_lists_as_the_readme_writes_them(tmp_path):
    """`-p tasks "mod,sort"` and `-p seeds "[0, 1]"` arrive as strings; both are read as lists."""
    result = subprocess.run([sys.executable, "-m", "papermill", str(NOTEBOOKS / "03_probing.ipynb"),
                             str(tmp_path / "out.ipynb"), "-p", "tasks", "mod,sort", "-p", "seeds", "[0, 1]",
                             "-p", "levels", "hard", "--cwd", str(NOTEBOOKS)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    out = (tmp_path / "out.ipynb").read_text()
    assert "2 tasks, levels ['hard']" in out


def test_negative_steps_fail_before_training(tmp_path):
    result = subprocess.run([sys.executable, "-m", "papermill", str(NOTEBOOKS / "01_collapse.ipynb"),
                             str(tmp_path / "out.ipynb"), "-p", "recompute", "True", "-p", "seeds", "0",
                             "-p", "tasks", "copy", "-p", "levels", "easy", "-p", "steps", "-5",
                             "-p", "root", str(tmp_path / "runs"), "--cwd", str(NOTEBOOKS)],
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "parameter steps" in result.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("notebook", sorted(p.name for p in NOTEBOOKS.glob("0*.ipynb")))
def test_papermill_reads_every_parameter(notebook):
    """papermill skips a parameter line it cannot parse (two '=' on it): the book's parameter
    table and `papermill --help-notebook` would silently lose it."""
    import nbformat
    import papermill

    cell = next(c for c in nbformat.read(NOTEBOOKS / notebook, 4).cells if "parameters" in c.metadata.get("tags", []))
    assigned = [line.split("=")[0].strip() for line in cell.source.splitlines()
                if line.strip() and not line.lstrip().startswith("#")]
    inspected = papermill.inspect_notebook(str(NOTEBOOKS / notebook))
    assert list(inspected) == assigned
    assert all(p["help"] for p in inspected.values()), "every parameter has a help comment"
