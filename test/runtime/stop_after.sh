#!/bin/sh
# Runs a command as this MPI rank; on rank $1 the process stops (SIGSTOP:
# alive, holding its connections, answering nothing) after $2 seconds, and
# its process id goes to file $3 (the test of a rank that stops answering).
#   stop_after.sh RANK SECONDS PIDFILE COMMAND...
rank=$1 seconds=$2 pidfile=$3
shift 3
if [ "$OMPI_COMM_WORLD_RANK" = "$rank" ]; then
  echo $$ > "$pidfile"
  (sleep "$seconds"; kill -STOP $$) &
fi
exec "$@"
