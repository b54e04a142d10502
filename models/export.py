"""Export a named model config to ONNX (forward pass with the loss as output).

    /usr/bin/python3 models/export.py CONFIG -o out.onnx [--seq T] [--batch B]
        [--dynamic-batch] [--shapes-only] [--seed S] [--opset N] [--fold]

Graph inputs: `idx` and `targets` (int64 [batch, seq]); output: `loss`
(float scalar).  Weighted exports hold every parameter as an initializer
named by its state_dict name (do_constant_folding=False; --fold turns on
torch's default folding, which renames and may merge initializers).
`--shapes-only` builds the model on the `meta` device and writes no weight
data: trainable parameters become graph inputs (after idx, targets) with
their real shapes and names; buffers (small, computable) stay initializers.

metadata_props written:
  cleave.buffers      comma-separated initializer names that are buffers,
                      not trainable parameters ("" if none)
  cleave.shapes_only  "1" if parameters are graph inputs without data, else "0"
  cleave.init         JSON {param: ["normal", std] | ["ones", 0] | ["zeros", 0]}
  cleave.config       JSON of the model config
  cleave.seed         the init seed (weighted exports)
  cleave.padding_idx  JSON {initializer: row} of each nn.Embedding with a
                      padding_idx (only when there is one): PyTorch gives
                      that row no gradient from the lookup, which an ONNX
                      Gather cannot say (export_for_training writes it too)
Models whose weights exceed 2 GB are saved with external data, all tensors
in one file `<name>.onnx.data` beside the model.
"""
import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch                                             # noqa: E402
import onnx                                              # noqa: E402
from onnx import numpy_helper                            # noqa: E402

from configs import get_config, build_model              # noqa: E402

TWO_GB = 2 ** 31


@contextlib.contextmanager
def _meta_export_patches():
    """Let torch 1.13's exporter run on meta tensors.

    Two passes read parameter *values*: ONNX shape inference (copies params
    to use them as constants) and initializer de-duplication (compares
    data pointers, which are all null on meta, so it would merge every pair
    of same-shaped parameters).  With export_params=False neither is needed:
    shape inference still sees every parameter's shape through the graph
    input types, and no de-duplication is wanted.
    """
    C = torch._C
    orig_si = C._jit_pass_onnx_graph_shape_type_inference
    orig_dd = C._jit_pass_onnx_deduplicate_initializers

    def shape_inference(graph, params_dict, opset):
        return orig_si(graph, {}, opset)

    def dedup(graph, params_dict, is_train):
        return params_dict

    C._jit_pass_onnx_graph_shape_type_inference = shape_inference
    C._jit_pass_onnx_deduplicate_initializers = dedup
    try:
        yield
    finally:
        C._jit_pass_onnx_graph_shape_type_inference = orig_si
        C._jit_pass_onnx_deduplicate_initializers = orig_dd


TEMPLATE_LAYERS = 3


def _segments(nodes, attr, n):
    """Node index ranges [start, end) of blocks 0..n-1 (scoped '/attr.k/').

    Unscoped nodes (torch names them '<Op>_<index>', e.g. the Constant axes
    of an Unsqueeze) that sit between two blocks belong to the later one.
    """
    first, last = {}, {}
    for i, nd in enumerate(nodes):
        for k in range(n):
            if nd.name.startswith("/%s.%d/" % (attr, k)):
                first.setdefault(k, i)
                last[k] = i
    assert sorted(first) == list(range(n)), "blocks not found by node names"
    seg = []
    for k in range(n):
        start = first[0] if k == 0 else last[k - 1] + 1
        assert start <= first[k] and (k == 0 or first[k] > last[k - 1])
        seg.append((start, last[k] + 1))
    return seg


