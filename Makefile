# Two entry points: `make book` (the main job) and `make test`.
VENV   ?= .venv
PY     := $(VENV)/bin/python
export HF_HUB_OFFLINE := 1

.PHONY: setup test book clean

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

test: setup
	$(PY) -m pytest -q

# Until the book exists, the main job runs one default experiment and prints its summary.
book: setup
	$(VENV)/bin/geomcap train --task add --level medium --size 405k --seed 0 --steps 1500 --out _build/runs/add-medium-405k-s0
	$(VENV)/bin/geomcap show _build/runs/add-medium-405k-s0

clean:
	rm -rf _build
