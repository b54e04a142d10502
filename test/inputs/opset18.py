"""Writes a model in the opset-18 forms of ops that torch exports in older
forms: ReduceMean and ReduceSum with axes as an input, Split with
num_outputs, LayerNormalization, Gelu (opset 20).

    /usr/bin/python3 test/inputs/opset18.py OUT.onnx [--opset N]
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--opset", type=int, default=18)
    args = ap.parse_args()
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    consts = [
        numpy_helper.from_array(np.array([-1], dtype=np.int64), "last"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "seq"),
    ]
    nodes = [
        # three equal parts of the last axis, by num_outputs
        helper.make_node("Split", ["x"], ["a", "b", "c"], name="/split",
                         axis=2, num_outputs=3),
        helper.make_node("ReduceMean", ["a", "last"], ["m"], name="/mean",
                         keepdims=1),
        helper.make_node("Sub", ["b", "m"], ["d"], name="/sub"),
        helper.make_node("ReduceSum", ["d", "seq"], ["s"], name="/sum",
                         keepdims=0),
        helper.make_node("Add", ["s", "s"], ["t"], name="/add"),
        helper.make_node("ReduceSum", ["c"], ["all"], name="/sum_all",
                         keepdims=0),
        helper.make_node("Mul", ["t", "all"], ["y"], name="/mul"),
    ]
    if args.opset >= 20:
        nodes[-1].output[0] = "pre"
        nodes.append(helper.make_node("Gelu", ["pre"], ["y"], name="/gelu",
                                      approximate="tanh"))
    graph = helper.make_graph(nodes, "opset18", [x], [y], consts)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", args.opset)])
    model.ir_version = 8
    onnx.save(model, args.out)


if __name__ == "__main__":
    main()
