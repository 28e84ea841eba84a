# One Makefile for people and CI. `make test` and `make demo` work on a fresh machine with
# Python 3.11 and make: they create .venv and install everything the package needs.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test test-fast demo bench lint clean registry

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	# torch and torchvision first, pinned to the releases this project is tested with
	$(BIN)/python -m pip install --quiet "torch==2.14.1" "torchvision==0.29.1"
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

# CI's command: the linters (ruff, mypy) first, then the whole suite, slow cases included
test: lint
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

demo: $(STAMP)
	$(BIN)/vbstore demo

bench: $(STAMP)
	$(BIN)/python benchmarks/store_bench.py

# the reference registry and the README tables generated from it (docs/suites.md)
registry: $(STAMP)
	$(BIN)/python -m vbstore.suites.reference build registry.db
	$(BIN)/python -m vbstore.suites.reference readme README.md registry.db

lint: $(STAMP)
	$(BIN)/python -m ruff check vbstore tests benchmarks
	$(BIN)/python -m mypy

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
