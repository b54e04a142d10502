#!/bin/sh
# Succeeds once the process whose id is in file $1 is gone, within $2
# seconds; else kills it and fails (a process a job left behind).
#   gone_within.sh PIDFILE SECONDS
pid=$(cat "$1") || exit 1
tries=$(($2 * 4))
while [ "$tries" -gt 0 ]; do
  kill -0 "$pid" 2>/dev/null || exit 0
  sleep 0.25
  tries=$((tries - 1))
done
echo "process $pid is still running $2 s after its job ended" >&2
kill -9 "$pid"
exit 1
