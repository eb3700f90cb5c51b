# Conveyor — `make run` starts a dev node, `make test` runs every test.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8080
PYTEST_ARGS ?=

.PHONY: run test test-fast lint bench bench-peers clean venv migrate proto

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt
	@set -e; if [ ! -x $(PY) ]; then \
	  python=$$(scripts/find-python); \
	  echo "Creating $(VENV) with $$python ($$($$python --version))"; \
	  $$python -m venv $(VENV); \
	fi
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	@# Make the project importable from the venv (examples, SDK users) without a build step.
	$(PY) -c "import sysconfig, pathlib; pathlib.Path(sysconfig.get_paths()['purelib'], 'conveyor-project.pth').write_text('$(CURDIR)\n')"
	@touch $@

migrate: venv
	$(PY) manage.py migrate --noinput

run: venv
	$(PY) manage.py conveyord --dev --host $(HOST) --port $(PORT)

test: venv
	scripts/test-setup
	$(VENV)/bin/lint-imports
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: venv
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

bench: venv
	$(PY) bench/broker_bench.py
	$(PY) bench/dispatch_bench.py
	$(PY) bench/webhook_bench.py

# Celery and procrastinate in a venv of their own, then the side-by-side run.
bench-peers: venv bench/.peers/.installed
	$(PY) bench/compare.py $(COMPARE_ARGS)

bench/.peers/.installed: bench/requirements-peers.txt
	@set -e; if [ ! -x bench/.peers/bin/python ]; then $$(scripts/find-python) -m venv bench/.peers; fi
	bench/.peers/bin/pip install --quiet -r bench/requirements-peers.txt
	@touch $@

# The Connect wire's generated code, committed: run after editing conveyor/v1/*.proto
# (tests/unit/test_proto_codegen.py fails while the committed code is stale).
PROTOS := conveyor/v1/task.proto conveyor/v1/service.proto
proto: venv
	$(PY) -m grpc_tools.protoc -I. --python_out=. --pyi_out=. \
	  --plugin=protoc-gen-connectrpc=$(VENV)/bin/protoc-gen-connectrpc \
	  --connectrpc_out=. --connectrpc_opt=protobuf=google $(PROTOS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) var .pytest_cache
