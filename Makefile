# Two entry points for a fresh clone: `make demo` and `make test`.
# Both create .venv and install everything they need into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check --quiet

.PHONY: demo test lint-self clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[tensorflow,report]'
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[test,tensorflow]'
	touch $@

demo: $(VENV)/.demo-installed
	@echo "== gpudoctor lint fixtures/seeds   (the code examples of the documents gpudoctor grew from)"
	$(BIN)/gpudoctor lint --output-format full fixtures/seeds; test $$? -le 1
	@echo
	@echo "== gpudoctor probe   (this machine; the page: demo-report.html)"
	$(BIN)/gpudoctor probe --html demo-report.html

test: $(VENV)/.test-installed
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .gpudoctor_cache demo-report.html
