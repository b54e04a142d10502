#!/usr/bin/env bash
# Benchmark: one training step (forward, backward, clip_grad_norm_, AdamW) of
# GPT-2 124M on Cleave's CPU backend against PyTorch CPU, in one run: same
# weights (export.py, seed 0), same batches (data/tokens.bin), same optimizer,
# same thread count. Both run STEPS steps; the first is a warm-up and is
# dropped. Prints the mean ms/step and tokens/s of each, their losses side by
# side (they should agree to ~5 decimals), the load average before and after
# (2-core machine: a busy host skews the ratio) and, last, the ratio. Not a
# test. The weighted export is cached in BUILD/bench-cache (one per SEQ).
#
#   bench/train-cpu.sh BUILD [BATCH=4] [SEQ=256] [THREADS=2] [STEPS=5]
set -euo pipefail
build=${1:?usage: bench/train-cpu.sh BUILD [BATCH] [SEQ] [THREADS] [STEPS]}
batch=${2:-4}
seq=${3:-256}
threads=${4:-2}
steps=${5:-5}
[ "$steps" -ge 2 ] || { echo "STEPS must be >= 2 (the first is a warm-up)" >&2; exit 2; }
py=/usr/bin/python3
data=data/tokens.bin
optimizer='{"type": "adamw", "lr": 1e-4, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1, "grad_clip": 1.0}'
cache=$build/bench-cache
model=$cache/gpt2-124m-seq$seq.onnx
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ ! -s "$model" ]; then
  mkdir -p "$cache"
  $py models/export.py gpt2-124m --seq "$seq" --dynamic-batch -o "$work/model.onnx" >/dev/null
  mv "$work/model.onnx" "$model"
fi
echo "{\"batch_size\": $batch, \"microbatches\": 1, \"optimizer\": $optimizer}" > "$work/spec.json"
"$build/bin/cleave-compile" "$model" --spec "$work/spec.json" -o "$work/out"

echo "load before: $(uptime | sed 's/.*load average/load average/')"
OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads \
  "$build/bin/cleave-run" "$work/out" --data "$data" --steps "$steps" \
  --threads "$threads" --metrics "$work/m.jsonl" >/dev/null
torch=$(OMP_NUM_THREADS=$threads $py bench/torch_train.py gpt2-124m --batch "$batch" \
  --seq "$seq" --data "$data" --steps "$steps" --threads "$threads" --optimizer "$optimizer")
echo "load after:  $(uptime | sed 's/.*load average/load average/')"

$py - "$work/m.jsonl" "$batch" "$seq" "$torch" <<'PY'
import json, sys
metrics = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
batch, seq, torch = int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
tokens = batch * seq
ours = [tokens / m["tokens_per_s"] for m in metrics[1:]]
theirs = torch["seconds"][1:]
cleave, pt = sum(ours) / len(ours), sum(theirs) / len(theirs)
print("gpt2-124m training step (fwd, bwd, clip, AdamW), batch %d x seq %d, %d threads, "
      "mean of %d steps after 1 warm-up" % (batch, seq, torch["threads"], len(ours)))
for name, t, ts in (("cleave-run", cleave, ours), ("pytorch", pt, theirs)):
    print("  %-10s: %8.1f ms/step  %7.0f tok/s   (steps: %s ms)"
          % (name, t * 1e3, tokens / t, " ".join("%.0f" % (x * 1e3) for x in ts)))
print("  step  loss cleave  loss pytorch  |diff|")
for m, l in zip(metrics, torch["losses"]):
    print("  %4d  %11.5f  %12.5f  %.1e" % (m["step"], m["loss"], l, abs(m["loss"] - l)))
print("ratio (PyTorch / Cleave): %.2f; target >= 1" % (pt / cleave))
PY
