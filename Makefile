# opscope: the two set-up commands (make demo, make test) and the developer targets.
# Every target that builds first installs missing Debian packages (scripts/install-deps.sh).

BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
CMAKE_ARGS ?=
JOBS       ?= $(shell nproc)
CTEST_ARGS ?= --output-on-failure -j $(JOBS)

.PHONY: all deps build demo test test-fast test-asan test-tsan bench format format-check clean

all: build

deps:
	@scripts/install-deps.sh

# configure + build, Release-with-debug-info by default
build: deps
	cmake -S . -B $(BUILD) -G Ninja -DOPSCOPE_BUILD_TESTS=ON $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	@scripts/demo.sh $(BUILD)

# The whole suite: the normal build, then again under AddressSanitizer + UBSan.
test: test-fast test-asan

test-fast: build
	cd $(BUILD) && ctest $(CTEST_ARGS)

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DOPSCOPE_SANITIZE=address,undefined -DOPSCOPE_BUILD_TESTS=ON $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest $(CTEST_ARGS)

# ThreadSanitizer run (not part of make test: run it before landing concurrency changes).
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DOPSCOPE_SANITIZE=thread -DOPSCOPE_BUILD_TESTS=ON $(CMAKE_ARGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && ctest $(CTEST_ARGS)

bench: build
	$(BUILD)/bin/bench_runtime

format:
	git ls-files '*.cpp' '*.h' | xargs clang-format -i

format-check:
	git ls-files '*.cpp' '*.h' | xargs clang-format --dry-run -Werror

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
