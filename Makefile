# Two entry points: `make book` (the main job) and `make test`.
VENV   ?= .venv
PY     := $(VENV)/bin/python
export HF_HUB_OFFLINE := 1

.PHONY: setup browser test book clean

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

# Debian's chromium, for the browser check of the built book (no browser download).
browser:
	@command -v chromium >/dev/null || { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# Every notebook is executed once: tests/test_book.py builds the book cold (`--all`), executing each
# notebook and page at its defaults, and a cell that raises fails the build (allow_errors: false,
# nb_execution_raise_on_error in _config.yml), hence the test. No separate nbval pass, which would
# execute every notebook a second time to check the same thing.
# Two pytest workers, one test file each at a time (a module's fixtures are built once): the book build,
# mostly one process, runs beside the other files. One torch/OpenMP thread per worker, so that the two
# workers do not fight over the cores.
TEST_WORKERS ?= 2
test: setup browser
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The main job: execute the notebooks at their defaults (cached: an unchanged notebook is not
# re-executed) and build the HTML book into _build/html, Sphinx warnings as errors. The cache keys
# on a notebook's code only, so it is dropped when the committed data or the library change.
BOOK_INPUTS = $$( { find data -type f -printf '%p %s\n' | sort; find src/geomcap -name '*.py' | sort | xargs cat; } | sha1sum)
book: setup
	@mkdir -p _build; if [ "$(BOOK_INPUTS)" != "$$(cat _build/.book-inputs 2>/dev/null)" ]; then \
	  rm -rf _build/.jupyter_cache _build/.doctrees; fi
	$(VENV)/bin/jupyter-book build . -W -n
	@echo "$(BOOK_INPUTS)" > _build/.book-inputs
	@echo "open _build/html/index.html"

clean:
	rm -rf _build