def _replicate_blocks(proto, attr, n_template, n_layer, param_inputs):
    """Grow a graph exported with `n_template` blocks to `n_layer` blocks.

    torch's exporter takes time quadratic in the graph size (its ONNX shape
    inference), so a 96-block graph takes minutes.  Blocks are identical, so
    we export 3 and clone the last one: every reference a block makes is
    classified as (a) a value made inside the block, (b) a value made by the
    previous block, (c) a parameter of the block, or (d) anything else
    (graph inputs, values made before the blocks); block 1 and block 2 must
    classify identically (checked), and clone k maps (a) to its own values,
    (b) to block k-1's, (c) to '<attr>.k.*' and keeps (d).  The result is
    checked against a real export in models/test_export.py.
    """
    g = proto.graph
    nodes = list(g.node)
    seg = _segments(nodes, attr, n_template)
    blocks = [nodes[a:b] for a, b in seg]
    pos = []                       # per block: value name -> (node, output)
    for blk in blocks:
        pos.append({y: (i, j) for i, nd in enumerate(blk) for j, y in enumerate(nd.output)})

    def classify(k, x, from_end=False):
        if x in pos[k]:
            return ("own", pos[k][x])
        if k > 0 and x in pos[k - 1]:
            i, j = pos[k - 1][x]
            # Block 0 may differ from the others in length (it can hold
            # values shared by all blocks), so compare positions from the end.
            return ("prev", (i - len(blocks[k - 1]) if from_end else i, j))
        pre = "%s.%d." % (attr, k)
        if x.startswith(pre):
            return ("param", x[len(pre):])
        return ("ext", x)

    t = n_template - 1
    a, b = blocks[t - 1], blocks[t]
    assert len(a) == len(b), "blocks differ in size"
    for na, nb in zip(a, b):
        same = na.op_type == nb.op_type and len(na.input) == len(nb.input)
        for xa, xb in zip(na.input, nb.input):
            # Equal classes, or the very same value made before both blocks
            # (torch's CSE leaves constants shared by all blocks in block 0).
            same = same and (classify(t - 1, xa, True) == classify(t, xb, True)
                             or (xa == xb and xa not in pos[t - 1]))
        assert same, "blocks %d and %d differ at %s / %s" % (t - 1, t, na.name, nb.name)
        assert [x.SerializeToString() for x in na.attribute] == \
               [x.SerializeToString() for x in nb.attribute], (na.name, nb.name)

    counter = [0]

    def fresh(name, k):
        scoped = "/%s.%d/" % (attr, t)
        if scoped in name:
            return name.replace(scoped, "/%s.%d/" % (attr, k))
        counter[0] += 1
        return "%s__%s%d_%d" % (name, attr, k, counter[0])

    names = {t: [list(nd.output) for nd in b]}     # block k -> output names
    new_blocks = []
    for k in range(n_template, n_layer):
        out_names = []
        blk = []
        for nd in b:
            c = onnx.NodeProto()
            c.CopyFrom(nd)
            del c.input[:]
            for x in nd.input:
                kind, v = classify(t, x) if x else ("ext", x)
                if kind == "own":
                    c.input.append(out_names[v[0]][v[1]])
                elif kind == "prev":
                    c.input.append(names[k - 1][v[0]][v[1]])
                elif kind == "param":
                    c.input.append("%s.%d.%s" % (attr, k, v))
                else:
                    c.input.append(x)
            del c.output[:]
            c.output.extend(fresh(y, k) for y in nd.output)
            out_names.append(list(c.output))
            c.name = fresh(nd.name, k) if nd.name.startswith("/") else nd.name
            blk.append(c)
        names[k] = out_names
        new_blocks.append(blk)

    # Values of the last template block used after it now come from the last clone.
    last = {y: names[n_layer - 1][i][j] for y, (i, j) in pos[t].items()}
    suffix = nodes[seg[-1][1]:]
    for nd in suffix:
        for i, x in enumerate(nd.input):
            if x in last:
                nd.input[i] = last[x]
    for o in g.output:
        assert o.name not in last
    all_nodes = nodes[:seg[-1][1]] + [n for blk in new_blocks for n in blk] + suffix
    for i, nd in enumerate(all_nodes):           # torch's names for unscoped nodes
        if not nd.name.startswith("/"):
            nd.name = "%s_%d" % (nd.op_type, i)
    del g.node[:]
    g.node.extend(all_nodes)
    keep = [i for i in g.input[:2]]
    del g.input[:]
    g.input.extend(keep + param_inputs)


def make_model(cfg, seed=0, shapes_only=False):
    if shapes_only:
        return build_model(cfg, device="meta")
    torch.manual_seed(seed)
    return build_model(cfg)


