"""Trains each export that `models/third_party.py --train` wrote with
cleave-compile and cleave-run (on PATH) and compares the losses and final
parameters with PyTorch's, using compare_losses.py and compare_params.py
with their default tolerances.

    /usr/bin/python3 test/runtime/run_third_party_training.py DIR [--steps 10]

Each <model>_train_op<N>[_dyn].onnx is compiled with DIR/<model>.spec.json;
the dynamic-batch exports with 2 microbatches (gradient accumulation), the
static ones with 1 (the exported batch is the whole global batch).

With --ranks N (N > 1) only the dynamic-batch exports run, each under
`mpirun -np N` as N data-parallel ranks of one microbatch; --only REGEX
keeps the exports whose name matches, and each --set KEY=VALUE is passed
to cleave-compile after the script's own (e.g. shard_optimizer_state=true).
--rtol is compare_losses.py's tolerance; --losses-only skips the
parameters, for bf16 against PyTorch autocast (third_party.py --autocast
bf16): there, parameters whose gradients are near zero take AdamW updates
of about lr from rounding alone, so 10 steps move them as far apart as
training moves them at all. Prints
"<export>: losses ok, parameters ok" and the comparisons' worst figures per
export (or what failed) and exits non-zero if any export differs or fails
to compile or run.
"""
import argparse
import glob
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--only", default="")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--rtol", help="compare_losses.py's --rtol")
    ap.add_argument("--losses-only", action="store_true")
    a = ap.parse_args()
    d = a.dir
    exports = sorted(glob.glob(os.path.join(d, "*_train_op*.onnx")))
    exports = [e for e in exports if re.search(a.only, os.path.basename(e))
               and (a.ranks == 1 or e.endswith("_dyn.onnx"))]
    if not exports:
        sys.exit("run_third_party_training.py: no *_train_op*.onnx in %s" % d)
    failed = 0
    for onnx in exports:
        tag = os.path.basename(onnx)[:-len(".onnx")]
        model = re.sub(r"_train_op\d+(_dyn)?$", "", tag)
        ref = os.path.join(d, model + ".train")
        out = os.path.join(d, tag + ".program")
        microbatches = "2" if tag.endswith("_dyn") and a.ranks == 1 else "1"
        sets = ["microbatches=" + microbatches]
        launch = []
        if a.ranks > 1:
            sets += ["world_size=%d" % a.ranks, "ddp=true"]
            launch = ["timeout", "300", "mpirun", "-np", str(a.ranks),
                      "--oversubscribe", "--allow-run-as-root"]
        rc, text = run(["cleave-compile", onnx, "--spec",
                        os.path.join(d, model + ".spec.json"), "-o", out] +
                       [arg for kv in sets + a.set for arg in ("--set", kv)])
        if rc == 0:
            rc, text = run(launch + ["cleave-run", out, "--data", os.path.join(d, "tokens.bin"),
                                     "--steps", str(a.steps), "--threads", "1",
                                     "--metrics", out + ".jsonl",
                                     "--save-params", out + ".safetensors"])
        if rc != 0:
            print("%s: FAILED\n%s" % (tag, text))
            failed += 1
            continue
        lrc, ltext = run([sys.executable, os.path.join(HERE, "compare_losses.py"),
                          out + ".jsonl", os.path.join(ref, "losses.json")] +
                         (["--rtol", a.rtol] if a.rtol else []))
        if a.losses_only:
            prc, ptext = 0, "parameters not compared (--losses-only)"
        else:
            prc, ptext = run([sys.executable, os.path.join(HERE, "compare_params.py"),
                              out + ".safetensors",
                              os.path.join(ref, "params_final.safetensors")])
        print("%s: losses %s, parameters %s" % (
            tag, "ok" if lrc == 0 else "DIFFER",
            "not compared" if a.losses_only else "ok" if prc == 0 else "DIFFER"))
        print("   " + ltext.strip().splitlines()[-1])
        print("   " + ptext.strip().splitlines()[-1])
        failed += lrc != 0 or prc != 0
    print("%d of %d train as in PyTorch" % (len(exports) - failed, len(exports)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
