"""A tiny NumPy interpreter for the ONNX ops our exports use (forward only).

It exists to check exported graphs against PyTorch without onnxruntime, and
as a readable statement of what each op means in these graphs:

    /usr/bin/python3 models/onnx_eval.py MODEL.onnx --io IO.safetensors
        evaluates MODEL on the idx/targets in IO (safetensors with idx,
        targets and optionally loss) and prints the loss (and the
        difference to the stored one)

Only opsets 13-17 and the attributes torch.onnx.export writes are handled;
anything else raises NotImplementedError naming the op.
"""
import argparse
import math
import sys

import numpy as np
import onnx
from onnx import numpy_helper

try:
    from onnx.helper import tensor_dtype_to_np_dtype as _np_dtype
except ImportError:                                      # onnx < 1.13
    from onnx.mapping import TENSOR_TYPE_TO_NP_TYPE

    def _np_dtype(t):
        return TENSOR_TYPE_TO_NP_TYPE[t]

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _int_div(a, b):
    q = np.abs(a) // np.abs(b)
    return (np.sign(a) * np.sign(b) * q).astype(a.dtype)


def _softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def run_node(node, ins, opset):
    op, at = node.op_type, _attrs(node)
    x = ins[0] if ins else None
    if op == "Constant":
        if "value" in at:
            return [numpy_helper.to_array(at["value"])]
        for k, dt in (("value_float", np.float32), ("value_int", np.int64),
                      ("value_floats", np.float32), ("value_ints", np.int64)):
            if k in at:
                return [np.array(at[k], dtype=dt)]
        raise NotImplementedError("Constant with %s" % list(at))
    if op == "Identity":
        return [x]
    if op in ("Add", "Sub", "Mul", "Pow", "Equal", "Greater", "Less"):
        a, b = ins
        r = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
             "Equal": np.equal, "Greater": np.greater, "Less": np.less}.get(op)
        if op == "Pow":
            return [np.power(a, b).astype(a.dtype)]
        out = r(a, b)
        return [out if op in ("Equal", "Greater", "Less") else out.astype(a.dtype)]
    if op == "Div":
        a, b = ins
        if np.issubdtype(a.dtype, np.integer):
            return [_int_div(a, b)]
        return [(a / b).astype(a.dtype)]
    if op in ("Neg", "Sqrt", "Tanh", "Cos", "Sin", "Relu", "Sigmoid", "Erf", "Not", "Exp",
              "Reciprocal"):
        f = {"Neg": np.negative, "Sqrt": np.sqrt, "Tanh": np.tanh, "Cos": np.cos,
             "Sin": np.sin, "Relu": lambda v: np.maximum(v, 0),
             "Sigmoid": lambda v: 1 / (1 + np.exp(-v)), "Erf": _erf,
             "Not": np.logical_not, "Exp": np.exp, "Reciprocal": lambda v: 1 / v}[op]
        return [np.asarray(f(x)).astype(x.dtype)]
    if op == "Cast":
        return [x.astype(_np_dtype(at["to"]))]
    if op == "MatMul":
        return [np.matmul(*ins)]
    if op == "Gemm":
        a, b = ins[0], ins[1]
        a = a.T if at.get("transA", 0) else a
        b = b.T if at.get("transB", 0) else b
        y = at.get("alpha", 1.0) * (a @ b)
        if len(ins) > 2 and ins[2] is not None:
            y = y + at.get("beta", 1.0) * ins[2]
        return [y.astype(ins[0].dtype)]
    if op == "Transpose":
        return [np.transpose(x, at.get("perm"))]
    if op == "Reshape":
        shape = [int(s) for s in ins[1]]
        if not at.get("allowzero", 0):
            shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
        return [x.reshape(shape)]
    if op == "Flatten":
        ax = at.get("axis", 1) % max(x.ndim, 1) if x.ndim else 0
        return [x.reshape(int(np.prod(x.shape[:ax])), -1)]
    if op == "Shape":
        s = np.array(x.shape, dtype=np.int64)
        return [s[at.get("start", 0):at.get("end", None)]]
    if op == "Gather":
        return [np.take(x, ins[1].astype(np.int64), axis=at.get("axis", 0))]
    if op == "Unsqueeze":
        axes = sorted(int(a) % (x.ndim + len(ins[1])) for a in ins[1])
        for a in axes:
            x = np.expand_dims(x, a)
        return [x]
    if op == "Squeeze":
        if len(ins) > 1 and ins[1] is not None:
            return [np.squeeze(x, axis=tuple(int(a) for a in ins[1]))]
        return [np.squeeze(x)]
    if op == "Concat":
        return [np.concatenate(ins, axis=at["axis"])]
    if op == "Split":
        axis = at.get("axis", 0)
        if len(ins) > 1 and ins[1] is not None:
            idx = np.cumsum(ins[1])[:-1]
        else:
            idx = len(node.output)
        return list(np.split(x, idx, axis=axis))
    if op == "Slice":
        starts, ends = ins[1], ins[2]
        axes = ins[3] if len(ins) > 3 and ins[3] is not None else range(len(starts))
        steps = ins[4] if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
        sl = [slice(None)] * x.ndim
        for s, e, a, st in zip(starts, ends, axes, steps):
            sl[int(a)] = slice(int(s), int(e), int(st))
        return [x[tuple(sl)]]
    if op == "Expand":
        return [np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(int(s) for s in ins[1])))
                .copy()]
    if op == "Where":
        c, a, b = ins
        return [np.where(c, a, b).astype(np.result_type(a, b))]
    if op == "ConstantOfShape":
        v = numpy_helper.to_array(at["value"]) if "value" in at else np.zeros(1, np.float32)
        return [np.full(tuple(int(s) for s in x), v.reshape(-1)[0], dtype=v.dtype)]
    if op == "Range":
        s, l, d = (np.asarray(v).reshape(()) for v in ins)
        return [np.arange(s, l, d, dtype=s.dtype)]
    if op == "Trilu":
        k = int(ins[1]) if len(ins) > 1 and ins[1] is not None else 0
        return [np.triu(x, k) if at.get("upper", 1) else np.tril(x, k)]
    if op == "Pad":
        # pads: every axis' begins, then its ends (only `axes`' with the
        # opset 18 input); negative ones crop. The fill is constant_value
        # (0 when absent) in constant mode.
        mode = at.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        pads = [int(p) for p in ins[1]]
        axes = (range(x.ndim) if len(ins) < 4 or ins[3] is None
                else [int(a) % x.ndim for a in ins[3]])
        begin, end = [0] * x.ndim, [0] * x.ndim
        for i, a in enumerate(axes):
            begin[a], end[a] = pads[i], pads[len(axes) + i]
        x = x[tuple(slice(max(-b, 0), x.shape[d] - max(-e, 0))
                    for d, (b, e) in enumerate(zip(begin, end)))]
        width = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
        if mode == "constant":
            fill = ins[2] if len(ins) > 2 and ins[2] is not None and ins[2].size else 0
            return [np.pad(x, width, mode="constant",
                           constant_values=np.asarray(fill).reshape(())).astype(x.dtype)]
        if mode not in ("reflect", "edge", "wrap"):
            raise NotImplementedError("Pad mode %s" % mode)
        return [np.pad(x, width, mode=mode)]
    if op == "CumSum":
        axis = int(np.asarray(ins[1]).reshape(())) % x.ndim
        y = np.flip(x, axis) if at.get("reverse", 0) else x
        c = np.cumsum(y, axis=axis, dtype=x.dtype)
        if at.get("exclusive", 0):  # each sum without its own element
            c = np.roll(c, 1, axis)
            c[(slice(None),) * axis + (0,)] = 0
        return [np.flip(c, axis) if at.get("reverse", 0) else c]
    if op == "Tile":
        return [np.tile(x, [int(r) for r in ins[1]])]
    if op == "GatherElements":
        axis = at.get("axis", 0) % x.ndim
        idx = ins[1].astype(np.int64)
        idx = np.where(idx < 0, idx + x.shape[axis], idx)
        return [np.take_along_axis(x, idx, axis=axis)]
    if op == "ScatterND":
        # Each index tuple (the last axis of indices) names a slice of
        # data that takes (or is combined with) its slice of updates.
        red = at.get("reduction", b"none")
        red = red.decode() if isinstance(red, bytes) else red
        out = np.copy(x)
        idx = ins[1].astype(np.int64)
        k = idx.shape[-1]
        updates = ins[2].reshape((-1,) + x.shape[k:])
        for where, u in zip(idx.reshape(-1, k), updates):
            t = tuple(int(v) for v in where)
            if red == "none":
                out[t] = u
            elif red == "add":
                out[t] = out[t] + u
            elif red == "mul":
                out[t] = out[t] * u
            elif red in ("max", "min"):
                out[t] = (np.maximum if red == "max" else np.minimum)(out[t], u)
            else:
                raise NotImplementedError("ScatterND reduction %s" % red)
        return [out]
    if op == "ReduceMean":
        axes = at.get("axes")
        if axes is None and len(ins) > 1:
            axes = ins[1]
        axes = tuple(int(a) for a in axes) if axes is not None else None
        return [np.mean(x, axis=axes, keepdims=bool(at.get("keepdims", 1))).astype(x.dtype)]
    if op == "Softmax":
        return [_softmax(x, at.get("axis", -1)).astype(x.dtype)]
    if op == "LayerNormalization":
        axis = at.get("axis", -1) % x.ndim
        eps = at.get("epsilon", 1e-5)
        red = tuple(range(axis, x.ndim))
        xf = x.astype(np.float64)
        mean = xf.mean(axis=red, keepdims=True)
        var = ((xf - mean) ** 2).mean(axis=red, keepdims=True)
        y = (xf - mean) / np.sqrt(var + eps) * ins[1]
        if len(ins) > 2 and ins[2] is not None:
            y = y + ins[2]
        return [y.astype(x.dtype)]
    if op == "SoftmaxCrossEntropyLoss":
        scores, labels = ins[0].astype(np.float64), ins[1].astype(np.int64)
        if len(ins) > 2 and ins[2] is not None:
            raise NotImplementedError("SoftmaxCrossEntropyLoss with weights")
        ign = at.get("ignore_index")
        red = at.get("reduction", b"mean")
        red = red.decode() if isinstance(red, bytes) else red
        logp = scores - scores.max(axis=1, keepdims=True)
        logp = logp - np.log(np.exp(logp).sum(axis=1, keepdims=True))
        keep = np.ones(labels.shape, bool) if ign is None else labels != ign
        safe = np.where(keep, labels, 0)
        nll = -np.take_along_axis(logp, np.expand_dims(safe, 1), axis=1).squeeze(1)
        nll = np.where(keep, nll, 0.0)
        loss = {"mean": nll.sum() / max(keep.sum(), 1), "sum": nll.sum(), "none": nll}[red]
        out = [np.asarray(loss, dtype=ins[0].dtype)]
        if len(node.output) > 1:
            out.append(logp.astype(ins[0].dtype))
        return out
    raise NotImplementedError("op %s (opset %d)" % (op, opset))


