#!/usr/bin/env bash
# Benchmark: how long cleave-compile takes to import the shapes-only exports
# of the largest configs (target: under 30 s for GPT-3 175B on 2 cores).
# Prints one line per model; not a test.
set -euo pipefail
build=${1:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for config in gpt2-1.3b gpt3-175b llama2-70b; do
  /usr/bin/python3 models/export.py "$config" --shapes-only -o "$work/$config.onnx" >/dev/null
  nodes=$(/usr/bin/python3 -c "import onnx,sys; print(len(onnx.load(sys.argv[1], load_external_data=False).graph.node))" "$work/$config.onnx")
  /usr/bin/time -f "%e %M" -o "$work/time" \
    "$build/bin/cleave-compile" "$work/$config.onnx" --emit=mlir -o /dev/null
  read -r seconds kb < "$work/time"
  printf "import %-12s %6d ONNX nodes  %6.1f s  peak %5d MiB\n" "$config" "$nodes" "$seconds" $((kb / 1024))
done
