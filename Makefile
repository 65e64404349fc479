# make demo: set up .venv and run the main job.   make test: set up .venv and run the tests.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# CPU build of torch where no CUDA driver is present (override TORCH_SPEC on GPU machines)
TORCH_SPEC ?= torch==2.13.0
export RAY_AUTH_MODE ?= disabled
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER ?= 0
export RAY_USAGE_STATS_ENABLED ?= 0
export MLFLOW_DISABLE_TELEMETRY ?= true
export DO_NOT_TRACK ?= 1

.PHONY: venv demo test test-unit test-slow test-browser bench results clean lint format

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	if ! command -v nvidia-smi >/dev/null 2>&1; then $(PY) -m pip install -q "$(TORCH_SPEC)"; fi
	$(PY) -m pip install -q -e ".[test]"
	touch $@

venv: $(VENV)/.installed

# The main job: Table 3 at the cpu profile with adaptive seeds (two of every row, a third where a verdict is undecided), then the report.
# The budget (the spec's 60m unless DEMO_BUDGET is given) counts every session of the sweep: to go on
# after it was spent, give a larger one, e.g. make demo DEMO_BUDGET=3h
DEMO_DIR ?= sweep_runs/table3-cpu
DEMO_BUDGET ?=
# A run that stopped early (interrupted, a fault it could not survive) still gets the report of what finished, and
# make exits with the run's status.
demo: venv
	@status=0; $(VENV)/bin/tsweep run sweeps/specs/table3.yaml --profile cpu --out $(DEMO_DIR) $$(test -f $(DEMO_DIR)/sweep.json && echo --resume) $(if $(DEMO_BUDGET),--budget $(DEMO_BUDGET)) || status=$$?; \
	if test -f $(DEMO_DIR)/sweep.json; then $(VENV)/bin/tsweep report $(DEMO_DIR) || exit $$?; \
	echo "report: $(DEMO_DIR)/report/report.html (and report.md, table.csv, table.tex)"; fi; exit $$status

# Lint, type-check sweeps/ and analysis/ (pyproject's [tool.mypy]), then the default selection (pyproject's addopts) in two parts: unit tests, then tests/e2e/ (real sweeps); CI runs this
test: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -n 2 -m "$(UNIT_MARKERS)"
	$(PY) -m pytest -q -m "$(E2E_MARKERS)"

# The quick loop while editing: the default selection without tests/e2e/ (no Ray, no sweep), on two processes.
# make test runs these, then the end-to-end sweeps one at a time (each starts its own Ray cluster).
UNIT_MARKERS := not e2e and not slow and not integration and not gpu and not browser
E2E_MARKERS := e2e and not slow and not integration and not gpu and not browser
test-unit: venv
	$(PY) -m pytest -q -n 2 -m "$(UNIT_MARKERS)"

# report.html in headless Chromium (console errors, every image loads, a screenshot beside the report)
test-browser: venv
	command -v chromium >/dev/null 2>&1 || (apt-get update -q && apt-get install -y -q chromium)
	$(PY) -m pytest -q -m browser tests/analysis/test_browser.py

# Opt-in: long runs and real downloaded corpora (e2e ones included)
test-slow: venv
	$(PY) -m pytest -q -m "slow or integration"

bench: venv
	$(PY) benchmarks/model_throughput.py
	$(PY) benchmarks/beam_cache.py
	$(PY) benchmarks/attention_backends.py
	$(PY) benchmarks/trainer_throughput.py
	$(PY) benchmarks/compile_masks.py

# Regenerate results/NAME from each published sweep directory that is present (results/README.md)
RESULTS := table3:sweep_runs/table3-cpu table3-avx2:sweep_runs/table3-cpu-avx2 \
  modifications:sweep_runs/modifications-cpu \
  table3-lm:sweep_runs/table3-lm-cpu table3-quick:sweep_runs/table3-quick-cpu \
  calibrate-cpu:sweep_runs/calibrate-cpu calibrate-cpu-batch:sweep_runs/calibrate-cpu-batch
results: venv
	@for r in $(RESULTS); do name=$${r%%:*}; dir=$${r#*:}; \
	  if test -f $$dir/sweep.json; then $(VENV)/bin/tsweep report $$dir --out results/$$name --compare-rules || exit 1; \
	  else echo "results/$$name: skipped ($$dir has no sweep.json)"; fi; done

clean:
	rm -rf runs sweep_runs .pytest_cache

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .
