# Set-up is part of every target: the first call builds .venv from pyproject.toml.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-fast test-changed test-floors chromium full

run: $(STAMP)  ## the main job on the embedded default (verify, demo sweep, report, analysis)
	$(BIN)/interp run

full: $(STAMP)  ## the paper's Tables 1 and 2
	$(BIN)/interp run --full

test: $(STAMP) chromium  ## the test suite (what CI runs); the layout check first, it fails fast
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_layout.py
	$(BIN)/python -m pytest -q -n logical --dist loadfile  # one worker per core; a file stays on one

FAST := tests/test_layout.py tests/core/test_tasks.py tests/core/test_constructions.py tests/training/test_smoke.py
test-fast: $(STAMP)  ## before every commit (< 60 s): layout, tasks, constructions at small n, 50 training steps
	$(BIN)/python -m pytest -q -p no:cacheprovider $(FAST) -k "not n100 and not n1000"

test-changed: $(STAMP)  ## the tests of the interp/ modules changed since origin/main (else HEAD~1), and the layout check
	$(BIN)/python -m pytest -q -p no:cacheprovider $$($(BIN)/python tests/changed.py $(BASE))

FLOORS := build/venv-floors
test-floors:  ## every runtime dependency at its declared floor (torch: constraints.txt's CPU wheel), then the fast tier
	rm -rf $(FLOORS) && $(PY) -m venv $(FLOORS)
	$(PY) tests/floors.py pins > $(FLOORS)/floors.txt
	$(FLOORS)/bin/pip install -q --prefer-binary -c constraints.txt -c $(FLOORS)/floors.txt -e '.[dev]'
	$(FLOORS)/bin/python tests/floors.py check
	$(FLOORS)/bin/python -m pytest -q -p no:cacheprovider $(FAST) tests/test_dependencies.py -k "not n100 and not n1000"

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,ray]'
	touch $(STAMP)

chromium:  ## Debian's headless Chromium, for the attention-view rendering test
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)
