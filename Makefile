# KV Cache Lab: the commands a contributor runs. Every target uses the tools of one virtual
# environment, .venv by default (`make install` makes it); VENV=/path/to/venv uses another.
# The git hooks (.pre-commit-config.yaml) call these targets, so they use the same tools.

VENV ?= .venv
BIN := $(VENV)/bin
FAST := not browser and not live and not slow

.DEFAULT_GOAL := help
.PHONY: help install app fast test lint ruff-check format-check typecheck format hooks

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 16

install:  ## make .venv and install everything: the app, the live page, tests and lint tools
	python3 -m venv $(VENV)
	$(BIN)/pip install -r requirements-dev.txt

app:  ## run the app at http://localhost:8501
	$(BIN)/streamlit run app.py

fast:  ## the fast suite: no browser, no torch, no servers (about two minutes on 2 cores)
	$(BIN)/python -m pytest -q -m "$(FAST)"

test:  ## every test, as CI runs them (20+ minutes; .ci/run installs Chromium, HAProxy, PostgreSQL)
	$(BIN)/python -m pytest -q

lint: ruff-check format-check typecheck  ## ruff check, ruff format --check and mypy, as CI runs them

ruff-check:  ## ruff's lint rules ([tool.ruff.lint] in pyproject.toml)
	$(BIN)/ruff check .

format-check:  ## fails when `make format` would change a file
	$(BIN)/ruff format --check .

typecheck:  ## mypy over kvcalc/ and webui/ ([tool.mypy] in pyproject.toml)
	$(BIN)/mypy

format:  ## rewrite the files in ruff's format
	$(BIN)/ruff format .

hooks:  ## run every git hook on every file (pre-commit, offline: the hooks are these targets)
	$(BIN)/pre-commit run --all-files
