"""Activation checkpointing and offload on one model (issue 15's closing
table): for each strategy (none, each, group_2, contiguous, selective) and
each offload horizon (on top of `each`), prints

1. predicted, at the largest batch whose plan fits DEVICE GiB (the compile
   with `device_memory_gib` set says whether it fits): the batch, the
   device and host activations, the device peak, the predicted step time
   and its recompute and host-copy seconds (plan.json's stages'
   `recompute_seconds` and `host_copy_seconds` times the microbatches) and
   the recompute overhead: those seconds over the rest of the step;
2. with --measure, at --batch (small enough to run here): the same plan
   numbers next to what cleave-run measures over --steps steps on
   --device (cpu-staged: the host arena is host memory, the device arena
   the staged backend's): device activations (the measured peak less the
   plan's non-activation bytes), host activations, the last step's time,
   and the overhead against `none`'s measured step. The losses of every
   run are checked to be the same floats as the first configuration's.

    /usr/bin/python3 bench/remat-memory.py BUILD [--model gpt2-124m]
        [--seq 1024] [--device-gib 20] [--configs none each ... offload2]
        [--measure] [--batch 1] [--steps 2] [--device cpu-staged]
"""
import argparse
import json
import os
import subprocess
import sys

from common import SameLosses, run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MB = 1e6
GIB = 1 << 30


def sets_of(config):
    """`none`, a strategy, or `offload<H>` (each with offload, horizon H)."""
    if config.startswith("offload"):
        return ["activation_checkpointing=each", "offload_activations=true",
                "activation_loading_horizon=%s" % config[len("offload"):]]
    return ["activation_checkpointing=%s" % config]


def compile_plan(bin_dir, onnx, out, batch, config, device_gib=None):
    """plan.json of `config` at `batch`, or None when it does not fit."""
    cmd = [os.path.join(bin_dir, "cleave-compile"), onnx,
           "--set", "batch_size=%d" % batch]
    for s in sets_of(config):
        cmd += ["--set", s]
    if device_gib is not None:
        cmd += ["--set", "device_memory_gib=%g" % device_gib]
    cmd += ["-o", out]
    if device_gib is not None:
        p = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if p.returncode:
            if "device_memory_gib" in p.stdout:
                return None, cmd
            sys.exit("failed: %s\n%s" % (" ".join(cmd), p.stdout[-3000:]))
    else:
        run(cmd)
    return json.load(open(os.path.join(out, "plan.json"))), cmd


def numbers(plan):
    """Device and host activations, device peak, step, recompute and copy
    seconds per step (one rank)."""
    rank = plan["ranks"][0]
    microbatches = plan["batch"]["microbatches"]
    stages = [s for s in plan["stages"] if s["stage"] in rank["stages"]]
    return {
        "device_act": rank["predicted_activations_by_space"]["device"],
        "host_act": rank["predicted_activations_by_space"]["host"],
        "device_peak": rank["predicted_memory_by_space"]["device"],
        "step": rank["predicted_step_seconds"],
        "recompute": microbatches * sum(s["recompute_seconds"]
                                        for s in stages),
        "copies": microbatches * sum(s["host_copy_seconds"] for s in stages),
    }


def overhead(n):
    extra = n["recompute"] + n["copies"]
    return extra / (n["step"] - extra) if n["step"] > extra else 0.0


