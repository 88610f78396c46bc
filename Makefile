# promptprism — two commands on a fresh machine: `make run`, `make test`.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Debian's Chromium drives the browser tests (Playwright cannot download its own).
CHROMIUM ?= /usr/bin/chromium
PYTEST_ARGS ?=

.PHONY: run test browser bench clean

# The compiled OTLP walker and block checks are built by the install: a changed .pyx rebuilds them.
$(STAMP): pyproject.toml setup.py collector/otlp/_walk.pyx collector/write/_blocks.pyx collector/write/_strings.pyx
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
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

test: $(STAMP) browser
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python benchmarks/render.py
	$(BIN)/python benchmarks/ingest.py
	$(BIN)/python benchmarks/read_load.py

clean:
	rm -rf $(VENV) promptprism-data .pytest_cache
