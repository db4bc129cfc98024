# opscope: the two set-up commands (make demo, make test) and the developer targets.
# Every target that builds first installs missing Debian packages (scripts/install-deps.sh).
#
#   make test             the normal build and its whole suite (the README's test command)
#   make test-sanitizers  every test again under AddressSanitizer + UBSan, then the concurrency tests under
#                         ThreadSanitizer (test-asan, test-tsan); .ci/run runs make test and then these
#   make fuzz             the libFuzzer targets of tests/fuzz (clang), each for FUZZ_RUNS inputs or FUZZ_SECONDS
#   make ci               what .ci/run does: all of the above, each stage timed (scripts/ci-times.sh)

# bash: the fuzz target reads PIPESTATUS
SHELL := /bin/bash

BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
# make fuzz: each libFuzzer target for FUZZ_RUNS inputs (CI), or FUZZ_SECONDS seconds each when set.
FUZZ_RUNS    ?= 20000
FUZZ_SECONDS ?=
# The runs of CI are repeatable (a fixed seed); timed runs explore (seed 0: a new one each time).
FUZZ_SEED    ?= $(if $(FUZZ_SECONDS),0,1)
FUZZ_TARGETS := fuzz_config fuzz_fault_spec fuzz_tensor_row fuzz_result_json
CMAKE_ARGS ?=
# The ASan+UBSan build compiles with clang: 2-3x as fast as g++ under ASan (see the top CMakeLists.txt).
# ASAN_CC= builds it with the default compiler instead. The ThreadSanitizer build stays with g++: clang 14's
# shared TSan runtime (which a hook preloaded into mpirun needs) crashes in libstdc++'s start-up.
ASAN_CC ?= -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
JOBS       ?= $(shell nproc)
CTEST_ARGS ?= --output-on-failure -j $(JOBS)

# The concurrency tests, run under ThreadSanitizer: the runtime's queues, notifiers, memory and stress
# tests (all of test_runtime), the hook in multi-threaded programs (capture, auto-compare and fallback on
# several queues, a crash under the hook), the profiler (its writer thread beside the recording threads,
# signals, schedules, the demos), memcheck (threads, errors, the demos), the collective library and the
# flight recorder (its watchdog, host functions, the rank consistency exchange and the program's threads, in mpirun jobs with every
# planted fault). Only the programs these need
# are built in $(TSAN_BUILD). The hook's fork test runs here too (it hung until the runtime refused its calls in a
# forked child instead of waiting for the parent's workers). Left out: memcheck's valgrind comparison (valgrind, started from the TSan-built
# test, saw one of leaky_host's 100 leaked blocks as still reachable: a pointer left on its stack) and the
# single-threaded whole-training tests of other modules. All of these run in the other two stages.
TSAN_TARGETS ?= test_runtime test_hooks test_capture test_autocompare test_fallback test_profiler test_memcheck test_mlucl \
                mlucl_probe test_mlucl_faults test_flight_recorder
TSAN_TESTS   ?= ^(Mlucl|MluclFaults|FlightRecorder|FlightRecorderConsistency|FlightRecorderNan|ShutdownDeathTest|ErrorTest|DeviceTest|MemoryTest|PinnedMemoryTest|PointerAttributesTest|MemcpyTest|MemsetTest|QueueTest|KernelTest|StickyErrorTest|NotifierTest|TimestampTest|ActivityTest|StressTest|EnvironmentTest|All/MalformedEnvironmentTest|CaptureThreads|Profiler[A-Za-z]*|Profiler/ProfilerSignals|Memcheck(Errors|Threads|Launcher|Demos)|Memcheck/MemcheckErrors)\.|^HookProcess\.(ACrashStillFlushesTheTools|AForkedChildRunsUntracedAndTheParentsCaptureIsComplete|RegionsSwitchAToolOnForTheCallsTheyCover|ThreadsSharingAQueueInPlaceGiveNoFalseFindings)$$|^(AutoCompare|Fallback)\.InPlaceOpsOnSeveralQueues$$

.PHONY: all deps build build-asan build-tsan build-fuzz demo install test test-asan test-tsan test-sanitizers \
        fuzz ci bench format format-check clean

all: build

deps:
	@scripts/install-deps.sh

# configure + build, Release-with-debug-info by default
build: deps
	cmake -S . -B $(BUILD) -G Ninja -DOPSCOPE_BUILD_TESTS=ON $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja $(ASAN_CC) -DOPSCOPE_SANITIZE=address,undefined -DOPSCOPE_BUILD_TESTS=ON \
	  -DOPSCOPE_BUILD_BENCH=OFF $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)

build-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DOPSCOPE_SANITIZE=thread -DOPSCOPE_BUILD_TESTS=ON $(CMAKE_ARGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target $(TSAN_TARGETS)

# The libFuzzer targets (tests/fuzz), built alone with clang, ASan and UBSan.
build-fuzz: deps
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DOPSCOPE_FUZZ=ON \
	  -DOPSCOPE_BUILD_TESTS=OFF -DOPSCOPE_BUILD_BENCH=OFF $(CMAKE_ARGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS)

# Runs each target from its seed corpus (tests/fuzz/corpus/<target>, read only: what it finds goes to
# $(FUZZ_BUILD)/corpus/<target>); a crash stops with the input saved as $(FUZZ_BUILD)/crash-<target>-*.
fuzz: build-fuzz
	@set -e; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	  limit=$$( [ -n "$(FUZZ_SECONDS)" ] && echo -max_total_time=$(FUZZ_SECONDS) || echo -runs=$(FUZZ_RUNS)); \
	  echo "== fuzz: $$t $$limit"; \
	  $(FUZZ_BUILD)/bin/$$t $$limit -seed=$(FUZZ_SEED) -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
	    -artifact_prefix=$(FUZZ_BUILD)/crash-$$t- -print_final_stats=1 \
	    $(FUZZ_BUILD)/corpus/$$t tests/fuzz/corpus/$${t#fuzz_} 2>&1 | grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss|==[0-9]+==ERROR|SUMMARY)' ; \
	  test $${PIPESTATUS[0]} -eq 0; \
	done

demo: build
	@scripts/demo.sh $(BUILD)

# cmake --install of the normal build: opscope, op-replay and trace-check in $(PREFIX)/bin, the libraries in
# $(PREFIX)/lib, the headers, a CMake package and a pkg-config file, and the Python packages opscope and
# torch_mlu (under $(PREFIX)/lib/python3.X/dist-packages, which Debian's python3 reads for /usr/local).
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

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
	@scripts/ci-times.sh test test-asan test-tsan fuzz

bench: build
	$(BUILD)/bin/bench_runtime

format:
	git ls-files '*.cpp' '*.h' | xargs clang-format -i

format-check:
	git ls-files '*.cpp' '*.h' | xargs clang-format --dry-run -Werror

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
