#!/usr/bin/env bash
# A CPU hog: N busy processes (default 2) beside a command, stopped when it ends, however it ends.
#
#   scripts/cpu_hog.sh [N] [command ...]
#
#   scripts/cpu_hog.sh 2 make test     # make test with 2 busy processes beside it; its exit code
#   scripts/cpu_hog.sh 2               # only the hog, until Ctrl-C
#
# Each busy process is a busy shell loop at normal priority, as a `stress -c N`
# would be: on a 2-core machine two of them leave the tests about half the CPU.
set -uo pipefail

N=2
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
  N=$1
  shift
fi
if [ "$N" -lt 1 ]; then
  echo "cpu_hog.sh: N must be 1 or more" >&2
  exit 2
fi

HOGS=()
stop_hogs() {
  for pid in "${HOGS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${HOGS[@]}"; do wait "$pid" 2>/dev/null || true; done
  HOGS=()
}
trap stop_hogs EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for _ in $(seq "$N"); do
  # Busy until this script ends: stopped by the trap above, or, if the script is killed -9, by
  # finding it gone (kill -0 is a shell builtin: the loop stays busy). It ignores a Ctrl-C sent
  # to the terminal's group: the trap stops it by its pid.
  bash -c 'trap "" INT; while kill -0 "$1" 2>/dev/null; do :; done' cpu_hog "$$" &
  HOGS+=($!)
done
echo "cpu_hog.sh: $N busy process(es): ${HOGS[*]}" >&2

if [ $# -eq 0 ]; then
  # only the hog: until a signal ends it (a trapped signal interrupts the wait; the traps stop the loops)
  wait "${HOGS[@]}"
fi
"$@"
status=$?
exit "$status"
