"""Writes one small ONNX model per case for the frontend's op tests.

    /usr/bin/python3 test/inputs/onnx_ops.py CASE OUT.onnx

Built with onnx.helper, each holding only what its case needs; the node
names ("/pad", "/tile" ...) are what the tests look for in locations and
messages. test/frontend/import-*.test and bad-*.test use them.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

I64, F32, BOOL = TensorProto.INT64, TensorProto.FLOAT, TensorProto.BOOL


def const(name, array):
    return helper.make_node("Constant", [], [name], name="/" + name,
                            value=numpy_helper.from_array(np.asarray(array)))


def model(nodes, inputs, outputs, opset=17, initializers=()):
    graph = helper.make_graph(nodes, "case", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def vinfo(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def pad_labels(dynamic):
    """HF's F.pad(labels, (0, 1), value=-100): the pads come from the
    labels' rank through Shape arithmetic, as torch.onnx exports them."""
    dims = ["batch", 8] if dynamic else [2, 8]
    nodes = [
        helper.make_node("Shape", ["labels"], ["shape"], name="/shape"),
        helper.make_node("Size", ["shape"], ["rank"], name="/rank"),
        const("zero", np.array([0], dtype=np.int64)),
        const("one", np.array([1], dtype=np.int64)),
        helper.make_node("Sub", ["rank", "one"], ["lead"], name="/lead"),
        helper.make_node("ConstantOfShape", ["lead"], ["zeros"], name="/zeros",
                         value=numpy_helper.from_array(np.array([0], dtype=np.int64))),
        helper.make_node("Concat", ["zeros", "zero", "zeros", "one"], ["pads"],
                         name="/pads", axis=0),
        const("fill", np.array(-100, dtype=np.int64)),
        helper.make_node("Pad", ["labels", "pads", "fill"], ["padded"], name="/pad"),
    ]
    return model(nodes, [vinfo("labels", I64, dims)], [vinfo("padded", I64, None)])


def pad_float(mode, pads, extra_inputs=()):
    inputs = [vinfo("x", F32, [2, 4])] + list(extra_inputs)
    nodes = [const("pads", np.array(pads, dtype=np.int64))]
    args = ["x", "pads"]
    if mode == "constant-runtime-value":
        args.append("value")
        mode = "constant"
    nodes.append(helper.make_node("Pad", args, ["y"], name="/pad", mode=mode))
    return model(nodes, inputs, [vinfo("y", F32, None)])


def if_model(runtime_cond, else_shape=None):
    """y = If(cond, then: x * 2, else: -x) over x [batch, 4]. The condition
    is batch == 2, from the shape (it folds once the batch is bound), or a
    bool graph input. The branches read x from the enclosing graph."""
    x = vinfo("x", F32, ["batch", 4])
    then_graph = helper.make_graph(
        [const("two", np.array(2.0, dtype=np.float32)),
         helper.make_node("Mul", ["x", "two"], ["doubled"], name="/then/mul")],
        "then", [], [vinfo("doubled", F32, None)])
    if else_shape:
        else_nodes = [const("other", np.zeros(else_shape, dtype=np.float32))]
        else_out = "other"
    else:
        else_nodes = [helper.make_node("Neg", ["x"], ["negated"], name="/else/neg")]
        else_out = "negated"
    else_graph = helper.make_graph(else_nodes, "else", [],
                                   [vinfo(else_out, F32, None)])
    inputs = [x]
    if runtime_cond:
        inputs.append(vinfo("cond", BOOL, []))
        nodes = []
    else:
        nodes = [helper.make_node("Shape", ["x"], ["shape"], name="/shape"),
                 const("zero", np.array(0, dtype=np.int64)),
                 helper.make_node("Gather", ["shape", "zero"], ["batch"],
                                  name="/batch", axis=0),
                 const("expected", np.array(2, dtype=np.int64)),
                 helper.make_node("Equal", ["batch", "expected"], ["cond"],
                                  name="/is_two")]
    nodes.append(helper.make_node("If", ["cond"], ["y"], name="/if",
                                  then_branch=then_graph, else_branch=else_graph))
    return model(nodes, inputs, [vinfo("y", F32, None)])


def embedding(padding, constant_ids=False):
    """loss = sum(table[ids] @ proj + bias), the lookup a Gather of the float
    initializer 'table' [10, 4], with the `cleave.padding_idx` metadata
    `padding` (a string, as models/export.py writes it). 'proj' [4, 4] and
    'bias' [4] are other parameters the metadata can name. The ids are the
    graph input [2, 3], or a constant."""
    inits = [numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4),
                                     "table"),
             numpy_helper.from_array(np.eye(4, dtype=np.float32), "proj"),
             numpy_helper.from_array(np.ones(4, dtype=np.float32), "bias")]
    nodes = [helper.make_node("Gather", ["table", "ids"], ["g"], name="/lookup"),
             helper.make_node("MatMul", ["g", "proj"], ["h"], name="/proj"),
             helper.make_node("Add", ["h", "bias"], ["y"], name="/add"),
             helper.make_node("ReduceSum", ["y"], ["loss"], name="/sum", keepdims=0)]
    inputs = [vinfo("ids", I64, [2, 3])]
    if constant_ids:
        nodes.insert(0, const("ids", np.array([[3, 0, 3], [1, 2, 9]], dtype=np.int64)))
        inputs = []
    m = model(nodes, inputs, [vinfo("loss", F32, None)], initializers=inits)
    m.metadata_props.add(key="cleave.padding_idx", value=padding)
    return m


