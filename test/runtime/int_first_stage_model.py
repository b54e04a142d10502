"""Exports a tiny language model whose first ONNX nodes are integer work
only: the token ids and targets are flattened (Reshape) before the
embedding Gather, so a pipeline split at "/emb/Gather" gives stage 0 no op
that carries a gradient.

    /usr/bin/python3 test/runtime/int_first_stage_model.py OUT.onnx \
        [--batch 8] [--seq 32] [--vocab 256]
"""
import argparse
import warnings

import torch
from torch import nn
from torch.nn import functional as F

warnings.filterwarnings("ignore")  # torch.onnx.export's tracer warnings


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


if __name__ == "__main__":
    main()
