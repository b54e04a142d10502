"""Writes the malformed ONNX inputs of the frontend's bad-input tests.

    /usr/bin/python3 test/inputs/bad_onnx.py CASE OUTDIR

Each CASE writes OUTDIR/model.onnx (and, for the external-data cases, the
files beside it) that is wrong in exactly one way; test/frontend/bad-*.test
check the message cleave-compile gives for it. Built with onnx.helper, not by
a PyTorch export, so that each file holds only what the case needs.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def linear_model(opset=17, batch=2, input_dims=None):
    """y = x @ w: one MatMul with a [4, 3] float initializer 'w'."""
    dims = input_dims or [batch, 4]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="/proj/MatMul")
    graph = helper.make_graph([node], "linear", [x], [y], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def external(location, length=None, offset="0"):
    """The linear model with 'w' stored as external data at `location`."""
    model = linear_model()
    w = model.graph.initializer[0]
    w.ClearField("raw_data")
    w.ClearField("float_data")
    w.data_location = TensorProto.EXTERNAL
    entries = [("location", location), ("offset", offset),
               ("length", str(length if length is not None else 48))]
    for key, value in entries:
        w.external_data.add(key=key, value=value)
    return model


def weights(path, size=48):
    """The bytes of 'w' (0..11 as float32), padded with zeros to `size`."""
    data = np.arange(12, dtype=np.float32).tobytes()
    with open(path, "wb") as f:
        f.write(data + b"\0" * (size - len(data)))


def mask_from_input(n):
    """x [1, n] plus a zero constant of shape [n, n] folded from x's shape
    (as a causal mask of seq x seq is): y = x + ConstantOfShape([n, n])."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node("Shape", ["x"], ["n"], name="/seq/Shape", start=1),
        helper.make_node("Concat", ["n", "n"], ["nn"], name="/mask/Concat",
                         axis=0),
        helper.make_node("ConstantOfShape", ["nn"], ["zeros"],
                         name="/mask/ConstantOfShape"),
        helper.make_node("Add", ["x", "zeros"], ["y"], name="/mask/Add"),
    ]
    graph = helper.make_graph(nodes, "mask", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def write(model, out):
    with open(os.path.join(out, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())


def main():
    case, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "model.onnx")
    if case == "truncated":
        data = linear_model().SerializeToString()
        with open(path, "wb") as f:
            f.write(data[: len(data) // 2])
    elif case == "not-onnx":
        with open(path, "w") as f:
            f.write("this is a text file, not an ONNX model\n")
    elif case == "empty":
        open(path, "wb").close()
    elif case == "unsupported-op":
        model = linear_model()
        model.graph.node.append(
            helper.make_node("Celu", ["y"], ["z"], name="/act/Celu"))
        model.graph.output[0].name = "z"
        write(model, out)
    elif case == "symbolic-seq":
        write(linear_model(input_dims=["batch", "features"]), out)
    elif case == "symbolic-batch":
        write(linear_model(input_dims=["batch", 4]), out)
    elif case == "shape-mismatch":
        write(linear_model(input_dims=[2, 5]), out)
    elif case == "missing-external":
        write(external("weights.bin"), out)
    elif case == "external-short":
        # The file holds 20 bytes; the tensor needs 48.
        write(external("weights.bin"), out)
        with open(os.path.join(out, "weights.bin"), "wb") as f:
            f.write(b"\0" * 20)
    elif case == "external-escapes":
        write(external("../weights.bin"), out)
        with open(os.path.join(out, "..", "weights.bin"), "wb") as f:
            f.write(b"\0" * 48)
    elif case == "external-absolute":
        write(external("/etc/hostname"), out)
    elif case == "external-fifo":
        # A FIFO: reading it would wait for a writer forever.
        write(external("weights.bin"), out)
        os.mkfifo(os.path.join(out, "weights.bin"))
    elif case == "external-symlink-out":
        # A symlink inside the folder to a file outside it.
        write(external("weights.bin"), out)
        weights(os.path.join(out, "..", "outside.bin"))
        os.symlink(os.path.join("..", "outside.bin"),
                   os.path.join(out, "weights.bin"))
    elif case == "external-symlink-in":
        # A symlink to another file of the folder: accepted.
        write(external("weights.bin"), out)
        weights(os.path.join(out, "data.bin"))
        os.symlink("data.bin", os.path.join(out, "weights.bin"))
    elif case == "external-hardlink":
        # A second name for a file outside the folder.
        write(external("weights.bin"), out)
        weights(os.path.join(out, "..", "outside.bin"))
        os.link(os.path.join(out, "..", "outside.bin"),
                os.path.join(out, "weights.bin"))
    elif case in ("external-text-offset", "external-negative-offset",
                  "external-text-length", "external-past-end"):
        offset, length = {"external-text-offset": ("8 bytes", None),
                          "external-negative-offset": ("-8", None),
                          "external-text-length": ("0", "forty-eight"),
                          "external-past-end": ("8", None)}[case]
        write(external("weights.bin", length=length, offset=offset), out)
        weights(os.path.join(out, "weights.bin"))
    elif case == "huge-input":
        # 2^62 x 4 floats: 2^66 bytes.
        write(linear_model(input_dims=[2 ** 62, 4]), out)
    elif case == "huge-mask":
        # A [2^20, 2^20] constant: 2^40 elements.
        write(mask_from_input(2 ** 20), out)
    elif case == "overflowing-mask":
        # A [2^32, 2^32] constant: 2^64 elements, past any 64-bit count.
        write(mask_from_input(2 ** 32), out)
    elif case == "huge-activation":
        # Two 8 GiB inputs whose sum broadcasts to 2 x 2^31 x 2^31 floats:
        # 2^65 bytes, which a 64-bit plan would hold as a few bytes.
        n = 2 ** 31
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, n, 1])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1, n])
        z = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
        node = helper.make_node("Add", ["x", "y"], ["z"], name="/outer/Add")
        graph = helper.make_graph([node], "outer", [x, y], [z])
        write(helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 17)]), out)
    elif case == "huge-dropout-mask":
        # Dropout's mask output (all true in eval mode) is a constant of
        # the input's shape: 2^40 elements.
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2 ** 40])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        m = helper.make_tensor_value_info("mask", TensorProto.BOOL, None)
        node = helper.make_node("Dropout", ["x"], ["y", "mask"],
                                name="/drop/Dropout")
        graph = helper.make_graph([node], "drop", [x], [y, m])
        write(helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 17)]), out)
    elif case == "huge-initializer":
        # An initializer whose dims multiply past 64 bits.
        model = linear_model()
        w = model.graph.initializer[0]
        del w.dims[:]
        w.dims.extend([2 ** 62, 4])
        write(model, out)
    elif case == "empty-huge-concat":
        # A float initializer with no elements whose other dimension is
        # 2^62, concatenated with itself along that dimension: its sum
        # overflowed 64 bits in the shape inference (found by fuzzing;
        # so did copying an empty initializer's null data).
        z = helper.make_tensor("z", TensorProto.FLOAT, [0, 2 ** 62], [])
        node = helper.make_node("Concat", ["z", "z"], ["y"], axis=1,
                                name="/cat/Concat")
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        graph = helper.make_graph([node], "cat", [], [y], [z])
        write(helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 17)]), out)
    elif case == "empty-initializer":
        # y = x + e, e a float initializer of shape [0, 4]: no elements.
        e = helper.make_tensor("e", TensorProto.FLOAT, [0, 4], [])
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 4])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        node = helper.make_node("Add", ["x", "e"], ["y"], name="/add/Add")
        graph = helper.make_graph([node], "empty", [x], [y], [e])
        write(helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 17)]), out)
    elif case in ("missing-input", "empty-input", "missing-output",
                  "folded-no-inputs"):
        # A node without the inputs or outputs its op requires (found by
        # fuzz-onnx: the importer indexed past the node's inputs).
        model = linear_model()
        node = model.graph.node[0]
        if case == "missing-input":
            del node.input[1:]
        elif case == "empty-input":
            node.input[0] = ""
        elif case == "missing-output":
            del node.output[:]
        else:
            # A Concat of nothing, which the folder would evaluate.
            model.graph.node.insert(0, helper.make_node(
                "Concat", [], ["none"], name="/shape/Concat", axis=0))
        write(model, out)
    elif case == "old-opset":
        write(linear_model(opset=11), out)
    elif case == "no-graph":
        with open(path, "wb") as f:
            f.write(onnx.ModelProto(producer_name="not a model").SerializeToString())
    elif case == "good":
        write(linear_model(), out)
    else:
        sys.exit("bad_onnx.py: unknown case '%s'" % case)


if __name__ == "__main__":
    main()
