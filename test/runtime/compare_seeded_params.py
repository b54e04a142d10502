"""Says which tensors of two --save-params files differ: the split
parameters tensor_parallel_seed seeds, and the replicated ones it does not
(runtime/tensor-smp-keys.test).

    /usr/bin/python3 test/runtime/compare_seeded_params.py A.safetensors \
        B.safetensors --replicated REGEX

Prints "equal: NAME" or "differ: NAME" per tensor, then how many tensors
whose names match REGEX (the replicated ones) differ and how many others
(the split ones) are equal. Exits non-zero when the files hold different
names or shapes.
"""
import argparse
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "models"))
import safetensors_io  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--replicated", required=True,
                    help="regular expression of the replicated tensors' names")
    args = ap.parse_args()
    a, _ = safetensors_io.load(args.a)
    b, _ = safetensors_io.load(args.b)
    if set(a) != set(b):
        sys.exit("compare_seeded_params: names differ: %s"
                 % sorted(set(a) ^ set(b)))
    replicated = re.compile(args.replicated)
    replicated_differ = split_equal = 0
    for name in sorted(a):
        x, y = np.asarray(a[name]), np.asarray(b[name])
        if x.shape != y.shape:
            sys.exit("compare_seeded_params: %s has shapes %s and %s"
                     % (name, x.shape, y.shape))
        equal = np.array_equal(x, y)
        print("%s: %s" % ("equal" if equal else "differ", name))
        if replicated.search(name):
            replicated_differ += not equal
        else:
            split_equal += equal
    print("%d replicated differ, %d split equal" % (replicated_differ, split_equal))


if __name__ == "__main__":
    main()
