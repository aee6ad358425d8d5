"""Run papermill-parameterised notebooks in one IPython shell, each until its first error.

    python tests/run_notebook_cells.py CASES.json RESULTS.json

CASES.json: a list of [notebook path, {name: value as given to `papermill -p`}]. Each case is
parameterised by papermill's own code (the CLI's value parsing, the injected "# Parameters" cell),
then its code cells run in order in a reset IPython shell, as a kernel would run them, stopping at
the first error. RESULTS.json: per case, the error's type and message and whether IPython shows it
as one line (null when every cell ran). One process and one shell for every case, so the imports
are paid once: a papermill kernel per case cost about 10 s each.
"""
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from papermill.cli import _resolve_type  # noqa: E402
from papermill.iorw import load_notebook_node  # noqa: E402
from papermill.parameterize import parameterize_notebook  # noqa: E402
from traitlets.config import Config  # noqa: E402


def first_error(shell, notebook: Path, parameters: dict):
    nb = parameterize_notebook(load_notebook_node(str(notebook)),
                               {name: _resolve_type(value) for name, value in parameters.items()})
    shell.reset(new_session=True)
    cwd = os.getcwd()
    os.chdir(notebook.parent)  # papermill --cwd notebooks
    try:
        for cell in nb.cells:
            if cell.cell_type == "code":
                result = shell.run_cell(cell.source, store_history=True)
                error = result.error_before_exec or result.error_in_exec
                if error is not None:
                    return {"type": type(error).__name__, "message": str(error),
                            "one_line": hasattr(error, "_render_traceback_")}
    finally:
        os.chdir(cwd)
    return None


if __name__ == "__main__":
    cases = json.loads(Path(sys.argv[1]).read_text())
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    results = [first_error(shell, Path(notebook), parameters) for notebook, parameters in cases]
    Path(sys.argv[2]).write_text(json.dumps(results))
