# Two entry points (see README): `make demo` and `make test`.  Both build .venv first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STORE ?= demo.db
export PIP_CACHE_DIR ?= $(HOME)/.cache/pip
export UV_CACHE_DIR ?= $(HOME)/.cache/uv
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install demo test lint

install: $(VENV)/.installed

# uv installs the pinned set (constraints.txt) in seconds and, unlike pip here, caches it.
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q uv==0.13.9
	$(BIN)/uv pip install -q --python $(BIN)/python -c constraints.txt -e '.[models,cassandra,langchain,mcp,dev]'
	touch $@

demo: install
	rm -f $(STORE) $(STORE)-wal $(STORE)-shm
	$(BIN)/graphstore --store $(STORE) ingest samples/python-tutorial/pages --root samples/python-tutorial/pages
	$(BIN)/graphstore --store $(STORE) search "how do I clean up resources when an exception happens"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

CASSANDRA_PORT ?= 9042
TEST_NODE_DIR ?= $(HOME)/.cache/graphstore/test-node
NODE := $(BIN)/python -m graphstore.testing.local_cassandra

# Starts a local Cassandra node with empty data (--fresh: schema tombstones left by earlier
# runs slow every CREATE and DROP) whose schema changes skip flushing (--fast-schema: no test
# kills it) unless GRAPHSTORE_TEST_CASSANDRA names one already running.
# The cluster tests (tests/test_cassandra_cluster.py) start and stop their own three nodes
# on 127.0.0.2-4 with free ports, so they never meet that node.
test: lint
	@if [ -n "$$GRAPHSTORE_TEST_CASSANDRA" ]; then \
		$(BIN)/pytest; \
	else \
		$(NODE) start --fresh --fast-schema --dir $(TEST_NODE_DIR) --port $(CASSANDRA_PORT) || exit 1; \
		GRAPHSTORE_TEST_CASSANDRA=127.0.0.1:$(CASSANDRA_PORT) $(BIN)/pytest; status=$$?; \
		$(NODE) stop --dir $(TEST_NODE_DIR); exit $$status; \
	fi
