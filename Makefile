# `make demo` and `make test` set everything up on a fresh machine, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test clean

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

# the SageMaker SDK (~1 GB) and the moto stand-in its tests run against: tests only, not the demo
$(VENV)/.sagemaker: $(STAMP)
	$(BIN)/pip install -c constraints.txt -e ".[test,sagemaker]"
	touch $@

test: install $(VENV)/.sagemaker
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) build dist test-output
