# The Python of `make setup` (pyproject.toml asks for >= 3.11): PYTHON=... where given, else
# python3.11 where it runs, else python3 where it is 3.11 or newer (Ubuntu 24.04, Debian 13, a
# current macOS); else setup stops in one line naming what it found. `=` variables: only setup's
# recipe runs these probes, not `make test`.
py_version = $(lastword $(shell $(1) --version 2>/dev/null))
py_at_least_311 = $(and $(filter 3,$(word 1,$(subst ., ,$(1)))),\
                        $(filter-out 0 1 2 3 4 5 6 7 8 9 10,$(word 2,$(subst ., ,$(1)))))
PY311 = $(call py_version,python3.11)
PY3   = $(call py_version,python3)
PYTHON ?= $(if $(PY311),python3.11,$(if $(call py_at_least_311,$(PY3)),python3,$(error \
  make setup: needs Python >= 3.11; found $(if $(PY3),python3 $(PY3),no python3) (no python3.11);\
  install one, or give PYTHON=/path/to/python3.x)))
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: setup test lint

setup:  ## create .venv, install treelm with its test tools (torch 2.13.0 CPU), build its C++ loop
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip >/dev/null
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e '.[dev]'
	$(BIN)/python -m treelm.kernels.build   # the fused ON-LSTM's C++ loops (optional; says what it did)
	# and their AVX2 build, which an AVX-512 CPU's tests and AVX2 proxy load (elsewhere: the same)
	TREELM_CXX_ISA=avx2 $(BIN)/python -m treelm.kernels.build

test:   ## the whole suite (CPU, 2 threads, no network, no shared data)
	OMP_NUM_THREADS=2 $(BIN)/python -m pytest tests

lint:
	$(BIN)/ruff check .
