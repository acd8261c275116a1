PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: setup test lint

setup:  ## create .venv and install treelm with its test tools (torch 2.13.0 CPU)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip >/dev/null
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e '.[dev]'

test:   ## the whole suite (CPU, 2 threads, no network, no shared data)
	OMP_NUM_THREADS=2 $(BIN)/python -m pytest tests

lint:
	$(BIN)/ruff check .
