#!/usr/bin/env bash
# Benchmark of issue 6, on a GPU machine, in one run: GPT-2 124M and 350M
# training steps (forward, backward, clip_grad_norm_, AdamW) in bf16 at
# sequence 1024, for Cleave (cleave-run --device cuda), PyTorch eager and
# torch.compile of the same model (models/gpt2.py) on the same GPU. Each
# takes the largest batch that runs (Cleave: of the programs that
# scripts/gpu-check.sh --bench compiled, those the plan says fit 80 GiB).
# Prints tokens/s, MFU against the bf16 matrix-product rate measured there
# (8192^3 torch.matmul) with nanoGPT's FLOPs per token (6 N + 12 L d T), and
# the ratio of Cleave to torch.compile. Not a test.
#
#   bash bench/train-gpu.sh PACK_DIR [STEPS=10]    (from the repository root;
#                                                   LD_LIBRARY_PATH as run.sh)
set -uo pipefail
pack=${1:?usage: bench/train-gpu.sh PACK_DIR [STEPS]}
steps=${2:-10}
py=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rows=()
for config in gpt2-124m gpt2-350m; do
  cleave="{}"
  for program in $(ls -d "$pack"/bench/"$config"-b*/ 2>/dev/null | sed 's|/$||' | sort -t b -k3 -n -r); do
    batch=${program##*-b}
    if "$pack/bin/cleave-run" "$program" --device cuda --data data/tokens.bin \
      --steps "$steps" --metrics "$work/$config.jsonl" >"$work/$config-b$batch.log" 2>&1; then
      cleave=$("$py" - "$work/$config.jsonl" "$batch" <<'PY'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
timed = [s["tokens_per_s"] for s in steps[3:]]
print(json.dumps({"mode": "cleave", "batch": int(sys.argv[2]),
                  "tokens_per_second": sum(timed) / len(timed)}))
PY
)
      break
    fi
    echo "cleave-run $config batch $batch: $(tail -1 "$work/$config-b$batch.log")"
  done
  torch=$("$py" bench/torch_train_gpu.py "$config" --seq 1024 --batches 64,48,32,24,16,8,4 --steps "$steps" --modes "${TORCH_MODES:-eager,compile}" | grep '^{')
  rows+=("$("$py" - "$config" "$cleave" <<PY
import json, sys
config, cleave = sys.argv[1], json.loads(sys.argv[2])
lines = [json.loads(l) for l in """$torch""".splitlines() if l.strip()]
info, modes = lines[0], {l["mode"]: l for l in lines[1:]}
modes["cleave"] = cleave
sys.path.insert(0, "models")
from configs import get_config
c = get_config(config)
per_token = 6 * info["params"] + 12 * c["n_layer"] * c["d_model"] * 1024
out = []
for mode in ("cleave", "eager", "compile"):
    m = modes.get(mode, {})
    if "tokens_per_second" not in m:
        out.append("%s %-7s: %s" % (config, mode, m.get("error", "did not run")))
        continue
    mfu = m["tokens_per_second"] * per_token / info["matmul_bf16_flops"]
    out.append("%s %-7s: batch %3d  %10.0f tok/s  MFU %5.1f%%"
               % (config, mode, m["batch"], m["tokens_per_second"], 100 * mfu))
if "tokens_per_second" in modes["cleave"] and "tokens_per_second" in modes.get("compile", {}):
    out.append("%s cleave / torch.compile = %.2f" % (config, modes["cleave"]["tokens_per_second"] / modes["compile"]["tokens_per_second"]))
out.append("%s: %s, torch %s, bf16 matmul %.0f TFLOP/s measured" % (config, info["device"], info["torch"], info["matmul_bf16_flops"] / 1e12))
print("\n".join(out))
PY
)")
done
echo "== GPU training benchmark (bf16, sequence 1024, $steps steps, first 3 dropped)"
printf '%s\n' "${rows[@]}"
