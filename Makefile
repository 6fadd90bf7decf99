# ctxweb: `make run` serves the dashboard, `make test` runs every test. Both install what they need.
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 8000
PYTHON ?= python3

.PHONY: run test check lint fmt worker beat install install-dev install-agents migrate clean

$(VENV)/.installed-run: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	touch $@

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt $(VENV)/.installed-run
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	touch $@

# The coding agents the tests run through the proxy (tests/ctxweb/proxy/test_agents.py): the
# releases pinned in agents/package-lock.json, from the npm registry into agents/node_modules
# (never globally). The stamp lives there too: removing node_modules installs them again.
# Each ships its native binary as an optional dependency (Claude Code's postinstall copies it
# in place, offline): the two --version calls fail the install when a binary did not land.
agents/node_modules/.installed-agents: agents/package.json agents/package-lock.json
	npm ci --prefix agents --no-audit --no-fund
	agents/node_modules/.bin/claude --version
	agents/node_modules/.bin/codex --version
	touch $@

install: $(VENV)/.installed-run
install-agents: agents/node_modules/.installed-agents
install-dev: $(VENV)/.installed-dev install-agents
install-dev: install-agents-more

# Two more agents for tests/ctxweb/proxy/test_agents_more.py, pinned: OpenCode from the npm
# registry into agents/opencode/node_modules (its binary is an optional dependency per platform),
# aider from PyPI into a virtualenv of its own, agents/aider/.venv (its pins are not ours).
.PHONY: install-agents-more
agents/opencode/node_modules/.installed-opencode: agents/opencode/package.json agents/opencode/package-lock.json
	npm ci --prefix agents/opencode --no-audit --no-fund
	touch $@

agents/aider/.venv/.installed-aider: agents/aider/requirements.txt
	test -x agents/aider/.venv/bin/python || $(PYTHON) -m venv agents/aider/.venv
	agents/aider/.venv/bin/python -m pip install -q --disable-pip-version-check -r agents/aider/requirements.txt
	touch $@

install-agents-more: agents/opencode/node_modules/.installed-opencode agents/aider/.venv/.installed-aider

migrate: install
	$(PY) manage.py migrate --noinput

# A key for an existing project, from a fresh clone too: `make key PROJECT=demo` (ROLE=operator
# for an operator's key). The key is alone on the last line.
.PHONY: key
key: migrate
	@test -n "$(PROJECT)" || { echo "usage: make key PROJECT=<name> [ROLE=operator]"; exit 2; }
	@$(PY) manage.py create_api_key --project "$(PROJECT)" --role "$(or $(ROLE),ingest)"

# `make run` is for a person at a laptop: debug pages on unless the environment says otherwise.
# Only there: tests, workers and servers started any other way run with DEBUG off.
run: export DEBUG ?= 1
run: export CTXWEB_SCHEDULER ?= 1
run: migrate
	$(PY) manage.py seed_demo --if-empty
	$(PY) manage.py runserver 127.0.0.1:$(PORT)

worker: install
	$(VENV)/bin/celery -A ctxweb worker --loglevel=info --concurrency=$${CELERY_CONCURRENCY:-2}

# Periodic tasks (retention, reaping stale operations) in production: run exactly one.
beat: install
	$(VENV)/bin/celery -A ctxweb beat --loglevel=info --schedule=$${CTXWEB_DATA_DIR:-data}/celerybeat-schedule

# `--dist loadscope`: a module's tests go to one worker, so a module's server (a module-scoped
# fixture) starts once, not once per worker (measured back to back, -n 2: tests/ctxweb/proxy
# 6:05 against 7:13 with xdist's default; capture, contexts and api 5:46 against 5:52).
# The production shape: every database, channel-layer and task test again on PostgreSQL with
# channels-redis and real Celery workers. Under CI=true it must run; elsewhere it runs when the
# services answer. Two pytest workers (each its own PostgreSQL test database and Redis database,
# ctxweb/settings/test.py), then the tests marked `alone` in one process: the fault tests kill the
# database's connections every 150 ms and need a request to finish between two kills, which two
# busy workers on two cores did not leave them. Tests marked `embedded_server` test only a server
# of their own in the embedded shape (its own SQLite, no Redis): the production pass would run
# the very same thing again, so it leaves them out.
PROD_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
PROD_REDIS_URL    ?= redis://127.0.0.1:6379/15

test: install-dev
	@echo "== embedded shape: SQLite, in-memory channel layer, in-process tasks =="
	$(PY) -m pytest -n 2 --dist loadscope -m "not alone" $(PYTEST_ARGS)
	$(PY) -m pytest -m alone $(PYTEST_ARGS)
	@if $(PY) -m tests.services "$(PROD_DATABASE_URL)" "$(PROD_REDIS_URL)"; then \
	  echo "== production shape: PostgreSQL, channels-redis, Celery workers on Redis =="; \
	  DATABASE_URL="$(PROD_DATABASE_URL)" REDIS_URL="$(PROD_REDIS_URL)" \
	    $(PY) -m pytest -n 2 --dist loadscope tests/ctxweb -m "not browser and not agents and not alone and not embedded_server" $(PYTEST_ARGS) && \
	  DATABASE_URL="$(PROD_DATABASE_URL)" REDIS_URL="$(PROD_REDIS_URL)" \
	    $(PY) -m pytest tests/ctxweb -m "alone" $(PYTEST_ARGS); \
	elif [ "$$CI" = "true" ]; then \
	  echo "production shape: services unreachable under CI=true"; exit 1; \
	else \
	  echo "== production shape skipped: PostgreSQL or Redis unreachable =="; \
	fi

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy compaction ctxweb bench
	$(VENV)/bin/lint-imports
	$(PY) manage.py makemigrations --check --dry-run

fmt: install-dev
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

check: lint test

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache
