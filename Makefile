# dblog-etl: `make run` and `make test` do all the set-up on a fresh machine.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
DATE    ?= 2026-11-01
DATA    ?= $(CURDIR)/data
TRX     ?= 200
STAMP   := $(VENV)/.installed

.PHONY: setup run test test-fast clean

$(STAMP): requirements.txt pyproject.toml
	@command -v $(PY) >/dev/null || { echo "needs $(PY) (Python 3.11)"; exit 2; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)

# Write a sample night into the data root, run the nightly pipeline on it, print what was published.
run: $(STAMP)
	$(BIN)/dblog synth --date $(DATE) --transactions $(TRX) --data-root $(DATA)
	$(BIN)/dblog run --date $(DATE) --data-root $(DATA)

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not spark and not airflow and not browser"

clean:
	rm -rf $(VENV) data spark-warehouse
