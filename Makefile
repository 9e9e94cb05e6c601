# dblog-etl: `make run` and `make test` do all the set-up on a fresh machine.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
DATE    ?= 2026-11-01
DATA    ?= $(CURDIR)/data
TRX     ?= 200
STAMP   := $(VENV)/.installed

.PHONY: setup jvm-cache run test test-fast clean airflow airflow-dags-test test-airflow test-browser browser-deps

$(STAMP): requirements.txt pyproject.toml
	@command -v $(PY) >/dev/null || { echo "needs $(PY) (Python 3.11)"; exit 2; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

setup: $(STAMP) jvm-cache

# The Spark JVM's class archive for this Java and Spark (dblog/jvmcache.py): built once (1-2
# minutes), then every local Spark JVM starts and plans its first queries seconds sooner.
# Only an optimisation: when it cannot be built, Spark starts without it.
jvm-cache: $(STAMP)
	-$(BIN)/dblog jvm-cache

# Write a sample night into the data root, run the nightly pipeline on it, print what was published.
run: $(STAMP) jvm-cache
	$(BIN)/dblog synth --date $(DATE) --transactions $(TRX) --data-root $(DATA)
	$(BIN)/dblog run --date $(DATE) --data-root $(DATA)

test: $(STAMP) browser-deps jvm-cache
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=40

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not spark and not airflow and not browser"

# Local Airflow (standalone on SQLite, AIRFLOW_HOME=.airflow/) with sample nights from 3 days
# ago through today in data/landing; UI on http://localhost:$(AIRFLOW_PORT), no login.
AIRFLOW_PORT ?= 8080
airflow: $(STAMP) jvm-cache
	$(BIN)/dblog synth --date $$($(BIN)/python -c "import datetime as d; print(d.date.today() - d.timedelta(days=3))") \
		--days 4 --transactions $(TRX) --data-root $(DATA)
	DBLOG_DATA_ROOT=$(DATA) AIRFLOW_PORT=$(AIRFLOW_PORT) bin/airflow-local

# One night through the DAG without the scheduler (airflow dags test), on the sample data.
airflow-dags-test: $(STAMP) jvm-cache
	$(BIN)/dblog synth --date $(DATE) --transactions $(TRX) --data-root $(DATA)
	DBLOG_DATA_ROOT=$(DATA) bin/airflow-local --prepare
	DBLOG_DATA_ROOT=$(DATA) bash -c '. bin/airflow-env.sh && airflow dags test dblog_nightly $(DATE)'

test-airflow: $(STAMP)
	$(BIN)/python -m pytest -q tests/test_dag.py tests/test_airflow_dags_test.py

test-browser: $(STAMP) browser-deps
	$(BIN)/python -m pytest -q tests/test_browser.py

# Debian's chromium + chromium-driver for the browser test (installed only when missing, as root).
browser-deps:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
	else echo "browser test needs chromium and chromium-driver (as root: apt-get install -y chromium chromium-driver)"; fi

clean:
	rm -rf $(VENV) data spark-warehouse

# The decode benchmark (issue 10; docs/BENCHMARK.md). N changes per format, default 1,000,000.
N ?= 1000000
BENCH_ARGS ?=
.PHONY: bench
bench: $(STAMP) jvm-cache
	$(BIN)/python -m bench --n $(N) $(BENCH_ARGS)

# Seeded mutation fuzzing of every format's decoder (issue 15; docs/ROBUSTNESS.md): crashes,
# hangs, check violations, and the share of single-field damages that lose half an archive.
# CI runs a bounded version (tests/test_fuzz.py, 150 cases per target).
FUZZ_CASES ?= 5000
.PHONY: fuzz
fuzz: $(STAMP)
	$(BIN)/python -m tests.fuzz --cases $(FUZZ_CASES)
