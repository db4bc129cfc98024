# opscope: the two set-up commands (make demo, make test) and the developer targets.
# Every target that builds first installs missing Debian packages (scripts/install-deps.sh).
#
#   make test             the normal build and its whole suite (the README's test command)
#   make test-sanitizers  every test again under AddressSanitizer + UBSan, then the concurrency tests under
#                         ThreadSanitizer (test-asan, test-tsan); .ci/run runs make test and then these
#   make ci               what .ci/run does: all of the above, each stage timed (scripts/ci-times.sh)

BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
CMAKE_ARGS ?=
JOBS       ?= $(shell nproc)
CTEST_ARGS ?= --output-on-failure -j $(JOBS)

# The concurrency tests, run under ThreadSanitizer: the runtime's queues, notifiers, memory and stress
# tests (all of test_runtime), the hook in multi-threaded programs (capture, auto-compare and fallback on
# several queues, a crash under the hook), the profiler (its writer thread beside the recording threads,
# signals, schedules, the demos) and memcheck (threads, errors, the demos). Only the programs these need
# are built in $(TSAN_BUILD). Left out: the hook's fork test (it hangs under ThreadSanitizer; the cause,
# TSan's limits on a fork of a multi-threaded process or the hook's at-fork handling, is not known), memcheck's valgrind comparison (valgrind, started from the TSan-built
# test, saw one of leaky_host's 100 leaked blocks as still reachable: a pointer left on its stack) and the
# single-threaded whole-training tests of other modules. All of these run in the other two stages.
TSAN_TARGETS ?= test_runtime test_hooks test_capture test_autocompare test_fallback test_profiler test_memcheck
TSAN_TESTS   ?= ^(ShutdownDeathTest|ErrorTest|DeviceTest|MemoryTest|PinnedMemoryTest|PointerAttributesTest|MemcpyTest|MemsetTest|QueueTest|KernelTest|StickyErrorTest|NotifierTest|TimestampTest|ActivityTest|StressTest|EnvironmentTest|All/MalformedEnvironmentTest|CaptureThreads|Profiler[A-Za-z]*|Profiler/ProfilerSignals|Memcheck(Errors|Threads|Launcher|Demos)|Memcheck/MemcheckErrors)\.|^HookProcess\.ACrashStillFlushesTheTools$$|^(AutoCompare|Fallback)\.InPlaceOpsOnSeveralQueues$$

.PHONY: all deps build build-asan build-tsan demo test test-asan test-tsan test-sanitizers ci \
        bench format format-check clean

all: build

deps:
	@scripts/install-deps.sh

# configure + build, Release-with-debug-info by default
build: deps
	cmake -S . -B $(BUILD) -G Ninja -DOPSCOPE_BUILD_TESTS=ON $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DOPSCOPE_SANITIZE=address,undefined -DOPSCOPE_BUILD_TESTS=ON $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)

build-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DOPSCOPE_SANITIZE=thread -DOPSCOPE_BUILD_TESTS=ON $(CMAKE_ARGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target $(TSAN_TARGETS)

demo: build
	@scripts/demo.sh $(BUILD)

# The README's test command: the normal build and its whole suite.
test: build
	cd $(BUILD) && ctest $(CTEST_ARGS)

# Every test again under AddressSanitizer + UBSan.
test-asan: build-asan
	cd $(ASAN_BUILD) && ctest $(CTEST_ARGS)

# The concurrency tests under ThreadSanitizer.
test-tsan: build-tsan
	cd $(TSAN_BUILD) && ctest $(CTEST_ARGS) -R '$(TSAN_TESTS)'

test-sanitizers: test-asan test-tsan

ci:
	@scripts/ci-times.sh

bench: build
	$(BUILD)/bin/bench_runtime

format:
	git ls-files '*.cpp' '*.h' | xargs clang-format -i

format-check:
	git ls-files '*.cpp' '*.h' | xargs clang-format --dry-run -Werror

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
