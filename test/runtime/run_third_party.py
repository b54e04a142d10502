"""Compiles and runs every export of models/third_party.py with cleave-run
(--forward-only) and compares each step's loss with PyTorch's.

    /usr/bin/python3 test/runtime/run_third_party.py DIR [--rtol 1e-5]

Prints one line per file for FileCheck; exits non-zero if any differs.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--rtol", type=float, default=1e-5)
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.dir, "*.onnx")))
    if not files:
        sys.exit("run_third_party.py: no .onnx files in %s" % a.dir)
    failed = 0
    for path in files:
        name = os.path.basename(path)[:-len(".onnx")]
        model = re.sub(r"_op\d+(_dyn)?$", "", name)
        with open(os.path.join(a.dir, model + ".losses.json")) as f:
            ref = json.load(f)
        out = os.path.join(a.dir, name + ".out")
        metrics = os.path.join(a.dir, name + ".jsonl")
        steps = [["cleave-compile", path, "--set", "batch_size=%d" % ref["batch"], "-o", out],
                 ["cleave-run", out, "--data", os.path.join(a.dir, ref["data"]),
                  "--steps", str(len(ref["losses"])), "--forward-only", "--metrics", metrics]]
        error = None
        for step in steps:
            run = subprocess.run(step, capture_output=True, text=True)
            if run.returncode != 0:
                error = "%s failed:\n%s" % (" ".join(step), run.stderr)
                break
        if error is None:
            with open(metrics) as f:
                ours = [json.loads(line)["loss"] for line in f if line.strip()]
            worst = max(abs(o - t) / abs(t) for o, t in zip(ours, ref["losses"]))
            if len(ours) != len(ref["losses"]) or worst > a.rtol:
                error = "losses %s, PyTorch %s" % (ours, ref["losses"])
        if error:
            failed += 1
            print("DIFFERS %s: %s" % (name, error))
        else:
            print("matched %s (max relative difference %.1e)" % (name, worst))
    print("%d of %d match PyTorch" % (len(files) - failed, len(files)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
