"""Writes the one-node Dropout models of test/frontend/import-dropout.test.

    /usr/bin/python3 test/inputs/dropout_onnx.py CASE OUTDIR

CASE: train (ratio 0.25, training_mode true, its mask output returned),
train-no-mask (the mask output named but read by nothing, as
torch.onnx.export writes it), eval (training_mode false), ratio-zero,
runtime-mode and runtime-ratio (an input computed from a graph input),
ratio-one, ratio-negative, ratio-vector, constant-input (a Constant node
as the input). Writes OUTDIR/model.onnx with
x float [2, 4, 8] and the node named /drop/Dropout.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    case, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 8])
    inputs, outputs, nodes, inits = [x], [], [], []
    ratio = {"ratio-one": 1.0, "ratio-negative": -0.5, "ratio-zero": 0.0}.get(case, 0.25)
    ratio_value = np.array([ratio, ratio], np.float32) if case == "ratio-vector" \
        else np.array(ratio, np.float32)
    if case == "ratio-vector":
        # A Constant node: the importer reads a vector initializer as a
        # parameter.
        nodes.append(helper.make_node(
            "Constant", [], ["ratio"], name="/drop/Constant",
            value=numpy_helper.from_array(ratio_value, "ratio_value")))
    else:
        inits.append(numpy_helper.from_array(ratio_value, "ratio"))
    inits.append(numpy_helper.from_array(np.array(case != "eval"), "training"))
    ratio_name, training_name = "ratio", "training"
    if case == "runtime-mode":
        # training_mode = (flag > 0), flag a graph input.
        inputs.append(helper.make_tensor_value_info("flag", TensorProto.FLOAT, []))
        inits.append(numpy_helper.from_array(np.array(0, np.float32), "zero"))
        nodes.append(helper.make_node("Greater", ["flag", "zero"], ["mode"],
                                      name="/mode/Greater"))
        training_name = "mode"
    if case == "runtime-ratio":
        inputs.append(helper.make_tensor_value_info("p", TensorProto.FLOAT, []))
        ratio_name = "p"
    x_name = "x"
    if case == "constant-input":
        # x + Dropout(c) with c a Constant node: folding would drop the mask.
        nodes.append(helper.make_node(
            "Constant", [], ["c"], name="/c/Constant",
            value=numpy_helper.from_array(np.ones((2, 4, 8), np.float32), "c_value")))
        x_name = "c"
    mask = case in ("train", "ratio-zero")
    nodes.append(helper.make_node("Dropout", [x_name, ratio_name, training_name],
                                  ["y", "mask"], name="/drop/Dropout"))
    outputs.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, None))
    if mask:
        outputs.append(helper.make_tensor_value_info("mask", TensorProto.BOOL, None))
    graph = helper.make_graph(nodes, "drop", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with open(os.path.join(out, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())


if __name__ == "__main__":
    main()
