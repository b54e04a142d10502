"""Cleave's dropout masks in numpy, for PyTorch references that train with
the very masks cleave-run draws (docs/dropout.md).

The mask of ONNX Dropout node NAME (training mode, ratio p) at data step s
keeps element e of the step's global activation iff
    u = ((splitmix64(key ^ splitmix64(c)) >> 11) + 0.5) / 2^53 >= p,
    key = splitmix64(splitmix64(seed ^ fnv1a64(NAME)) ^ s),
    c = j * per_sample + (e's row-major index within sample j),
where j is the sample's index in the step's global batch; kept elements are
scaled by 1 / (1 - p). runtime/Random.h and runtime/ops/DropoutStream.h are
the C++ side.

    install(model, onnx_path, seed) -> StreamDropouts

replaces every nn.Dropout of `model` by one that draws this mask, named by
the Dropout node of the export at `onnx_path` (module path "h.0.attn.drop" is
node "/h.0/attn/drop/Dropout"); call .set_step(s) before each step's forward (the
returned object does it from a forward pre-hook on `model`).
"""
import numpy as np
import onnx
import torch
import torch.nn as nn

MASK64 = (1 << 64) - 1


def splitmix64(z):
    """splitmix64 of a uint64 numpy array (wrapping arithmetic)."""
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9e3779b97f4a7c15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
    return z ^ (z >> np.uint64(31))


def fnv1a64(name):
    h = 0xcbf29ce484222325
    for c in name.encode():
        h = ((h ^ c) * 0x100000001b3) & MASK64
    return h


def uniform53(key, counters):
    bits = splitmix64(np.uint64(key) ^ splitmix64(counters)) >> np.uint64(11)
    return (bits.astype(np.float64) + 0.5) * 2.0 ** -53


def keep_mask(seed, name, step, shape, ratio, first_sample=0):
    """Bool array of `shape` (samples along axis 0, from `first_sample`)."""
    key = int(splitmix64(np.uint64((seed ^ fnv1a64(name)) & MASK64)))
    key = int(splitmix64(np.uint64(key ^ step)))
    per_sample = int(np.prod(shape[1:], dtype=np.int64))
    counters = (np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.uint64)
                + np.uint64(first_sample * per_sample))
    return (uniform53(key, counters) >= ratio).reshape(shape)


class StreamDropout(nn.Module):
    def __init__(self, p, name, state):
        super().__init__()
        self.p, self.name, self.state = p, name, state

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        # The export holds the ratio as a float32 constant, which Cleave
        # reads exactly (0.1 is 0.100000001490116...).
        p = float(np.float32(self.p))
        keep = keep_mask(self.state["seed"], self.name, self.state["step"],
                         tuple(x.shape), p)
        scale = torch.tensor(1.0 / (1.0 - p), dtype=x.dtype)
        return x * torch.from_numpy(keep).to(x.dtype) * scale


class StreamDropouts:
    def __init__(self, seed):
        self.state = {"seed": seed, "step": -1}

    def set_step(self, step):
        self.state["step"] = step


def install(model, onnx_path, seed):
    """Replaces model's nn.Dropout modules (see the module's docstring);
    every one must name a Dropout node of the export, and every such node
    a module."""
    nodes = {n.name for n in onnx.load(onnx_path, load_external_data=False).graph.node
             if n.op_type == "Dropout"}
    streams = StreamDropouts(seed)
    found = set()
    for path, module in list(model.named_modules()):
        for child, sub in list(module.named_children()):
            if not isinstance(sub, nn.Dropout):
                continue
            full = (path + "." + child) if path else child
            # torch's scope names join a ModuleList and its index with
            # '.', the rest with '/': compare with both as '.'.
            named = [n for n in nodes
                     if n.strip("/").replace("/", ".") == full + ".Dropout"]
            name = named[0] if len(named) == 1 else None
            if name is None:
                raise SystemExit("cleave_dropout: %s has no Dropout node %s in %s "
                                 "(nodes: %s)" % (full, name, onnx_path, sorted(nodes)))
            found.add(name)
            setattr(module, child, StreamDropout(sub.p, name, streams.state))
    if found != nodes:
        raise SystemExit("cleave_dropout: Dropout nodes without a module: %s"
                         % sorted(nodes - found))

    def next_step(_module, _inputs):
        streams.state["step"] += 1
    model.register_forward_pre_hook(next_step)
    return streams