def main():
    case, out = sys.argv[1], sys.argv[2]
    if case == "pad-labels":
        m = pad_labels(False)
    elif case == "pad-labels-dyn":
        m = pad_labels(True)
    elif case == "pad-reflect":
        m = pad_float("reflect", [0, 2, 0, 1])
    elif case == "pad-edge":
        m = pad_float("edge", [1, 0, 0, 0])
    elif case == "pad-crop":
        # Pad 2 on the left of axis 1, crop 1 on its right.
        m = pad_float("constant", [0, 2, 0, -1])
    elif case == "pad-runtime-value":
        m = pad_float("constant-runtime-value", [0, 1, 0, 1],
                      [vinfo("value", F32, [])])
    elif case == "bad-pad-count":
        m = pad_float("constant", [0, 1, 0])
    elif case == "bad-pad-reflect-too-far":
        m = pad_float("reflect", [0, 4, 0, 0])
    elif case == "bad-pad-mode":
        m = pad_float("mirror", [0, 1, 0, 1])
    elif case == "bad-pad-runtime-pads":
        x = vinfo("x", F32, [2, 4])
        p = vinfo("pads", I64, [4])
        m = model([helper.make_node("Pad", ["x", "pads"], ["y"], name="/pad")],
                  [x, p], [vinfo("y", F32, None)])
    elif case == "tile":
        m = model([const("repeats", np.array([1, 3], dtype=np.int64)),
                   helper.make_node("Tile", ["x", "repeats"], ["y"], name="/tile")],
                  [vinfo("x", F32, [2, 4])], [vinfo("y", F32, None)])
    elif case == "bad-tile-count":
        m = model([const("repeats", np.array([2], dtype=np.int64)),
                   helper.make_node("Tile", ["x", "repeats"], ["y"], name="/tile")],
                  [vinfo("x", F32, [2, 4])], [vinfo("y", F32, None)])
    elif case == "if-shape":
        m = if_model(False)
    elif case == "if-runtime":
        m = if_model(True)
    elif case == "bad-if-runtime-shapes":
        m = if_model(True, else_shape=[3])
    elif case == "gather-elements":
        m = model([const("index", np.array([[0, 2, -1, 1]], dtype=np.int64)),
                   helper.make_node("GatherElements", ["x", "index"], ["y"],
                                    name="/gather", axis=0)],
                  [vinfo("x", F32, [3, 4])], [vinfo("y", F32, None)])
    elif case == "scatter-nd":
        # x[1] = u and x[0] += nothing else: one tuple per row of u.
        m = model([const("where", np.array([[1], [0]], dtype=np.int64)),
                   helper.make_node("ScatterND", ["x", "where", "u"], ["y"],
                                    name="/scatter")],
                  [vinfo("x", F32, [3, 4]), vinfo("u", F32, [2, 4])],
                  [vinfo("y", F32, None)])
    elif case == "bad-scatter-nd-updates":
        m = model([const("where", np.array([[1], [0]], dtype=np.int64)),
                   helper.make_node("ScatterND", ["x", "where", "u"], ["y"],
                                    name="/scatter")],
                  [vinfo("x", F32, [3, 4]), vinfo("u", F32, [2, 3])],
                  [vinfo("y", F32, None)])
    elif case == "embedding-padding":
        m = embedding('{"table":3}')
    elif case == "embedding-padding-constant-ids":
        m = embedding('{"table":3}', constant_ids=True)
    elif case.startswith("bad-padding-"):
        # cleave.padding_idx values that do not name a row of a table.
        m = embedding({"bad-padding-range": '{"table":10}',
                       "bad-padding-negative": '{"table":-1}',
                       "bad-padding-float": '{"table":1.5}',
                       "bad-padding-string": '{"table":"0"}',
                       "bad-padding-name": '{"tabel":0}',
                       "bad-padding-json": 'table=0',
                       "bad-padding-list": '[["table",0]]',
                       "bad-padding-rank": '{"bias":0}',
                       "bad-padding-unused": '{"proj":0}'}[case])
    else:
        sys.exit("onnx_ops.py: unknown case " + case)
    onnx.save(m, out)


if __name__ == "__main__":
    main()
