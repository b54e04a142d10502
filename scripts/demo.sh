#!/usr/bin/env bash
# `make demo`: export the toy GPT-2 and Llama from models/, import them with
# cleave-compile, check the import contract with cleave-opt, show what the IR
# holds, then compile GPT-2 toy to its per-rank program and run it with
# cleave-run next to PyTorch's losses on the same batches.
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
