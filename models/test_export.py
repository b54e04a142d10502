"""Self-checks of export.py (about a minute on 2 cores).

    /usr/bin/python3 models/test_export.py [-o DIR]

- a shapes-only export is the same graph as the weighted export of the same
  config (toy configs), static and dynamic batch, opset 13 and 17;
- a shapes-only export that clones blocks (the fast path) is the same graph
  as one that traces every block (real widths, 6 blocks);
- weighted exports name every initializer by its state_dict name and pass
  onnx.checker;
- evaluated with onnx_eval.py (NumPy), every toy export (and, given its
  parameters, every shapes-only toy export) gives PyTorch's loss, also at a
  batch size other than the traced one when the batch axis is dynamic;
- reference.py's files agree with its model.onnx (keys, step-0 loss);
- every third_party.py export gives its module's loss;
- onnx_eval.py's Pad, CumSum, Tile, GatherElements and ScatterND give the
  outputs of ONNX's own node tests (libonnx-testdata, where installed).
"""
import argparse
import glob
import os
import re
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
warnings.filterwarnings("ignore")

import numpy as np                            # noqa: E402
import onnx                                   # noqa: E402
from onnx import numpy_helper                 # noqa: E402
import torch                                  # noqa: E402

from configs import get_config               # noqa: E402
from export import export_model, make_model  # noqa: E402
from onnx_tools import same_graph            # noqa: E402
from onnx_eval import evaluate                # noqa: E402
import third_party                            # noqa: E402
import safetensors_io                         # noqa: E402


def onnx_loss(model, idx, tgt, weights=None):
    out = evaluate(model, {"idx": idx.numpy(), "targets": tgt.numpy()}, weights)
    return float(out["loss"])


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
                ms = onnx.load(s)
                ok, why = same_graph(mw, ms)
                check(tag + ": shapes-only == weighted", ok, why)
                torch_model = make_model(cfg)
                g = torch.Generator().manual_seed(1)
                for b in ((2, 3) if dyn else (2,)):
                    idx = torch.randint(0, cfg["vocab"], (b, cfg["seq"]), generator=g)
                    tgt = torch.randint(0, cfg["vocab"], (b, cfg["seq"]), generator=g)
                    with torch.no_grad():
                        ref = float(torch_model(idx, tgt))
                    got = onnx_loss(mw, idx, tgt)
                    check("%s: onnx loss == torch loss (batch %d)" % (tag, b),
                          abs(got - ref) < 1e-5 * max(1, abs(ref)), "%r vs %r" % (got, ref))
                    w = {n: p.detach().numpy() for n, p in torch_model.named_parameters()}
                    got = onnx_loss(ms, idx, tgt, w)
                    check("%s: shapes-only onnx loss == torch loss (batch %d)" % (tag, b),
                          abs(got - ref) < 1e-5 * max(1, abs(ref)), "%r vs %r" % (got, ref))

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
    import reference
    from tokenizer import read_tokens
    tokens = read_tokens(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                      "..", "data", "tokens.bin"))
    for cfg_name in ("gpt2-toy", "llama-toy"):
        rd = os.path.join(d, "ref-" + cfg_name)
        info = reference.run(get_config(cfg_name), tokens, 4, 3, rd,
                             dict(reference.DEFAULT_OPTIMIZER), verbose=False)
        m = onnx.load(os.path.join(rd, "model.onnx"))
        grads, _ = safetensors_io.load(os.path.join(rd, "grads.safetensors"))
        init, _ = safetensors_io.load(os.path.join(rd, "params_init.safetensors"))
        final, _ = safetensors_io.load(os.path.join(rd, "params_final.safetensors"))
        names = {t.name for t in m.graph.initializer}
        check("reference %s: safetensors keys == initializers" % cfg_name,
              set(init) == names == set(final) == set(grads) - {"loss"})
        idx, tgt = reference.get_batch(tokens, 0, 4, get_config(cfg_name)["seq"])
        got = onnx_loss(m, idx, tgt)
        check("reference %s: onnx loss of step-0 batch == grads loss" % cfg_name,
              abs(got - float(grads["loss"])) < 1e-5, "%r vs %r" % (got, float(grads["loss"])))
        check("reference %s: losses.json step 0 == grads loss" % cfg_name,
              info["losses"][0] == float(grads["loss"]))
        moved = all(not np.array_equal(init[k], final[k]) for k in init)
        check("reference %s: every parameter changed" % cfg_name, moved)

    tp = os.path.join(d, "third_party")
    for e in third_party.export_all(tp, verbose=False):
        io, _ = safetensors_io.load(os.path.join(tp, e["io"]))
        m = onnx.load(os.path.join(tp, e["file"]))
        for sfx in ("", "_b3") if e["dynamic_batch"] else ("",):
            got = float(evaluate(m, {"idx": io["idx" + sfx],
                                     "targets": io["targets" + sfx]})["loss"])
            ref = float(io["loss" + sfx])
            check("third_party %s: onnx loss == torch loss%s" % (e["file"], sfx),
                  abs(got - ref) < 1e-5 * max(1, abs(ref)), "%r vs %r" % (got, ref))
    node_tests = "/usr/share/libonnx-testdata/data/node"
    pattern = re.compile(r"^test_(pad|constant_pad|edge_pad|reflect_pad|wrap_pad|"
                         r"cumsum|tile|gather_elements|scatternd)")
    for case in sorted(os.listdir(node_tests)) if os.path.isdir(node_tests) else []:
        if not pattern.match(case) or "expanded" in case:
            continue
        m = onnx.load(os.path.join(node_tests, case, "model.onnx"))
        for data in sorted(glob.glob(os.path.join(node_tests, case, "test_data_set_*"))):
            def tensors(kind):
                return [numpy_helper.to_array(onnx.load_tensor(f))
                        for f in sorted(glob.glob(os.path.join(data, kind + "_*.pb")))]
            feeds = {i.name: v for i, v in zip(m.graph.input, tensors("input"))}
            out = evaluate(m, feeds)
            got = [out[o.name] for o in m.graph.output]
            want = tensors("output")
            check("onnx_eval %s/%s" % (case, os.path.basename(data)),
                  all(g.shape == w.shape and np.allclose(g, w) for g, w in zip(got, want)),
                  "differs from the node test's output")
    print("%d failure(s)" % fails)
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
