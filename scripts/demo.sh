#!/usr/bin/env bash
# `make demo`: export the toy GPT-2 and Llama from models/, import them with
# cleave-compile, check the import contract with cleave-opt, show what the IR
# holds, then compile GPT-2 toy to its per-rank program and run it with
# cleave-run next to PyTorch's losses on the same batches, and train it for
# 300 steps (forward, backward, AdamW) with the loss falling.
set -euo pipefail
build=${1:-build}
bin=$build/bin
py=/usr/bin/python3
out=$build/demo
mkdir -p "$out"

for config in gpt2-toy llama-toy; do
  echo "== $config"
  $py models/export.py "$config" --dynamic-batch -o "$out/$config.onnx"
  "$bin/cleave-compile" "$out/$config.onnx" --emit=mlir --batch 4 -o "$out/$config.mlir"
  "$bin/cleave-opt" "$out/$config.mlir" --cleave-verify-imported=require-names -o /dev/null
  params=$(grep -c "cleave.parameter" "$out/$config.mlir")
  echo "   imported: $params parameters; ops in @forward:"
  grep -oE "= cleave\.[a-z_]+" "$out/$config.mlir" | sort | uniq -c | sort -rn |
    awk '{printf "     %5d %s\n", $1, $3}'
  echo "   IR: $out/$config.mlir"
done

echo "== gpt3-175b, shapes only"
$py models/export.py gpt3-175b --shapes-only -o "$out/gpt3-175b.onnx"
start=$(date +%s%N)
"$bin/cleave-compile" "$out/gpt3-175b.onnx" --emit=mlir -o "$out/gpt3-175b.mlir"
end=$(date +%s%N)
echo "   imported in $(( (end - start) / 1000000 )) ms:" \
  "$(grep -c 'cleave.parameter' "$out/gpt3-175b.mlir") parameters"

echo "== gpt2-toy: compile to a program, run with cleave-run, compare with PyTorch"
$py models/reference.py gpt2-toy --data data/tokens.bin --batch 8 --steps 3 \
  --forward-only -o "$out/gpt2-ref" > /dev/null
"$bin/cleave-compile" "$out/gpt2-ref/model.onnx" --set batch_size=8 --set microbatches=2 -o "$out/gpt2-program"
echo "   $out/gpt2-program: $(ls "$out/gpt2-program" | tr '\n' ' ')"
"$bin/cleave-run" "$out/gpt2-program" --data data/tokens.bin --steps 3 --forward-only \
  --metrics "$out/gpt2-metrics.jsonl" | sed 's/^/   /'
$py test/runtime/compare_losses.py "$out/gpt2-metrics.jsonl" "$out/gpt2-ref/losses.json" | sed 's/^/   /'

echo "== gpt2-toy: train 300 steps on data/tokens.bin (AdamW, warm-up + cosine)"
cat > "$out/train-spec.json" <<'JSON'
{"batch_size": 8, "microbatches": 2,
 "optimizer": {"type": "adamw", "lr": 3e-3, "betas": [0.9, 0.95], "eps": 1e-8,
               "weight_decay": 0.1, "grad_clip": 1.0,
               "warmup_steps": 20, "lr_decay_steps": 300, "min_lr": 3e-4}}
JSON
"$bin/cleave-compile" "$out/gpt2-ref/model.onnx" --spec "$out/train-spec.json" -o "$out/gpt2-train"
"$bin/cleave-run" "$out/gpt2-train" --data data/tokens.bin --steps 300 \
  --metrics "$out/gpt2-train.jsonl" --save-params "$out/gpt2-trained.safetensors" |
  awk '/^step/ { split($2, s, "/"); if (s[1] == 1 || s[1] % 25 == 0) print "   " $0; next } { print "   " $0 }'
$py - "$out/gpt2-train.jsonl" <<'PY'
import json, sys
losses = [json.loads(l)["loss"] for l in open(sys.argv[1]) if l.strip()]
first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
print("   mean loss of the first 10 steps %.3f, of the last 10 %.3f (%.0f%% lower)"
      % (first, last, 100 * (1 - last / first)))
PY
echo "   trained parameters: $out/gpt2-trained.safetensors"
