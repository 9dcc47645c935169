# decode-kit: `make report` (main job) and `make test` set everything up on a fresh Debian machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SESSION ?= notebooks/sample
OUT ?= report
PDF ?=
PYTEST_ARGS ?=

.PHONY: install system-deps report-deps assets engines lint test test-fast report bench clean

# The venv is (re)built when missing or when pyproject.toml changes. pip prints what it collects and
# a progress bar per download (the first install fetches pandas, pyarrow, matplotlib, jupyter...).
$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || { echo "make: creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@echo "make: pip installs decode-kit and its dependencies into $(VENV) (about a minute the first time)"
	$(PY) -m pip install --disable-pip-version-check --progress-bar on -e '.[test]'
	@touch $@

install: $(VENV)/.installed

# System programs, installed with apt only when running as root and missing: npm (vendored
# report assets) for the report, and Chromium for `make report PDF=1`; for the tests also the
# OpenSSH server (tests start their own sshd), Chromium (exported HTML is checked in it) and ripgrep.
report-deps:
	@bash tools/system_deps.sh $(if $(PDF),pdf,report)

system-deps:
	@bash tools/system_deps.sh test

# Offline report assets (require.js, the widget renderer) vendored from npm at install time.
assets: install report-deps
	@bash tools/vendor_assets.sh

lint: install
	$(VENV)/bin/ruff check .

# The published SGLang and vLLM wheels whose source the tests read (about 874 MB, once per
# checkout, into .kit-cache/engines/): said before it starts, with pip's progress per wheel.
engines: install
	@$(PY) tools/fetch_engines.py

test: install system-deps assets lint engines
	$(PY) -m pytest $(PYTEST_ARGS)

# Everything but the tests marked slow (tests/conftest.py lists them): about 3 minutes on 2 cores.
test-fast: install assets lint
	$(PY) -m pytest -m "not slow" -q $(PYTEST_ARGS)

# `make report PDF=1` also writes the whole report as one PDF, $(OUT)/report.pdf (headless Chromium).
report: install assets
	$(VENV)/bin/kit report --session $(SESSION) --out $(OUT) $(if $(PDF),--pdf)

bench: install system-deps
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) $(OUT) .kit-cache
	rm -rf "$${KIT_CACHE_DIR:-$${XDG_CACHE_HOME:-$$HOME/.cache}/decode-kit}/profile"  # kit.profile's table cache
