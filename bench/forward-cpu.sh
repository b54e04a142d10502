#!/usr/bin/env bash
# Benchmark: the CPU backend's forward step against PyTorch CPU, same model
# (GPT-2 124M, export.py's weights), same batches, same thread count, one
# run. Prints both median step times, the ratio and the losses; not a test.
#
#   bench/forward-cpu.sh [BUILD] [BATCH] [SEQ] [THREADS] [STEPS]
set -euo pipefail
build=${1:-build}
batch=${2:-4}
seq=${3:-256}
threads=${4:-$(nproc)}
steps=${5:-5}
py=/usr/bin/python3
data=data/tokens.bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

$py models/export.py gpt2-124m --seq "$seq" --batch "$batch" -o "$work/model.onnx" >/dev/null
"$build/bin/cleave-compile" "$work/model.onnx" -o "$work/out"
# One warm-up step, then $steps timed ones.
OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads \
  "$build/bin/cleave-run" "$work/out" --data "$data" --steps $((steps + 1)) \
  --forward-only --threads "$threads" --metrics "$work/m.jsonl" >/dev/null
torch=$($py bench/torch_forward.py gpt2-124m --batch "$batch" --seq "$seq" \
  --data "$data" --steps $((steps + 1)) --threads "$threads")

$py - "$work/m.jsonl" "$batch" "$seq" "$torch" <<'PY'
import json, sys
metrics = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][1:]
batch, seq, torch = int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
times = sorted(batch * seq / m["tokens_per_s"] for m in metrics)
cleave = times[len(times) // 2]
theirs = torch["median_s"]
print("gpt2-124m forward, batch %d x seq %d, %d threads" % (batch, seq, torch["threads"]))
print("  cleave-run : %8.1f ms/step  losses %s" % (cleave * 1e3, " ".join("%.5f" % m["loss"] for m in metrics)))
print("  pytorch    : %8.1f ms/step  losses %s" % (theirs * 1e3, " ".join("%.5f" % l for l in torch["losses"][1:])))
print("  speed ratio (pytorch time / cleave time): %.2f" % (theirs / cleave))
PY
