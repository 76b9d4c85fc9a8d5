# kvgate's front door. `make run` runs the main job, `make test` every test,
# `make bench` the benchmarks (never part of the tests), `make fuzz` the fuzz targets.
SHELL := /bin/bash
JOBS ?= $(shell nproc)
CMAKE_COMMON := -G Ninja

.PHONY: all bootstrap release asan fuzz-build fuzz run test check faults bench format check-format clean

PGO ?= 1

all: release

bootstrap:
	@scripts/bootstrap

build/asan/build.ninja: CMakeLists.txt
	cmake -S . -B build/asan $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=Debug -DKVGATE_SANITIZE=ON >/dev/null

# The libFuzzer targets (fuzz/, docs/fuzzing.md): clang, ASan and UBSan, their own build.
build/fuzz/build.ninja: fuzz/CMakeLists.txt
	cmake -S fuzz -B build/fuzz $(CMAKE_COMMON) -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null

fuzz-build: build/fuzz/build.ninja
	cmake --build build/fuzz -j $(JOBS)

# Each target for FUZZ_SECONDS (FUZZ_TARGETS: some of them), growing build/fuzz/corpus.
FUZZ_SECONDS ?= 60
fuzz: bootstrap fuzz-build
	scripts/fuzz long $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Profile-guided by default; PGO=0 for a plain -O3 build (scripts/build-release).
release:
	JOBS=$(JOBS) PGO=$(PGO) scripts/build-release kvgate

asan: build/asan/build.ninja
	cmake --build build/asan -j $(JOBS)

# The main job: see README.md. Builds once: the release build as it is configured, or a
# plain -O3 one on a fresh machine (the profile-guided build is `make release`).
run: bootstrap
	JOBS=$(JOBS) scripts/build-release --reuse kvgate
	scripts/run

# Every test, under AddressSanitizer and UndefinedBehaviorSanitizer, and a short fixed run
# of every fuzz target on its seed corpus. The fuzz targets' clang build runs beside ctest,
# niced (scripts/run-tests).
test: bootstrap asan build/fuzz/build.ninja
	@scripts/check-format
	@scripts/check-layers
	@scripts/check-no-rebuild build/asan
	JOBS=$(JOBS) scripts/run-tests

# The quick loop (docs/development.md): builds only the unit tests and runs them, under
# the same sanitizers and in the same build directory as `make test`.
#   make check                      every layer's unit tests (ctest label `unit`)
#   make check LAYER=gateway        one layer's (a layer with unit tests: kvgate_layer() in
#                                   CMakeLists.txt; gateway runs all its planes' tests)
#   make check LAYER=gateway FILTER='GatewayTest.Drain*'   some tests of one layer
check: bootstrap build/asan/build.ninja
ifneq ($(LAYER),)
	@layers=$$(cd build/asan && ctest -N -L unit | sed -n 's/.*: unit_//p'); \
	if ! grep -qx '$(LAYER)' <<<"$$layers"; then \
	  echo "make check: LAYER=$(LAYER) is not a layer with unit tests; one of:" $$layers >&2; exit 2; fi
	cmake --build build/asan -j $(JOBS) --target kvgate_$(LAYER)_tests
ifneq ($(FILTER),)
	cd build/asan && KVGATE_SOURCE_DIR=$(CURDIR) ./kvgate_$(LAYER)_tests --gtest_brief=1 \
	  --gtest_filter='$(FILTER)'
else
	cd build/asan && ctest --output-on-failure --timeout 600 -j $(JOBS) -R '^unit_$(LAYER)$$'
endif
else
	cmake --build build/asan -j $(JOBS) --target kvgate_unit_tests
	cd build/asan && ctest --output-on-failure --timeout 600 -j $(JOBS) -L unit
endif

# The fault matrix alone (docs/reliability.md); `make test` runs it too.
faults: asan
	cd build/asan && ctest --output-on-failure --timeout 600 -L faults

bench: bootstrap
	JOBS=$(JOBS) PGO=$(PGO) scripts/build-release all
	scripts/bench

format:
	@git ls-files '*.cc' '*.h' | xargs -r clang-format -i

check-format:
	@scripts/check-format

clean:
	rm -rf build
