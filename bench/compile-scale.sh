#!/usr/bin/env bash
# Benchmark (issue 13 item 6): how long cleave-compile takes, and its peak
# memory, to compile GPT-3 175B (shapes only) for many ranks: each layout
# is "pipeline tensor data" (the issue's 1,024-rank layout is "16 8 8";
# the defaults are tensor 8 x data 128, pipeline 16 x data 64 and a small
# one). Prints one line per layout: time and peak resident memory
# and CPU time (/usr/bin/time), and how many programs the communication
# check read (with more than two data ranks the emitter writes one program
# per pipeline stage, role-<k>.pb, and each rank file as a small header
# naming it: docs/communication-check.md); not a test. Each compile
# runs under `ulimit -v` of BENCH_MEMORY_KB (default 10 GiB) so that a
# regression cannot take a shared machine's memory.
#   bench/compile-scale.sh [BUILD] ["P T D" ...]
set -euo pipefail
build=${1:-build}
shift || true
layouts=("$@")
[ ${#layouts[@]} -gt 0 ] || layouts=("1 8 128" "16 1 64" "16 1 8")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 models/export.py gpt3-175b --shapes-only --dynamic-batch -o "$work/gpt3-175b.onnx" >/dev/null
for layout in "${layouts[@]}"; do
  read -r p t d <<< "$layout"
  world=$((p * t * d))
  out="$work/out-$p-$t-$d"
  ( ulimit -v "${BENCH_MEMORY_KB:-10485760}"
    exec /usr/bin/time -f "%e %M %U %S" -o "$work/time" \
    "$build/bin/cleave-compile" "$work/gpt3-175b.onnx" -o "$out" \
    --set world_size=$world --set pipeline_parallel_degree=$p \
    --set tensor_parallel_degree=$t --set batch_size=$((d * p * 4)) \
    --set microbatches=$((p * 4 > 1 ? p * 4 : 1)) --set ddp=true \
    --set bf16=true --set device_memory_gib=0 ) > "$work/log" 2>&1 ||
    { echo "pipeline $p tensor $t data $d: failed"; tail -5 "$work/log"; continue; }
  read -r seconds kb user sys < "$work/time"
  distinct=$(sed -n 's/.*(\([0-9]*\) distinct programs.*/\1/p' "$work/log")
  files=$(ls "$out"/rank-*.pb | wc -l)
  bytes=$(du -sm "$out" | cut -f1)
  printf "gpt3-175b pipeline %2d tensor %d data %3d = %4d ranks: %6.1f s (%5.1f s CPU)  peak %5d MiB  %4d rank programs (%s distinct), %5d MiB written\n" \
    "$p" "$t" "$d" "$world" "$seconds" "$(awk "BEGIN { print $user + $sys }")" $((kb / 1024)) "$files" "${distinct:-$files}" "$bytes"
  rm -rf "$out"
done
