# One Makefile for people and CI. `make test` and `make demo` work on a fresh machine with
# Python 3.11 and make: they create .venv and install everything the package needs.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test test-fast demo bench lint clean registry registry-reported browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	# torch and torchvision pinned to the releases this project is tested with, in the same
	# resolve as the rest (one pip run: a second one re-checked every installed requirement);
	# --no-compile: Python writes the bytecode of what it imports when it first imports it,
	# rather than pip compiling all 19k modules of the environment (45 s of CPU) up front
	$(BIN)/python -m pip install --quiet --no-compile "torch==2.14.1" "torchvision==0.29.1" -e ".[test]"
	touch $(STAMP)

# The suite on every core (pytest-xdist): whole test files to each worker (--dist loadfile), so
# a file's module-scoped stores and data are built once, the costliest files first
# (tests/conftest.py orders them; --no-loadscope-reorder keeps that order). Beside it, in a pytest
# of its own, the tests marked `serial` (the two-node Ray cluster, in its own network namespace),
# collected from the files that spell `mark.serial` only (tests/conftest.py stops a run where a
# serial test's file does not spell it), and mypy: run before the suite, the two held the machine
# 3 min 21 s while using a fraction of it (the Ray suite waits on its processes more than it
# computes: 2 min of CPU over 3-4 min of wall; mypy 30 s of CPU); beside it they fill its waits.
# (A background job hands SIGINT down ignored: the Ray test that sends Ctrl-C to a driver restores
# it there.) Every pass always runs; each one's output and exit status is printed at the end, and
# any one failing fails the target. PYTEST_WORKERS=N sets the workers (1: one process).
PYTEST_WORKERS ?= auto
PYTEST_PARALLEL = $(if $(filter 1,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder)
SERIAL_FILES = $(shell grep -rl --include='test_*.py' 'mark\.serial' tests)

# The install leaves bytecode to first import (--no-compile); PYTHONDONTWRITEBYTECODE in the
# caller's environment (containers and CI images often set it) would keep it from ever being
# written, so every process of a run (each xdist worker, each CLI subprocess a test starts, each
# Ray worker) would compile torch from source again: 11 s of CPU for `import torch, torchvision`
# against 4 s. What is written lands in .venv and the tree's __pycache__ (git ignores both).
unexport PYTHONDONTWRITEBYTECODE

# CI's command: ruff, then the suite with the serial pass and mypy beside it, slow cases included
# (the Datasette page in a real headless browser: `browser` installs one where none is found).
# Ctrl-C stops every pass: the background ones ignore SIGINT (a shell's `&`), so they get SIGTERM
# (the serial test then ends its Ray nodes).
test: $(STAMP) browser
	$(BIN)/python -m ruff check vbstore tests benchmarks
	par=0; ser=0; typ=0; serial=; mypy=; \
	trap 'kill -TERM $$serial $$mypy 2>/dev/null; wait; exit 130' INT TERM; \
	$(BIN)/python -m pytest -q -p no:cacheprovider -m serial $(SERIAL_FILES) \
		> $(VENV)/serial.out 2>&1 & serial=$$!; \
	$(BIN)/python -m mypy > $(VENV)/mypy.out 2>&1 & mypy=$$!; \
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) -m "not serial" || par=$$?; \
	wait $$serial || ser=$$?; wait $$mypy || typ=$$?; \
	echo "--- the serial pass (beside the suite):"; cat $(VENV)/serial.out; \
	echo "--- mypy:"; cat $(VENV)/mypy.out; \
	echo "make test: suite exit $$par, serial pass exit $$ser, mypy exit $$typ"; \
	[ $$par = 0 ] && [ $$ser = 0 ] && [ $$typ = 0 ]

# a headless Chromium for the browser test: Debian's package, installed only when no browser is
# found (a `command -v` when one is: idempotent and instant); without root it says what to run,
# and under CI (CI=true) the browser test then fails rather than skip
BROWSERS := chromium-headless-shell chromium chromium-browser google-chrome
browser:
	@for b in $(BROWSERS); do command -v $$b >/dev/null 2>&1 && exit 0; done; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing chromium-headless-shell (apt-get) for the browser test"; \
		apt-get install -y --no-install-recommends chromium-headless-shell >/dev/null || \
		{ apt-get update >/dev/null && \
		  apt-get install -y --no-install-recommends chromium-headless-shell >/dev/null; }; \
	else \
		echo "no headless Chromium: run 'sudo apt-get install chromium-headless-shell'" \
		     "(the browser test skips without one, and fails under CI)"; \
	fi

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) -m "not slow and not serial"

demo: $(STAMP)
	$(BIN)/vbstore demo

bench: $(STAMP)
	$(BIN)/python benchmarks/store_bench.py

# the reference registry and the README tables generated from it (docs/suites.md);
# REGISTRY_WORK=DIR keeps the build's store there, so a rebuild recomputes only what changed
registry: $(STAMP)
	$(BIN)/python -m vbstore.suites.reference build registry.db $(if $(REGISTRY_WORK),--work $(REGISTRY_WORK))
	$(BIN)/python -m vbstore.suites.reference readme README.md registry.db

# only the reported boards (published figures) anew, the observed ones kept as they are: no
# corpus computation (docs/suites.md)
registry-reported:
	$(BIN)/python -m vbstore.suites.reference reported registry.db
	$(BIN)/python -m vbstore.suites.reference readme README.md registry.db

lint: $(STAMP)
	$(BIN)/python -m ruff check vbstore tests benchmarks
	$(BIN)/python -m mypy

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
