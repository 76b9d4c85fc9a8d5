# kvgate's front door. `make run` runs the main job, `make test` every test,
# `make bench` the benchmarks (never part of the tests).
SHELL := /bin/bash
JOBS ?= $(shell nproc)
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := true
export CCACHE_SLOPPINESS := time_macros
CMAKE_COMMON := -G Ninja -DCMAKE_CXX_COMPILER_LAUNCHER=ccache

.PHONY: all bootstrap release asan run test bench format check-format clean

all: release

bootstrap:
	@scripts/bootstrap

build/release/build.ninja: CMakeLists.txt
	cmake -S . -B build/release $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=Release -DKVGATE_BENCH=ON >/dev/null

build/asan/build.ninja: CMakeLists.txt
	cmake -S . -B build/asan $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=Debug -DKVGATE_SANITIZE=ON >/dev/null

release: build/release/build.ninja
	cmake --build build/release -j $(JOBS) --target kvgate

asan: build/asan/build.ninja
	cmake --build build/asan -j $(JOBS)

# The main job: see README.md.
run: bootstrap release
	scripts/run

# Every test, under AddressSanitizer and UndefinedBehaviorSanitizer.
test: bootstrap asan
	@scripts/check-format
	cd build/asan && ctest --output-on-failure --timeout 600 -j $(JOBS)

bench: bootstrap build/release/build.ninja
	cmake --build build/release -j $(JOBS)
	scripts/bench

format:
	@git ls-files '*.cc' '*.h' | xargs -r clang-format -i

check-format:
	@scripts/check-format

clean:
	rm -rf build
