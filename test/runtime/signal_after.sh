#!/bin/sh
# Runs a command; on MPI rank $1 (or without mpirun when $1 is 0) the
# process gets SIGTERM after $2 seconds, or, when $2 is a path, once that
# path exists (at most 300 s, looked for every 10 ms: a checkpoint that
# --keep removes a few steps later must not be missed): the test of a run
# stopped mid-way. A path keeps a test that needs some checkpoints before
# the stop independent of how fast a loaded machine runs the steps. The
# signal is TERM, or the one CLEAVE_TEST_SIGNAL names (INT: a Ctrl-C).
#   signal_after.sh RANK SECONDS|PATH COMMAND...
rank=$1 when=$2 sig=${CLEAVE_TEST_SIGNAL:-TERM}
shift 2
if [ "${OMPI_COMM_WORLD_RANK:-0}" = "$rank" ]; then
  case $when in
  *[!0-9.]*)
    (i=0
     while [ ! -e "$when" ] && [ $i -lt 30000 ]; do sleep 0.01; i=$((i + 1)); done
     kill -$sig $$) & ;;
  *) (sleep "$when"; kill -$sig $$) & ;;
  esac
fi
exec "$@"
