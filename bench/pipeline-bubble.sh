#!/bin/sh
# The pipeline bubble, measured: trains a model whose stages balance
# (gpt2-pipe: 8 equal blocks) with P pipeline ranks and M microbatches for
# STEPS steps under mpirun with --trace, then prints each rank's idle
# fraction (bench/trace_bubble.py) next to the schedule's theoretical
# bubble ((p-1)/(m+p-1) for 1F1B, (p-1)/(v*m+p-1) with v virtual stages).
#
#   bench/pipeline-bubble.sh BUILD [P] [M] [SCHEDULE] [V] [STEPS]
#
# One rank per core gives a meaningful measure: on this 2-core machine use
# P=2 (the default). Each rank runs 1 thread.
set -eu
build=${1:?usage: bench/pipeline-bubble.sh BUILD [P] [M] [SCHEDULE] [V] [STEPS]}
p=${2:-2}
m=${3:-8}
schedule=${4:-interleaved}
v=${5:-1}
steps=${6:-6}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
work=$build/bench-cache/bubble
mkdir -p "$work"
model=$work/gpt2-pipe.onnx
[ -f "$model" ] || /usr/bin/python3 "$root/models/export.py" gpt2-pipe --dynamic-batch -o "$model" >/dev/null
out=$work/p$p-m$m-$schedule-v$v
"$build/bin/cleave-compile" "$model" -o "$out" \
  --set world_size=$p --set pipeline_parallel_degree=$p --set microbatches=$m \
  --set batch_size=$((2 * m)) --set pipeline=$schedule --set virtual_pipeline_degree=$v
root_flag=""
[ "$(id -u)" = 0 ] && root_flag=--allow-run-as-root
mpirun -np "$p" --oversubscribe $root_flag --bind-to core \
  "$build/bin/cleave-run" "$out" --data "$root/data/tokens.bin" --steps "$steps" \
  --threads 1 --trace "$out/trace.json" | tail -2
/usr/bin/python3 "$here/trace_bubble.py" "$out/trace.json" "$out/plan.json"
