"""Bytes per rank of plain data parallelism, ZeRO-1 and sharded data
parallelism (issue 14), by category: for each model, compiles RANKS-way data
parallelism plain (ddp), with shard_optimizer_state (zero1), and with
sharded_data_parallel_degree K (sK, every parameter sharded:
sdp_param_persistence_threshold 0), and prints a Markdown table of rank 0's
parameters, gradients, optimizer state, the most gathered parameters live at once
(ZeRO-3's gather buffers, part of the activations in plan.json), the
activations at the live peak (the peak less the model states: the
reduce-scatter's flattened gradients among them) and the live peak, three
ways:

  - predicted: plan.json's predicted_memory (the peak: its
    predicted_live_peak_bytes, what the runtime's live peak is compared with);
  - measured:  cleave-run's metrics after 2 steps under mpirun on the CPU
    backend, rank 0: each category's own peak (category_peak_bytes),
    live_peak_bytes, and what it held when reached (live_peak_categories);
  - formula:   the ZeRO paper's (Rajbhandari et al. 2020, section 3 and 5):
    bytes per parameter 4 + 4 + 8 in fp32 (parameter, gradient, AdamW's two
    moments), 2 + 2 + 12 with mixed precision (fp16/bf16 parameter and
    gradient; fp32 master, momentum and variance), each term divided by the
    ranks that share it: the optimizer state by RANKS under ZeRO-1, all
    three by K under sharding. The parameter count is the model's trainable
    parameters (the ONNX initializers).

Layout tK is tensor parallelism of degree K instead (issue 13's per-rank
table; data parallel RANKS / K), which has no formula row: its parameters
are split by the propagated sharding, the replicated ones (norms, and the
embedding and head when K does not divide the vocabulary) whole.

A layout whose predicted peak over RANKS ranks exceeds --max-total-gib is
not run ("predicted only"): the machine must hold all RANKS processes.

    /usr/bin/python3 bench/zero-memory.py BUILD [--models gpt2-124m gpt2-350m]
        [--ranks 8] [--seq 64] [--measure] [--bf16]
        [--layouts ddp zero1 s2 s4 s8 t2 t4] [--max-total-gib 14] [--reuse]
        [--bucket 0]
"""
import argparse
import json
import os
import sys

from common import run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MIB = 1 << 20
GIB = 1 << 30
HEAD = ["params", "grads", "opt state", "gathered (max)",
        "activ. at peak", "peak"]


