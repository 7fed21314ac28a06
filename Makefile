# The two commands of the README:
#   make demo   set everything up, start the webhook on embedded defaults and run the scripted demo
#   make test   set everything up and run the linters, the type checker and the whole test suite
# Everything installs from requirements/dev.lock with hashes; Debian packages and helm are fetched when missing.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LOCK := requirements/dev.lock
STAMP := $(VENV)/.installed-$(shell sha256sum $(LOCK) pyproject.toml | sha256sum | cut -c1-16)
# chromium (with a font to draw text) runs the evidence report's browser tests, driven by Playwright (dev extra).
APT_PACKAGES := docker-registry curl skopeo gpg gpgv sq sqv chromium fonts-dejavu-core
# checkov (the chart tests' Kubernetes scanner) pins packaging<24, which the project's hatchling cannot use:
# it gets a virtual environment of its own, from its own hashed lock.
CHECKOV := .tools/checkov/bin/checkov

.PHONY: setup demo test lint typecheck pytest bench lock clean

setup: $(STAMP) .tools/helm $(CHECKOV) system-packages

$(STAMP): $(LOCK) pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r $(LOCK)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	rm -f $(VENV)/.installed-* && touch $@

.tools/helm: scripts/fetch_helm.py $(STAMP)
	$(BIN)/python scripts/fetch_helm.py

$(CHECKOV): requirements/checkov.lock
	rm -rf .tools/checkov
	$(PYTHON) -m venv .tools/checkov
	.tools/checkov/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps \
		-r requirements/checkov.lock
	touch $@

system-packages:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# make demo DEMO_PORT=8443 DEMO_FLAGS=--keep-running: a port of your choice (0: a free one), webhook left running.
DEMO_PORT ?= 0
DEMO_FLAGS ?=
demo: setup
	$(BIN)/python -m trtguard.demo --port $(DEMO_PORT) $(DEMO_FLAGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: setup
	$(BIN)/pytest -q

test: lint typecheck pytest

bench: setup
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Regenerate the hashed lock after changing pyproject.toml (needs network access to PyPI and `uv`).
LOCK_FLAGS := --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28
lock:
	uv pip compile pyproject.toml --extra dev --extra onnx --extra otel --extra bench --extra report $(LOCK_FLAGS) -o $(LOCK)
	uv pip compile pyproject.toml $(LOCK_FLAGS) -o requirements/runtime.lock
	echo "hatchling==1.29.0" | uv pip compile - $(LOCK_FLAGS) -o requirements/build.lock
	echo "checkov==3.3.30" | uv pip compile - $(LOCK_FLAGS) -o requirements/checkov.lock

clean:
	rm -rf $(VENV) .tools .mypy_cache .ruff_cache .pytest_cache
