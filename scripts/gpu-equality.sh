#!/usr/bin/env bash
# The GPU equality checks of issue 6, run on the GPU machine by .gpu/run.sh
# from the repository root (scripts/gpu-check.sh prepared .gpu/cases/ here:
# programs compiled for `device: cuda`, PyTorch CPU references and the CPU
# backend's own runs of the same programs).
#
# For each fp32 case: cleave-run --device cuda, 10 steps; the losses within
# 1e-4 relative of PyTorch's and the final parameters within torch's
# assert_close rule (rtol 1e-4, atol 1e-5) of PyTorch's and of the CPU
# backend's. For each bf16 case: PyTorch trains the same weights on the GPU
# under autocast (models/reference.py --device cuda --autocast bf16 --init),
# and Cleave's losses must be within 2e-2 of those. A case whose programs
# need several ranks runs under mpirun with the ranks sharing the GPU (the
# Open MPI that gpu-check.sh packed, relocated by run.sh).
#
#   scripts/gpu-equality.sh PACK_DIR LOG_DIR     (LD_LIBRARY_PATH set by run.sh)
set -uo pipefail
pack=${1:?usage: gpu-equality.sh PACK_DIR LOG_DIR}
logs=${2:?usage: gpu-equality.sh PACK_DIR LOG_DIR}
py=${PYTHON:-python3}
run=$pack/bin/cleave-run
data=data/tokens.bin
status=0
results=()

check() { # name, command...
  local name=$1
  shift
  if "$@" >"$logs/eq-$name.log" 2>&1; then
    results+=("$name: ok ($(tail -1 "$logs/eq-$name.log"))")
  else
    results+=("$name: FAILED (log $logs/eq-$name.log: $(tail -1 "$logs/eq-$name.log"))")
    status=1
  fi
}

for case in "$pack"/cases/*/; do
  case=${case%/}
  name=$(basename "$case")
  [[ "$name" =~ ${CLEAVE_GPU_CASES:-.} ]] || continue
  ranks=$(cat "$case/ranks")
  precision=$(cat "$case/precision")
  config=$(cat "$case/config")
  batch=$(cat "$case/batch")
  out=$logs/$name
  mkdir -p "$out"
  launch=("$run")
  if [ "$ranks" -gt 1 ]; then
    if ! command -v mpirun >/dev/null; then
      results+=("$name: NOT RUN (no mpirun on this machine)")
      status=1
      continue
    fi
    launch=(mpirun -np "$ranks" --oversubscribe --allow-run-as-root
      -x LD_LIBRARY_PATH ${OPAL_PREFIX:+-x OPAL_PREFIX}
      ${PMIX_INSTALL_PREFIX:+-x PMIX_INSTALL_PREFIX} "$run")
  fi
  check "$name-run" "${launch[@]}" "$case/program" --device cuda --data "$data" \
    --steps 10 --metrics "$out/metrics.jsonl" --save-params "$out/params.safetensors"
  if [ "$precision" = fp32 ]; then
    check "$name-losses-vs-torch" "$py" test/runtime/compare_losses.py \
      "$out/metrics.jsonl" "$case/ref/losses.json" --rtol 1e-4
    check "$name-params-vs-torch" "$py" test/runtime/compare_params.py \
      "$out/params.safetensors" "$case/ref/params_final.safetensors"
    check "$name-params-vs-cpu" "$py" test/runtime/compare_params.py \
      "$out/params.safetensors" "$case/cpu-params.safetensors"
  else
    check "$name-torch-gpu" "$py" models/reference.py "$config" --data "$data" \
      --batch "$batch" --steps 10 --device cuda --autocast bf16 --no-export \
      --init "$case/ref/params_init.safetensors" -o "$out/torch-gpu"
    check "$name-losses-vs-torch-gpu" "$py" test/runtime/compare_losses.py \
      "$out/metrics.jsonl" "$out/torch-gpu/losses.json" --rtol 2e-2
  fi
done

echo "== equality"
printf '  %s\n' "${results[@]}" | tee "$logs/equality.txt"
exit $status
