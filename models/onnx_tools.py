"""Helpers for looking at and comparing exported ONNX graphs.

    /usr/bin/python3 models/onnx_tools.py MODEL.onnx [--nodes]
        prints opset, inputs, initializers, metadata and the op-type set
    /usr/bin/python3 models/onnx_tools.py A.onnx --same-graph B.onnx
        checks that A and B are the same graph up to the names of
        intermediate values and nodes (parameters may be initializers in one
        and graph inputs in the other)
"""
import argparse
import collections
import json
import os
import sys

import onnx
from onnx import numpy_helper


def op_types(proto):
    return sorted({n.op_type for n in proto.graph.node})


def opset(proto):
    return {o.domain or "ai.onnx": o.version for o in proto.opset_import}


def _attr_key(a):
    if a.type == onnx.AttributeProto.TENSOR:
        t = numpy_helper.to_array(a.t)
        return (a.name, str(t.dtype), t.shape, t.tobytes())
    if a.type == onnx.AttributeProto.GRAPH:
        return (a.name, "graph", canonical_form(onnx.ModelProto(graph=a.g)))
    return (a.name, repr(onnx.helper.get_attribute_value(a)))


def _type_key(vi):
    tt = vi.type.tensor_type
    return (tt.elem_type, tuple(d.dim_param or d.dim_value for d in tt.shape.dim))


def canonical_form(proto):
    """A hashable description of the graph that ignores intermediate names.

    Named things: graph inputs and initializers (by name; an initializer and
    a graph input of the same name, type and shape are equal) and outputs.
    Everything else is referred to by (producer node index, output index).
    """
    g = proto.graph
    named = {}
    for t in g.initializer:
        named[t.name] = ("param", t.name, t.data_type, tuple(t.dims))
    for i in g.input:
        if i.name not in named:
            et, dims = _type_key(i)
            kind = "input" if i.name in ("idx", "targets") else "param"
            named[i.name] = (kind, i.name, et, dims)
    produced = {}
    nodes = []
    for k, n in enumerate(g.node):
        ins = []
        for x in n.input:
            if x == "":
                ins.append(None)
            elif x in produced:
                ins.append(produced[x])
            else:
                ins.append(named.get(x, ("??", x)))
        for j, y in enumerate(n.output):
            produced[y] = (k, j)
        nodes.append((n.op_type, n.domain, tuple(ins),
                      tuple(sorted(_attr_key(a) for a in n.attribute))))
    outs = tuple((produced.get(o.name, o.name), _type_key(o)) for o in g.output)
    inputs = tuple(named[i.name] for i in g.input[:2])
    params = tuple(sorted(v for v in named.values() if v[0] == "param"))
    return (inputs, params, tuple(nodes), outs)


def same_graph(a, b):
    """(True, "") or (False, reason)."""
    ca, cb = canonical_form(a), canonical_form(b)
    if ca == cb:
        return True, ""
    for what, x, y in zip(("inputs", "params", "nodes", "outputs"), ca, cb):
        if x != y:
            if what == "nodes":
                for i, (p, q) in enumerate(zip(x, y)):
                    if p != q:
                        return False, "node %d differs: %s (%s) vs %s (%s)" % (
                            i, p[0], a.graph.node[i].name, q[0], b.graph.node[i].name)
                return False, "node count %d vs %d" % (len(x), len(y))
            if what == "params":
                sx, sy = set(x), set(y)
                return False, "params differ: %s / %s" % (sorted(sx - sy)[:3], sorted(sy - sx)[:3])
            return False, "%s differ" % what
    return False, "?"


def describe(proto, nodes=False):
    g = proto.graph
    print("opset:", opset(proto), " ir_version:", proto.ir_version)
    print("inputs:")
    for i in g.input[:8]:
        print("   ", i.name, _type_key(i))
    if len(g.input) > 8:
        print("    ... %d more" % (len(g.input) - 8))
    print("initializers: %d" % len(g.initializer))
    print("outputs:", [(o.name, _type_key(o)) for o in g.output])
    for p in proto.metadata_props:
        v = p.value if len(p.value) < 200 else p.value[:200] + "..."
        print("metadata %s = %s" % (p.key, v))
    cnt = collections.Counter(n.op_type for n in g.node)
    print("nodes: %d" % len(g.node))
    print("op types:", " ".join(sorted(cnt)))
    if nodes:
        for n in g.node:
            print("  %-20s %-50s %s -> %s" % (n.op_type, n.name, list(n.input), list(n.output)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--nodes", action="store_true")
    ap.add_argument("--same-graph", metavar="OTHER")
    a = ap.parse_args()
    m = onnx.load(a.model, load_external_data=False)
    if a.same_graph:
        ok, why = same_graph(m, onnx.load(a.same_graph, load_external_data=False))
        print("same graph" if ok else "DIFFERENT: " + why)
        sys.exit(0 if ok else 1)
    describe(m, a.nodes)


if __name__ == "__main__":
    main()
