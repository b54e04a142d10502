#!/usr/bin/env bash
# Checkpoint save and load times of GPT-2 124M (issue 16), on the CPU
# backend: one rank (2 threads), pipeline 4 and data 4 (4 ranks under
# mpirun, 1 thread each). Sequence 64, batch 4, AdamW fp32. For each
# layout: what a background save costs training (runs without saves and
# with a save every 8 steps, alternately: bench/save_cost.py), 4 steps
# saving every 2 in the foreground (--checkpoint-sync), the checkpoint's
# size, and the load of the newest checkpoint by --resume (its own layout,
# and pipeline 4 and data 4 from the one-rank checkpoint: a reshard).
# Prints cleave-run's own lines and save_cost.py's figures; not a test.
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
  # One rank: 25 steps (3 saves in the background), twice; 4 ranks: 17
  # steps (2 saves), once.
  if [ $layout = one ]; then steps=25 pairs="1 2"; else steps=17 pairs=1; fi
  echo "== $layout: $steps steps without saves and with a background save every 8"
  runs=()
  for pair in $pairs; do
    $run "$work/$layout" --data "$data" --steps $steps --threads "$t" \
      >"$work/plain-$layout-$pair.txt"
    rm -rf "$work/ck-$layout"
    $run "$work/$layout" --data "$data" --steps $steps --threads "$t" --checkpoint-dir "$work/ck-$layout" \
      --checkpoint-every 8 >"$work/saving-$layout-$pair.txt"
    grep -E '^checkpoint' "$work/saving-$layout-$pair.txt"
    runs+=("$work/plain-$layout-$pair.txt" "$work/saving-$layout-$pair.txt")
  done
  /usr/bin/python3 "$repo/bench/save_cost.py" "${runs[@]}"
  echo "   checkpoint size: $(du -sh "$work/ck-$layout/step-$steps" | cut -f1)"
  echo "== $layout: 4 steps, a foreground save every 2"
  rm -rf "$work/sync-$layout"
  $run "$work/$layout" --data "$data" --steps 4 --threads "$t" --checkpoint-dir "$work/sync-$layout" \
    --checkpoint-every 2 --checkpoint-sync | grep -E '^checkpoint'
  echo "== $layout: load its own step $steps"
  $run "$work/$layout" --data "$data" --steps $steps --threads "$t" --resume "$work/ck-$layout" | grep -E '^resumed'
done
for layout in pp4 dp4; do
  echo "== $layout: load the one-rank step 25 (reshard)"
  $(launch $layout) "$work/$layout" --data "$data" --steps 25 --threads 1 --resume "$work/ck-one" | grep -E '^resumed'
done
