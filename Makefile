# The two commands a user needs: `make demo` and `make test`. Everything else
# is for developers. Each target installs what it needs first.
BUILD       ?= build
TEST_BUILD  ?= build-test
JOBS        ?= $(shell nproc)
GENERATOR   := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
CTEST_ARGS  ?=
FUZZ_SECONDS ?= 60

.PHONY: all deps build image demo test bench fuzz format lint clean

all: build

deps:
	@scripts/install-deps.sh

build:
	@scripts/install-deps.sh --demo
	@cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release -DGPUOP_WERROR=OFF -DGPUOP_BUILD_TESTS=OFF -DGPUOP_BUILD_BENCH=OFF >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# gpuop's one image (localhost/gpuop:<version>), from the Release build.
image: build
	@scripts/build-image.sh $(BUILD)

demo: build
	@scripts/demo.sh $(BUILD)

test: deps
	@cmake -S . -B $(TEST_BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Debug -DGPUOP_SANITIZE=ON -DGPUOP_WERROR=ON -DGPUOP_BUILD_BENCH=OFF >/dev/null
	@cmake --build $(TEST_BUILD) -j $(JOBS)
	@cd $(TEST_BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

bench: deps build
	@cmake -S . -B $(BUILD) -DGPUOP_BUILD_BENCH=ON >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	@scripts/bench.sh $(BUILD)

# Every parser's libFuzzer target (clang, in build-fuzz), FUZZ_SECONDS each;
# `make test` runs them for a few seconds (ctest label fuzz).
fuzz: deps
	@FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh

format:
	@git ls-files '*.cc' '*.h' | xargs clang-format -i

lint: deps
	@cmake -S . -B $(TEST_BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Debug >/dev/null
	@git ls-files 'src/*.cc' 'sim/*.cc' | xargs clang-tidy -p $(TEST_BUILD) --quiet
	@scripts/thread_safety.py $(TEST_BUILD)

clean:
	rm -rf $(BUILD) $(TEST_BUILD) build-fuzz
