# make demo: set up .venv and run the main job.   make test: set up .venv and run the tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# CPU build of torch where no CUDA driver is present (override TORCH_SPEC on GPU machines)
TORCH_SPEC ?= torch==2.13.0
export RAY_AUTH_MODE ?= disabled
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER ?= 0
export RAY_USAGE_STATS_ENABLED ?= 0
export MLFLOW_ENABLE_TELEMETRY ?= false
export DO_NOT_TRACK ?= 1

.PHONY: venv demo test test-slow bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	if ! command -v nvidia-smi >/dev/null 2>&1; then $(PY) -m pip install -q "$(TORCH_SPEC)"; fi
	$(PY) -m pip install -q -e ".[test]"
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(VENV)/bin/tsweep params --vocab 37000
	$(VENV)/bin/tsweep data prepare bible-en-de
	$(VENV)/bin/tsweep train --corpus bible-en-de --workdir runs/demo-train --profile cpu

test: venv
	$(PY) -m pytest -q

test-slow: venv
	$(PY) -m pytest -q -m "slow or integration"

bench: venv
	$(PY) benchmarks/model_throughput.py
	$(PY) benchmarks/beam_cache.py

clean:
	rm -rf runs sweep_runs .pytest_cache
