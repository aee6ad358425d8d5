"""Notebook parameters: list forms, flags, numbers, and names papermill injected that a notebook lacks."""
import pytest

from geomcap import parameters
from geomcap.parameters import ParameterError, as_list, check, check_value

DECLARED = '# parameters\ntasks = "all"  # help\nseeds = "all"\nrecompute = False\nfraction = 0.5\nlayers = "final"\n'


@pytest.mark.parametrize("value, expected", [
    ("mod,sort", ["mod", "sort"]), ("mod", ["mod"]), (["a", "b"], ["a", "b"]), ("[0, 1]", [0, 1]),
    ("['mod', 'sort']", ["mod", "sort"]), ("[mod, sort]", ["mod", "sort"]), (3, [3]), (" a , b ,", ["a", "b"]),
])
def test_as_list(value, expected):
    assert as_list(value) == expected


@pytest.mark.parametrize("name, value, expected", [
    ("tasks", "mod,sort", ["mod", "sort"]), ("tasks", "all", "all"), ("seeds", "0,1", [0, 1]),
    ("benchmarks", "a,b", ["a", "b"]), ("fraction", "0.5", 0.5),
    ("seeds", "[0, 1]", [0, 1]), ("seeds", 2, [2]), ("seeds", "all", "all"), ("recompute", True, True),
    ("fraction", 1, 1.0), ("layers", "final", "final"), ("layers", "0,2", [0, 2]), ("layers", 1, [1]),
    ("revisions", "every:4", "every:4"), ("revisions", "step0,step8", ["step0", "step8"]),
    ("small", "405k", "405k"),
    ("steps", 200, "200"), ("steps", "easy:2000,hard:8000", "easy:2000,hard:8000"),
])
def test_values_are_normalised(name, value, expected):
    assert check_value(name, value) == expected


@pytest.mark.parametrize("name, value, message", [
    ("recompute", "no", "parameter recompute: must be True or False, got 'no'"),
    ("recompute", 1, "parameter recompute: must be True or False, got 1"),
    ("fraction", "abc", r"parameter fraction: must be a number in \(0, 1\], got 'abc'"),
    ("fraction", float("nan"), r"parameter fraction: must be a number in \(0, 1\]"),
    ("seeds", "0,-1", r"parameter seeds: must be an integer in \[0, 4294967295\], got -1"),
    ("seeds", "x", "parameter seeds: must be an integer in .*, got 'x'"),
    ("tasks", "", "parameter tasks: expected a name"),
    ("tasks", [1], "parameter tasks: expected a name"),
    ("tasks", "mod,chess", "parameter tasks: unknown value 'chess'; choose one of: copy, reverse"),
    ("large", "999m", "parameter large: unknown value '999m'; choose one of: 405k"),
    ("steps", "easy:2000,hard:x", "parameter steps: 'x' is not an integer"),
    ("steps", "easy:0", "parameter steps: must be a positive integer, got 0"),
    ("layers", "deep", "parameter layers: 'deep'"),
    ("root", 3, "parameter root: must be a string, got 3"),
    ("steps", 0, "parameter steps: must be a positive integer, or per level as 'easy:2000,medium:4000,hard:8000'"),
    ("steps", 2.5, "parameter steps: must be a string, got 2.5"),
])
def test_bad_values_name_the_parameter(name, value, message):
    with pytest.raises(ParameterError, match=message):
        check_value(name, value)


def test_choice_is_one_value_not_all():
    assert parameters.check_choice("measure", "rankme", ["rankme", "rankme_centred"]) == "rankme"
    with pytest.raises(ParameterError, match="parameter measure: unknown value 'all'; choose one of: rankme"):
        parameters.check_choice("measure", "all", ["rankme", "rankme_centred"])


def test_unknown_injected_name_fails_and_values_are_written_back():
    namespace = {"tasks": "mod,sort", "seeds": "[0, 1]", "recompute": False, "fraction": 0.5, "layers": "final",
                 "taks": "mod"}
    injected = '# Parameters\ntaks = "mod"\n'
    with pytest.raises(ParameterError, match="parameter taks: unknown; this notebook's parameters are: "
                                             "tasks, seeds, recompute, fraction, layers"):
        check(namespace, cells=["", DECLARED, injected, "parameters.check(globals())"])
    check(namespace, cells=["", DECLARED, '# Parameters\ntasks = "mod,sort"\nseeds = "[0, 1]"\n'])
    assert namespace["tasks"] == ["mod", "sort"] and namespace["seeds"] == [0, 1]
    # no injected cell (Jupyter, the book): only the values are checked
    with pytest.raises(ParameterError, match="parameter recompute"):
        check({**namespace, "recompute": "no"}, cells=["", DECLARED])


def test_a_parameter_error_shows_as_one_line_in_ipython():
    assert ParameterError("parameter x: bad")._render_traceback_() == ["ParameterError: parameter x: bad"]


def test_in_a_kernel_a_parameter_error_also_goes_to_the_kernel_s_stderr_once(monkeypatch, capsys):
    """papermill's command printed the ParameterError only at the end of its own 36-line traceback."""
    import io
    import sys

    terminal = io.StringIO()
    monkeypatch.setattr(sys, "__stderr__", terminal)
    error = ParameterError("parameter x: bad")
    assert error._render_traceback_() == ["ParameterError: parameter x: bad"]
    assert terminal.getvalue() == ""  # not in a kernel: IPython's own output is enough
    monkeypatch.setattr(parameters, "_in_kernel", lambda: True)
    for _ in range(2):  # IPython renders an error twice
        assert error._render_traceback_() == ["ParameterError: parameter x: bad"]
    assert terminal.getvalue() == "\nParameterError: parameter x: bad\n"


def test_an_int_steps_means_every_level():
    """`-p steps 200` (papermill passes an int) was refused as "expected a string"."""
    from geomcap import results

    namespace = {"steps": 200}
    check(namespace, cells=["", "# parameters\nsteps = 'easy:2000,medium:4000,hard:8000'\n", "# Parameters\nsteps = 200\n"])
    configs = results.section_grid(tasks="copy", levels="easy,hard", seeds=[0], steps=namespace["steps"])
    assert [c.steps for c in configs] == [200, 200]
