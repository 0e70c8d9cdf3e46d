# Convenience wrapper around CMake: `make` builds into build/, `make test` runs
# every CPU test, then the same suite built with ASan+UBSan in build-asan/.
BUILD ?= build
ASAN_BUILD ?= build-asan
CMAKE ?= cmake
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all test test-plain test-asan install clean deps

all: $(BUILD)/CMakeCache.txt
	$(CMAKE) --build $(BUILD) -j $(JOBS)

$(BUILD)/CMakeCache.txt:
	@scripts/check-deps
	$(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

$(ASAN_BUILD)/CMakeCache.txt:
	$(CMAKE) -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGPUSLICE_SANITIZE=ON

test: test-plain test-asan

test-plain: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: $(ASAN_BUILD)/CMakeCache.txt
	$(CMAKE) --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)

install: all
	$(CMAKE) --install $(BUILD)

deps:
	scripts/install-deps

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
