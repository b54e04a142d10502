"""Compares the activation memory of two compiles of one model per rank:
the plan's predicted activation bytes (plan.json) and, when metrics files
are given, the peak bytes cleave-run measured. Used to show that a layout
(sequence parallelism) holds fewer activation bytes per rank than another
(tensor parallelism alone).

    /usr/bin/python3 test/runtime/compare_activation_memory.py \
        BASE_DIR SMALLER_DIR [--metrics BASE.jsonl SMALLER.jsonl]

Prints the figures of every rank and exits non-zero unless SMALLER's
predicted activations are below BASE's on every rank, and its measured
peak (the last step's) below BASE's, and both runs measured the live peaks
the plan predicts (per rank and memory space, to the byte).
"""
import argparse
import json
import os
import sys


def activations(out_dir):
    with open(os.path.join(out_dir, "plan.json")) as f:
        plan = json.load(f)
    return [r["predicted_memory"]["activations"] for r in plan["ranks"]]


def last_peak(metrics):
    with open(metrics) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    return lines[-1]["peak_bytes"], lines[-1]["predicted_peak_bytes"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("smaller")
    ap.add_argument("--metrics", nargs=2)
    a = ap.parse_args()
    base, smaller = activations(a.base), activations(a.smaller)
    if len(base) != len(smaller):
        sys.exit("compare_activation_memory.py: %d ranks against %d" %
                 (len(base), len(smaller)))
    ok = True
    for rank, (b, s) in enumerate(zip(base, smaller)):
        less = b - s
        print("rank %d: predicted activations %d -> %d bytes (%.1f%% less)" %
              (rank, b, s, 100.0 * less / b))
        ok &= s < b
    if a.metrics:
        (bm, bp), (sm, sp) = last_peak(a.metrics[0]), last_peak(a.metrics[1])
        print("measured peak %d -> %d bytes (plan %d -> %d)" % (bm, sm, bp, sp))
        ok &= sm < bm
        # Each run's live peaks, per rank and space, are the plan's.
        for metrics in a.metrics:
            with open(metrics) as f:
                last = [json.loads(line) for line in f if line.strip()][-1]
            exact = all(m == p for k in ("live_peak_bytes",
                                         "host_live_peak_bytes") if k in last
                        for m, p in zip(last[k], last["predicted_" + k]))
            print("%s: live peak measured %s plan on every rank"
                  % (os.path.basename(metrics), "==" if exact else "!="))
            ok &= exact
    print("smaller" if ok else "NOT smaller")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
