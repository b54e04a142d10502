"""Checks that two cleave-run --metrics files have the same losses, step by
step (relative difference at most --rtol, default 1e-12).

    /usr/bin/python3 test/runtime/same_losses.py A.jsonl B.jsonl [--rtol R]

Prints "N steps, the same losses" or the first step that differs (exit 1).
"""
import argparse
import json
import sys


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rtol", type=float, default=1e-12)
    args = ap.parse_args()
    a, b = losses(args.a), losses(args.b)
    if len(a) != len(b):
        sys.exit("%d steps in %s, %d in %s" % (len(a), args.a, len(b), args.b))
    for step, (x, y) in enumerate(zip(a, b)):
        if x is None or y is None or abs(x - y) > args.rtol * max(abs(x), abs(y)):
            sys.exit("step %d: %r in %s, %r in %s" % (step, x, args.a, y, args.b))
    print("%d steps, the same losses" % len(a))


if __name__ == "__main__":
    main()
