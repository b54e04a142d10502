"""The equality matrix of the tensor-parallel and sharded-data-parallel
issues' "done when": every layout below, with and without sequence
parallelism (tensor layouts), in fp32 and bf16, trains a model as its
PyTorch reference does (models/reference.py, global batch 8, 10 AdamW
steps with weight decay and clipping): losses within 1e-5 relative and
the parameters gathered by --save-params within compare_params.py's
tolerances in fp32; losses within 2e-2 against PyTorch autocast in bf16
(today's bf16 tolerance).

    /usr/bin/python3 test/runtime/run_layout_matrix.py MODEL_REF_DIR... \
        --data tokens.bin --bin BUILD/bin --out DIR \
        [--layouts t2 t4 ...] [--sp both|on|off] [--precisions fp32 bf16]

Each MODEL_REF_DIR is a reference.py output folder (model.onnx,
losses.json, params_final.safetensors); a bf16 case uses the folder of
the same name with "-bf16" appended (reference.py --autocast bf16), and is
skipped, saying so, when there is none. Prints one line per case and a
summary; exits non-zero if any case differs, fails to compile or run, or
if no case ran.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# name -> (world size, spec keys). Tensor layouts run with and without
# sequence parallelism; the sharded ones are issue 14's, with no persistence
# threshold so that every parameter is sharded (SMP's default of 10^6
# elements would keep each of the toys' parameters whole: a ZeRO-1 program).
LAYOUTS = {
    "t2": (2, {"tensor_parallel_degree": 2}),
    "t4": (4, {"tensor_parallel_degree": 4}),
    "t2p2": (4, {"tensor_parallel_degree": 2, "pipeline_parallel_degree": 2}),
    "t2d2": (4, {"tensor_parallel_degree": 2}),
    "t2p2d2": (8, {"tensor_parallel_degree": 2, "pipeline_parallel_degree": 2}),
    "z1d4": (4, {"shard_optimizer_state": True}),
    "z1p2d2": (4, {"shard_optimizer_state": True, "pipeline_parallel_degree": 2}),
    "z1t2d2": (4, {"shard_optimizer_state": True, "tensor_parallel_degree": 2}),
    "z1t2p2d2": (8, {"shard_optimizer_state": True, "tensor_parallel_degree": 2,
                     "pipeline_parallel_degree": 2}),
    "sdp2x2": (4, {"sharded_data_parallel_degree": 2, "sdp_param_persistence_threshold": 0}),
    "sdp4": (4, {"sharded_data_parallel_degree": 4, "sdp_param_persistence_threshold": 0}),
    "sdp2t2": (4, {"sharded_data_parallel_degree": 2, "tensor_parallel_degree": 2,
                     "sdp_param_persistence_threshold": 0}),
}

SPEC = {"batch_size": 8, "microbatches": 2, "ddp": True,
        "optimizer": {"type": "adamw", "lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8,
                      "weight_decay": 0.1, "grad_clip": 1.0}}


def run(cmd, timeout=360):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, "timed out after %d s" % timeout
    return p.returncode, p.stdout


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def case(a, ref, model, layout, sp, precision):
    world, keys = LAYOUTS[layout]
    name = "%s %s%s %s" % (model, layout, "+sp" if sp else "", precision)
    out = os.path.join(a.out, "%s-%s%s-%s" % (model, layout, "-sp" if sp else "", precision))
    spec = dict(SPEC, **keys)
    spec["world_size"] = world
    if sp:
        spec["sequence_parallel"] = True
    if precision == "bf16":
        spec["bf16"] = True
    with open(out + ".spec.json", "w") as f:
        json.dump(spec, f)
    rc, text = run([os.path.join(a.bin, "cleave-compile"), os.path.join(ref, "model.onnx"),
                    "--spec", out + ".spec.json", "-o", out])
    if rc != 0:
        return name, False, "COMPILE FAILED\n" + text
    t0 = time.time()
    rc, text = run(["timeout", "330", "mpirun", "-np", str(world), "--oversubscribe",
                    "--allow-run-as-root", os.path.join(a.bin, "cleave-run"), out,
                    "--data", a.data, "--steps", str(a.steps), "--threads", "1",
                    "--metrics", out + ".jsonl", "--save-params", out + ".safetensors"])
    seconds = time.time() - t0
    if rc != 0:
        return name, False, "RUN FAILED (exit %d)\n%s" % (rc, text[-3000:])
    if precision == "bf16":
        rc, losses = run([sys.executable, os.path.join(HERE, "compare_losses.py"),
                          out + ".jsonl", os.path.join(ref, "losses.json"), "--rtol", "2e-2"])
        return name, rc == 0, "losses: %s  (%.1f s)" % (last_line(losses), seconds)
    rc1, losses = run([sys.executable, os.path.join(HERE, "compare_losses.py"),
                       out + ".jsonl", os.path.join(ref, "losses.json")])
    rc2, params = run([sys.executable, os.path.join(HERE, "compare_params.py"),
                       out + ".safetensors", os.path.join(ref, "params_final.safetensors")])
    detail = "losses: %s  params: %s  (%.1f s)" % (last_line(losses), last_line(params), seconds)
    if rc1 or rc2:
        detail += "\n" + losses + params
    return name, rc1 == 0 and rc2 == 0, detail


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("references", nargs="+")
    ap.add_argument("--data", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--layouts", nargs="+", default=sorted(LAYOUTS), choices=sorted(LAYOUTS))
    ap.add_argument("--sp", choices=["both", "on", "off"], default="both",
                    help="sequence parallelism in the tensor layouts")
    ap.add_argument("--precisions", nargs="+", default=["fp32", "bf16"],
                    choices=["fp32", "bf16"])
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    ran = failed = 0
    started = time.time()
    for ref in a.references:
        model = os.path.basename(os.path.normpath(ref))
        for layout in a.layouts:
            tensor = "tensor_parallel_degree" in LAYOUTS[layout][1]
            sps = {"both": [False, True], "on": [True], "off": [False]}[a.sp] if tensor else [False]
            for sp in sps:
                for precision in a.precisions:
                    folder = ref if precision == "fp32" else os.path.normpath(ref) + "-bf16"
                    if not os.path.isdir(folder):
                        print("%s %s %s skipped: no reference %s" % (model, layout, precision, folder))
                        continue
                    name, ok, detail = case(a, folder, model, layout, sp, precision)
                    ran += 1
                    failed += not ok
                    print("%-32s %s  %s" % (name, "ok" if ok else "DIFFERS", detail), flush=True)
    print("layout matrix: %d cases ran, %d failed (%.0f s)" % (ran, failed, time.time() - started))
    sys.exit(0 if failed == 0 and ran > 0 else 1)


if __name__ == "__main__":
    main()