def _consolidate_external_data(model_proto, src_dir, out_path):
    """Move per-tensor external files written by torch into one file."""
    data_name = os.path.basename(out_path) + ".data"
    off = 0
    with open(os.path.join(os.path.dirname(os.path.abspath(out_path)), data_name),
              "wb") as out:
        for t in model_proto.graph.initializer:
            if t.data_location != onnx.TensorProto.EXTERNAL:
                continue
            info = {e.key: e.value for e in t.external_data}
            with open(os.path.join(src_dir, info["location"]), "rb") as f:
                f.seek(int(info.get("offset", 0)))
                n = int(info["length"]) if "length" in info else -1
                blob = f.read(n)
            pad = -off % 4096
            out.write(b"\0" * pad)
            off += pad
            out.write(blob)
            del t.external_data[:]
            for k, v in (("location", data_name), ("offset", str(off)),
                         ("length", str(len(blob)))):
                e = t.external_data.add()
                e.key, e.value = k, v
            off += len(blob)


def padding_rows(module, names):
    """{initializer name: padding_idx} of the nn.Embedding modules of
    `module` that have a padding_idx, for the `cleave.padding_idx` metadata.
    An embedding's weight is found among `names` (the export's initializer
    and graph input names) under any of its state_dict names, so a tied
    table is named as the export named it; one the export dropped (unused)
    is left out."""
    names_of = {}
    for name, t in module.state_dict(keep_vars=True).items():
        names_of.setdefault(id(t), []).append(name)
    rows = {}
    for m in module.modules():
        if isinstance(m, torch.nn.Embedding) and m.padding_idx is not None:
            for name in names_of.get(id(m.weight), []):
                if name in names:
                    rows[name] = int(m.padding_idx)
    return rows


def padding_metadata(module, proto):
    """The `cleave.padding_idx` entry of `proto`'s metadata ({} when no
    embedding has a padding row, so other exports stay as they were)."""
    names = {t.name for t in proto.graph.initializer}
    names |= {i.name for i in proto.graph.input}
    rows = padding_rows(module, names)
    if not rows:
        return {}
    return {"cleave.padding_idx": json.dumps(rows, sort_keys=True,
                                             separators=(",", ":"))}


def export_for_training(module, args, out_path, input_names, opset=17,
                        dynamic_batch=False, metadata=None):
    """torch.onnx.export the way a model is exported to be trained, and save.

    training=TrainingMode.TRAINING and do_constant_folding=False: torch's
    default (eval-mode) export de-duplicates initializers by value, merging
    parameters equal at initialization (all LayerNorm weights), and constant
    folding renames initializers and unties a tied head.  With both off every
    initializer is one parameter or buffer under its state_dict name.
    `args` are the module's inputs, `input_names` their names; the one output
    is `loss`.  dynamic_batch makes axis 0 of every input the symbol `batch`.
    `metadata` ({key: value}, or a function of the exported ModelProto that
    returns one) goes into metadata_props, with `cleave.padding_idx` for
    the embeddings that have a padding row.  Weights of 2 GB or
    more go to one external data file `<out>.data`.  Returns the ModelProto
    (external data not loaded).
    """
    n_bytes = sum(p.numel() * p.element_size() for p in module.parameters())
    n_bytes += sum(b.numel() * b.element_size() for b in module.buffers())
    big = n_bytes >= TWO_GB - (64 << 20)
    axes = {n: {0: "batch"} for n in input_names} if dynamic_batch else None
    kwargs = dict(input_names=list(input_names), output_names=["loss"],
                  opset_version=opset, dynamic_axes=axes,
                  training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False)
    tmpdir = None
    with torch.no_grad():
        if big:
            tmpdir = tempfile.mkdtemp(prefix="cleave-export-",
                                      dir=os.path.dirname(os.path.abspath(out_path)))
            torch.onnx.export(module, args, os.path.join(tmpdir, "model.onnx"), **kwargs)
            proto = onnx.load(os.path.join(tmpdir, "model.onnx"), load_external_data=False)
        else:
            f = io.BytesIO()
            torch.onnx.export(module, args, f, **kwargs)
            proto = onnx.load_from_string(f.getvalue())
    if callable(metadata):
        metadata = metadata(proto)
    metadata = dict(padding_metadata(module, proto), **(metadata or {}))
    for k, v in metadata.items():
        p = proto.metadata_props.add()
        p.key, p.value = k, v
    _save(proto, out_path, tmpdir)
    return proto


