"""Compares the losses cleave-run wrote (--metrics JSONL) with PyTorch's
(losses.json of models/reference.py), step by step.

    /usr/bin/python3 test/runtime/compare_losses.py METRICS.jsonl LOSSES.json
        [--rtol 1e-5]

Prints one line per step and exits non-zero if a step differs by more than
rtol (relative) or the step counts differ.
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("metrics")
    ap.add_argument("reference")
    ap.add_argument("--rtol", type=float, default=1e-5)
    a = ap.parse_args()
    with open(a.metrics) as f:
        ours = [json.loads(line) for line in f if line.strip()]
    with open(a.reference) as f:
        theirs = json.load(f)["losses"]
    if len(ours) != len(theirs):
        sys.exit("compare_losses: %d steps in %s, %d in %s"
                 % (len(ours), a.metrics, len(theirs), a.reference))
    worst = 0.0
    for i, (o, t) in enumerate(zip(ours, theirs)):
        if o.get("step") is None or o.get("loss") is None:
            sys.exit("compare_losses: line %d of %s has no step or loss" % (i + 1, a.metrics))
        rel = abs(o["loss"] - t) / max(abs(t), 1e-12)
        worst = max(worst, rel)
        print("step %d: cleave %.7f torch %.7f rel %.2e %s"
              % (o["step"], o["loss"], t, rel, "ok" if rel <= a.rtol else "DIFFERS"))
    print("max relative difference %.2e (rtol %.0e)" % (worst, a.rtol))
    sys.exit(0 if worst <= a.rtol else 1)


if __name__ == "__main__":
    main()
