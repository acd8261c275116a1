PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: setup test lint

setup:  ## create .venv, install treelm with its test tools (torch 2.13.0 CPU), build its C++ loop
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip >/dev/null
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e '.[dev]'
	$(BIN)/python -m treelm.kernels.build   # the fused ON-LSTM's C++ loops (optional; says what it did)

test:   ## the whole suite (CPU, 2 threads, no network, no shared data)
	OMP_NUM_THREADS=2 $(BIN)/python -m pytest tests

lint:
	$(BIN)/ruff check .
