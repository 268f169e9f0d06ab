VENV := .venv
BIN := $(VENV)/bin
# Reinstall when pyproject.toml or the C line scanner changes; the stamps mark the last installs: the
# dashboard's own dependencies for `make run`, those and the test tools for `make test`.
INSTALLED := $(VENV)/.installed
RUN_INSTALLED := $(VENV)/.installed-run

.PHONY: run test chromium bench bench-fix bench-ingest bench-first-view bench-upload bench-timeline bench-sync

$(BIN)/python:
	python3.11 -m venv $(VENV)

$(INSTALLED): $(BIN)/python pyproject.toml setup.py transcripts/formats/_linescan.c
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(INSTALLED)

$(RUN_INSTALLED): $(BIN)/python pyproject.toml setup.py transcripts/formats/_linescan.c
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUN_INSTALLED)

run: $(RUN_INSTALLED)
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py demo
	$(BIN)/honcho start -f Procfile

# The browser tests drive Debian's chromium (never a downloaded browser): install it
# when it is missing and we are root, else stop and say how.
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get install -y chromium || { apt-get update && apt-get install -y chromium; }; \
	  else \
	    echo "Chromium is missing: run apt-get install -y chromium (as root), then make test again."; \
	    exit 1; \
	  fi; \
	fi

# The package is byte-compiled first, as an install is: with PYTHONDONTWRITEBYTECODE set
# (as on CI machines), every `pairfix`, `manage.py` and worker process a test starts
# would otherwise compile each module it imports (0.65 s against 0.12 s for one check).
# Two pytest-xdist workers, each with its own test database, Celery queue and blob folder
# (tests/conftest.py); a module's tests run in one worker, so a module's costly fixtures
# (a 50,000-record session) are made once. The schemathesis run gives each API operation
# a test of one node id, which xdist would run once for all: it runs on its own after.
SCHEMA_RUN := tests/api/test_schema.py::test_the_api_keeps_to_its_schema
test: $(INSTALLED) chromium
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m compileall -q transcripts project
	$(BIN)/pytest --numprocesses 2 --dist loadscope --deselect $(SCHEMA_RUN)
	$(BIN)/pytest $(SCHEMA_RUN)

# The figures of issue 15 in one run, as ratios against their targets (sessions of up to
# 1 GB generated under var/; tens of minutes). Each part runs alone as its own target.
# PostgreSQL and Redis when DATABASE_URL and CELERY_BROKER_URL say so (each benchmark
# makes and drops a database of its own on that server), else SQLite and the filesystem
# broker.
bench: bench-fix bench-ingest bench-first-view bench-upload

# `pairfix fix` against the floor and OpenClaw (OpenClaw's own repair needs Node 24 and
# npm openclaw, see bench/pairfix_fix.py).
bench-fix: $(INSTALLED)
	$(BIN)/python bench/pairfix_fix.py

# A 1.0 GB session through the API and `ingest`, then a repair job: peak RSS of each.
bench-ingest: $(INSTALLED)
	$(BIN)/python bench/ingest_job.py --profile

# A 1.0 GB session synced and appended to (by the sync and by the API): time and peak RSS.
bench-sync: $(INSTALLED)
	$(BIN)/python bench/sync_append.py

# The timeline build of a 50,000-record session (its page first opened): peak RSS.
bench-timeline: $(INSTALLED)
	$(BIN)/python bench/timeline_build.py

# First view of 5,000 and 50,000 records against claude-code-log and
# claude-code-transcripts (installed into virtualenvs under ~/.cache/pairfix-bench).
bench-first-view: $(INSTALLED)
	$(BIN)/python bench/first_view.py

# A 107 MB session uploaded through the form in Chromium, with its progress bars.
bench-upload: $(INSTALLED) chromium
	$(BIN)/python bench/upload_browser.py
