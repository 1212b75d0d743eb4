# Two entry points for a fresh clone: `make demo` and `make test`.
# Both create .venv and install everything they need into it.
# `make gpu-check` runs gpudoctor's GPU paths on a machine with an NVIDIA GPU, with
# $(PYTHON) as it is (the interpreter that holds the frameworks): no venv, nothing installed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check --quiet

.PHONY: demo test gpu-check lint-self clean

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

# e.g. make gpu-check PYTHON=/opt/torch/.venv/bin/python3 GPU_CHECK_ARGS="--parts scenarios"
GPU_CHECK_ARGS ?=
gpu-check:
	PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} $(PYTHON) -m gpucheck --python $(PYTHON) $(GPU_CHECK_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .gpudoctor_cache demo-report.html
