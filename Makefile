# The two commands of the README: `make demo` and `make test`. Both set up .venv first
# (torch==2.13.0 before the package, so pip takes the CPU wheel on this disk rather than a
# multi-GB CUDA build), and both are quiet and idempotent on the second run.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
STAMP := $(VENV)/.dtorch-installed

.PHONY: demo test lint typecheck pytest setup clean bench

demo: $(STAMP)
	@$(PY) -m examples.main

test: lint typecheck pytest

setup: $(STAMP)

lint: $(STAMP)
	@$(VENV)/bin/ruff check --quiet dtorch tests benchmarks examples
	@$(VENV)/bin/ruff format --quiet --check dtorch tests benchmarks examples

typecheck: $(STAMP)
	@$(VENV)/bin/mypy --no-error-summary dtorch

pytest: $(STAMP)
	@$(VENV)/bin/pytest -q

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "setting up $(VENV) (torch==2.13.0 first, then dtorch[dev]); log: $(VENV)/setup.log"
	@$(PIP) install torch==2.13.0 > $(VENV)/setup.log 2>&1 || { cat $(VENV)/setup.log; exit 1; }
	@$(PIP) install -e '.[dev]' >> $(VENV)/setup.log 2>&1 || { cat $(VENV)/setup.log; exit 1; }
	@# bytecode, as a wheel install has it: worker processes need not compile dtorch each
	@$(PY) -m compileall -q dtorch >> $(VENV)/setup.log 2>&1 || { cat $(VENV)/setup.log; exit 1; }
	@touch $(STAMP)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
	find dtorch tests benchmarks examples -name __pycache__ -type d -prune -exec rm -rf {} +
