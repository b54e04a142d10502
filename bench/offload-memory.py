"""Device and host memory of activation offload (issue 15): for one model,
compiles activation_checkpointing `each` alone and with
offload_activations at each horizon, and prints plan.json's device and
host activations and peaks next to what cleave-run measures over two steps
on `--device cpu-staged` (the device's copy path: the host arena is real
host memory, the device arena the staged backend's), the predicted step
time and the second step's measured time.

    /usr/bin/python3 bench/offload-memory.py BUILD [--model gpt2-124m]
        [--seq 1024] [--batch 1] [--horizons 1 2] [--steps 2] [--no-run]

The losses of every run are checked to be the same floats as `each`'s.
"""
import argparse
import json
import os
import sys

from common import SameLosses, run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MB = 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--model", default="gpt2-124m")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--horizons", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--out", default="/tmp/offload-memory")
    ap.add_argument("--no-run", action="store_true",
                    help="plans only, no cleave-run")
    a = ap.parse_args()
    bin_dir = os.path.join(os.path.abspath(a.build), "bin")
    os.makedirs(a.out, exist_ok=True)
    onnx = os.path.join(a.out, "%s-%d.onnx" % (a.model, a.seq))
    if not os.path.exists(onnx):
        run([sys.executable, os.path.join(ROOT, "models", "export.py"),
             a.model, "--dynamic-batch", "--seq", str(a.seq), "-o", onnx])
    data = os.path.join(ROOT, "data", "tokens.bin")
    configs = [("each", [])] + [
        ("each + offload, horizon %d" % h,
         ["--set", "offload_activations=true",
          "--set", "activation_loading_horizon=%d" % h])
        for h in a.horizons]
    print("| %s, seq %d, batch %d | device activations plan | device peak "
          "plan | device peak measured | host arena plan | host measured "
          "| step predicted | step measured (last) |" % (a.model, a.seq,
                                                          a.batch))
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    runs = SameLosses(bin_dir, data, a.steps, "cpu-staged")
    for name, sets in configs:
        out = os.path.join(a.out, name.replace(" ", "").replace(",", "-"))
        cmd = [os.path.join(bin_dir, "cleave-compile"), onnx, "--set",
               "batch_size=%d" % a.batch, "--set",
               "activation_checkpointing=each"] + sets + ["-o", out]
        print("<!-- %s -->" % " ".join(cmd[1:]))
        run(cmd)
        plan = json.load(open(os.path.join(out, "plan.json")))
        rank = plan["ranks"][0]
        by_space = rank["predicted_activations_by_space"]
        memory = rank["predicted_memory_by_space"]
        step = rank.get("predicted_step_seconds", plan.get(
            "predicted_step_seconds", 0))
        measured = host = seconds = "-"
        if not a.no_run:
            last = runs.train(name, out, out + ".jsonl")[-1]
            measured = "%.1f MB" % (last["peak_bytes"] / MB)
            host = "%.1f MB" % (last.get("host_peak_bytes", 0) / MB)
            seconds = "%.2f s" % (a.batch * a.seq / last["tokens_per_s"])
        print("| %s | %.1f MB | %.1f MB | %s | %.1f MB | %s | %s | %s |"
              % (name, by_space["device"] / MB, memory["device"] / MB,
                 measured, memory["host"] / MB, host,
                 "%.2f s" % step if step else "-", seconds))


main()
