# Every target creates .venv and installs the project itself when needed.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast bench torture lint clean eval

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) on PATH"; exit 2; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,bench]'
	touch $(STAMP)

# A fresh ledger each time, so the demo tells one story from its first second. The sample
# mission (sample_jobs/missions/pipeline.toml) is queued first: press m in the console to
# follow it, A to approve its report. Without ANTHROPIC_API_KEY its coordinator and workers
# are scripted; with it, the same mission runs with Claude.
demo: $(STAMP)
	rm -rf demo sample_jobs/out
	$(BIN)/watchkeeper mission start --specs sample_jobs --name pipeline --ledger demo/watchkeeper.db
	$(BIN)/watchkeeper up sample_jobs --ledger demo/watchkeeper.db

lint: $(STAMP)
	$(BIN)/ruff check core console tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy

# The suite runs on every core (pytest-xdist); test-fast skips the real-process tests (slow).
test: lint
	$(BIN)/python -m pytest -q -p no:cacheprovider -n auto

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n auto -m "not slow"

# The judge's figures on tests/eval/corpus.jsonl: rules alone and via a local fake Claude.
eval: $(STAMP)
	$(BIN)/python -m tests.eval.figures

bench: $(STAMP)
	$(BIN)/python -m bench

torture: $(STAMP)
	$(BIN)/python -m bench.torture

clean:
	rm -rf $(VENV) demo .pytest_cache
