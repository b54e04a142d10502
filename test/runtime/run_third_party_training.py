"""Trains each model that `models/third_party.py --train` wrote with
cleave-compile and cleave-run (on PATH) and compares the losses and final
parameters with PyTorch's, using compare_losses.py and compare_params.py.

    /usr/bin/python3 test/runtime/run_third_party_training.py DIR

Prints "<model>: losses ok, parameters ok" per model (or what differed) and
exits non-zero if any model differs or fails to compile or run.
"""
import glob
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    d = sys.argv[1]
    failed = False
    for onnx in sorted(glob.glob(os.path.join(d, "*_train.onnx")),
                       key=lambda p: os.path.getmtime(p)):
        name = os.path.basename(onnx)[:-len("_train.onnx")]
        ref = os.path.join(d, name + ".train")
        out = os.path.join(d, name + ".program")
        steps = "10"
        rc, text = run(["cleave-compile", onnx, "--spec",
                        os.path.join(d, name + ".spec.json"), "-o", out])
        if rc == 0:
            rc, text = run(["cleave-run", out, "--data", os.path.join(d, "tokens.bin"),
                            "--steps", steps, "--metrics", out + ".jsonl",
                            "--save-params", out + ".safetensors"])
        if rc != 0:
            print("%s: FAILED\n%s" % (name, text))
            failed = True
            continue
        lrc, ltext = run([sys.executable, os.path.join(HERE, "compare_losses.py"),
                          out + ".jsonl", os.path.join(ref, "losses.json")])
        prc, ptext = run([sys.executable, os.path.join(HERE, "compare_params.py"),
                          out + ".safetensors",
                          os.path.join(ref, "params_final.safetensors")])
        print("%s: losses %s, parameters %s" % (name, "ok" if lrc == 0 else "DIFFER",
                                                "ok" if prc == 0 else "DIFFER"))
        print("   " + ltext.strip().splitlines()[-1])
        print("   " + ptext.strip().splitlines()[-1])
        failed |= lrc != 0 or prc != 0
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
