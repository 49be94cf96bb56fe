# Sluice: two commands. `make up` sets up and runs the service on the embedded defaults;
# `make test` sets up and runs the whole suite. Everything else is a building block of those.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH ?= all
QUICK ?=
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: setup up test lint fmt unit bench clean faults console-setup kafka-tools native

$(STAMP): pyproject.toml
	@$(PYTHON) -c "import sys; assert sys.version_info[:2] == (3, 11), sys.version" || { echo "Sluice needs Python 3.11 (python3.11 on PATH)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip==26.3"
	$(PY) -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

setup: $(STAMP)

## The service on the embedded defaults: control plane, three brokers, a demo key (data in var/).
up: setup
	$(PY) infra/run_local.py --host $(HOST) --port $(PORT)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

fmt: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

unit: setup
	$(VENV)/bin/pytest tests/unit

## The web console's tools: npm packages (npm ci when the lock file changed) and, for the browser
## tests, Chromium from apt when /usr/bin/chromium is missing (never a downloaded browser).
SUDO := $(if $(filter 0,$(shell id -u)),,sudo -n)
console-setup:
	@command -v npm >/dev/null || { echo "The console needs Node >= 20.19 with npm on PATH"; exit 1; }
	@test node_modules/.package-lock.json -nt package-lock.json || npm ci --no-audit --no-fund
	@test -x /usr/bin/chromium || { echo "Installing Chromium with apt for the browser tests..."; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	  chromium chromium-driver >/dev/null; }

## kcat (Debian's package) for the Kafka-protocol compatibility tests, when missing.
kafka-tools:
	@command -v kcat >/dev/null || { echo "Installing kcat with apt for the Kafka-protocol tests..."; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	  kcat >/dev/null; }

## The whole suite: lint, import contracts, then every test.
test: lint console-setup kafka-tools
	$(VENV)/bin/pytest

## The fault-injection suite at full length (`make test` runs it shortened); results in
## bench/results/faults.json.
faults: setup
	SLUICE_FAULTS_LONG=1 $(VENV)/bin/pytest tests/faults -s

## Benchmarks: `make bench` (all) or `make bench BENCH=storage [QUICK=1] [NATIVE=1]` (NATIVE: brokers
## run the compiled hot modules, docs/native-build.md).
bench: setup $(if $(NATIVE),native,)
	$(PY) -m bench $(BENCH) $(if $(QUICK),--quick,) $(if $(NATIVE),--native,)
	$(PY) -m bench.perf_doc

## The compiled hot modules (optional; docs/native-build.md): Cython compiles the broker's
## per-request modules into var/native/; brokers started with SLUICE_NATIVE=1 load them.
native: setup
	@$(PY) -c "import Cython" 2>/dev/null || $(PY) -m pip install --quiet -e ".[native]"
	$(PY) infra/build_native.py

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache .hypothesis .import_linter_cache
	rm -rf node_modules frontend/dist test-artifacts
