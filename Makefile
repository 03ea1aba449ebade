# The README's commands. CMake does the building; this file only names the jobs.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
CLANG_BUILD ?= build-clang
FUZZ_BUILD ?= build-fuzz
INSTALL_BUILD ?= build-install
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
# `make -jN` runs N jobs (read from MAKEFLAGS in the recipes); otherwise one per core.
JOBS       ?= $(or $(patsubst -j%,%,$(filter -j%,$(MAKEFLAGS))),$(shell nproc 2>/dev/null || echo 2))
CMAKE_ARGS ?=

.PHONY: all deps test test-asan test-tsan test-clang fuzz bench demo install clean

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

# Everything built with clang (`CC=clang make` works too), and the suites where the two compilers
# could round differently or warn differently.
$(CLANG_BUILD)/Makefile:
	@sh scripts/install-deps.sh clang
	CC=clang cmake -S . -B $(CLANG_BUILD) -DCMAKE_BUILD_TYPE=Release \
		-DKILN_TEST_CACHE=$(abspath $(BUILD))/test-cache $(CMAKE_ARGS)

test-clang: deps $(CLANG_BUILD)/Makefile
	cmake --build $(CLANG_BUILD) -j $(JOBS)
	cd $(CLANG_BUILD) && ctest --output-on-failure -j $(JOBS) \
		-R '^(test_fused|test_elementwise|test_tokenizer|test_cache|test_thread_count|cli_smoke)$$'

# libFuzzer (clang) on each loader for FUZZ_SECONDS (docs/fuzzing.md); FUZZ_TARGETS picks some.
$(FUZZ_BUILD)/Makefile:
	@sh scripts/install-deps.sh clang libclang-rt-14-dev llvm
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DKILN_FUZZ=ON $(CMAKE_ARGS)

fuzz: $(FUZZ_BUILD)/Makefile
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets
	sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

bench: all
	cmake --build $(BUILD) --target benchmarks -j $(JOBS)
	sh bench/run.sh $(BUILD)

# The main job: a small GPT learns to add 2-digit numbers on the CPU (kiln train adder).
demo: all
	./$(BUILD)/kiln train adder

# Installed artefacts are built apart, portable: for KILN_ARCH (CMake's default: x86-64-v3 on
# x86-64; `make install KILN_ARCH=x86-64-v2`), not -march=native as the in-tree build that
# `make test` checks.
install: deps
	cmake -S . -B $(INSTALL_BUILD) -DCMAKE_BUILD_TYPE=Release -DKILN_NATIVE=OFF -DKILN_TESTS=OFF \
		$(if $(KILN_ARCH),-DKILN_ARCH=$(KILN_ARCH)) $(CMAKE_ARGS)
	cmake --build $(INSTALL_BUILD) -j $(JOBS)
	cmake --install $(INSTALL_BUILD) $(if $(PREFIX),--prefix $(PREFIX))

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(CLANG_BUILD) $(FUZZ_BUILD) $(INSTALL_BUILD)
