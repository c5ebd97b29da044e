# The two set-up commands (README): `make run` and `make test`. Both install what is missing,
# configure, build, then run. Everything else here is a convenience for developers.
BUILD_DIR  ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
GENERATOR  := $(if $(shell command -v ninja 2>/dev/null),Ninja,Unix Makefiles)
# One GPU shared by every test process: run GPU tests one at a time.
TEST_JOBS  ?= $(if $(shell nvidia-smi -L 2>/dev/null),1,$(JOBS))

PYTHON     ?= python3

.PHONY: all deps configure build test python-test docs cpp-examples run gpu-check memcheck-cuda1 bench install clean wheel wheel-test

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@if [ -f $(BUILD_DIR)/CMakeCache.txt ]; then \
	  cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS) >/dev/null; \
	else \
	  cmake -S . -B $(BUILD_DIR) -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS); \
	fi

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# Every test: C++ (ctest), Python (tests/python, which runs the examples of the docs and the
# README as doctests), the C++ examples of the docs, and the docs build itself.
test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure --timeout 900 -j $(TEST_JOBS)
	@bash scripts/python-test.sh
	@bash docs/examples/run_cpp_examples.sh $(BUILD_DIR)
	@$(MAKE) --no-print-directory docs

# The Python package alone: pip-installs it (incrementally, build/python) and runs its tests.
python-test: deps
	@bash scripts/python-test.sh

# The documentation (Sphinx, warnings are errors) into $(BUILD_DIR)/docs/index.html, from a fresh
# environment (-E: the .pyi stubs the API pages come from are not tracked as dependencies). It needs
# Sphinx, not the compiled package: the API reference is read from python/tessel/*.pyi.
docs: deps
	@$(PYTHON) -m sphinx -E -W --keep-going -q -b html docs $(BUILD_DIR)/docs
	@echo "docs: $(BUILD_DIR)/docs/index.html"

# The C++ examples of the docs (docs/examples/cpp), built against an install of $(BUILD_DIR).
cpp-examples: build
	@bash docs/examples/run_cpp_examples.sh $(BUILD_DIR)

run: build
	@$(BUILD_DIR)/cli/tessel info
	@$(BUILD_DIR)/cli/tessel bench --quick --no-record

gpu-check:
	@bash scripts/gpu-check.sh

# compute-sanitizer memcheck of every test binary with cuda:1 as the test device (two GPUs).
memcheck-cuda1:
	@GPU_CHECK_STEPS="build device1-memcheck" GPU_CHECK_LOGS=$(BUILD_DIR)/memcheck-cuda1 bash scripts/gpu-check.sh

# The binary wheel (docs/guide/installation.rst): dist/tessel-*.whl, SASS for sm_75..sm_120 plus PTX,
# MPI and NCCL opened on use, CUDA libraries from NVIDIA's wheels. TESSEL_WHEEL_CUDA_ARCHS=86-real
# builds a quick one-architecture wheel. Not part of `make test`: all architectures take ~40 min on 2 cores.
wheel:
	@JOBS=$(JOBS) bash scripts/build-wheel.sh

# The wheel in a fresh venv with the CUDA toolkit hidden: `tessel info`, import time, the CPU
# fallback, a missing-library message, and a subset of tests/python (scripts/test-wheel.sh --help).
wheel-test:
	@bash scripts/test-wheel.sh $(WHEEL_TEST_ARGS)

bench: build
	@for b in $(BUILD_DIR)/bench/*_bench; do echo "== $$b"; $$b || exit 1; done

install: build
	@cmake --install $(BUILD_DIR) $(if $(PREFIX),--prefix $(PREFIX))

clean:
	@rm -rf $(BUILD_DIR)
