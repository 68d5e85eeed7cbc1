#!/usr/bin/env bash
# make demo: migrate, create a demo staff user, start a worker and the dashboard (Daphne), and
# enqueue sample tasks. Uses the embedded Redis in var/ unless WORQR_REDIS_URL is set.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
PORT=${PORT:-8000}
mkdir -p var
export DJANGO_SETTINGS_MODULE=worqr_site.settings

# The embedded Redis outlives its users (like a database server); the demo stops it on exit
# if it was not running before (asked first: saving the demo user below already reaches Redis,
# as the dashboard closes the sockets of a changed user).
STOP_REDIS=0
if [ -z "${WORQR_REDIS_URL:-}" ] && [ "$($PY manage.py embedded_redis status)" != "running" ]; then
  STOP_REDIS=1
fi
WORKER= TRICKLE= WEB=
stop_all() {
  for pid in $TRICKLE $WEB $WORKER; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in $TRICKLE $WEB $WORKER; do wait "$pid" 2>/dev/null || true; done
  if [ "$STOP_REDIS" = 1 ]; then echo "Embedded Redis: $($PY manage.py embedded_redis stop)"; fi
}
trap stop_all EXIT
# Ctrl-C (SIGINT to the group; background processes ignore it) ends the wait for the server at
# once: stop_all then stops the server, the worker and the trickle.
trap 'exit 130' INT
trap 'exit 143' TERM
$PY manage.py migrate --noinput >/dev/null
$PY manage.py collectstatic --noinput >/dev/null
PASSWORD=$($PY -c "import secrets; print(secrets.token_urlsafe(9))")
$PY manage.py shell -v 0 -c "
from django.contrib.auth import get_user_model
u, _ = get_user_model().objects.get_or_create(username='demo')
u.is_staff = u.is_superuser = True
u.set_password('$PASSWORD')
u.save()
"
if [ -z "${WORQR_REDIS_URL:-}" ]; then
  echo "Embedded Redis: $($PY manage.py embedded_redis start)"
fi

# The worker (with the demo's schedules: sample/demo_settings.py) writes to a log in var/; its
# start-up lines are shown once it is ready, then the sample tasks go in, and the demo's address
# and password come last, so they stay on screen (the server's lines go to its log too).
LOGS=${WORQR_VAR_DIR:-var}
mkdir -p "$LOGS"
DJANGO_SETTINGS_MODULE=sample.demo_settings $PY manage.py worker default emails reports notifications \
  --concurrency 4 --name demo-worker >"$LOGS/demo-worker.log" 2>&1 &
WORKER=$!
for _ in $(seq 1 600); do
  if grep -q "serving" "$LOGS/demo-worker.log" 2>/dev/null; then break; fi
  if ! kill -0 "$WORKER" 2>/dev/null; then cat "$LOGS/demo-worker.log"; echo "demo: the worker exited"; exit 1; fi
  sleep 0.2
done
cat "$LOGS/demo-worker.log"

# Sample tasks: a first round that puts something on every page, then a trickle (sample/demo.py).
$PY -m sample.demo --once
$PY -m sample.demo --trickle >"$LOGS/demo-trickle.log" 2>&1 &
TRICKLE=$!

# The server; the address is printed once it answers. If it cannot start (the port is taken),
# its log says why.
$PY -m daphne -b 127.0.0.1 -p "$PORT" worqr_site.asgi:application >"$LOGS/demo-web.log" 2>&1 &
WEB=$!
for _ in $(seq 1 600); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then break; fi
  if ! kill -0 "$WEB" 2>/dev/null; then break; fi
  sleep 0.2
done
if kill -0 "$WEB" 2>/dev/null; then
  cat <<MSG

  worqr demo is running.
  Dashboard:  http://127.0.0.1:$PORT/queues/
  Log in as:  demo / $PASSWORD
  Logs:       tail -f $LOGS/demo-worker.log $LOGS/demo-web.log
  Enqueue more from another shell:  $PY manage.py enqueue emails someone@example.com
  Stop with Ctrl-C.

MSG
fi
status=0
wait "$WEB" || status=$?
WEB=
cat "$LOGS/demo-web.log"  # it stopped by itself: why
exit "$status"