def evaluate(model, feeds, weights=None):
    """Run `model` (ModelProto) on `feeds` {name: array}; -> {output: array}.

    `weights` supplies values for graph inputs beyond the feeds (e.g. the
    parameters of a shapes-only export)."""
    g = model.graph
    opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    env = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    env.update(weights or {})
    env.update(feeds)
    for i in g.input:
        if i.name not in env:
            raise KeyError("no value for graph input %s" % i.name)
    for node in g.node:
        ins = [env[n] if n else None for n in node.input]
        outs = run_node(node, ins, opset)
        for name, v in zip(node.output, outs):
            if name:
                env[name] = np.asarray(v)
    return {o.name: env[o.name] for o in g.output}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--io", required=True, help="safetensors with idx, targets [, loss]")
    ap.add_argument("--weights", help="safetensors with values for parameter inputs")
    a = ap.parse_args()
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import safetensors_io
    io, _ = safetensors_io.load(a.io)
    w = safetensors_io.load(a.weights)[0] if a.weights else None
    m = onnx.load(a.model)
    out = evaluate(m, {"idx": io["idx"].astype(np.int64),
                       "targets": io["targets"].astype(np.int64)}, w)
    loss = float(out[m.graph.output[0].name])
    msg = "loss %.7f" % loss
    if "loss" in io:
        msg += "  (stored %.7f, diff %.2e)" % (float(io["loss"]), loss - float(io["loss"]))
    print(msg)


if __name__ == "__main__":
    main()
