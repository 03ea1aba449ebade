# The README's commands. CMake does the building; this file only names the jobs.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
# `make -jN` runs N jobs (read from MAKEFLAGS in the recipes); otherwise one per core.
JOBS       ?= $(or $(patsubst -j%,%,$(filter -j%,$(MAKEFLAGS))),$(shell nproc 2>/dev/null || echo 2))
CMAKE_ARGS ?=

.PHONY: all deps test test-asan test-tsan bench demo install clean

all: deps $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS)

deps:
	@sh scripts/install-deps.sh

$(BUILD)/Makefile:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

test: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

$(ASAN_BUILD)/Makefile:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON -DKILN_NATIVE=ON \
		-DKILN_TEST_CACHE=$(abspath $(BUILD))/test-cache $(CMAKE_ARGS)

test-asan: deps $(ASAN_BUILD)/Makefile
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS)

# Data races between the host thread and the stream worker (ThreadSanitizer, a few suites).
$(TSAN_BUILD)/Makefile:
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_TSAN=ON \
		-DKILN_TEST_CACHE=$(abspath $(BUILD))/test-cache $(CMAKE_ARGS)

test-tsan: deps $(TSAN_BUILD)/Makefile
	cmake --build $(TSAN_BUILD) --target tsan_tests -j $(JOBS)
	cd $(TSAN_BUILD) && TSAN_OPTIONS=halt_on_error=1:allocator_may_return_null=1 \
		ctest --output-on-failure -L tsan -j $(JOBS)

bench: all
	cmake --build $(BUILD) --target benchmarks -j $(JOBS)
	sh bench/run.sh $(BUILD)

# The main job: a small GPT learns to add 2-digit numbers on the CPU (kiln train adder).
demo: all
	./$(BUILD)/kiln train adder

install: all
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
