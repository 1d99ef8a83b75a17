# SPDX-License-Identifier: Apache-2.0
# Kiln: `make demo` and `make test` work from a fresh clone (they create .venv themselves).
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
BUILD := build
ASAN_BUILD := build-asan
FUZZ_BUILD := build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_HARNESSES ?= fuzz_load fuzz_builder
# per-input limits: a slow or memory-hungry input is a finding (tests/fuzz/README.md)
FUZZ_OPTS ?= -rss_limit_mb=2048 -timeout=60 -max_len=65536 -print_final_stats=1
JOBS ?= $(shell nproc)
GEN := $(shell command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")
STAMP_VENV := $(VENV)/.kiln-venv-stamp
STAMP_TOOLS := $(VENV)/.kiln-skbuild-stamp
STAMP_PKG := $(VENV)/.kiln-pkg-skbuild-stamp

.PHONY: all venv build test test-c test-asan test-py test-wheel demo bench fuzz clean

all: build

# torch is pinned: 2.13.0 is the CPU wheel on disk. Never install an unpinned torch.
$(STAMP_VENV):
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade "pip>=23" "setuptools>=64" wheel
	$(VPY) -m pip install -q torch==2.13.0 numpy pytest expecttest hypothesis cmake ninja
	touch $@

# The build backend (pyproject.toml): the wheel and the editable install both go through it.
$(STAMP_TOOLS): $(STAMP_VENV)
	$(VPY) -m pip install -q "scikit-build-core>=0.11"
	touch $@

venv: $(STAMP_TOOLS)

# The same CMakeLists.txt as the wheel: Torch found from the venv's torch (-DPython_EXECUTABLE),
# the libraries copied into ./torch_kiln (KILN_INPLACE), then an editable install that only
# links the source package and its entry points into the venv (no second build).
build: $(STAMP_TOOLS)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake -S . -B $(BUILD) -G "$(GEN)" -DCMAKE_BUILD_TYPE=Release \
	  -DKILN_BUILD_TORCH=ON -DPython_EXECUTABLE=$(CURDIR)/$(VPY) >/dev/null
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake --build $(BUILD) -j $(JOBS)
	@test -f $(STAMP_PKG) || { TORCH_DEVICE_BACKEND_AUTOLOAD=0 $(VPY) -m pip install -q --no-build-isolation --no-deps -e . && touch $(STAMP_PKG); }

test-c: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-asan: $(STAMP_VENV)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake -S . -B $(ASAN_BUILD) -G "$(GEN)" -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON >/dev/null
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

test-py: build
	KILN_LIB=$(CURDIR)/torch_kiln/libkiln.so KILN_BUILD_DIR=$(CURDIR)/$(BUILD) $(VPY) -m pytest -q tests/python

# The wheel end to end (a full CMake build of libkiln + the shim, minutes): pip wheel, install
# into a fresh venv that borrows the dev venv's torch, import from another directory.
test-wheel: $(STAMP_TOOLS)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VPY) -m pytest -q -s tests/wheel

test: test-c test-asan test-py

# Time-boxed libFuzzer runs (clang; not part of `make test`, which replays the corpora instead):
# each harness for FUZZ_SECONDS, new inputs kept in $(FUZZ_BUILD)/corpus/<harness>, crashes in
# $(FUZZ_BUILD)/artifacts/<harness>/.
fuzz: $(STAMP_VENV)
	@command -v clang >/dev/null || { echo "make fuzz needs clang and libFuzzer (apt-get install clang libclang-rt-dev)"; exit 1; }
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G "$(GEN)" \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_FUZZ=ON >/dev/null
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(FUZZ_HARNESSES)
	@for h in $(FUZZ_HARNESSES); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$h $(FUZZ_BUILD)/artifacts/$$h || exit 1; \
	  dict=; test -f tests/fuzz/$$h.dict && dict=-dict=tests/fuzz/$$h.dict; \
	  regr=; test -d tests/fuzz/regressions/$$h && regr=tests/fuzz/regressions/$$h; \
	  echo "== $$h: $(FUZZ_SECONDS) s"; \
	  KILN_NUM_THREADS=1 $(FUZZ_BUILD)/$$h -max_total_time=$(FUZZ_SECONDS) $(FUZZ_OPTS) $$dict \
	    -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$h/ $(FUZZ_BUILD)/corpus/$$h tests/fuzz/corpus/$$h $$regr \
	    || exit 1; \
	done

demo: build
	$(VPY) demo/demo.py

bench: build
	$(VPY) bench/run.py

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) build-wheel torch_kiln/*.so torch_kiln/_build_info.py torch_kiln/include
