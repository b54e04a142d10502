#!/usr/bin/env bash
# Benchmark: one training step (forward, backward, AdamW with clipping) of
# GPT-2 124M on the CPU backend against PyTorch CPU: same model (export.py's
# weights), same batches, same optimizer, same thread count, in one run.
# Prints both median step times (the first step of each is a warm-up and is
# dropped), their losses side by side and the ratio; not a test.
#
#   bench/train-cpu.sh [BUILD] [BATCH] [SEQ] [THREADS] [STEPS]
set -euo pipefail
build=${1:-build}
batch=${2:-4}
seq=${3:-256}
threads=${4:-$(nproc)}
steps=${5:-5}
py=/usr/bin/python3
data=data/tokens.bin
optimizer='{"type": "adamw", "lr": 1e-4, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1, "grad_clip": 1.0}'
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "load before: $(uptime | sed 's/.*load/load/')"
$py models/export.py gpt2-124m --seq "$seq" --dynamic-batch -o "$work/model.onnx" >/dev/null
echo "{\"batch_size\": $batch, \"microbatches\": 1, \"optimizer\": $optimizer}" > "$work/spec.json"
"$build/bin/cleave-compile" "$work/model.onnx" --spec "$work/spec.json" -o "$work/out"
OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads \
  "$build/bin/cleave-run" "$work/out" --data "$data" --steps $((steps + 1)) \
  --threads "$threads" --metrics "$work/m.jsonl" >/dev/null
torch=$($py bench/torch_train.py gpt2-124m --batch "$batch" --seq "$seq" \
  --data "$data" --steps $((steps + 1)) --threads "$threads" --optimizer "$optimizer")
echo "load after:  $(uptime | sed 's/.*load/load/')"

$py - "$work/m.jsonl" "$batch" "$seq" "$torch" <<'PY'
import json, sys
metrics = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
batch, seq, torch = int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
times = sorted(batch * seq / m["tokens_per_s"] for m in metrics[1:])
cleave = times[len(times) // 2]
theirs = torch["median_s"]
print("gpt2-124m training step (forward, backward, AdamW), batch %d x seq %d, %d threads"
      % (batch, seq, torch["threads"]))
print("  cleave-run : %8.1f ms/step  %7.0f tok/s  %.3f TFLOP/s"
      % (cleave * 1e3, batch * seq / cleave, sorted(m["tflops"] for m in metrics[1:])[len(times) // 2]))
print("  pytorch    : %8.1f ms/step  %7.0f tok/s" % (theirs * 1e3, batch * seq / theirs))
print("  losses (cleave / pytorch), step by step:")
for i, (m, t) in enumerate(zip(metrics, torch["losses"])):
    print("    step %d: %.5f  %.5f" % (i, m["loss"], t))
print("  ratio (PyTorch / Cleave): %.2f; target >= 1" % (theirs / cleave))
PY
