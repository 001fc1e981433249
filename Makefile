# `make lab`, `make demo` and `make test` set everything up on a fresh machine, then run.
PYTHON ?= python3
# the browser tests drive Debian's Chromium (Playwright's own browser downloads are not used)
CHROMIUM ?= /usr/bin/chromium
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo lab test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch first, as the CPU wheel: anything that depends on torch must find it installed,
# or pip pulls a multi-GB CUDA build
$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install -c constraints.txt torch
	$(BIN)/pip install -c constraints.txt -e ".[test]"
	@if $(BIN)/pip list 2>/dev/null | grep -qi '^nvidia-'; then echo "a CUDA build of torch crept in; see constraints.txt" >&2; exit 1; fi
	touch $@

install: $(STAMP)

demo: install
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/nbtoolkit demo

# JupyterLab on the quickstart notebook (offline, bundled tiny model)
lab: install
	$(BIN)/jupyter lab notebooks/quickstart.ipynb $(if $(filter 0,$(shell id -u)),--allow-root)

$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else echo "the browser tests need Chromium at $(CHROMIUM): apt-get install chromium (as root)" >&2; exit 1; fi

# browser tests run apart: Playwright's sync API cannot share pytest-jupyter's event loop
test: install $(CHROMIUM)
	$(BIN)/python -m pytest
	$(BIN)/python -m pytest -p no:asyncio tests/ui

clean:
	rm -rf $(VENV) build dist test-output
