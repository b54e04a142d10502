#!/usr/bin/env bash
# Checkpoint save and load times of GPT-2 124M (issue 16), on the CPU
# backend: one rank (2 threads), pipeline 4 and data 4 (4 ranks under
# mpirun, 1 thread each). Sequence 64, batch 4, AdamW fp32. For each
# layout: 6 steps saving every 2 in the background (what training waited
# for and how long the writer took), 4 steps saving every 2 in the
# foreground (--checkpoint-sync), the checkpoint's size, and the load of
# the newest checkpoint by --resume (its own layout, and pipeline 4 and
# data 4 from the one-rank checkpoint: a reshard). Prints cleave-run's own
# lines; not a test.
#
#   bench/checkpoint-times.sh BUILD_DIR [WORK_DIR]
set -euo pipefail
build=$(cd "${1:?usage: bench/checkpoint-times.sh BUILD_DIR [WORK_DIR]}" && pwd)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${2:-$build/bench-cache/checkpoint}
data=$repo/data/tokens.bin
mkdir -p "$work"
export PATH="$build/bin:$PATH"
mpi=(mpirun --oversubscribe --allow-run-as-root)

onnx=$work/gpt2-124m-s64.onnx
[ -f "$onnx" ] || /usr/bin/python3 "$repo/models/export.py" gpt2-124m --dynamic-batch --seq 64 -o "$onnx" >/dev/null
echo '{"batch_size": 4, "microbatches": 1, "optimizer": {"type": "adamw", "lr": 1e-4, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1, "grad_clip": 1.0}}' >"$work/spec.json"

launch() { # layout -> the command prefix that runs it
  case $1 in
  one) echo "cleave-run" ;;
  *) echo "${mpi[*]} -np 4 cleave-run" ;;
  esac
}
threads() { [ "$1" = one ] && echo 2 || echo 1; }

for layout in one pp4 dp4; do
  case $layout in
  one) keys=() ;;
  pp4) keys=(--set world_size=4 --set pipeline_parallel_degree=4 --set microbatches=4) ;;
  dp4) keys=(--set world_size=4 --set ddp=true) ;;
  esac
  [ -f "$work/$layout/rank-0.pb" ] || cleave-compile "$onnx" --spec "$work/spec.json" "${keys[@]}" -o "$work/$layout" >/dev/null
done

for layout in one pp4 dp4; do
  run=$(launch $layout)
  t=$(threads $layout)
  echo "== $layout: 6 steps, a background save every 2"
  rm -rf "$work/ck-$layout"
  $run "$work/$layout" --data "$data" --steps 6 --threads "$t" --checkpoint-dir "$work/ck-$layout" \
    --checkpoint-every 2 | grep -E '^(step|checkpoint)'
  echo "   checkpoint size: $(du -sh "$work/ck-$layout/step-6" | cut -f1)"
  echo "== $layout: 4 steps, a foreground save every 2"
  rm -rf "$work/sync-$layout"
  $run "$work/$layout" --data "$data" --steps 4 --threads "$t" --checkpoint-dir "$work/sync-$layout" \
    --checkpoint-every 2 --checkpoint-sync | grep -E '^checkpoint'
  echo "== $layout: load its own step 6"
  $run "$work/$layout" --data "$data" --steps 6 --threads "$t" --resume "$work/ck-$layout" | grep -E '^resumed'
done
for layout in pp4 dp4; do
  echo "== $layout: load the one-rank step 6 (reshard)"
  $(launch $layout) "$work/$layout" --data "$data" --steps 6 --threads 1 --resume "$work/ck-one" | grep -E '^resumed'
done
