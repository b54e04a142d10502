"""A model whose tensor-parallel split meets an op that needs a split
dimension whole: an MLP whose hidden activation is gated by a softmax
over its own width (fc1 is column-parallel and fc2 row-parallel, as
Megatron splits an MLP, but no rank holds the whole row the softmax
normalizes). Exported for training like models/third_party.py's modules
(opsets 14 and 17, static and dynamic batch, PyTorch's 10-step reference,
the spec):

    /usr/bin/python3 test/runtime/stop_gather_model.py DIR [--autocast bf16]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "models"))

import third_party                            # noqa: E402
import torch.nn as nn                         # noqa: E402
import torch.nn.functional as F               # noqa: E402

VOCAB, D = third_party.VOCAB, third_party.D


class SoftmaxGate(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.ln = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 4 * D)
        self.fc2 = nn.Linear(4 * D, D)
        self.lnf = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, idx, targets):
        x = self.emb(idx)
        h = self.fc1(self.ln(x))
        h = F.softmax(h, dim=-1) * h
        x = x + self.fc2(h)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--autocast", choices=["bf16"])
    a = ap.parse_args()
    third_party.export_training(a.outdir, autocast=a.autocast,
                                models={"tp_softmax_gate": SoftmaxGate})


if __name__ == "__main__":
    main()
