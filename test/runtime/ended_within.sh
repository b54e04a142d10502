#!/bin/sh
# Succeeds when the time in file $2 is at most $3 seconds after the time in
# file $1 (both seconds since 1970, as `date +%s` writes them).
#   ended_within.sh STARTFILE ENDFILE SECONDS
start=$(cat "$1") && end=$(cat "$2") || exit 1
if [ $((end - start)) -gt "$3" ]; then
  echo "ended $((end - start)) s after the start, more than $3 s" >&2
  exit 1
fi
