"""Compiles a model under many random valid parallel specs; every compile
runs cleave-compile's communication check (runtime/CommunicationCheck.h),
which refuses programs whose ranks' collectives, sends and receives do not
match or can deadlock. A compile refused for that reason fails this test.

    /usr/bin/python3 test/runtime/random_specs.py MODEL.onnx --bin BUILD/bin \
        --out DIR --count N [--seed S] [--layers L]

Specs draw pipeline degree, tensor degree (1, 2 or 4: the toy's 8 heads,
FFN and 256-token vocabulary divide both; with and without data
parallelism), data degree, schedule (simple, interleaved,
interleaved_virtual with 2-3 chunks), microbatches, active microbatches,
placement strategy, precision (fp32, bf16, fp16 with loss scaling) and the
global batch. A spec the compiler refuses as a user error (for example more
stages than the model has places to cut) is drawn again and counted; the
test fails if fewer than half of the draws compile, so it cannot pass by
refusing everything. Prints the counts per feature and a summary line.
"""
import argparse
import collections
import json
import os
import random
import shutil
import subprocess
import sys
import time


def draw(rng, layers):
    p = rng.choice([1, 1, 2, 2, 3, 4])
    t = rng.choice([1, 2, 4])
    # With a tensor axis at most 3 data ranks (3: the emitter's shifted
    # data ranks), so that a draw stays as cheap as the others.
    d = rng.choice([1, 2, 2, 3, 4] if t == 1 else [1, 2, 3])
    kind, v = "interleaved", 1
    if p > 1:
        kind = rng.choice(["simple", "interleaved", "interleaved_virtual"])
        if kind == "interleaved_virtual":
            v = rng.choice([2, 3])
            if p * v > layers:
                v = 2
    m = rng.choice([1, 2, 3, 4, 6, 8])
    if kind == "interleaved_virtual":
        m = p * rng.choice([1, 2, 3])
    spec = {
        "world_size": p * t * d,
        "pipeline_parallel_degree": p,
        "tensor_parallel_degree": t,
        "microbatches": m,
        "batch_size": d * m * rng.choice([1, 2]),
        "pipeline": kind,
        "ddp": d > 1 or rng.random() < 0.3,
        "optimizer": {"type": "adamw", "lr": 1e-3,
                      "grad_clip": rng.choice([0.0, 1.0])},
        "placement_strategy": rng.choice(["cluster", "spread", "DPT", "PDT",
                                          "TDP"]),
    }
    if v > 1:
        spec["virtual_pipeline_degree"] = v
    if kind != "interleaved_virtual" and p > 1 and rng.random() < 0.4:
        spec["active_microbatches"] = rng.randint(1, m)
    precision = rng.choice(["fp32", "fp32", "bf16", "fp16"])
    if precision == "bf16":
        spec["bf16"] = True
    elif precision == "fp16":
        spec["fp16"] = True
        spec["dynamic_loss_scale"] = True
    return spec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=8,
                    help="the model's layers (bounds virtual stages)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    compile_bin = os.path.join(a.bin, "cleave-compile")
    os.makedirs(a.out, exist_ok=True)
    spec_path = os.path.join(a.out, "spec.json")
    out_dir = os.path.join(a.out, "program")
    compiled = refused = 0
    ranks_checked = 0
    features = collections.Counter()
    refusals = collections.Counter()
    started = time.time()
    while compiled < a.count:
        spec = draw(rng, a.layers)
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        shutil.rmtree(out_dir, ignore_errors=True)
        p = subprocess.run([compile_bin, a.model, "--spec", spec_path,
                            "-o", out_dir],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=300)
        if "would not run together" in p.stdout or p.returncode not in (0, 1):
            print("FAILED spec %s\n%s" % (json.dumps(spec, sort_keys=True),
                                          p.stdout))
            return 1
        if p.returncode != 0:
            refused += 1
            text = p.stdout.strip()
            refusals[text.split("error: ", 1)[-1].splitlines()[0]
                     if text else "(no message)"] += 1
            if refused > compiled + 50:
                print("too many specs refused (%d refused, %d compiled); "
                      "last: %s\n%s" % (refused, compiled,
                                        json.dumps(spec, sort_keys=True),
                                        p.stdout))
                return 1
            continue
        if "checked: the communication of %d rank" % spec["world_size"] \
                not in p.stdout:
            print("FAILED: cleave-compile did not check the communication "
                  "of spec %s\n%s" % (json.dumps(spec, sort_keys=True),
                                      p.stdout))
            return 1
        compiled += 1
        ranks_checked += spec["world_size"]
        features["pipeline %d" % spec["pipeline_parallel_degree"]] += 1
        t = spec["tensor_parallel_degree"]
        features["tensor %d" % t] += 1
        features["data %d" % (spec["world_size"] //
                              (spec["pipeline_parallel_degree"] * t))] += 1
        if t > 1:
            features["tensor %d x data %d" % (
                t, spec["world_size"] //
                (spec["pipeline_parallel_degree"] * t))] += 1
        features[spec["pipeline"]] += 1
        features["active_microbatches" if "active_microbatches" in spec
                 else "all microbatches active"] += 1
        features["bf16" if spec.get("bf16") else
                 "fp16" if spec.get("fp16") else "fp32"] += 1
    for name, n in sorted(features.items()):
        print("  %-26s %d" % (name, n))
    for why, n in refusals.most_common(5):
        print("  refused %3d: %s" % (n, why[:100]))
    print("random specs: %d compiled and checked (%d ranks), %d refused as "
          "invalid, 0 mismatches, %.0f s" % (compiled, ranks_checked, refused,
                                             time.time() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
