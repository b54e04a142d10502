"""Checks plan.json's "tensor_parallel" and report.html's section for a
tensor-parallel compile against the model itself (no numbers typed in):

    tensor_plan.py MODEL.onnx OUT/ DEGREE

- every trained parameter of the ONNX model is listed once; a split one's
  full shape is its local shape with the split dimension times DEGREE (a
  padded vocabulary's padded shape, a multiple of DEGREE), a whole one
  keeps its shape and says why;
- the counts and per-rank bytes add up;
- each row-parallel weight (split along its input dimension, 1) gives one
  tensor-axis all-reduce per forward (Megatron's g) and one per backward
  (f's gradient), each of a microbatch's activations: microbatch x seq x
  d_model floats, so the bytes per step follow from plan.json's batch; a
  vocab-parallel embedding (a Gather's table split on its rows) adds one g
  of activations to the forward, and its loss (Megatron's vocab-parallel
  cross-entropy) two sums and a max of one float per token to the forward
  and the head's f gradient (activations) to the backward;
- the report's section names the mesh and every parameter.
Prints what it found; FileCheck checks the lines.
"""
import html
import json
import sys

import onnx
from onnx import numpy_helper

model_path, out, degree = sys.argv[1], sys.argv[2], int(sys.argv[3])
plan = json.load(open(out + "/plan.json"))
tp = plan["tensor_parallel"]
print("mesh:", " ".join("%s %d" % (a["name"], a["size"]) for a in plan["mesh_axes"]))
print("degree matches:", tp["degree"] == degree == plan["mesh"]["tensor"])

model = onnx.load(model_path, load_external_data=False)
inputs = {i.name for i in model.graph.input}
shapes = {}
for init in model.graph.initializer:
    if init.data_type == onnx.TensorProto.FLOAT and len(init.dims) >= 1:
        shapes[init.name] = list(init.dims)
params = {p["name"]: p for p in tp["parameters"]}
print("every parameter listed once:",
      sorted(params) == sorted(shapes) and len(params) == len(tp["parameters"]))

bad = []
split_bytes = whole_bytes = 0
row_parallel = []
for name, p in params.items():
    full, local = p["full_shape"], p["local_shape"]
    if full != shapes[name]:
        bad.append("%s: full shape %s, the model's %s" % (name, full, shapes[name]))
    elems = 1
    for d in local:
        elems *= d
    if p["split"]:
        split_bytes += 4 * elems
        dims = {s["dim"] for s in p["split"]}
        if any(s["axis"] != "tensor" for s in p["split"]):
            bad.append(name + ": split over another axis")
        # A padded vocabulary is split as its padded shape.
        padded = p.get("padded_shape", full)
        if padded != full:
            print("padded: %s %s -> %s" % (name, full, padded))
            if [f % degree for f in padded] != [0] * len(padded) or any(
                    f < g for f, g in zip(padded, full)):
                bad.append("%s: padded %s, not a multiple of %d" % (name, padded, degree))
        want = [f // degree if i in dims else f for i, f in enumerate(padded)]
        if local != want:
            bad.append("%s: local %s, want %s" % (name, local, want))
        if dims == {1} and len(full) == 2:
            row_parallel.append(name)
    else:
        whole_bytes += 4 * elems
        if local != full or not p.get("replicated_why"):
            bad.append(name + ": whole without a reason or with another shape")
print("shapes:", "ok" if not bad else bad)
print("counts add up:",
      tp["split_parameters"] == sum(1 for p in params.values() if p["split"]) and
      tp["replicated_parameters"] == sum(1 for p in params.values() if not p["split"]) and
      tp["split_parameter_bytes_per_rank"] == split_bytes and
      tp["replicated_parameter_bytes_per_rank"] == whole_bytes)
for name in sorted(params):
    why = params[name].get("replicated_why", "")
    if "not divisible" in why:
        print("whole:", name, "--", why)

batch = plan["batch"]
d_model = max(params[n]["full_shape"][0] for n in row_parallel) if row_parallel else 0
tokens = batch["microbatch_size"] * batch["seq_len"]
activation = tokens * d_model * 4
tables = {n.input[0] for n in model.graph.node if n.op_type == "Gather"}
vocab = [n for n, p in params.items()
         if n in tables and {s["dim"] for s in p["split"]} == {0}]
print("vocab-parallel:", vocab)
for c in tp["collectives"]:
    print("collective: %s %s %s %s over %s, %d per run x %d runs = %d per step" % (
        c["function"], c["op"], c["kind"], c["reduce"], c["axis"], c["per_run"],
        c["runs_per_step"], c["per_step"]))
    runs = c["runs_per_step"]
    if c["op"] == "tp_reduce":
        if c["function"] == "forward":
            want = len(row_parallel) + 3 * len(vocab)
            bytes_per_run = (len(row_parallel) + len(vocab)) * activation + \
                2 * len(vocab) * tokens * 4
        else:
            want = len(row_parallel) + len(vocab)
            bytes_per_run = want * activation
        print("  one per row-parallel weight and vocab-parallel op:",
              c["per_run"] == want)
        print("  runs per step are the microbatches:",
              runs == batch["microbatches"])
        print("  bytes are the activations':",
              c["bytes_per_step"] == runs * bytes_per_run)
    elif c["op"] == "all_gather":
        # prescaled_batch false: each rank reads its part of the token ids
        # and targets, [microbatch, seq] int64 gathered whole.
        print("  the token ids and targets, gathered whole:",
              c["per_run"] == 2 and c["bytes_per_step"] == runs * 2 * tokens * 8)
    elif c["op"] == "all_reduce" and c["reduce"] == "max":
        print("  the vocab-parallel loss's max, a float per token:",
              c["per_run"] == len(vocab) and
              c["bytes_per_step"] == runs * len(vocab) * tokens * 4)
total = sum(c["bytes_per_step"] for c in tp["collectives"])
print("bytes per pipeline rank add up:",
      sum(tp["collective_bytes_per_step_by_pipeline_rank"]) == total)

page = open(out + "/report.html").read()
section = page[page.index("<h2>Tensor parallelism</h2>"):]
section = section[:section.index("</table>\n<table>")]
print("report mesh:", html.unescape(section[section.index("Mesh:"):section.index(".")]))
print("report lists every parameter:",
      all('"node">%s<' % html.escape(n) in section for n in params))
print("report says why:", "whole: " in section)
print("report says padded:", all(
    "(padded to %s)" % "&times;".join(map(str, p["padded_shape"])) in section
    or "(padded to %s)" % "×".join(map(str, p["padded_shape"])) in section
    for p in params.values() if "padded_shape" in p))
