"""Self-checks of export.py (about a minute on 2 cores).

    /usr/bin/python3 models/test_export.py [-o DIR]

- a shapes-only export is the same graph as the weighted export of the same
  config (toy configs), static and dynamic batch, opset 13 and 17;
- a shapes-only export that clones blocks (the fast path) is the same graph
  as one that traces every block (real widths, 6 blocks);
- weighted exports name every initializer by its state_dict name and pass
  onnx.checker.
"""
import argparse
import os
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
warnings.filterwarnings("ignore")

import onnx                                   # noqa: E402

from configs import get_config               # noqa: E402
from export import export_model, make_model  # noqa: E402
from onnx_tools import same_graph            # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--outdir")
    a = ap.parse_args()
    d = a.outdir or tempfile.mkdtemp(prefix="cleave-test-export-")
    os.makedirs(d, exist_ok=True)
    fails = 0

    def check(name, ok, why=""):
        nonlocal fails
        print("%-60s %s" % (name, "ok" if ok else "FAIL " + why))
        fails += not ok

    for cfg_name in ("gpt2-toy", "llama-toy"):
        for dyn in (False, True):
            for opset in (13, 17):
                cfg = get_config(cfg_name)
                tag = "%s-%s-op%d" % (cfg_name, "dyn" if dyn else "static", opset)
                w = os.path.join(d, tag + ".onnx")
                s = os.path.join(d, tag + ".shapes.onnx")
                export_model(cfg, w, batch=2, dynamic_batch=dyn, opset=opset, verbose=False)
                export_model(cfg, s, batch=2, dynamic_batch=dyn, opset=opset,
                             shapes_only=True, verbose=False)
                mw = onnx.load(w)
                onnx.checker.check_model(mw)
                names = {t.name for t in mw.graph.initializer}
                sd = {n for n, _ in make_model(cfg).named_parameters()}
                check(tag + ": initializers == parameters", names == sd,
                      str(sorted(names ^ sd)[:4]))
                ok, why = same_graph(mw, onnx.load(s))
                check(tag + ": shapes-only == weighted", ok, why)

    for cfg_name, seq in (("gpt2-350m", 64), ("llama2-70b", 64), ("gpt3-175b", 32)):
        for dyn in (False, True):
            cfg = get_config(cfg_name, seq=seq)
            cfg["n_layer"] = 6
            tag = "%s-6L-%s" % (cfg_name, "dyn" if dyn else "static")
            r = os.path.join(d, tag + ".cloned.onnx")
            f = os.path.join(d, tag + ".traced.onnx")
            export_model(cfg, r, batch=2, dynamic_batch=dyn, shapes_only=True, verbose=False)
            export_model(cfg, f, batch=2, dynamic_batch=dyn, shapes_only=True,
                         replicate_blocks=False, verbose=False)
            mr = onnx.load(r)
            onnx.checker.check_model(mr)
            ok, why = same_graph(mr, onnx.load(f))
            check(tag + ": cloned blocks == traced blocks", ok, why)
    print("%d failure(s)" % fails)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
