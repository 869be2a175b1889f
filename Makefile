# Every target creates .venv and installs the project itself when needed.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: runtime demo test test-fast soak bench torture lint clean eval docs screenshots browser postgres

# Each stamp installs only what its targets need: the product alone (demo); the product with
# the test and docs tools, Textual pinned for the snapshot tests (lint, test, docs ...); the
# product with the bench peers (bench, torture).
RUNTIME := $(VENV)/.runtime
BENCH := $(VENV)/.bench

$(RUNTIME): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "need $(PY) on PATH"; exit 2; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	touch $(RUNTIME)

# The per-run monitor in C (core/monitor_c): one small process per run instead of the sh
# monitor's eight. Static when the C library allows it (no loader: under 1 MB of RSS); without
# a C compiler the runner uses the sh monitor (core/monitor.py), so that is a warning only.
MONITOR := $(BIN)/watchkeeper-monitor
MONITOR_SRC := core/monitor_c/watchkeeper-monitor.c
MONITOR_CFLAGS := -O2 -Wall -Wextra -Werror
$(MONITOR): $(MONITOR_SRC) $(RUNTIME)
	@if command -v $(CC) >/dev/null 2>&1; then \
	  $(CC) $(MONITOR_CFLAGS) -static -o $@ $(MONITOR_SRC) 2>/dev/null || $(CC) $(MONITOR_CFLAGS) -o $@ $(MONITOR_SRC); \
	else echo "warning: no C compiler ($(CC)): runs use the sh monitor"; fi

$(STAMP): $(RUNTIME) $(MONITOR) tests/constraints.txt
	$(BIN)/python -m pip install -q -e '.[test,docs]' -c tests/constraints.txt
	touch $(STAMP)

$(BENCH): $(RUNTIME) $(MONITOR)
	$(BIN)/python -m pip install -q -e '.[bench]'
	touch $(BENCH)

# A fresh ledger each time, so the demo tells one story from its first second. The sample
# mission (sample_jobs/missions/pipeline.toml) is queued first: press m in the console to
# follow it, A to approve its report. Without ANTHROPIC_API_KEY its coordinator and workers
# are scripted; with it, the same mission runs with Claude.
# The product alone in .venv/bin (watchkeeper, its PostgreSQL driver, the C monitor): what a
# host of a fleet needs, without the test and docs tools.
runtime: $(RUNTIME) $(MONITOR)

demo: $(RUNTIME) $(MONITOR)
	rm -rf demo sample_jobs/out
	$(BIN)/watchkeeper mission start --specs sample_jobs --name pipeline --ledger demo/watchkeeper.db
	$(BIN)/watchkeeper up sample_jobs --ledger demo/watchkeeper.db

lint: $(STAMP)
	$(BIN)/ruff check core console tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy

# The suite runs on every core (pytest-xdist), and on at least 5 workers: the slow tests with
# real runners and agent workers share two xdist groups ("heavy:runner", "heavy:other",
# tests/conftest.py) that mostly wait on their processes, and the Pilot tests wait for the
# console to go idle, so on 2 cores 3 workers used only 1.4 of them (pytest 271 s on an idle
# machine) and 5 workers bring it to 239 s. The console's Pilot tests are grouped per module,
# so --dist loadgroup never runs two tests of one console module at once. --durations=15
# prints the slowest tests, so a creeping one is seen in every CI log. test-fast skips the
# slow ones; soak runs what needs minutes of real time (never in test).
WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -lt 5 ] && n=5; echo $$n)
# Bytecode is written (__pycache__, git-ignored) even where PYTHONDONTWRITEBYTECODE is set:
# otherwise each xdist worker compiles the sources and rewrites the test modules again (about
# 9 CPU-s of its collection), and so does every watchkeeper process the tests start.
# A worker that crashes ends the run at once (--max-worker-restart=0): pytest-xdist 3.8 with
# --dist loadgroup can hang for ever after replacing a crashed worker (its issues #1323, #1378),
# and a CI run once waited out its whole time limit that way after a segfault.
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -p no:cacheprovider -n $(WORKERS) --dist loadgroup \
	--max-worker-restart=0
test: lint
	$(PYTEST) --durations=15 -m "not soak"

test-fast: $(STAMP)
	$(PYTEST) -m "not slow and not soak"

soak: $(STAMP)
	$(PYTEST) --durations=15 -m soak -o timeout=1800

# The judge's figures on tests/eval/corpus.jsonl: rules alone and via a local fake Claude.
eval: $(STAMP)
	$(BIN)/python -m tests.eval.figures

# The manual (docs/, mkdocs.yml): built strict, so a broken link, anchor or missing page fails;
# the reference pages (commands, settings, keys) are generated from the code while it builds.
# Not --quiet: it hides the warnings that --strict counts, and the build would pass anyway.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict

# The manual's console pictures (docs/images/*.svg): Textual's SVG export of the real console,
# after the sample jobs have run on a fresh ledger for a minute or so.
screenshots: $(STAMP)
	$(BIN)/python docs/gen/screenshots.py

# The web console's test drives a real headless Chromium and reads its screenshot with
# tesseract: both from the system packages, installed when missing (needs root; without them
# that one test is skipped).
browser:
	@command -v chromium >/dev/null && command -v tesseract >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium tesseract-ocr; } || \
	  echo "warning: chromium/tesseract not installed: the browser test will be skipped"

# The PostgreSQL lane (tests/kit/postgres.py) starts a throw-away server from the local
# server binaries (initdb, pg_ctl on PATH or under /usr/lib/postgresql/*/bin), as the
# `postgres` system user when run as root: installed when missing (needs root; without them
# the PostgreSQL lane is skipped). SQLite alone needs none of this.
postgres:
	@{ command -v initdb || ls /usr/lib/postgresql/*/bin/initdb; } >/dev/null 2>&1 || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } || \
	  echo "warning: postgresql not installed: the PostgreSQL tests will be skipped"
	@[ "$$(id -u)" != 0 ] || id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql postgres || true

# make test builds the manual too, and has the browser and PostgreSQL (separate rules, so the
# test recipe above stays as it is).
test: docs browser postgres
soak: postgres
bench: postgres

bench: $(BENCH)
	$(BIN)/python -m bench

torture: $(BENCH)
	$(BIN)/python -m bench.torture

clean:
	rm -rf $(VENV) demo .pytest_cache site
