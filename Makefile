# Two entry points for a fresh machine (see README): `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
KB     ?= kb-sample
LOCOMO ?= ../shared/data/locomo/locomo_dev.json

.PHONY: demo test lint install install-test browser bench wheel docs docs-serve clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[all]'

install-test: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[all,test]'

# Build a KB from the sample conversation offline (no API key), then show what it holds.
demo: install
	$(BIN)/gravity build examples/sample_conversation.jsonl -o $(KB)
	$(BIN)/gravity stats $(KB)

# Debian's Chromium for the browser tests of `gravity show` (Playwright drives it; it downloads no browser).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium >/dev/null; }

test: install-test browser
	$(BIN)/python -m pytest

# All nine benchmarks, offline (20 to 35 minutes on two cores, about half of it the 1M-anchor KB of benchmark 6): benchmarks/results/*.json, every ratio with its target.
bench: install-test
	$(BIN)/python -m benchmarks --locomo $(LOCOMO)

# A wheel of this checkout: dist/gravity_memory-<version>-py3-none-any.whl (pip takes hatchling from the index).
wheel: $(BIN)/python
	$(BIN)/pip wheel --quiet --no-deps . -w dist

# The documentation site (mkdocs.yml, docs/): built offline into site/, every warning an error.
docs: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[docs]'
	$(BIN)/mkdocs build --strict

# The same site served on http://127.0.0.1:8000, rebuilt as you edit.
docs-serve: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[docs]'
	$(BIN)/mkdocs serve

lint: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/ruff check gravity_core gravity_langchain gravity_llamaindex gravity_mcp tests
	$(BIN)/mypy -p gravity_core -p gravity_langchain -p gravity_llamaindex -p gravity_mcp
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) $(KB) .pytest_cache dist site