def _save(proto, out_path, tmpdir):
    """Save `proto`; with `tmpdir` (where torch wrote per-tensor external
    files), first gather them into one `<out>.data` and remove tmpdir."""
    if tmpdir:
        _consolidate_external_data(proto, tmpdir, out_path)
        onnx.save(proto, out_path)
        shutil.rmtree(tmpdir)
    else:
        onnx.save(proto, out_path)


def export_model(cfg, out_path, batch=1, dynamic_batch=False, shapes_only=False,
                 seed=0, opset=17, fold=False, model=None, verbose=True,
                 replicate_blocks=True):
    """Export `cfg` to `out_path`; returns a dict describing the export.

    `model` may be given (an nn.Module built by make_model with the same
    cfg/seed) to export exactly those weights.  Shapes-only exports of more
    than TEMPLATE_LAYERS blocks export that many and clone the last one
    (see _replicate_blocks); replicate_blocks=False exports all of them.
    """
    t0 = time.time()
    if model is None:
        model = make_model(cfg, seed=seed, shapes_only=shapes_only)
    T = cfg["seq"]
    dev = "meta" if shapes_only else "cpu"
    idx = torch.zeros(batch, T, dtype=torch.long, device=dev)
    tgt = torch.zeros(batch, T, dtype=torch.long, device=dev)
    param_names = [n for n, _ in model.named_parameters()]
    buffer_names = [n for n, _ in model.named_buffers()]
    n_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    big = not shapes_only and n_bytes >= TWO_GB - (64 << 20)

    kwargs = dict(
        input_names=["idx", "targets"], output_names=["loss"],
        opset_version=opset,
        dynamic_axes=({"idx": {0: "batch"}, "targets": {0: "batch"}}
                      if dynamic_batch else None),
    )
    if fold:
        # torch's defaults: eval mode, constant folding on.
        model.eval()
        kwargs.update(do_constant_folding=True)
    else:
        # Train mode + PRESERVE: no folding, and initializer de-duplication
        # goes by identity (eval mode would merge equal-valued tensors, e.g.
        # all LayerNorm weights at init).  Dropout (GPT-2 with
        # cfg["dropout"]) exports in training mode; no batchnorm.
        model.train()
        kwargs.update(do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE)

    tmpdir = None
    attr = getattr(model, "layers_attr", None)
    replicate = (shapes_only and replicate_blocks and attr is not None
                 and cfg["n_layer"] > TEMPLATE_LAYERS)
    with torch.no_grad():
        if shapes_only:
            f = io.BytesIO()
            m = model
            if replicate:
                m = make_model(dict(cfg, n_layer=TEMPLATE_LAYERS), shapes_only=True)
                m.train()
            with _meta_export_patches():
                torch.onnx.export(m, (idx, tgt), f, export_params=False, **kwargs)
            proto = onnx.load_from_string(f.getvalue())
            if replicate:
                # Parameter inputs in torch's order (named_parameters order).
                tmpl = {i.name: i for i in proto.graph.input}
                pre = "%s.%d." % (attr, TEMPLATE_LAYERS - 1)
                pin = []
                for name, p in model.named_parameters():
                    src = name
                    parts = name.split(".")
                    if parts[0] == attr and int(parts[1]) >= TEMPLATE_LAYERS:
                        src = pre + ".".join(parts[2:])
                    vi = onnx.ValueInfoProto()
                    vi.CopyFrom(tmpl[src])
                    vi.name = name
                    assert list(p.shape) == [d.dim_value for d in vi.type.tensor_type.shape.dim]
                    pin.append(vi)
                _replicate_blocks(proto, attr, TEMPLATE_LAYERS, cfg["n_layer"], pin)
        elif big:
            tmpdir = tempfile.mkdtemp(prefix="cleave-export-",
                                      dir=os.path.dirname(os.path.abspath(out_path)))
            tmp_path = os.path.join(tmpdir, "model.onnx")
            torch.onnx.export(model, (idx, tgt), tmp_path, **kwargs)
            proto = onnx.load(tmp_path, load_external_data=False)
        else:
            f = io.BytesIO()
            torch.onnx.export(model, (idx, tgt), f, **kwargs)
            proto = onnx.load_from_string(f.getvalue())
    t_export = time.time() - t0

    g = proto.graph
    init_names = [t.name for t in g.initializer]
    input_names = [i.name for i in g.input]
    assert input_names[:2] == ["idx", "targets"], input_names[:4]

    params = set(param_names)
    if shapes_only:
        # Persistent buffers would arrive as graph inputs: give them their
        # real values (models provide buffer_values(); ours have none).
        values = model.buffer_values() if hasattr(model, "buffer_values") else {}
        keep = []
        for i in g.input:
            if i.name in buffer_names:
                assert i.name in values, "no value for buffer %s" % i.name
                g.initializer.append(numpy_helper.from_array(
                    values[i.name].detach().cpu().numpy(), i.name))
            else:
                keep.append(i)
        del g.input[:]
        g.input.extend(keep)
        init_names = [t.name for t in g.initializer]
        input_names = [i.name for i in g.input]
        got = set(input_names[2:])
        assert got == params, ("parameter inputs differ from named_parameters()",
                               sorted(got ^ params)[:10])
    elif not fold:
        extra = set(init_names) - params
        assert params <= set(init_names) and extra <= set(buffer_names), \
            ("initializer names differ from state_dict names",
             sorted(params - set(init_names))[:10], sorted(extra)[:10])

    meta = {
        "cleave.buffers": ",".join(n for n in buffer_names if n in init_names),
        "cleave.shapes_only": "1" if shapes_only else "0",
        "cleave.init": json.dumps(model.init_spec() if hasattr(model, "init_spec") else {},
                                  separators=(",", ":")),
        "cleave.config": json.dumps(cfg, sort_keys=True, separators=(",", ":")),
    }
    if not shapes_only:
        meta["cleave.seed"] = str(seed)
    meta.update(padding_metadata(model, proto))
    for k, v in meta.items():
        p = proto.metadata_props.add()
        p.key, p.value = k, v

    _save(proto, out_path, tmpdir if big else None)
    dt = time.time() - t0
    info = dict(path=out_path, config=cfg["name"], seconds=dt,
                export_seconds=t_export, shapes_only=shapes_only,
                external_data=big, params=sum(p.numel() for p in model.parameters()),
                nodes=len(g.node), ops=sorted({n.op_type for n in g.node}),
                opset=opset, buffers=meta["cleave.buffers"])
    if verbose:
        print("exported %s -> %s in %.2f s (%s params, %d nodes, opset %d%s%s)"
              % (cfg["name"], out_path, dt, "{:,}".format(info["params"]),
                 info["nodes"], opset, ", shapes only" if shapes_only else "",
                 ", external data" if big else ""))
        print("ops:", " ".join(info["ops"]))
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--seq", type=int, help="sequence length (default: config's)")
    ap.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    ap.add_argument("--dynamic-batch", action="store_true",
                    help="make axis 0 of idx and targets symbolic ('batch')")
    ap.add_argument("--shapes-only", action="store_true",
                    help="no weights: parameters become graph inputs (meta device)")
    ap.add_argument("--seed", type=int, default=0, help="init seed (default 0)")
    ap.add_argument("--opset", type=int, default=17, choices=range(13, 18))
    ap.add_argument("--fold", action="store_true",
                    help="torch's default export (eval mode, constant folding)")
    ap.add_argument("--gelu", choices=["tanh", "exact"], help="GPT-2 GELU variant")
    ap.add_argument("--dropout", type=float,
                    help="GPT-2: dropout probability of its four dropouts, "
                         "exported in training mode (default: none)")
    ap.add_argument("--attn-dropout", type=float,
                    help="GPT-2: the attention probabilities' (default: --dropout)")
    ap.add_argument("--check", action="store_true", help="run onnx.checker afterwards")
    ap.add_argument("--no-replicate", action="store_true",
                    help="shapes-only: trace every block (slow for deep models) "
                         "instead of tracing 3 and cloning the last")
    a = ap.parse_args(argv)
    cfg = get_config(a.config, seq=a.seq, gelu=a.gelu, dropout=a.dropout,
                     attn_dropout=a.attn_dropout)
    os.makedirs(os.path.dirname(os.path.abspath(a.output)), exist_ok=True)
    info = export_model(cfg, a.output, batch=a.batch, dynamic_batch=a.dynamic_batch,
                        shapes_only=a.shapes_only, seed=a.seed, opset=a.opset,
                        fold=a.fold, replicate_blocks=not a.no_replicate)
    if a.check:
        onnx.checker.check_model(a.output if info["external_data"] else onnx.load(a.output))
        print("onnx.checker: ok")
    return info


if __name__ == "__main__":
    main()
