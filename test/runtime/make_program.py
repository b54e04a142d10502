"""Writes small cleave programs (rank-<r>.pb + params.bin) for cleave-run's
lit tests, without the compiler.

    /usr/bin/python3 test/runtime/make_program.py OUT [--ranks N] [--train]
        [--microbatches M] [--microbatch-size S] [--seq T]
        [--magic TEXT] [--version V] [--fail-rank R]

The model is a byte-level bigram language model: loss =
cross_entropy(embedding(wte, ids) @ head.weight + head.bias, targets), vocab
256 (any byte token file works), wte from params.bin, head.weight from
"normal:0.02", head.bias "zeros".  With --ranks N the programs are data
parallel: rank r takes samples [r*M*S, (r+1)*M*S) of a global batch of
N*M*S, so N ranks of M microbatches see the same batch as one rank of N*M.
Every program also holds the parameters that test the communication; with
--train the optimizer (once per step) sets them, over the group "data":
  counter    [1], "ones"; all-reduced (SUM) in place: N**k after k steps
  shard      [2N] "normal:1.0", each rank holding its slice [2r, 2r+2), so
             --save-params assembles the full tensor from N ranks
  scattered  [2N], each rank its slice: reduce-scatter (SUM) of the
             all-gather of `shard`, so N * shard
  average    [2]: all-reduce (MEAN) of a copy of the rank's shard slice
  broadcast  [2]: a copy of the rank's shard slice broadcast from rank 0
  mailbox    [2] of [2N], zeros: rank N-1 receives rank 0's shard slice (N > 1)
--save-params keeps the last rank's copy of a parameter every rank holds
whole, so these show what rank N-1 ended with.  Without --train the program
has only its forward and needs --forward-only.
--fail-rank R gives rank R an embedding of 4 rows, so its first kernel fails
on any byte token >= 4 while the other ranks wait in a collective.
--magic / --version write a program that the loader must refuse.
--live-peak B gives every rank's program the predicted live peak B bytes
(MemoryPlan.live_peak_bytes; else 0, no prediction), for cleave-run's
warning when it measures another.

The protobuf module is generated from runtime/program.proto with protoc at
each run (into a temporary folder), so the schema is never copied.
"""
import argparse
import hashlib
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import program_seal  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(HERE, "..", "..", "runtime")


def load_schema():
    out = tempfile.mkdtemp(prefix="cleave-proto-")
    subprocess.run(["protoc", "--python_out=" + out, "-I", PROTO_DIR,
                    os.path.join(PROTO_DIR, "program.proto")], check=True)
    sys.path.insert(0, out)
    import program_pb2  # noqa: E402
    return program_pb2


class Builder:
    def __init__(self, pb, rank, ranks):
        self.pb = pb
        self.p = pb.Program(magic="cleave-program", version=pb.VERSION_CURRENT,
                            model="bigram.onnx")
        m = self.p.mesh
        m.rank, m.world_size = rank, ranks
        m.data_degree, m.pipeline_degree, m.tensor_degree = ranks, 1, 1
        m.data_rank = rank
        m.groups.add(name="data", ranks=list(range(ranks)))
        self.p.buffers.add(space=pb.DEVICE, alignment=64)
        self.end = 0

    def tensor(self, shape, dtype, category, name):
        size = {self.pb.F32: 4, self.pb.I64: 8}[dtype]
        for d in shape:
            size *= d
        t = self.p.tensors.add(buffer=0, offset=self.end, shape=shape,
                               dtype=dtype, category=category, name=name)
        self.end += (size + 63) // 64 * 64
        self.p.buffers[0].size_bytes = self.end
        return len(self.p.tensors) - 1, t

    def kernel(self, fn, op, inputs, outputs, **attrs):
        k = fn.body.add().kernel
        k.op, k.location = op, "/" + op
        k.inputs.extend(inputs)
        k.outputs.extend(outputs)
        for key, value in attrs.items():
            if isinstance(value, str):
                k.attributes[key].s = value
            else:
                k.attributes[key].i = value
        return k


