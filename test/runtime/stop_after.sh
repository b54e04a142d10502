#!/bin/sh
# Runs a command as this MPI rank; on rank $1 the process stops (SIGSTOP:
# alive, holding its connections, answering nothing) once file $2 exists
# and is not empty (rank 0's metrics: training has begun), and its process
# id goes to file $3, the time of the stop (seconds since 1970) to $3.stopped
# (the test of a rank that stops answering).
#   stop_after.sh RANK FILE PIDFILE COMMAND...
rank=$1 file=$2 pidfile=$3
shift 3
if [ "$OMPI_COMM_WORLD_RANK" = "$rank" ]; then
  echo $$ > "$pidfile"
  (while [ ! -s "$file" ]; do sleep 0.1; done
   date +%s > "$pidfile.stopped"
   kill -STOP $$) &
fi
exec "$@"
