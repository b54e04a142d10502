"""Bytes per rank of plain data parallelism, ZeRO-1 and sharded data
parallelism (issue 14): for each model, compiles RANKS-way data parallelism
without and with shard_optimizer_state, and with sharded_data_parallel_degree
K (layout sK, every parameter sharded), and prints, per rank, plan.json's
predicted parameters, gradients, optimizer state and activations (the
gathered parameters among them), the ZeRO paper's formula for the model
states (fp32 AdamW: 4 + 4 + 8 bytes per parameter, the optimizer state
divided by the ranks under ZeRO-1, all three by K under sharding), and, with
--measure, the peak that cleave-run measures over one step next to the
plan's peak.

    /usr/bin/python3 bench/zero-memory.py BUILD [--models gpt2-124m gpt2-350m]
        [--ranks 8] [--seq 128] [--measure] [--layouts ddp zero1 s2 s4 s8]

Measuring runs RANKS processes of the whole model on this machine: about
16 bytes per parameter per rank for plain data parallelism.
"""
import argparse
import json
import os
import sys

from common import run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MIB = 1 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--models", nargs="+", default=["gpt2-124m", "gpt2-350m"])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--measure", action="store_true")
    ap.add_argument("--layouts", nargs="+", default=["ddp", "zero1"],
                    help="ddp, zero1 or sK (sharded degree K)")
    a = ap.parse_args()
    bin_dir = os.path.join(os.path.abspath(a.build), "bin")
    work = os.path.join(os.path.abspath(a.build), "bench-cache", "zero")
    os.makedirs(work, exist_ok=True)
    root_flag = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    print("%-10s %-7s %10s %10s %10s %10s %10s %12s %12s %12s" %
          ("model", "layout", "params", "grads", "opt_state", "activ.",
           "gathered", "formula", "plan peak", "measured"))
    for model in a.models:
        onnx = os.path.join(work, "%s-s%d.onnx" % (model, a.seq))
        if not os.path.exists(onnx):
            run(["/usr/bin/python3", os.path.join(ROOT, "models", "export.py"),
                 model, "--dynamic-batch", "--seq", str(a.seq), "-o", onnx])
        for layout in a.layouts:
            zero = layout == "zero1"
            sharded = int(layout[1:]) if layout.startswith("s") else 1
            if layout not in ("ddp", "zero1") and sharded < 2:
                sys.exit("unknown layout '%s': ddp, zero1 or sK" % layout)
            out = os.path.join(work, "%s-s%d-%s-d%d" % (model, a.seq, layout, a.ranks))
            flags = ["--set", "shard_optimizer_state=%s" % str(zero).lower()]
            if sharded > 1:
                flags = ["--set", "sharded_data_parallel_degree=%d" % sharded,
                         "--set", "sdp_param_persistence_threshold=0"]
            run([os.path.join(bin_dir, "cleave-compile"), onnx, "-o", out,
                 "--set", "world_size=%d" % a.ranks, "--set", "ddp=true",
                 "--set", "batch_size=%d" % a.ranks] + flags)
            plan = json.load(open(os.path.join(out, "plan.json")))
            mem = plan["ranks"][0]["predicted_memory"]
            # Parameters, from the plan: fp32, each buffer aligned (and
            # under ZeRO-1 padded to whole chunks): a few KiB over; a
            # sharded rank's parameters are 1/K of them.
            n_params = mem["parameters"] / 4 * sharded
            state = 8 * n_params / (a.ranks if zero else sharded)
            formula = (4 * n_params + 4 * n_params) / sharded + state
            measured = "-"
            if a.measure:
                metrics = out + ".jsonl"
                run(["mpirun", "-np", str(a.ranks), "--oversubscribe"] + root_flag +
                    [os.path.join(bin_dir, "cleave-run"), out,
                     "--data", os.path.join(ROOT, "data", "tokens.bin"),
                     "--steps", "2", "--threads", "1", "--metrics", metrics],
                    timeout=1800)
                last = [json.loads(l) for l in open(metrics)][-1]
                measured = "%.1f MiB" % (last["peak_bytes"] / MIB)
            print("%-10s %-7s %10.1f %10.1f %10.1f %10.1f %10.1f %8.1f MiB %8.1f MiB %12s" %
                  (model, layout, mem["parameters"] / MIB, mem["gradients"] / MIB,
                   mem["optimizer_state"] / MIB, mem["activations"] / MIB,
                   mem.get("gathered_parameters", 0) / MIB,
                   formula / MIB, mem["peak_bytes"] / MIB, measured))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
