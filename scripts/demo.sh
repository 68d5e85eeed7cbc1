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
WORKER=
stop_all() {
  if [ -n "$WORKER" ]; then kill -TERM "$WORKER" 2>/dev/null; wait "$WORKER" 2>/dev/null || true; fi
  if [ "$STOP_REDIS" = 1 ]; then echo "Embedded Redis: $($PY manage.py embedded_redis stop)"; fi
}
trap stop_all EXIT
$PY manage.py migrate --noinput >/dev/null
$PY manage.py collectstatic --noinput >/dev/null
PASSWORD=$($PY -c "import secrets; print(secrets.token_urlsafe(9))")
$PY manage.py shell -c "
from django.contrib.auth import get_user_model
u, _ = get_user_model().objects.get_or_create(username='demo')
u.is_staff = u.is_superuser = True
u.set_password('$PASSWORD')
u.save()
"
if [ -z "${WORQR_REDIS_URL:-}" ]; then
  echo "Embedded Redis: $($PY manage.py embedded_redis start)"
fi

$PY manage.py worker default emails reports notifications --concurrency 4 --name demo-worker &
WORKER=$!

seq 1 30 | sed 's/^/order-/' | $PY manage.py enqueue default - >/dev/null
seq 1 12 | sed 's/^/user-/;s/$/@example.com/' | $PY manage.py enqueue emails - >/dev/null
printf 'acme:q1\nacme:q2\nglobex:q1\ninitech:q1\nacme:q3\n' | $PY manage.py enqueue reports - >/dev/null
seq 1 20 | sed 's/^/push-/' | $PY manage.py enqueue notifications - >/dev/null
seq 1 5 | sed 's/^/reminder-/' | $PY manage.py enqueue notifications --delay 60 - >/dev/null

cat <<MSG

  worqr demo is running.
  Dashboard:  http://127.0.0.1:$PORT/queues/
  Log in as:  demo / $PASSWORD
  Enqueue more from another shell:  $PY manage.py enqueue emails someone@example.com
  Stop with Ctrl-C.

MSG
$PY -m daphne -b 127.0.0.1 -p "$PORT" worqr_site.asgi:application
