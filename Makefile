# The two entry points of the README: `make demo` and `make check`.
# Both install missing Debian packages, configure, build and run.
BUILD ?= build
PY := /usr/bin/python3
JOBS ?= $(shell nproc)
# ccache (when present) keys on paths relative to the checkout, so a fresh
# clone elsewhere reuses what an earlier build compiled.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1

.PHONY: deps configure build check demo asan clean

deps:
	@scripts/install-deps.sh

configure: deps
	@test -f $(BUILD)/build.ninja || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: configure
	cmake --build $(BUILD) -j $(JOBS)

check: build
	(cd $(BUILD) && ctest --output-on-failure -j $(JOBS)) || \
	  { scripts/failed-tests.sh $(BUILD); exit 1; }
	$(MAKE) asan

# The bad-input tests once more under AddressSanitizer and UBSan.
asan: deps
	@test -f build-asan/build.ninja || cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCLEAVE_ASAN=ON -DCLEAVE_CUDA=OFF
	cmake --build build-asan -j $(JOBS) --target cleave-compile cleave-opt cleave-run cleave-checkpoint
	(cd build-asan && ctest --output-on-failure -L bad-input) || \
	  { scripts/failed-tests.sh build-asan; exit 1; }

demo: build
	scripts/demo.sh $(BUILD)

clean:
	rm -rf $(BUILD) build-asan
