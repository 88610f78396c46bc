# promptprism — two commands on a fresh machine: `make run`, `make test`.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The compose file's server is ClickHouse 24.8 LTS; chdb 2.1.1 embeds 24.8.4.
# A second venv holds it and runs the tests marked `clickhouse` (migrations,
# every named query and panel, the server store behind the HTTP fixture) again.
VENV_CH248 ?= .venv-ch248
BIN_CH248 := $(VENV_CH248)/bin
STAMP_CH248 := $(VENV_CH248)/.installed
CH248_PYTEST_ARGS ?= -m clickhouse
# Debian's Chromium drives the browser tests (Playwright cannot download its own).
CHROMIUM ?= /usr/bin/chromium
PYTEST_ARGS ?=

.PHONY: run test test-ch248 browser bench clean

# The compiled OTLP walker and block checks are built by the install: a changed .pyx rebuilds them.
COMPILED := collector/_slotted.h collector/otlp/_walk.pyx collector/write/_blocks.pyx collector/write/_strings.pyx collector/write/_memory.pyx collector/write/_documents.pyx
$(STAMP): pyproject.toml setup.py $(COMPILED)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

# chdb 4.x installs its engine as chdb-core into the same chdb/ folder: remove
# both before installing 2.1.1 (its own wheel, no dependencies), or the files mix.
# The compiled modules are built in the source tree by the $(VENV) install only
# (the same Python, so the same files): `make test` installs both venvs at once,
# and two builds at once would write the same .c and .so files.
$(STAMP_CH248): pyproject.toml setup.py $(COMPILED)
	test -x $(BIN_CH248)/python || $(PYTHON) -m venv $(VENV_CH248)
	$(BIN_CH248)/python -m pip install --quiet --upgrade pip
	PROMPTPRISM_BUILD_EXTENSIONS=0 $(BIN_CH248)/python -m pip install --quiet -e '.[dev]'
	$(BIN_CH248)/python -m pip uninstall --quiet -y chdb chdb-core
	$(BIN_CH248)/python -m pip install --quiet --no-deps chdb==2.1.1
	$(BIN_CH248)/python -c "import chdb; assert chdb.engine_version.startswith('24.8.'), chdb.engine_version"
	touch $@

# Install Chromium when we can (root + apt); otherwise the browser tests say
# why they skip (and fail under CI=true).
browser:
	@if [ ! -x $(CHROMIUM) ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's chromium for the browser tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "chromium not found at $(CHROMIUM) and cannot install it (not root): browser tests will skip"; \
	  fi; \
	fi

run: $(STAMP)
	$(BIN)/promptprism collector

# The two venvs and the browser are set up at the same time (a sub-make with
# -j3, whatever -j `make test` was given). The two passes run at the same time
# (each mostly uses one of the machine's cores); the 24.8 pass's output is shown
# when both are done. Each pass takes its test ports from its own range, below
# the kernel's ephemeral ports (tests/support.py). Either failing fails the target.
CH248_LOG := .pytest-ch248.log
CH248_PORTS ?= 20000-29999
MAIN_PORTS ?= 10000-19999
test:
	@$(MAKE) --no-print-directory -j3 --output-sync=target $(STAMP) $(STAMP_CH248) browser
	@echo "ClickHouse 24.8 pass (.venv-ch248, $(CH248_PYTEST_ARGS)) running beside this one; its output follows this pass's"
	@PROMPTPRISM_TEST_PORTS=$(CH248_PORTS) $(BIN_CH248)/python -m pytest -p no:cacheprovider \
	    $(CH248_PYTEST_ARGS) $(PYTEST_ARGS) >$(CH248_LOG) 2>&1 & ch248=$$!; \
	trap 'kill $$ch248 2>/dev/null' INT TERM; \
	PROMPTPRISM_TEST_PORTS=$(MAIN_PORTS) $(BIN)/python -m pytest $(PYTEST_ARGS); main_pass=$$?; \
	wait $$ch248; ch248_pass=$$?; \
	echo; echo "==== ClickHouse 24.8 pass ($(BIN_CH248)/python -m pytest $(CH248_PYTEST_ARGS) $(PYTEST_ARGS))"; \
	cat $(CH248_LOG); rm -f $(CH248_LOG); \
	test $$main_pass = 0 && test $$ch248_pass = 0

# Only the ClickHouse 24.8 pass (e.g. while porting a query or a migration).
test-ch248: $(STAMP_CH248)
	$(BIN_CH248)/python -m pytest $(CH248_PYTEST_ARGS) $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python benchmarks/render.py
	$(BIN)/python benchmarks/ingest.py
	$(BIN)/python benchmarks/read_load.py

clean:
	rm -rf $(VENV) $(VENV_CH248) promptprism-data .pytest_cache $(CH248_LOG)
