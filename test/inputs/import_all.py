"""Imports every ONNX file of a folder with cleave-compile and verifies it
with cleave-opt; prints one line per file for FileCheck.

    /usr/bin/python3 test/inputs/import_all.py DIR [--batch N]

A file whose name ends in _dyn.onnx has a symbolic batch axis and is compiled
with --batch N. Exits non-zero if any file fails, after trying them all.
"""
import argparse
import glob
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--batch", type=int, default=3)
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(args.dir, "*.onnx")))
    if not files:
        sys.exit("import_all.py: no .onnx files in %s" % args.dir)
    failed = 0
    for path in files:
        name = os.path.basename(path)
        mlir = path[:-len(".onnx")] + ".mlir"
        cmd = ["cleave-compile", path, "--emit=mlir", "-o", mlir]
        if name.endswith("_dyn.onnx"):
            cmd += ["--batch", str(args.batch)]
        steps = [cmd, ["cleave-opt", mlir, "--cleave-verify-imported", "-o", os.devnull]]
        for step in steps:
            run = subprocess.run(step, capture_output=True, text=True)
            if run.returncode != 0:
                print("FAILED %s: %s\n%s" % (name, " ".join(step), run.stderr))
                failed += 1
                break
        else:
            print("imported %s" % name)
    print("%d of %d imported" % (len(files) - failed, len(files)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
