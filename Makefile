# Convenience wrapper around CMake: `make` builds into build/. `make test` runs every CPU test
# once, in the build that checks it best (tests/integration/CMakeLists.txt, labels): the unit
# tests, the timed shares and what only the plain build has in build/ (test-timing); the unit
# tests and every other test built with ASan+UBSan in build-asan/ (test-sanitized); the
# multi-threaded stress test and the daemon's soak built with ThreadSanitizer in build-tsan/;
# then each libFuzzer target for FUZZ_SECONDS (10, two at a time) in build-fuzz/.
# `make test-plain` and `make test-asan` run every test of their build. `make fuzz` runs the
# fuzz targets longer (FUZZ_SECONDS, default 600 each).
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_JOBS ?= 2
CMAKE ?= cmake
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: start all test test-plain test-timing test-asan test-sanitized test-tsan test-fuzz fuzz test-deps install clean deps

all: $(BUILD)/CMakeCache.txt
	$(CMAKE) --build $(BUILD) -j $(JOBS)

# make start: builds, then runs gpusliced in the foreground (on the real GPUs, or on the
# simulated GPU where there is no NVIDIA driver); DAEMON_ARGS are its options.
start: all
	$(BUILD)/bin/gpusliced --foreground $(DAEMON_ARGS)

$(BUILD)/CMakeCache.txt:
	@scripts/check-deps
	$(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

$(ASAN_BUILD)/CMakeCache.txt:
	$(CMAKE) -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGPUSLICE_SANITIZE=ON

test: test-timing test-sanitized test-tsan test-fuzz

test-plain: test-deps all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-timing: test-deps all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE behaviour

test-asan: test-deps $(ASAN_BUILD)/CMakeCache.txt
	$(CMAKE) --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)

test-sanitized: test-deps $(ASAN_BUILD)/CMakeCache.txt
	$(CMAKE) --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS) -LE timing

# clang with libFuzzer, ThreadSanitizer's runtime and kubectl: installed (Debian) when missing.
test-deps:
	@{ echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' | \
	   clang -x c -fsanitize=fuzzer -o /dev/null - && \
	   echo 'int main(void) { return 0; }' | gcc -x c -fsanitize=thread -o /dev/null - && \
	   command -v kubectl; } >/dev/null 2>&1 || scripts/install-deps

$(TSAN_BUILD)/CMakeCache.txt:
	@scripts/check-deps
	$(CMAKE) -S . -B $(TSAN_BUILD) -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DGPUSLICE_TSAN=ON

# The interposer, the simulator, the CLI, the stress program and the daemon (under a soak)
# with TSan; any report fails.
test-tsan: test-deps $(TSAN_BUILD)/CMakeCache.txt
	$(CMAKE) --build $(TSAN_BUILD) -j $(JOBS) --target gpuslice gpuslice_cli sim_cuda sim_nvml \
	    tsan_stress $$(grep -q '^GPUSLICE_DAEMON:BOOL=ON' $(TSAN_BUILD)/CMakeCache.txt && \
	    echo gpusliced mem_probe)
	cd $(TSAN_BUILD) && ctest --output-on-failure -L tsan

$(FUZZ_BUILD)/CMakeCache.txt:
	$(CMAKE) -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DGPUSLICE_FUZZ=ON -DGPUSLICE_TESTS=OFF -DGPUSLICE_SIM=OFF

test-fuzz: test-deps $(FUZZ_BUILD)/CMakeCache.txt
	$(CMAKE) --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_all
	tests/fuzz/run.sh $(FUZZ_BUILD) $(or $(FUZZ_SECONDS),10) $(FUZZ_JOBS)

fuzz: test-deps $(FUZZ_BUILD)/CMakeCache.txt
	$(CMAKE) --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_all
	tests/fuzz/run.sh $(FUZZ_BUILD) $(or $(FUZZ_SECONDS),600) $(FUZZ_JOBS)

# make install [PREFIX=DIR] [DESTDIR=DIR]: installs the build under PREFIX (default: the prefix
# the build was configured with, /usr/local unless CMAKE_INSTALL_PREFIX was given), staged
# under DESTDIR when that is set (cmake --install reads it from the environment).
install: all
	$(CMAKE) --install $(BUILD) $(if $(PREFIX),--prefix "$(PREFIX)")

deps:
	scripts/install-deps

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
