# Front end for the CMake build. The two README commands are `make demo`
# and `make test`; both install missing Debian packages first.
BUILD    ?= build
JOBS     ?= $(shell nproc)
# `make demo` runs `ringkernel demo` (docs/cli.md); DEMO_ARGS passes
# options, e.g. make demo DEMO_ARGS="--duration 10 --sensors 64".
DEMO_ARGS ?= --duration 3
CMAKE    ?= cmake
FUZZ_SECONDS ?= 30
SOAK_SECONDS ?= 600
# Regression tests whose fixes have not landed carry the ctest label
# "pending" (tests/CMakeLists.txt); the suites skip them, test-pending
# runs them.
CTEST_SKIP ?= -LE pending

.PHONY: all deps build demo test test-pending soak pytest gpucheck-selftest pycompat mypy pybench pyasan asan tsan fuzz fuzz-build fuzz-long bench install clean format docs

all: build

deps:
	@tools/deps.sh

$(BUILD)/CMakeCache.txt:
	$(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/CMakeCache.txt
	$(CMAKE) --build $(BUILD) -j$(JOBS)

demo: build
	./$(BUILD)/tools/ringkernel/ringkernel demo $(DEMO_ARGS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) $(CTEST_SKIP)
	$(MAKE) pytest

test-pending: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) -L pending

# The reliability soak at full scale (docs/reliability.md): the same test
# CI runs for a few seconds, for SOAK_SECONDS (default 10 minutes).
soak: build
	RK_SOAK_SECONDS=$(SOAK_SECONDS) ./$(BUILD)/tests/test_runtime_soak

# The Python package (pip install . into $(BUILD)/pyvenv) and its tests.
pytest: deps
	tools/pyvenv.sh $(BUILD)
	RK_TEST_FAKE_CUDA=$(abspath $(BUILD))/tests/libfake_cuda.so RK_REQUIRE_JUPYTER=1 \
	  $(BUILD)/pyvenv/bin/python -m pytest -q -p no:cacheprovider python/tests

# tools/gpu-check.sh's own flow with no GPU (docs/cuda-robustness.md,
# "What ran on a GPU"): it builds a subset in build-gpu-sim, the Python
# package offline with the build venv's python, and runs them against the
# stand-in driver; every row it prints says "stand_in":true.
gpucheck-selftest: deps
	test -x $(BUILD)/pyvenv/bin/python || tools/pyvenv.sh $(BUILD)
	PYTHON=$(BUILD)/pyvenv/bin/python JOBS=$(JOBS) tools/gpu-check.sh --stand-in >/dev/null

# Type checks (docs/python.md, "Notebooks and typing"): mypy --strict over
# the package, the typed example and the example notebooks' code cells
# (tools/nb2py.py), then stubtest: the C extension's stub against the
# built module.
MYPY_FILES = python/ringkernel examples/python/typed_quickstart.py $(BUILD)/nbcheck
mypy: deps
	tools/pyvenv.sh $(BUILD)
	rm -rf $(BUILD)/nbcheck
	$(BUILD)/pyvenv/bin/python tools/nb2py.py $(BUILD)/nbcheck examples/notebooks/*.ipynb
	$(BUILD)/pyvenv/bin/python -m mypy --strict --cache-dir $(BUILD)/mypy-cache $(MYPY_FILES)
	$(BUILD)/pyvenv/bin/python -m mypy.stubtest ringkernel._core \
	  --allowlist python/stubtest-allowlist.txt --mypy-config-file pyproject.toml

# PyDotCompute 0.2.0's own tests of its public API, imports rewritten to
# ringkernel (python/compat/run_pydotcompute_tests.py fetches the sdist
# from PyPI, checksum pinned: needs the network the first time).
pycompat: deps
	tools/pyvenv.sh $(BUILD)
	$(BUILD)/pyvenv/bin/python python/compat/run_pydotcompute_tests.py --work $(BUILD)/pdc-compat

# The Python tests over an ASan+UBSan build of the extension and library.
pyasan: deps
	tools/pyasan.sh build-pyasan

# Python benchmarks against PyDotCompute in the same run (JSON lines).
pybench: deps
	tools/pyvenv.sh $(BUILD)
	$(BUILD)/pyvenv/bin/python bench/python/bench_python.py

# Sanitizer builds of the whole suite (what .ci/run runs).
asan: deps
	$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DRK_SANITIZE=address,undefined -DRK_BUILD_BENCH=OFF
	$(CMAKE) --build build-asan -j$(JOBS)
	ctest --test-dir build-asan --output-on-failure -j$(JOBS) $(CTEST_SKIP)

tsan: deps
	$(CMAKE) -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DRK_SANITIZE=thread -DRK_BUILD_BENCH=OFF
	$(CMAKE) --build build-tsan -j$(JOBS)
	ctest --test-dir build-tsan --output-on-failure -j$(JOBS) $(CTEST_SKIP)

# Each libFuzzer target for FUZZ_SECONDS (CI: 20 s each, 10 targets), starting
# from its committed corpus (copied, so the run does not grow the committed
# one). `make fuzz-long` runs each for FUZZ_RUNS executions instead (10^7 by
# default, hours in all; docs/testing.md).
FUZZ_RUNS ?= 10000000
FUZZ_OPTS ?= -max_total_time=$(FUZZ_SECONDS)

fuzz-build: deps
	CC=clang CXX=clang++ $(CMAKE) -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DRK_BUILD_FUZZ=ON -DRK_BUILD_TESTS=OFF -DRK_BUILD_BENCH=OFF -DRK_BUILD_EXAMPLES=OFF -DRK_BUILD_CLI=OFF
	$(CMAKE) --build build-fuzz -j$(JOBS)

fuzz: fuzz-build
	@set -e; for f in $$(find build-fuzz/fuzz -maxdepth 1 -name "fuzz_*" -type f -executable | sort); do \
	  n=$$(basename $$f); rm -rf build-fuzz/corpus-$$n; mkdir -p build-fuzz/corpus-$$n; \
	  cp -r fuzz/corpus/$$n/. build-fuzz/corpus-$$n/ 2>/dev/null || true; \
	  echo "fuzz: $$n ($(FUZZ_OPTS))"; \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 $$f $(FUZZ_OPTS) -print_final_stats=1 build-fuzz/corpus-$$n; \
	done

fuzz-long:
	$(MAKE) fuzz FUZZ_OPTS=-runs=$(FUZZ_RUNS)

# Benchmarks want an optimised build without sanitizers.
bench: deps
	$(CMAKE) -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DRK_BUILD_TESTS=OFF
	$(CMAKE) --build build-bench -j$(JOBS) --target run_bench
	$(MAKE) pybench BUILD=build-bench

# The API reference from the public headers' comments (docs/Doxyfile):
# build-docs/html/index.html. Any Doxygen warning, an undocumented public
# symbol included, fails the target; the warnings are in
# build-docs/warnings.log. First every relative link in README.md and
# docs/*.md must resolve (tools/check-links.sh).
docs: deps
	tools/check-links.sh
	@mkdir -p build-docs
	@rm -f build-docs/warnings.log
	doxygen docs/Doxyfile || { cat build-docs/warnings.log >&2; exit 1; }
	@if [ -s build-docs/warnings.log ]; then cat build-docs/warnings.log >&2; exit 1; fi
	@echo "docs: build-docs/html/index.html"

install: build
	$(CMAKE) --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cpp')

clean:
	rm -rf build build-asan build-tsan build-fuzz build-bench build-pyasan build-docs build-gpu build-gpu-sim
