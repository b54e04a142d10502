"""Checks the communication parameters of make_program.py's --train programs
in a cleave-run --save-params file written by N ranks (see make_program.py).

    /usr/bin/python3 test/runtime/check_collectives.py PARAMS.safetensors N STEPS

Prints one "ok"/"WRONG" line per check; exits 1 if any is wrong.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "models"))
import safetensors_io  # noqa: E402


def main():
    path, n, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    p, _ = safetensors_io.load(path)
    shard = p["shard"].reshape(n, 2)
    last = shard[n - 1]
    checks = [
        ("counter", p["counter"], np.array([float(n) ** steps])),
        ("scattered", p["scattered"], n * p["shard"]),
        ("average", p["average"], shard.mean(axis=0)),
        ("broadcast", p["broadcast"], shard[0]),
        # Rank N-1's slice holds what rank 0 sent; the others stay zero.
        ("mailbox", p["mailbox"],
         np.concatenate([np.zeros(2 * (n - 1)), shard[0]]) if n > 1
         else np.zeros(2)),
    ]
    bad = 0
    for name, got, want in checks:
        ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-6, atol=0)
        bad += not ok
        print("%s: %s" % (name, "ok" if ok else "WRONG, %s != %s" % (got, want)))
    # Each rank's slice differs: the checks above would catch a rank that
    # used the wrong one.
    if n > 1 and np.array_equal(shard[0], last):
        print("shard: WRONG, the ranks' slices are equal")
        bad += 1
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