def build(pb, rank, a, wte_bytes):
    b = Builder(pb, rank, a.ranks)
    V = 4 if rank == a.fail_rank else 256
    D, S, M, T = 8, a.microbatch_size, a.microbatches, a.seq
    batch = b.p.batch
    batch.global_batch = a.ranks * M * S
    batch.microbatch_size, batch.microbatches, batch.seq_len = S, M, T
    batch.first_sample = rank * M * S

    def param(name, shape, **init):
        tid, t = b.tensor(shape, pb.F32, pb.PARAMETERS, name)
        prm = b.p.parameters.add(name=name, tensor=tid, full_shape=shape,
                                 slice_start=[0] * len(shape), slice_size=shape,
                                 seed=5)
        if "generator" in init:
            prm.generator = init["generator"]
        else:
            prm.file.path, prm.file.offset, prm.file.size_bytes = "params.bin", 0, len(wte_bytes)
            prm.file.sha256 = hashlib.sha256(wte_bytes).hexdigest()
        return tid, prm

    wte, _ = param("wte", [V, D]) if V == 256 else param("wte", [V, D], generator="ones")
    head, _ = param("head.weight", [D, 256], generator="normal:0.02")
    bias, _ = param("head.bias", [256], generator="zeros")
    counter, _ = param("counter", [1], generator="ones")
    shard, prm = param("shard", [2], generator="normal:1.0")
    prm.full_shape[:] = [2 * a.ranks]
    prm.slice_start[:] = [2 * rank]
    scattered, prm = param("scattered", [2], generator="zeros")
    prm.full_shape[:] = [2 * a.ranks]
    prm.slice_start[:] = [2 * rank]
    average, _ = param("average", [2], generator="zeros")
    broadcast, _ = param("broadcast", [2], generator="zeros")
    # A slice per rank, so that --save-params keeps every rank's mailbox
    # (a replicated parameter is saved from the first rank that holds it).
    mailbox, prm = param("mailbox", [2], generator="zeros")
    prm.full_shape[:] = [2 * a.ranks]
    prm.slice_start[:] = [2 * rank]

    ids, _ = b.tensor([S, T], pb.I64, pb.IO, "idx")
    tgt, _ = b.tensor([S, T], pb.I64, pb.IO, "targets")
    b.p.inputs.add(name="idx", tensor=ids, role=pb.TOKENS)
    b.p.inputs.add(name="targets", tensor=tgt, role=pb.TARGETS)
    x, _ = b.tensor([S, T, D], pb.F32, pb.ACTIVATIONS, "x")
    logits, _ = b.tensor([S, T, 256], pb.F32, pb.ACTIVATIONS, "logits")
    biased, _ = b.tensor([S, T, 256], pb.F32, pb.ACTIVATIONS, "biased")
    flat, _ = b.tensor([S * T, 256], pb.F32, pb.ACTIVATIONS, "flat")
    flat_t, _ = b.tensor([S * T], pb.I64, pb.ACTIVATIONS, "flat_t")
    loss, _ = b.tensor([], pb.F32, pb.ACTIVATIONS, "loss")
    b.p.outputs.add(name="loss", tensor=loss, role=pb.LOSS)

    fwd = b.p.functions.add(name="forward", kind=pb.FORWARD)
    b.kernel(fwd, "embedding", [wte, ids], [x])
    b.kernel(fwd, "matmul", [x, head], [logits])
    fwd.body.add().free.tensor = x
    b.kernel(fwd, "add", [logits, bias], [biased])
    fwd.body.add().free.tensor = logits
    b.kernel(fwd, "reshape", [biased], [flat])
    fwd.body.add().free.tensor = biased
    b.kernel(fwd, "reshape", [tgt], [flat_t])
    b.kernel(fwd, "softmax_cross_entropy", [flat, flat_t], [loss], reduction="mean")
    fwd.body.add().free.tensor = flat
    fwd.body.add().free.tensor = flat_t
    functions = [(0, mb) for mb in range(M)]

    if a.train:
        grad, _ = b.tensor([256], pb.F32, pb.GRADIENTS, "head.bias.grad")
        one, t = b.tensor([256], pb.F32, pb.CONSTANTS, "one")
        t.data = struct.pack("<256f", *([1.0] * 256))
        gathered, _ = b.tensor([2 * a.ranks], pb.F32, pb.ACTIVATIONS, "gathered")
        bwd = b.p.functions.add(name="backward", kind=pb.BACKWARD)
        b.kernel(bwd, "add", [grad, one], [grad])
        opt = b.p.functions.add(name="optimizer", kind=pb.OPTIMIZER)
        c = opt.body.add().collective
        c.kind, c.group, c.reduce = pb.ALL_REDUCE, 0, pb.SUM
        c.inputs.append(counter)
        c.outputs.append(counter)
        g = opt.body.add().collective
        g.kind, g.group = pb.ALL_GATHER, 0
        g.inputs.append(shard)
        g.outputs.append(gathered)
        rs = opt.body.add().collective
        rs.kind, rs.group, rs.reduce = pb.REDUCE_SCATTER, 0, pb.SUM
        rs.inputs.append(gathered)
        rs.outputs.append(scattered)
        opt.body.add().free.tensor = gathered
        for target in (average, broadcast):
            copy = opt.body.add().copy
            copy.source, copy.destination = shard, target
        mean = opt.body.add().collective
        mean.kind, mean.group, mean.reduce = pb.ALL_REDUCE, 0, pb.MEAN
        mean.inputs.append(average)
        mean.outputs.append(average)
        bc = opt.body.add().collective
        bc.kind, bc.group, bc.root = pb.BROADCAST, 0, 0
        bc.inputs.append(broadcast)
        bc.outputs.append(broadcast)
        opt.body.add().event.id = 1
        last = a.ranks - 1
        if last > 0 and rank in (0, last):
            sr = opt.body.add().send_recv
            sr.send, sr.peer, sr.tag = rank == 0, last - rank, 7
            sr.tensor = shard if rank == 0 else mailbox
        functions = [s for mb in range(M) for s in ((0, mb), (1, mb))] + [(2, -1)]
    for fn, mb in functions:
        b.p.schedule.add(function=fn, microbatch=mb)
    b.p.memory.peak_bytes = b.end
    b.p.memory.parameters = 0
    if a.live_peak is not None:
        b.p.memory.live_peak_bytes = a.live_peak
    if a.magic is not None:
        b.p.magic = a.magic
    if a.version is not None:
        b.p.version = a.version
    return b.p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--microbatches", type=int, default=2)
    ap.add_argument("--microbatch-size", type=int, default=2)
    ap.add_argument("--seq", type=int, default=8)
    ap.add_argument("--magic")
    ap.add_argument("--version", type=int)
    ap.add_argument("--fail-rank", type=int, default=-1)
    ap.add_argument("--live-peak", type=int)
    a = ap.parse_args()
    pb = load_schema()
    os.makedirs(a.out, exist_ok=True)
    # wte: a fixed pattern, row v column d = ((v * 8 + d) % 17 - 8) / 40.
    wte = [((v * 8 + d) % 17 - 8) / 40.0 for v in range(256) for d in range(8)]
    wte_bytes = struct.pack("<%df" % len(wte), *wte)
    with open(os.path.join(a.out, "params.bin"), "wb") as f:
        f.write(wte_bytes)
    # Sealed as cleave-compile seals its programs (program_seal.py).
    bodies = [build(pb, rank, a, wte_bytes).SerializeToString()
              for rank in range(a.ranks)]
    compile_fingerprint = program_seal.fingerprint(bodies)
    for rank, body in enumerate(bodies):
        with open(os.path.join(a.out, "rank-%d.pb" % rank), "wb") as f:
            f.write(program_seal.seal(body, compile_fingerprint))


if __name__ == "__main__":
    main()
