# decode-kit: `make report` (main job) and `make test` set everything up on a fresh Debian machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SESSION ?= notebooks/sample
OUT ?= report
PYTEST_ARGS ?=

.PHONY: install system-deps report-deps assets lint test report bench clean

# The venv is (re)built when missing or when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@touch $@

install: $(VENV)/.installed

# System programs, installed with apt only when running as root and missing: npm (vendored
# report assets) for the report; for the tests also the OpenSSH server (tests start their own
# sshd), Chromium (exported HTML is checked in it) and ripgrep.
report-deps:
	@bash tools/system_deps.sh report

system-deps:
	@bash tools/system_deps.sh test

# Offline report assets (require.js, the widget renderer) vendored from npm at install time.
assets: install report-deps
	@bash tools/vendor_assets.sh

lint: install
	$(VENV)/bin/ruff check .

test: install system-deps assets lint
	$(PY) -m pytest $(PYTEST_ARGS)

report: install assets
	$(VENV)/bin/kit report --session $(SESSION) --out $(OUT)

bench: install system-deps
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) $(OUT) .kit-cache
	rm -rf "$${KIT_CACHE_DIR:-$${XDG_CACHE_HOME:-$$HOME/.cache}/decode-kit}/profile"  # kit.profile's table cache
