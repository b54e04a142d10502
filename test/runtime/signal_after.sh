#!/bin/sh
# Runs a command; on MPI rank $1 (or without mpirun when $1 is 0) the
# process gets SIGTERM after $2 seconds (the test of a run stopped mid-way).
#   signal_after.sh RANK SECONDS COMMAND...
rank=$1 seconds=$2
shift 2
if [ "${OMPI_COMM_WORLD_RANK:-0}" = "$rank" ]; then
  (sleep "$seconds"; kill -TERM $$) &
fi
exec "$@"
