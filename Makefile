# ctxweb: `make run` serves the dashboard, `make test` runs every test. Both install what they need.
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 8000
PYTHON ?= python3
# `make run` is for a person at a laptop: debug pages on unless the environment says otherwise.
export DEBUG ?= 1

.PHONY: run test check lint fmt worker install install-dev migrate clean

$(VENV)/.installed-run: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	touch $@

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt $(VENV)/.installed-run
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed-run
install-dev: $(VENV)/.installed-dev

migrate: install
	$(PY) manage.py migrate --noinput

run: migrate
	$(PY) manage.py seed_demo --if-empty
	$(PY) manage.py runserver 127.0.0.1:$(PORT)

worker: install
	$(VENV)/bin/celery -A ctxweb worker --loglevel=info --concurrency=$${CELERY_CONCURRENCY:-2}

test: install-dev
	$(PY) -m pytest -p no:randomly $(PYTEST_ARGS)

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy compaction ctxweb
	$(VENV)/bin/lint-imports

fmt: install-dev
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

check: lint test

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache
