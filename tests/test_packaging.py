"""Packaging: a non-editable install works and finds the committed data; the pins are those of requirements.txt.

The install goes into a fresh virtual environment that sees this environment's packages (a .pth file),
with no package index: pip must find every dependency, extras included, already installed at its pin.
"""
import ast
import re
import shutil
import site
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _pins(lines) -> dict:
    """{normalised name: version} of the ``name==version`` lines (comments and others skipped)."""
    pins = {}
    for line in lines:
        match = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)==([^\s;#]+)\s*(#.*)?", line)
        if match:
            pins[re.sub(r"[-_.]+", "-", match[1]).lower()] = match[2]
    return pins


def test_pyproject_pins_are_requirements_pins():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"]]
    for extra, requirements in project["optional-dependencies"].items():
        declared += [r for r in requirements if not r.startswith("geomcap[")]
    pinned = _pins(declared)  # an extra may repeat another's pin (transformers)
    loose = [r for r in declared if not _pins([r])]
    assert not loose, f"not an exact pin: {loose}"
    requirements = _pins((REPO / "requirements.txt").read_text().splitlines())
    assert {name: requirements.get(name) for name in pinned} == pinned
    # every third-party module the library imports is declared (at the top of a module or inside a function)
    modules = set()
    for path in (REPO / "src" / "geomcap").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules.add(node.module.split(".")[0])
    distributions = {"sklearn": "scikit-learn", "IPython": "ipython", "myst_nb": "myst-nb",
                     "huggingface_hub": "huggingface-hub"}
    third_party = {m for m in modules - set(sys.stdlib_module_names) - {"geomcap", "__future__"}}
    missing = {m for m in third_party if distributions.get(m, m).lower() not in pinned}
    assert not missing, f"imported by src/geomcap but not declared in pyproject.toml: {sorted(missing)}"


def test_a_non_editable_install_finds_the_committed_data(tmp_path):
    source = tmp_path / "source"  # a copy, so that the build leaves nothing in the checkout
    shutil.copytree(REPO / "src" / "geomcap", source / "src" / "geomcap",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    [venv_site] = (venv / "lib").glob("python3*/site-packages")
    (venv_site / "this_environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                              "--no-index", "--no-build-isolation", f"{source}[test]"],
                             capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-3000:]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}  # no PYTHONPATH, no GEOMCAP_DATA
    check = subprocess.run([str(python), "-c", "import geomcap; from geomcap import store; "
                            "print(geomcap.__file__); print(store.committed_data('runs'))"],
                           cwd=REPO, env=env, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr[-3000:]
    installed, data = check.stdout.splitlines()
    assert Path(installed).is_relative_to(venv_site)  # the installed copy, not this checkout's src/
    assert Path(data) == REPO / "data" / "runs" and Path(data).is_dir()
    elsewhere = subprocess.run([str(python), "-c", "from geomcap import store; store.committed_data('runs')"],
                               cwd=tmp_path, env=env, capture_output=True, text=True)
    assert elsewhere.returncode != 0 and "GEOMCAP_DATA" in elsewhere.stderr