def largest_batch(bin_dir, onnx, work, config, device_gib):
    """The largest batch whose plan fits, from the plans at batches 1 and 2
    (activations grow about linearly with the batch), then checked by
    compiling with device_memory_gib."""
    fits = {}

    def plan_at(b):
        if b not in fits:
            fits[b] = compile_plan(bin_dir, onnx,
                                   os.path.join(work, "%s-b%d" % (config, b)),
                                   b, config, device_gib)
        return fits[b][0]

    one, two = plan_at(1), plan_at(2)
    if one is None:
        return 0, None, None
    if two is None:
        return 1, one, fits[1][1]
    d1 = one["ranks"][0]["predicted_memory_by_space"]["device"]
    d2 = two["ranks"][0]["predicted_memory_by_space"]["device"]
    b = max(2, 1 + int((device_gib * GIB - d1) // max(d2 - d1, 1)))
    while plan_at(b) is None and b > 2:
        b -= 1
    while plan_at(b + 1) is not None:
        b += 1
    return b, plan_at(b), fits[b][1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--model", default="gpt2-124m")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--device-gib", type=float, default=20)
    ap.add_argument("--configs", nargs="+",
                    default=["none", "each", "group_2", "contiguous",
                             "selective", "offload1", "offload2"])
    ap.add_argument("--measure", action="store_true",
                    help="also run cleave-run at --batch")
    ap.add_argument("--no-predict", action="store_true",
                    help="skip the largest-batch search")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--device", default="cpu-staged")
    ap.add_argument("--out", default="/tmp/remat-memory")
    a = ap.parse_args()
    bin_dir = os.path.join(os.path.abspath(a.build), "bin")
    os.makedirs(a.out, exist_ok=True)
    onnx = os.path.join(a.out, "%s-%d.onnx" % (a.model, a.seq))
    if not os.path.exists(onnx):
        run(["/usr/bin/python3", os.path.join(ROOT, "models", "export.py"),
             a.model, "--dynamic-batch", "--seq", str(a.seq), "-o", onnx])

    if not a.no_predict:
        print("Predicted: %s, seq %d, the largest batch whose plan fits "
              "device_memory_gib %g" % (a.model, a.seq, a.device_gib))
        print()
        print("| config | batch | device activations | host activations | "
              "device peak | step | recompute | host copies | overhead |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for config in a.configs:
            b, plan, cmd = largest_batch(bin_dir, onnx, a.out, config,
                                         a.device_gib)
            if plan is None:
                print("| %s | batch 1 does not fit | | | | | | | |" % config)
                continue
            print("<!-- %s -->" % " ".join(cmd[1:]))
            n = numbers(plan)
            print("| %s | %d | %.2f GiB | %.1f MB | %.2f GiB | %.1f s | "
                  "%.1f s | %.2f s | %+.1f %% |"
                  % (config, b, n["device_act"] / GIB, n["host_act"] / MB,
                     n["device_peak"] / GIB, n["step"], n["recompute"],
                     n["copies"], 100 * overhead(n)))
        print()

    if not a.measure:
        return
    data = os.path.join(ROOT, "data", "tokens.bin")
    print("Measured: %s, seq %d, batch %d, cleave-run --device %s, %d steps"
          % (a.model, a.seq, a.batch, a.device, a.steps))
    print()
    print("| config | device activations plan | measured | host activations "
          "plan | measured | step predicted | measured (last) | recompute "
          "overhead predicted | measured |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    runs = SameLosses(bin_dir, data, a.steps, a.device)
    none_step = None
    for config in a.configs:
        out = os.path.join(a.out, "%s-run-b%d" % (config, a.batch))
        plan, cmd = compile_plan(bin_dir, onnx, out, a.batch, config)
        print("<!-- %s -->" % " ".join(cmd[1:]))
        n = numbers(plan)
        lines = runs.train(config, out, out + "-%s.jsonl" % a.device)
        print("<!-- %s losses: %s -->" % (config, [l["loss"] for l in lines]))
        last = lines[-1]
        fixed = n["device_peak"] - n["device_act"]
        measured_act = last["peak_bytes"] - fixed
        step = a.batch * a.seq / last["tokens_per_s"]
        if config == "none":
            none_step = step
        print("| %s | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.2f s | "
              "%.2f s | %+.1f %% | %s |"
              % (config, n["device_act"] / MB, measured_act / MB,
                 n["host_act"] / MB, last.get("host_peak_bytes", 0) / MB,
                 n["step"], step, 100 * overhead(n),
                 "%+.1f %%" % (100 * (step / none_step - 1))
                 if none_step else "-"))


main()
