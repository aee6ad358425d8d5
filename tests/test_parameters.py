"""Notebook parameters: list forms, flags, numbers, and names papermill injected that a notebook lacks; the
rows they are checked through (geomcap.schema's selections)."""
import pytest

from geomcap import parameters
from geomcap.parameters import PARAMETERS, ParameterError, as_list, check, check_value
from geomcap.schema import Param, SettingError

DECLARED = '# parameters\ntasks = "all"  # help\nseeds = "all"\nrecompute = False\nfraction = 0.5\nlayers = "final"\n'


@pytest.mark.parametrize("value, expected", [
    ("mod,sort", ["mod", "sort"]), ("mod", ["mod"]), (["a", "b"], ["a", "b"]), ("[0, 1]", [0, 1]),
    ("['mod', 'sort']", ["mod", "sort"]), ("[mod, sort]", ["mod", "sort"]), (3, [3]), (" a , b ,", ["a", "b"]),
])
def test_as_list(value, expected):
    assert as_list(value) == expected


@pytest.mark.parametrize("name, value, expected", [
    ("tasks", "mod,sort", ["mod", "sort"]), ("tasks", "all", "all"), ("seeds", "0,1", [0, 1]),
    ("benchmarks", "arithmetic,negation", ["arithmetic", "negation"]), ("benchmarks", "all", "all"),
    ("seeds", "[0, 1]", [0, 1]), ("seeds", 2, [2]), ("seeds", "all", "all"), ("recompute", True, True),
    ("layers", "final", "final"), ("layers", "all", "all"), ("layers", "0,2", [0, 2]), ("layers", 1, [1]),
    ("revisions", "every:4", "every:4"), ("revisions", "step0,step8", ["step0", "step8"]),
    ("small", "405k", "405k"),
    ("steps", 200, "200"), ("steps", "easy:2000,hard:8000", "easy:2000,hard:8000"),
])
def test_values_are_normalised(name, value, expected):
    assert check_value(name, value) == expected


@pytest.mark.parametrize("name, value, message", [
    ("recompute", "no", "parameter recompute: must be True or False, got 'no'"),
    ("recompute", 1, "parameter recompute: must be True or False, got 1"),
    ("seeds", "0,-1", r"parameter seeds: must be an integer in \[0, 4294967295\], got -1$"),
    ("seeds", "x", r"parameter seeds: must be an integer in .*, got 'x' \(or 'all'\)"),
    ("tasks", "", r"parameter tasks: empty selection: name one or more values, comma-separated \(or 'all'\)"),
    ("tasks", [1], "parameter tasks: must be a string, got 1"),
    ("benchmarks", "chess", "parameter benchmarks: unknown value 'chess'; choose one of: agreement, category"),
    ("measure", "volume", "parameter measure: unknown value 'volume'; choose one of: rankme, rankme_centred"),
    ("revisions", "every:0", "parameter revisions: every:K needs a positive integer K, got 'every:0'"),
    ("revisions", "main", "parameter revisions: revision 'main' is not of the form stepN"),
    ("tasks", "mod,chess", "parameter tasks: unknown value 'chess'; choose one of: copy, reverse"),
    ("large", "999m", "parameter large: unknown value '999m'; choose one of: 405k"),
    ("steps", "easy:2000,hard:x", "parameter steps: 'x' is not an integer"),
    ("steps", "easy:0", "parameter steps: must be a positive integer, got 0"),
    ("layers", "deep", r"parameter layers: must be a non-negative integer, got 'deep' \(or 'final' or 'all'\)"),
    ("layers", [True], "parameter layers: must be a non-negative integer, got True"),
    ("root", 3, "parameter root: must be a string, got 3"),
    ("device", "tpu", "parameter device: unknown value 'tpu'; choose one of: auto, cpu, cuda, cuda:N$"),
    ("device", "cuda0", "parameter device: unknown value 'cuda0'"),
    ("steps", 0, "parameter steps: must be a positive integer, or per level as 'easy:2000,medium:4000,hard:8000'"),
    ("steps", 2.5, "parameter steps: must be a string, got 2.5"),
])
def test_bad_values_name_the_parameter(name, value, message):
    with pytest.raises(ParameterError, match=message):
        check_value(name, value)


@pytest.mark.parametrize("kind, value, expected", [
    ("fraction", "0.5", 0.5), ("fraction", 1, 1.0), ("count", 0, 0), ("positive", "3", 3), ("number", 2, 2.0),
    ("flag", "true", True), ("seeds", "1,2", [1, 2]),
])
def test_a_kind_checks_a_notebook_s_own_parameter(kind, value, expected):
    """``parameters.check(globals(), kinds={"p": "count"})``: a generic row, or another parameter's."""
    assert check_value("x", value, kind) == expected


@pytest.mark.parametrize("kind, value, message", [
    ("fraction", "abc", r"parameter x: must be a number in \(0, 1\], got 'abc'"),
    ("fraction", float("nan"), r"parameter x: must be a number in \(0, 1\]"),
    ("positive", 0, "parameter x: must be a positive integer, got 0"),
    ("count", 2.5, "parameter x: must be a non-negative integer, got 2.5"),
])
def test_a_kind_refuses_a_bad_value_naming_the_parameter(kind, value, message):
    with pytest.raises(ParameterError, match=message):
        check_value("x", value, kind)
    with pytest.raises(ValueError, match="unknown parameter kind 'volume'"):
        check_value("x", value, "volume")


def test_a_selection_row():
    """A schema row of type list: one value or several, "all" where it means something, its words as they are,
    each item checked by the row's choices or range (text read as a number where items are numbers)."""
    seeds = Param("seeds", list, item=int, interval="[0, 9]", every="every seed stored")
    assert seeds.check("1, 2") == [1, 2] and seeds.check(3) == [3] and seeds.check("[4]") == [4]
    assert seeds.check("all") == "all" and seeds.chosen("all") == "all"  # no choices to give it as
    with pytest.raises(SettingError, match=r"^seeds: must be an integer in \[0, 9\], got 10$"):
        seeds.check([1, 10])
    colours = Param("colours", list, choices=("red", "blue"), every="every colour")
    assert colours.chosen("all") == ["red", "blue"] and colours.chosen("blue") == ["blue"]
    assert Param("colours", list, choices=("red", "blue")).check("red,blue") == ["red", "blue"]
    with pytest.raises(SettingError, match="unknown value 'all'"):  # no every: "all" is not a value
        Param("colours", list, choices=("red", "blue")).check("all")
    layers = Param("layers", list, item=int, interval="[0, inf)", words=("final",))
    assert layers.check("final") == "final" and layers.check("0, 2") == [0, 2]
    with pytest.raises(SettingError) as refused:
        layers.check(" , ")
    assert refused.value.reason == "empty selection: name one or more values, comma-separated (or 'final')"
    assert Param("objects", int, choices=(3, 5)).check(5) == 5  # a number out of choices, without a range
    with pytest.raises(SettingError, match="unknown objects 4; choose one of: 3, 5"):
        Param("objects", int, choices=(3, 5)).check(4)


def test_every_notebook_parameter_and_command_option_of_a_name_is_one_row():
    """The sweep's grid axes and the Pythia options share the notebooks' rows, which reuse the training rows."""
    from geomcap.config import SETTINGS

    assert PARAMETERS["tasks"].choices == SETTINGS["task"].choices
    assert PARAMETERS["seeds"].interval == SETTINGS["seed"].interval
    assert PARAMETERS["small"].choices == SETTINGS["size"].choices
    assert all(name == row.name for name, row in PARAMETERS.items())


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
