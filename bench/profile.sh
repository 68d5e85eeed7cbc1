#!/usr/bin/env bash
# `make profile`: py-spy flame graphs of worqr's producer and of a worker draining (sync and async
# handler), plus instrumented counts (round trips, event-loop iterations, CPU and Redis time per
# task), against a private redis-server on a free port. Results: bench/results/profile-*.
# py-spy lives in its own venv (bench/.venv-profile), so neither the project's venv nor the
# harness's pinned one changes. PROFILE_N sets the tasks per run (default 20000).
set -euo pipefail
cd "$(dirname "$0")"
PY=${PY:-../.venv/bin/python}
N=${PROFILE_N:-20000}
SPY=.venv-profile/bin/py-spy
if [ ! -x "$SPY" ]; then
    python3 -m venv .venv-profile
    .venv-profile/bin/pip install -q --disable-pip-version-check py-spy==0.4.3
fi
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
WORK=$(mktemp -d)
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" --loglevel warning &
REDIS=$!
trap 'kill $REDIS 2>/dev/null; wait $REDIS 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
URL="redis://127.0.0.1:$PORT/0"
STAMP=$(date -u +%Y%m%dT%H%M%S)
mkdir -p results
# --gil: only the thread holding the GIL is sampled (idle handler threads blocked on their job
# queue would otherwise fill the graph).
"$SPY" record --gil -r 250 -o "results/profile-$STAMP-producer.svg" -- "$PY" profile.py produce --n "$N" --url "$URL"
"$SPY" record --gil -r 250 -o "results/profile-$STAMP-drain-sync.svg" -- "$PY" profile.py drain --n "$N" --url "$URL"
"$SPY" record --gil -r 250 -o "results/profile-$STAMP-drain-async.svg" -- "$PY" profile.py drain --async --n "$N" --url "$URL"
"$PY" profile.py counts --n "$N" --url "$URL" | tee "results/profile-$STAMP-counts.json"
echo "flame graphs and counts: bench/results/profile-$STAMP-*"
