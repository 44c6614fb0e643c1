# Both README commands set themselves up: a virtual environment in .venv with the CPU
# build of torch installed first (a looser pin would pull several GB of CUDA packages).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
TORCH := torch==2.13.0

# LLVM's AVX2 feature set of this host: -avx512f turns off every AVX-512 (and AVX10) feature with it.
# On a machine without AVX-512 it is the host itself.
AVX2_TARGET := llvm -mattr=-avx512f

.PHONY: demo table3 test test-avx2 test-all clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

demo: $(VENV)/.installed  ## the main job on a small default: tune GMM 256^3 on this CPU (q-method, 20 trials)
	rm -f demo_records.jsonl
	$(VENV)/bin/flexsched tune GMM 256 256 256 --trials 20 --method q --log demo_records.jsonl
	$(VENV)/bin/flexsched best demo_records.jsonl --top 3

table3: $(VENV)/.installed  ## static analysis of the paper's operators against its Table 3
	$(PY) experiments/analysis_table.py

test: $(VENV)/.installed  ## the test suite (slow sweeps skipped)
	$(PY) -m pytest

test-avx2: $(VENV)/.installed  ## the suite with the llvm target forced to the AVX2 feature set, so both vector paths run on any AVX2 or AVX-512 machine
	FLEXSCHED_LLVM_TARGET="$(AVX2_TARGET)" $(PY) -m pytest

test-all: $(VENV)/.installed  ## every test, slow sweeps included
	$(PY) -m pytest -m ''

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache demo_records.jsonl
