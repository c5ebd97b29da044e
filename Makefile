# The two set-up commands (README): `make run` and `make test`. Both install what is missing,
# configure, build, then run. Everything else here is a convenience for developers.
BUILD_DIR  ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
GENERATOR  := $(if $(shell command -v ninja 2>/dev/null),Ninja,Unix Makefiles)
# One GPU shared by every test process: run GPU tests one at a time.
TEST_JOBS  ?= $(if $(shell nvidia-smi -L 2>/dev/null),1,$(JOBS))

.PHONY: all deps configure build test python-test run gpu-check memcheck-cuda1 bench install clean

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

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure --timeout 900 -j $(TEST_JOBS)
	@bash scripts/python-test.sh

# The Python package alone: pip-installs it (incrementally, build/python) and runs its tests.
python-test: deps
	@bash scripts/python-test.sh

run: build
	@$(BUILD_DIR)/cli/tessel info
	@$(BUILD_DIR)/cli/tessel bench --quick --no-record

gpu-check:
	@bash scripts/gpu-check.sh

# compute-sanitizer memcheck of every test binary with cuda:1 as the test device (two GPUs).
memcheck-cuda1:
	@GPU_CHECK_STEPS="build device1-memcheck" GPU_CHECK_LOGS=$(BUILD_DIR)/memcheck-cuda1 bash scripts/gpu-check.sh

bench: build
	@for b in $(BUILD_DIR)/bench/*_bench; do echo "== $$b"; $$b || exit 1; done

install: build
	@cmake --install $(BUILD_DIR) $(if $(PREFIX),--prefix $(PREFIX))

clean:
	@rm -rf $(BUILD_DIR)
