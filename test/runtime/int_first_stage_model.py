"""Exports a tiny language model whose first ONNX nodes are integer work
only: the token ids and targets are flattened (Reshape) before the
embedding Gather, so a pipeline split at "/emb/Gather" gives stage 0 no op
that carries a gradient.

    /usr/bin/python3 test/runtime/int_first_stage_model.py OUT.onnx \
        [--seq 32] [--vocab 256] [--width 16] \
        [--reference DIR --data TOKENS --batch B --steps N]

With --reference, also trains the exported model in PyTorch as
models/reference.py does (AdamW, lr 1e-3, betas (0.9, 0.95), weight decay
0.1, clipping at 1.0, the batches cleave-run reads from TOKENS) and writes
DIR/losses.json and DIR/params_final.safetensors.
"""
import argparse
import os
import sys
import warnings

import torch
from torch import nn
from torch.nn import functional as F

warnings.filterwarnings("ignore")  # torch.onnx.export's tracer warnings
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "models"))


class IntFirst(nn.Module):
    def __init__(self, vocab, width):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.l1 = nn.Linear(width, width)
        self.l2 = nn.Linear(width, width)
        nn.init.normal_(self.emb.weight, std=0.02)

    def forward(self, idx, targets):
        t = targets.reshape(-1)
        ids = idx.reshape(-1)
        h = self.emb(ids)
        h = h + F.gelu(self.l1(h))
        h = h + F.gelu(self.l2(h))
        logits = h @ self.emb.weight.t()
        return F.cross_entropy(logits, t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--reference")
    ap.add_argument("--data")
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = IntFirst(args.vocab, args.width)
    model.train()
    idx = torch.zeros(args.batch, args.seq, dtype=torch.long)
    tgt = torch.zeros(args.batch, args.seq, dtype=torch.long)
    torch.onnx.export(model, (idx, tgt), args.out,
                      input_names=["idx", "targets"], output_names=["loss"],
                      dynamic_axes={"idx": {0: "batch"}, "targets": {0: "batch"}},
                      opset_version=17, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE)
    if args.reference:
        import onnx
        import reference
        from tokenizer import read_tokens
        inits = [t.name for t in onnx.load(args.out).graph.initializer]
        reference.write_training_reference(
            model, read_tokens(args.data), args.batch, args.seq, args.steps,
            reference.DEFAULT_OPTIMIZER, inits, args.reference)


if __name__ == "__main__":
    main()
