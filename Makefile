# make demo  - set up and start the dashboard, a worker and sample tasks (embedded Redis unless
#              WORQR_REDIS_URL is set)
# make test  - the whole test suite (installs what it needs first)
# make bench - the benchmarks: worqr beside RQ, Celery, Dramatiq, arq and huey (with the bare wake-up
#              floors), pickup while draining, scale and memory, Sidekiq's terms (500,000 tasks, with and
#              without 1 ms of latency), the features to come, the goals (PASS/FAIL), then the others
# make profile - py-spy flame graphs of the producer and of a worker draining, and round-trip counts
# make chaos - the chaos soak: 20,000 tasks over 4 workers under faults (CHAOS_ARGS: manage.py chaos --help)
# make screenshots - the dashboard's screenshots in docs/screenshots/, made by its browser test
# make django6 - only the Django 6.1 pass of make test (Python 3.13 in a Debian trixie root)
# make build - the package: dist/worqr-<version>.tar.gz and the wheel dist/worqr-<version>-py3-none-any.whl
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000

.PHONY: demo test bench profile build lint deps browser clean chaos screenshots django6

$(VENV)/.installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $@

deps: $(VENV)/.installed

# Debian's chromium for the browser tests (Playwright's own browser download does not work here).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing: sudo apt-get install chromium"; exit 1; fi; }
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; fi; true; }

# The tests where a cluster changes what happens run a second time on a real Redis Cluster of
# 3 masters + 3 replicas (tests/cluster_servers.py): routing and connections (cluster, enqueue),
# pub/sub wake-ups and control messages on the nodes (worker, crash, dashboard-live), reads and
# writes across many queues' slots (queue page, metrics, workflows, batches, outbox, schedules and
# their ticks), the limit scripts and the task controls' keys and holds (and encrypted payloads
# through a worker). Tests of the layers above one queue's scripts (HTTP API, dashboard views,
# Tasks backend, locks, lifecycle, limits and schedules through workers) run once.
CLUSTER_TESTS ?= tests/test_cluster.py tests/test_enqueue.py tests/test_worker.py tests/test_worker_crash.py \
	tests/test_dashboard_live.py tests/test_queue_page.py tests/test_metrics.py tests/test_workflows.py \
	tests/test_workflows_workers.py tests/test_batches.py tests/test_outbox.py tests/test_schedules.py \
	tests/test_schedule_ticks.py tests/test_limits.py tests/test_controls.py tests/test_controls_workers.py \
	tests/test_encryption.py tests/test_encryption_workers.py

# The Tasks-backend (with the framework's own backend tests), enqueue, worker, API, dashboard
# views, admin, checks, schedules and package tests run a third time on Python 3.13 + Django 6.1,
# in a Debian trixie root that scripts/trixie.sh builds once (debootstrap; Debian's packages and
# PyPI only) into TRIXIE_ROOT and reuses. It needs root, as make test does for chromium, and like
# chromium it is the machine's, shared by every checkout (a Python 3.13 to test with, not a part of
# this one).
TRIXIE_ROOT ?= /var/cache/worqr/trixie
DJANGO6_TESTS ?= tests/test_tasks_backend.py tests/test_conformance_rq.py \
	tests/test_conformance_db.py tests/test_conformance_django.py tests/test_enqueue.py tests/test_worker.py \
	tests/test_api.py tests/test_dashboard_views.py tests/test_api_tokens.py tests/test_setup.py \
	tests/test_schedules.py tests/test_package.py

# Each pytest session prints its 15 slowest tests at the end.
DURATIONS := --durations=15

# The suite, the cluster pass and the Django 6.1 pass run on TEST_WORKERS pytest processes
# (pytest-xdist), each with its own redis-server (or Redis Cluster), SQLite file and PostgreSQL
# database; a test file stays on one process (--dist loadfile), so its module fixtures (a Daphne, a
# browser) start once. Most long tests wait on processes, restarts and faults rather than compute,
# so the default is two processes per core (at most 8); TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); n=$$((n * 2)); [ $$n -gt 8 ] && n=8; echo $$n)
XDIST := $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --max-worker-restart=1)

# schemathesis's generated cases collapse into one test per run under pytest-xdist (a fraction of
# the requests), so its file runs in a process of its own.
SERIAL_TESTS := tests/test_api_schema.py

test: deps browser lint
	$(PY) -m pytest -q $(DURATIONS) $(XDIST) $(addprefix --ignore=,$(SERIAL_TESTS))
	$(PY) -m pytest -q $(SERIAL_TESTS)
	WORQR_TEST_REDIS=cluster $(PY) -m pytest -q $(DURATIONS) $(XDIST) $(CLUSTER_TESTS)
	./scripts/trixie.sh $(TRIXIE_ROOT) -q $(DURATIONS) $(XDIST) $(DJANGO6_TESTS)

django6:
	./scripts/trixie.sh $(TRIXIE_ROOT) -q $(XDIST) $(DJANGO6_TESTS)

# The README's screenshots of the dashboard (docs/screenshots/), made by its browser test.
screenshots: deps browser
	WORQR_SCREENSHOTS=1 $(PY) -m pytest -q tests/test_dashboard_search_bulk_browser.py tests/test_charts_browser.py

demo: deps
	PY=$(PY) PORT=$(PORT) ./scripts/demo.sh

# bench/run.sh makes bench/.venv (the peers' libraries); goals.py reads the results of this run only,
# and runs before the other benchmarks so that one of them failing cannot hide it.
BENCH_PY := bench/.venv/bin/python
BENCH_SINCE := $(shell date +%s)

bench: deps
	PY=$(PY) ./bench/run.sh $(BENCH_ARGS)
	$(BENCH_PY) bench/busy.py $(BUSY_ARGS)
	$(PY) bench/scale.py $(SCALE_ARGS)
	$(BENCH_PY) bench/sidekiq_terms.py $(TERMS_ARGS)
	$(PY) bench/future.py $(FUTURE_ARGS)
	$(PY) bench/goals.py --since $(BENCH_SINCE)
	$(PY) bench/schedules.py $(SCHEDULE_ARGS)
	$(PY) bench/tracing.py $(TRACING_ARGS)
	$(PY) bench/batches.py $(BATCH_ARGS)
	$(PY) bench/limits.py $(LIMITS_ARGS)
	$(PY) bench/cluster.py $(CLUSTER_BENCH_ARGS)

profile: deps
	PY=$(abspath $(PY)) ./bench/profile.sh

chaos: deps
	$(PY) manage.py migrate -v0
	nice $(PY) manage.py chaos $(CHAOS_ARGS)

# The sdist, then the wheel built from it (the way pip builds from an sdist); uv makes the
# isolated build environment quickly.
build: deps
	$(PY) -m build --installer uv --outdir dist .

lint: deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# var/trixie: where older checkouts built the Debian root (now /var/cache/worqr/trixie, kept)
clean:
	rm -rf $(VENV) var/*.sqlite3 test-artifacts dist build var/conformance var/trixie
