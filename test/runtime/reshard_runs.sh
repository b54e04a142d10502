#!/bin/sh
# The runs of cleave-run-reshard.test, one layout or one pair at a time
# (cleave-run and mpirun on PATH; every rank one thread).
#   reshard_runs.sh layout T NAME RANKS TOKENS [STEPS AT]
#     T/NAME runs STEPS steps straight (T/NAME-straight.{jsonl,safetensors})
#     and AT steps with a checkpoint (T/NAME-first.{jsonl,safetensors},
#     T/NAME-ck/step-AT).
#   reshard_runs.sh pair T FROM TO RANKS TOKENS [STEPS AT]
#     T/TO resumes T/FROM-ck: to step STEPS (T/FROM-TO-rest.jsonl,
#     T/FROM-TO.safetensors; the metrics of the whole run, FROM's AT steps
#     then TO's, in T/FROM-TO.jsonl), and at step AT without a step
#     (T/FROM-TO-AT.safetensors; the checkpoint rewritten for TO in
#     T/FROM-TO-ck/step-AT); both checkpoints' whole state, exported with
#     cleave-checkpoint --optimizer, in T/FROM-TO-state-{from,to}.safetensors.
# STEPS and AT are 6 and 3 unless given.
set -e
run() {
  ranks=$1
  shift
  if [ "$ranks" = 1 ]; then
    cleave-run "$@" --threads 1 > /dev/null
  else
    timeout 300 mpirun -np "$ranks" --oversubscribe --allow-run-as-root \
      cleave-run "$@" --threads 1 > /dev/null
  fi
}
case $1 in
layout)
  t=$2 name=$3 ranks=$4 tokens=$5 steps=${6:-6} at=${7:-3}
  run "$ranks" "$t/$name" --data "$tokens" --steps "$steps" \
    --metrics "$t/$name-straight.jsonl" --save-params "$t/$name-straight.safetensors"
  run "$ranks" "$t/$name" --data "$tokens" --steps "$at" \
    --metrics "$t/$name-first.jsonl" --save-params "$t/$name-first.safetensors" \
    --checkpoint-dir "$t/$name-ck"
  ;;
pair)
  t=$2 from=$3 to=$4 ranks=$5 tokens=$6 steps=${7:-6} at=${8:-3}
  run "$ranks" "$t/$to" --data "$tokens" --steps "$steps" --resume "$t/$from-ck" \
    --metrics "$t/$from-$to-rest.jsonl" --save-params "$t/$from-$to.safetensors"
  cat "$t/$from-first.jsonl" "$t/$from-$to-rest.jsonl" > "$t/$from-$to.jsonl"
  run "$ranks" "$t/$to" --data "$tokens" --steps "$at" --resume "$t/$from-ck" \
    --save-params "$t/$from-$to-$at.safetensors" --checkpoint-dir "$t/$from-$to-ck"
  cleave-checkpoint export "$t/$from-ck" --optimizer \
    -o "$t/$from-$to-state-from.safetensors" > /dev/null
  cleave-checkpoint export "$t/$from-$to-ck" --optimizer \
    -o "$t/$from-$to-state-to.safetensors" > /dev/null
  ;;
*)
  echo "reshard_runs.sh: unknown mode '$1'" >&2
  exit 2
  ;;
esac
