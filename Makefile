VENV := .venv
BIN := $(VENV)/bin
# Reinstall when pyproject.toml changes; the stamp marks the last install.
INSTALLED := $(VENV)/.installed

.PHONY: run test

$(BIN)/python:
	python3.11 -m venv $(VENV)

$(INSTALLED): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(INSTALLED)

run: $(INSTALLED)
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py demo
	$(BIN)/honcho start -f Procfile

test: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest
