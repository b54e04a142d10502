#!/bin/sh
# Runs a command as this MPI rank; on rank $1 the process is killed with
# SIGKILL after $2 seconds (the test of a rank that dies mid-run).
#   kill_after.sh RANK SECONDS COMMAND...
rank=$1 seconds=$2
shift 2
if [ "$OMPI_COMM_WORLD_RANK" = "$rank" ]; then
  (sleep "$seconds"; kill -9 $$) &
fi
exec "$@"
