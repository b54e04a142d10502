"""Compares the parameters cleave-run saved (--save-params, safetensors)
with PyTorch's (params_final.safetensors of models/reference.py).

    /usr/bin/python3 test/runtime/compare_params.py OURS.safetensors \
        THEIRS.safetensors [--rtol 1e-4]

A tensor matches when every element satisfies
|ours - theirs| <= atol + rtol * |theirs| (torch.testing.assert_close's
rule; rtol 1e-4, atol 1e-5 by default). The absolute floor is needed:
AdamW turns a gradient that is rounding noise (the bias of the attention
keys, which softmax cancels exactly) into updates of about lr * noise / eps
that differ in every implementation, on elements near zero (1e-6 apart
after 10 steps of lr 1e-3, far below one step's 1e-3). Also prints the
relative error ||ours - theirs|| / ||theirs|| of the worst tensor. Equal
elements count as equal, infinities included (a frozen float mask holds
-inf); a NaN on either side differs. Exits non-zero if a tensor differs, a
name is missing on either side or a shape differs.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "models"))
import safetensors_io  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours")
    ap.add_argument("theirs")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    a = ap.parse_args()
    ours, _ = safetensors_io.load(a.ours)
    theirs, _ = safetensors_io.load(a.theirs)
    theirs.pop("loss", None)
    if set(ours) != set(theirs):
        sys.exit("compare_params: names differ: only in %s: %s; only in %s: %s"
                 % (a.ours, sorted(set(ours) - set(theirs)), a.theirs,
                    sorted(set(theirs) - set(ours))))
    worst_name, worst, bad = None, 0.0, []
    for name in sorted(theirs):
        o = np.asarray(ours[name], dtype=np.float64)
        t = np.asarray(theirs[name], dtype=np.float64)
        if o.shape != t.shape:
            sys.exit("compare_params: %s has shape %s in %s, %s in %s"
                     % (name, o.shape, a.ours, t.shape, a.theirs))
        # Equal elements differ by 0, infinities included (a frozen float
        # mask holds -inf); a NaN on either side differs.
        with np.errstate(invalid="ignore"):
            diff = np.where(o == t, 0.0, np.abs(o - t))
        finite = np.where(np.isfinite(t), t, 0.0)
        if t.size and not np.all(diff <= a.atol + a.rtol * np.abs(t)):
            bad.append(name)
        rel = float(np.linalg.norm(diff)) / max(float(np.linalg.norm(finite)), 1e-30)
        if t.size and rel >= worst:
            worst_name, worst = name, rel
            worst_element = float(diff.max())
    print("%d parameters, worst %s: relative error %.2e, largest element "
          "difference %.2e (rtol %.0e, atol %.0e) %s"
          % (len(theirs), worst_name, worst, worst_element if worst_name else 0.0,
             a.rtol, a.atol, "ok" if not bad else "DIFFER: " + ", ".join(bad)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