def mib(x):
    return "-" if x is None else "%.1f" % (x / MIB)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--models", nargs="+", default=["gpt2-124m", "gpt2-350m"])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--measure", action="store_true")
    ap.add_argument("--bf16", action="store_true",
                    help="bf16 mixed precision (formula 2 + 2 + 12)")
    ap.add_argument("--layouts", nargs="+",
                    default=["ddp", "zero1", "s2", "s4", "s8"],
                    help="ddp, zero1, sK (sharded degree K) or tK "
                         "(tensor parallel degree K)")
    ap.add_argument("--bucket", type=int, default=0,
                    help="sdp_reduce_bucket_size of the sharded layouts "
                         "(0: one reduce-scatter per gradient; SMP's 5e8 "
                         "puts a 124M model's gradients in one bucket, "
                         "flattened beside them)")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse a layout's metrics from an earlier run of "
                         "the same program and cleave-run")
    ap.add_argument("--max-total-gib", type=float, default=14.0,
                    help="measure only layouts whose predicted peak times "
                         "the ranks stays within this")
    a = ap.parse_args()
    bin_dir = os.path.join(os.path.abspath(a.build), "bin")
    work = os.path.join(os.path.abspath(a.build), "bench-cache", "zero")
    os.makedirs(work, exist_ok=True)
    root_flag = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    precision = "bf16" if a.bf16 else "fp32"
    per_param = (2, 2, 12) if a.bf16 else (4, 4, 8)
    counts = {}
    print("| model | layout | %s | source | %s |" % (precision, " | ".join(HEAD)))
    print("|---|---|---|---|%s" % ("---:|" * len(HEAD)))
    for model in a.models:
        onnx = os.path.join(work, "%s-s%d.onnx" % (model, a.seq))
        if not os.path.exists(onnx):
            run(["/usr/bin/python3", os.path.join(ROOT, "models", "export.py"),
                 model, "--dynamic-batch", "--seq", str(a.seq), "-o", onnx])
        count = counts[model] = parameter_count(onnx)
        for layout in a.layouts:
            zero = layout == "zero1"
            sharded = int(layout[1:]) if layout.startswith("s") else 1
            tensor = int(layout[1:]) if layout.startswith("t") else 1
            if layout not in ("ddp", "zero1") and max(sharded, tensor) < 2:
                sys.exit("unknown layout '%s': ddp, zero1, sK or tK" % layout)
            out = os.path.join(work, "%s-s%d-%s-%s-d%d" %
                               (model, a.seq, precision, layout, a.ranks))
            flags = ["--set", "shard_optimizer_state=%s" % str(zero).lower()]
            if sharded > 1:
                flags = ["--set", "sharded_data_parallel_degree=%d" % sharded,
                         "--set", "sdp_param_persistence_threshold=0",
                         "--set", "sdp_reduce_bucket_size=%d" % a.bucket]
            if tensor > 1:
                flags = ["--set", "tensor_parallel_degree=%d" % tensor]
            if a.bf16:
                flags += ["--set", "bf16=true"]
            compile_cmd = [os.path.join(bin_dir, "cleave-compile"), onnx,
                           "-o", out, "--set", "world_size=%d" % a.ranks,
                           "--set", "ddp=true",
                           "--set", "batch_size=%d" % a.ranks] + flags
            print("<!-- %s -->" % " ".join(compile_cmd[1:]))
            # Compiled again unless OUT holds this command's program, made
            # after the model and the compiler.
            plan_path = os.path.join(out, "plan.json")
            made_by = os.path.join(out, "compile-command.txt")
            if not (os.path.exists(plan_path) and os.path.exists(made_by) and
                    open(made_by).read() == " ".join(compile_cmd) and
                    os.path.getmtime(plan_path) > max(
                        os.path.getmtime(onnx), os.path.getmtime(compile_cmd[0]))):
                run(compile_cmd)
                with open(made_by, "w") as f:
                    f.write(" ".join(compile_cmd))
            plan = json.load(open(os.path.join(out, "plan.json")))
            rank0 = plan["ranks"][0]
            mem = rank0["predicted_memory"]
            gathered = mem.get("gathered_parameters", 0)
            peak = rank0["predicted_live_peak_bytes"]["device"]
            states = [mem["parameters"], mem["gradients"],
                      mem["optimizer_state"]]
            predicted = states + [gathered, peak - sum(states), peak]
            n = count
            p, g, o = (b * n for b in per_param)
            formula = [p / sharded, g / sharded,
                       o / (a.ranks if zero else sharded), None, None,
                       None]
            formula[5] = sum(formula[:3])
            rows = [("predicted", predicted)]
            if tensor == 1:
                rows.append(("formula", formula))
            total = peak * a.ranks
            if a.measure and total > a.max_total_gib * GIB:
                rows.append(("measured", None))
            elif a.measure:
                metrics = out + ".jsonl"
                cmd = (["mpirun", "-np", str(a.ranks), "--oversubscribe"] +
                       root_flag +
                       [os.path.join(bin_dir, "cleave-run"), out,
                        "--data", os.path.join(ROOT, "data", "tokens.bin"),
                        "--steps", "2", "--threads", "1",
                        "--metrics", metrics])
                print("<!-- %s -->" % " ".join(cmd))
                sys.stdout.flush()
                # A run's metrics newer than its program and cleave-run are
                # reused (--reuse): the same measurement, not a new one.
                if not (a.reuse and os.path.exists(metrics) and
                        os.path.getmtime(metrics) > max(
                            os.path.getmtime(plan_path),
                            os.path.getmtime(cmd[cmd.index("--oversubscribe") +
                                                 1 + len(root_flag)]))):
                    run(cmd, timeout=3600)
                last = [json.loads(l) for l in open(metrics)][-1]
                cats = last["category_peak_bytes"]
                measured = [cats[c][0] for c in
                            ("parameters", "gradients", "optimizer_state")]
                live = last["live_peak_bytes"][0]
                at_peak = last["live_peak_categories"]
                rows.append(("measured", measured + [
                    cats["gathered_parameters"][0],
                    live - sum(at_peak[c][0] for c in
                               ("parameters", "gradients",
                                "optimizer_state")),
                    live]))
            for source, values in rows:
                if values is None:
                    cells = ["does not fit this machine's 24 GiB "
                             "(%.1f GiB over %d ranks), predicted only" %
                             (total / GIB, a.ranks)] + [""] * (len(HEAD) - 1)
                else:
                    cells = [mib(v) for v in values]
                print("| %s | %s | %s | %s | %s |" %
                      (model, layout, precision, source, " | ".join(cells)))
            sys.stdout.flush()
    print("\nMiB per rank (rank 0); %s; parameters (ONNX initializers): %s; "
          "sequence %d, one sample per rank." %
          (precision, ", ".join("%s %d" % kv for kv in counts.items()), a.seq))


def parameter_count(onnx_path):
    """The model's parameters: the exported ONNX's initializers' elements
    (every one a trained parameter in models/export.py's exports)."""
    import onnx
    model = onnx.load(onnx_path, load_external_data=False)
    n = 0
    for t in model.graph.initializer:
        k = 1
        for d in t.dims:
            k *= d
        n += k
    return n


if __name__ == "__main__":
    main()
