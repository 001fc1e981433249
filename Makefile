# `make lab`, `make demo` and `make test` set everything up on a fresh machine, then run.
# Every Python package comes from requirements.lock (`make lock` writes it), installed by uv in one
# resolver-free pass with each file's hash checked, so two set-ups give the same environment.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV := $(BIN)/uv
LOCK := requirements.lock
# what every lock is made from: a change to any of them is caught by lock-check (the image tables: tests/facts/images)
IMAGE_TABLES := $(sort $(wildcard tests/facts/images/*.json))
LOCK_INPUTS := pyproject.toml constraints.txt tools/skypilot-requirements.in tools/floor-requirements.in \
	tools/llama-requirements.in $(IMAGE_TABLES)
# of pyproject.toml only what names packages counts ([project], [build-system]): its tool settings change none
LOCK_INPUTS_SHA = $(shell $(PYTHON) tools/lock_inputs_sha.py)
# torch's CPU wheel: it lies on disk on this project's machines, elsewhere PyTorch's CPU index has it
TORCH_WHEELS ?= $(if $(wildcard /opt/wheels/torch-*+cpu-*.whl),/opt/wheels,https://download.pytorch.org/whl/cpu/torch/)
UV_INTO_VENV := --python $(BIN)/python --find-links $(TORCH_WHEELS)
# what builds in the venv itself (--no-build-isolation), so first: DeepSpeed's ops (torch, ninja),
# source-only releases (setuptools, wheel), nbtoolkit and its panel (pyproject's build-system, and
# editables for hatchling's editable install);
# pip for `pip check`
BUILD_TOOLS := torch ninja setuptools wheel hatchling editables hatch-jupyter-builder jupyter-builder pip
BUILD_TOOLS_STAMP := $(VENV)/.build-tools
PACKAGES_STAMP := $(VENV)/.packages
STAMP := $(VENV)/.installed
# the JupyterLab panel: node packages as yarn.lock pins them, built by `jlpm` from the venv
LAB := labextension
NODE_STAMP := $(LAB)/node_modules/.installed
LAB_BUILT := nbtoolkit/labextension/package.json
LAB_SOURCES := $(LAB)/package.json $(wildcard $(LAB)/src/*.ts $(LAB)/src/*/*.ts* $(LAB)/style/* $(LAB)/schema/*)
WITH_VENV := PATH="$(abspath $(BIN)):$$PATH"
CHROMIUM := /usr/bin/chromium
# the Slurm tests start their own one-node cluster of Debian's slurm-wlm (slurmctld, slurmd) and munge
SBATCH := /usr/bin/sbatch
SETUP_SECONDS := $(VENV)/.setup-seconds
# SkyPilot 0.14 pins click<8.2, which the locked transformers' huggingface-hub cannot share: its own
# environment, locked and hashed too, where the tests run SkyPilot's own task loader
SKY_VENV := .venv-skypilot
SKY_LOCK := requirements-skypilot.lock
# the training program under the oldest libraries it supports (nbtoolkit/train/supported_versions.py: transformers
# 4.56.2 as the oldest SageMaker image we pick carries, ...): its own environment, locked and hashed, where
# tests/test_supported_versions.py trains it; about 50-60 s to build here (1.4 GB), beside the rest of the set-up
FLOOR_VENV := .venv-floor
FLOOR_LOCK := requirements-floor.lock
# the program rehearsed in each real launch's image's packages (nbtoolkit/rehearsal/image_envs.py; `nbtoolkit rehearse SPEC
# --image-env`): one environment per image table of tests/facts/images, locked and hashed in
# requirements-image-NAME.lock, built into .venv-image-NAME (about a minute each here), not part of test-setup:
# `make test-images` builds them and runs tests/images apart
IMAGE_NAMES = $(basename $(notdir $(IMAGE_TABLES)))

# `export --format gguf` runs llama.cpp's converter and quantizer in an environment of their own, locked and hashed
# too: llama-cpp-python built from its sdist (llama.cpp's CPU library only), and the converter copied out of it.
# `make llama-env` took 716 s on 2 cores (682 s of it compiling llama.cpp), so it is not part of test-setup:
# `make test-gguf` builds it and runs the GGUF tests apart
LLAMA_VENV := .venv-llama
LLAMA_LOCK := requirements-llama.lock
LLAMA_VERSION = $(shell sed -n 's/^llama-cpp-python==\([^ ]*\).*/\1/p' $(LLAMA_LOCK))
LLAMA_BUILD_TOOLS := scikit-build-core cmake ninja pathspec packaging
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
	-DLLAMA_BUILD_TOOLS=OFF -DGGML_OPENMP=OFF

.PHONY: lock lock-floor lock-images image-envs test-images floor lock-check install deepspeed demo lab notebooks api-types lint docs docs-build test-setup \
	test clean llama-env test-gguf

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# uv itself, from a pinned and hashed release
$(UV): tools/uv-requirements.txt | $(BIN)/python
	$(BIN)/pip install --no-deps --require-hashes -r tools/uv-requirements.txt

# every extra of pyproject.toml and the build tools, resolved once for Linux x86_64 / Python 3.11;
# constraints.txt holds the pins that must hold. The first line records what the lock was made from. uv keeps
# the pins of the output file it is given where they still satisfy (a new extra adds packages, upgrades none).
lock: | $(UV)
	tail -n +2 $(LOCK) > $(LOCK).pins
	printf '%s\n' $(BUILD_TOOLS) | $(UV) pip compile pyproject.toml - --all-extras -c constraints.txt \
	    --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	    --find-links $(TORCH_WHEELS) --custom-compile-command "make lock" --quiet -o $(LOCK).pins
	{ echo "# inputs-sha256: $(LOCK_INPUTS_SHA) ($(LOCK_INPUTS))"; cat $(LOCK).pins; } > $(LOCK).new
	rm $(LOCK).pins && mv $(LOCK).new $(LOCK)
	$(UV) pip compile tools/skypilot-requirements.in --generate-hashes --python-version 3.11 \
	    --python-platform x86_64-manylinux_2_28 --custom-compile-command "make lock" --quiet -o $(SKY_LOCK)
	$(UV) pip compile tools/llama-requirements.in --generate-hashes --python-version 3.11 \
	    --python-platform x86_64-manylinux_2_28 --find-links $(TORCH_WHEELS) --custom-compile-command "make lock" \
	    --quiet -o $(LLAMA_LOCK)
	$(MAKE) --no-print-directory lock-floor lock-images

# the floor's own pins (`python -m nbtoolkit.train.supported_versions`) with what the program needs beside them
lock-floor: | $(UV)
	$(BIN)/python -m nbtoolkit.train.supported_versions | $(UV) pip compile tools/floor-requirements.in - \
	    --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 --find-links $(TORCH_WHEELS) \
	    --custom-compile-command "make lock" --quiet -o $(FLOOR_LOCK)

# each image's packages (its table) with what the container's requirements.txt lifts, and the lock's CPU torch;
# then nbtoolkit/launching/image_pins.json: the versions each lock lifts the image's packages to, which the container's
# requirements.txt pins (so the paid run installs what the rehearsal ran with)
lock-images: | $(UV)
	for name in $(IMAGE_NAMES); do \
	    $(BIN)/python -m nbtoolkit.rehearsal.image_envs requirements $$name | $(UV) pip compile - --generate-hashes \
	        --python-version 3.11 --python-platform x86_64-manylinux_2_28 --find-links $(TORCH_WHEELS) \
	        --custom-compile-command "make lock" --quiet -o requirements-image-$$name.lock || exit 1; \
	done
	$(BIN)/python -m nbtoolkit.rehearsal.image_envs pins

lock-check:
	@grep -q '^# inputs-sha256: $(LOCK_INPUTS_SHA) ' $(LOCK) || \
		{ echo 'requirements.lock is older than $(LOCK_INPUTS): run `make lock`' >&2; exit 1; }

# the build tools at their locked versions and hashes (with what they need, locked too)
$(BUILD_TOOLS_STAMP): $(LOCK) | lock-check $(UV)
	$(UV) pip install $(UV_INTO_VENV) --require-hashes -c $(LOCK) \
		$$(sed -n 's/^\($(subst $() ,\|,$(BUILD_TOOLS))\)==\([^ ]*\).*/\1==\2/p' $(LOCK))
	touch $@

# every locked package (DeepSpeed built here from its hashed source with its CPU ops, cpu_adam for
# optimizer offload and shm_comm for CPU collectives, while the rest downloads). `sync` also removes
# what the lock does not name; binder/postBuild installs beside its image's own packages instead.
# Needs the build tools installed first. Bytecode is compiled here, once (25 s): uv writes none by
# default, and where PYTHONDONTWRITEBYTECODE is set no run does either, so every process, each rank
# of every job, compiled torch and transformers again (5 s of a tiny job's 10).
# DeepSpeed's build is the longest step of the set-up: its setup.py turns ninja off unless DS_ENABLE_NINJA
# is set (setup.py:107-108), and without it torch's BuildExtension compiles each op's two sources one after
# the other; with it, side by side (ninja from the build tools, found on the venv's PATH)
LOCK_INSTALL ?= sync
$(PACKAGES_STAMP): $(LOCK) $(BUILD_TOOLS_STAMP) | lock-check
	DS_BUILD_OPS=0 DS_BUILD_CPU_ADAM=1 DS_BUILD_SHM_COMM=1 DS_ENABLE_NINJA=1 $(WITH_VENV) $(UV) pip $(LOCK_INSTALL) $(LOCK) \
		$(UV_INTO_VENV) --require-hashes --no-build-isolation --refresh-package deepspeed --compile-bytecode
	$(BIN)/python -c "from deepspeed.git_version_info import installed_ops as ops; assert ops['cpu_adam'] and ops['deepspeed_shm_comm'], ops"
	touch $@

# the panel's node packages (jlpm comes with jupyter-builder, a build tool), beside the sync above
$(NODE_STAMP): $(LAB)/yarn.lock $(BUILD_TOOLS_STAMP)
	cd $(LAB) && $(WITH_VENV) jlpm install --immutable
	touch $@

# again when pyproject.toml changes: its entry points (nbtoolkit.backends, nbtoolkit.tasks) reach the registries
# only through the installed metadata. After the panel's build: the editable install's build hook then finds it
# built (skip-if-exists in pyproject.toml) instead of building it a second time
$(STAMP): $(PACKAGES_STAMP) $(NODE_STAMP) $(LAB_BUILT) pyproject.toml
	# `develop` below links the venv's copy of the panel to nbtoolkit/labextension: drop the link first,
	# or the install would write the wheel's install.json through it into the source tree
	rm -rf $(VENV)/share/jupyter/labextensions/nbtoolkit nbtoolkit/labextension/install.json
	$(UV) pip install $(UV_INTO_VENV) --no-deps --no-build-isolation -e .
	$(WITH_VENV) jupyter-builder develop --overwrite .
	touch $@

install: $(STAMP)

# DeepSpeed with its CPU ops comes with every install
deepspeed: install

# the panel, built again when its sources change; it needs only the node packages and the build tools, so on a
# new machine it builds beside DeepSpeed's ops rather than after them
$(LAB_BUILT): $(LAB_SOURCES) $(NODE_STAMP)
	cd $(LAB) && $(WITH_VENV) jlpm build

# the REST contract, regenerated after a change to the server's models or routes: openapi.yaml from them, then the
# panel's TypeScript types (labextension/src/api.gen.ts) from it; tests fail while either committed file is stale
api-types: | $(STAMP)
	$(BIN)/python -m nbtoolkit.server.openapi --write
	cd $(LAB) && $(WITH_VENV) jlpm api-types

# the browser tests drive Debian's Chromium (Playwright's own browser downloads are not used)
$(CHROMIUM):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium

# the Slurm tests' cluster programs (tests/slurm/cluster.py starts and ends them); after Chromium's
# install, as two apt-gets at once (`make -j`) would fight over dpkg's lock
$(SBATCH): | $(CHROMIUM)
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge

$(SKY_VENV)/.installed: $(SKY_LOCK) | $(UV)
	$(UV) venv --quiet --allow-existing --python $(BIN)/python $(SKY_VENV)
	$(UV) pip sync --quiet --python $(SKY_VENV)/bin/python --require-hashes --compile-bytecode $(SKY_LOCK)
	touch $@

$(FLOOR_VENV)/.installed: $(FLOOR_LOCK) | $(UV)
	$(UV) venv --quiet --allow-existing --python $(BIN)/python $(FLOOR_VENV)
	$(UV) pip sync --quiet --python $(FLOOR_VENV)/bin/python --require-hashes --compile-bytecode \
		--find-links $(TORCH_WHEELS) $(FLOOR_LOCK)
	touch $@

floor: $(FLOOR_VENV)/.installed

# every image's environment, built where missing or older than its lock (the same code as `rehearse --image-env`)
image-envs: lock-check $(PACKAGES_STAMP)
	$(BIN)/python -m nbtoolkit.rehearsal.image_envs build

# the real launches rehearsed in their images' packages, apart from `make test` (see image-envs)
test-images: install image-envs
	$(BIN)/python -m pytest tests/images

# llama.cpp's environment: the build tools first (the sdist builds against them, hashed like the rest), then every
# locked package (llama.cpp compiled here: CPU, no tests, examples, server or tools), then the converter from the
# same sdist (its hash checked against the lock) beside the environment: .venv-llama/llama.cpp
$(LLAMA_VENV)/.installed: $(LLAMA_LOCK) | $(UV)
	$(UV) venv --quiet --allow-existing --python $(BIN)/python $(LLAMA_VENV)
	$(UV) pip install --quiet --python $(LLAMA_VENV)/bin/python --require-hashes -c $(LLAMA_LOCK) \
		$$(sed -n 's/^\($(subst $() ,\|,$(LLAMA_BUILD_TOOLS))\)==\([^ ]*\).*/\1==\2/p' $(LLAMA_LOCK))
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=2 $(UV) pip sync --python $(LLAMA_VENV)/bin/python \
		--require-hashes --no-build-isolation --find-links $(TORCH_WHEELS) --compile-bytecode $(LLAMA_LOCK)
	rm -rf $(LLAMA_VENV)/sdist $(LLAMA_VENV)/llama.cpp
	$(BIN)/pip download --quiet --no-deps --no-binary :all: -d $(LLAMA_VENV)/sdist llama-cpp-python==$(LLAMA_VERSION)
	grep -q "sha256:$$(sha256sum $(LLAMA_VENV)/sdist/*.tar.gz | cut -d' ' -f1)" $(LLAMA_LOCK)
	mkdir $(LLAMA_VENV)/llama.cpp
	tar -xzf $(LLAMA_VENV)/sdist/*.tar.gz -C $(LLAMA_VENV)/llama.cpp --strip-components=3 \
		$(addprefix llama_cpp_python-$(LLAMA_VERSION)/vendor/llama.cpp/,convert_hf_to_gguf.py conversion gguf-py)
	rm -rf $(LLAMA_VENV)/sdist
	touch $@

llama-env: $(LLAMA_VENV)/.installed

# the GGUF export's tests, apart from `make test` (llama.cpp's environment is minutes to build)
test-gguf: install llama-env
	$(BIN)/python -m pytest tests/gguf

demo: install
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/nbtoolkit demo

# JupyterLab on the quickstart notebook (offline, bundled tiny model)
lab: install
	$(BIN)/jupyter lab notebooks/quickstart.ipynb $(if $(filter 0,$(shell id -u)),--allow-root)

# the house rules, first in `make test` (about 15 s): ruff's lint and format check, mypy on the core
# ([tool.mypy] files in pyproject.toml), and the panel's eslint, prettier and stylelint (`jlpm lint:check`).
# It needs only the locked packages and the panel's node packages, not the rest of the set-up
PY_SOURCES := nbtoolkit tests benchmarks tools
lint: $(PACKAGES_STAMP) $(NODE_STAMP)
	$(BIN)/ruff check $(PY_SOURCES)
	$(BIN)/ruff format --check $(PY_SOURCES)
	$(BIN)/mypy
	cd $(LAB) && $(WITH_VENV) jlpm lint:check

# the docs site (MkDocs Material, mkdocs.yml): built strict, so a broken link, a page missing from the nav or
# a reference page that no longer matches the code fails; `make docs` serves it at http://127.0.0.1:8000
# (NO_MKDOCS_2_WARNING: Material's banner about its successor, printed on every build); not --quiet: under it
# MkDocs counts no warnings, and strict fails on none
docs-build: | $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/docs

docs: | $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# everything the tests need, set up side by side (`make test` runs this with -j)
test-setup: install $(LAB_BUILT) $(CHROMIUM) $(SBATCH) $(SKY_VENV)/.installed $(FLOOR_VENV)/.installed

# The house rules (`lint`) run first, beside the rest of the set-up as soon as the locked and the node packages
# are in, and stop the run on a finding; the docs build strict once the set-up is done.
# The set-up is timed (its seconds in .venv/.setup-seconds, printed at the end). Two test workers, a
# file each at a time (a file's fixtures are built once); most tests wait on one training process,
# so two keep both cores busy, in a random order (its seed printed at the top) under the isolation guard
# (tests/isolation.py; docs/development.md). Browser tests run apart: Playwright's sync API cannot share
# pytest-jupyter's event loop
test: lock-check
	start=$$(date +%s) && $(MAKE) --no-print-directory -j4 lint test-setup && echo $$(( $$(date +%s) - start )) > $(SETUP_SECONDS)
	$(BIN)/python -m pip check
	$(MAKE) --no-print-directory docs-build
	cd $(LAB) && $(WITH_VENV) jlpm test
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=15 -p randomly --isolation
	$(BIN)/python -m pytest -p no:asyncio tests/ui
	@echo "set-up took $$(cat $(SETUP_SECONDS))s"

clean:
	rm -rf $(VENV) $(FLOOR_VENV) $(addprefix .venv-image-,$(IMAGE_NAMES)) build dist test-output $(LAB)/node_modules $(LAB)/lib nbtoolkit/labextension

# the example notebooks, executed in smoke mode and saved with their outputs (tests check they are current)
notebooks: install
	HF_HUB_OFFLINE=1 $(BIN)/python tools/execute_notebooks.py
