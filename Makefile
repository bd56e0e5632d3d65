# Two commands on a fresh machine (README "Quick start" says exactly what each needs):
#   make run    create .venv, install, migrate + seed the embedded database, serve HTTP
#   make test   create .venv, install, install the services the tests need
#               (.ci/install-services.sh: PostgreSQL, redis-server, npm; root needed,
#               else it stops naming what is missing), run the whole test suite: the
#               formatter, linter and type checker (make lint), the published tool contract check, the MCP conformance suite against the HTTP server
#               (.ci/conformance), then pytest
#               (which also drives the pinned MCP Inspector CLI from .ci/inspector, the
#               MCP reference servers pinned in .ci/reference-servers, and headless
#               chromium with the MCP Apps host bridge pinned in .ci/apps)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# make run installs the server alone; make test (and the other targets) the test tools too.
SERVER_STAMP := $(VENV)/.server-stamp

.PHONY: run test install bench lint mutations screenshots

install: $(STAMP)

# pip's own progress (each package as it is collected, downloaded and installed) stays on:
# a first install on a fresh machine takes minutes, and a silent terminal looks hung.
$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "make: installing ticket-server, its pinned dependencies and the test tools into $(VENV) (the first time takes a few minutes; pip shows each package)" >&2
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -c constraints.txt -e '.[test]'
	@touch $(STAMP) $(SERVER_STAMP)
	@echo "make: installed into $(VENV)" >&2

$(SERVER_STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "make: installing ticket-server and its pinned dependencies into $(VENV) (the first time takes a minute or two; pip shows each package)" >&2
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -c constraints.txt -e .
	@touch $(SERVER_STAMP)
	@echo "make: installed into $(VENV)" >&2

run: $(SERVER_STAMP)
	$(BIN)/ticket-server db upgrade
	$(BIN)/ticket-server db seed --if-empty
	$(BIN)/ticket-server callers bootstrap
	$(BIN)/ticket-server serve --transport http

# The agent-framework environments (tests/frameworks/) install in the background while
# the contract check, the conformance suite and the Inspector install run: a cold install
# is minutes of waiting on the package index, which then costs pytest nothing.
test: $(STAMP)
	bash .ci/install-services.sh
	@mkdir -p .cache; \
	bash .ci/frameworks/install.sh all "$$($(BIN)/python -c 'import sys; print(sys._base_executable)')" \
		>.cache/frameworks-install.log 2>&1 & frameworks=$$!; \
	status=0; \
	$(MAKE) --no-print-directory lint && $(BIN)/ticket-server tools check && bash .ci/conformance/ticket-server.sh && bash .ci/inspector/install.sh && bash .ci/apps/install.sh && bash .ci/reference-servers/install.sh || status=$$?; \
	wait $$frameworks || { cat .cache/frameworks-install.log >&2; echo "make test: installing the agent frameworks failed" >&2; exit 1; }; \
	exit $$status
	$(BIN)/python -m pytest -n 2 --dist loadfile

# The formatter and the linter (ruff) and the type checker (mypy, strict on ticket_server/),
# each failing on a finding; `make test` runs this first. `ruff format .` and
# `ruff check --fix .` repair most findings.
lint: $(STAMP)
	$(BIN)/ruff format --check --quiet .
	$(BIN)/ruff check --quiet .
	$(BIN)/mypy

# Benchmarks (bench/README.md): by hand, never in CI; about 30 minutes, more the first
# time (the 1M-ticket data sets are generated once into .cache/bench/).
bench: $(STAMP)
	bash .ci/install-services.sh bench
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[bench]'
	$(BIN)/python -m bench

# Deliberate breakage (bench/mutations/): each mutation of mutations.toml applied in a
# scratch copy of the tree, its tests run, caught / survived printed and REPORT.md
# rewritten. By hand, never in CI; about 20 minutes.
mutations: $(STAMP)
	$(BIN)/python -m bench.mutations

# The MCP Apps views' pictures in docs/ (README "MCP Apps"): SUP-4412's ticket card and
# the billing queue's board, rendered by headless chromium in the browser test's host page.
screenshots: $(STAMP)
	bash .ci/install-services.sh
	$(BIN)/python -m tests.tools.apps.screenshots
