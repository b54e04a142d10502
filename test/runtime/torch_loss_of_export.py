"""Loads what `cleave-checkpoint export` wrote into the PyTorch reference
model with load_state_dict and checks that it computes the loss cleave-run
computed next, from the same weights.

    /usr/bin/python3 test/runtime/torch_loss_of_export.py CONFIG EXPORT \
        TOKENS METRICS --batch B --step S [--optimizer JSON --optimizer-steps N]
        [--rtol R]

CONFIG is a models/configs.py name, EXPORT the safetensors file, METRICS
cleave-run's --metrics of a run that continued the checkpoint: its step S
is the first after the checkpoint. The model's loss on step S's batch
(reference.py's get_batch) must equal that line's within --rtol (relative;
default 1e-5). With --optimizer (the spec's optimizer JSON) the export must
hold the optimizer state too (`NAME.exp_avg`, `NAME.exp_avg_sq` for AdamW,
`NAME.momentum_buffer` for SGD, of every parameter): it becomes
torch.optim's state (step N for AdamW), torch takes step S's optimizer step
(with clip_grad_norm_), and the loss on step S+1's batch must equal
cleave's step S+1. Prints one line per loss compared.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "models"))
import safetensors_io                              # noqa: E402
from configs import get_config                     # noqa: E402
from export import make_model                      # noqa: E402
from reference import get_batch, make_optimizer    # noqa: E402
from tokenizer import read_tokens                  # noqa: E402

STATE = {"adamw": ("exp_avg", "exp_avg_sq"), "sgd": ("momentum_buffer",)}


def cleave_loss(path, step):
    with open(path) as f:
        for line in f:
            m = json.loads(line)
            if m["step"] == step:
                return m["loss"]
    sys.exit("%s: no step %d" % (path, step))


def check(what, ours, theirs, rtol):
    diff = abs(ours - theirs) / abs(theirs)
    print("%s: torch %.7f, cleave %.7f, relative difference %.1e"
          % (what, ours, theirs, diff))
    if not diff <= rtol:
        sys.exit("loss differs by more than %g" % rtol)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("export")
    ap.add_argument("tokens")
    ap.add_argument("metrics")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--step", type=int, required=True)
    ap.add_argument("--optimizer")
    ap.add_argument("--optimizer-steps", type=int, default=0)
    ap.add_argument("--rtol", type=float, default=1e-5)
    a = ap.parse_args()
    cfg = get_config(a.config)
    tokens = read_tokens(a.tokens)
    tensors, _ = safetensors_io.load(a.export)
    model = make_model(cfg)
    names = set(n for n, _ in model.named_parameters())
    weights = {n: torch.as_tensor(np.asarray(t)) for n, t in tensors.items()
               if n in names}
    # strict: every parameter of the module, nothing else.
    model.load_state_dict(weights, strict=True)

    idx, tgt = get_batch(tokens, a.step, a.batch, cfg["seq"])
    loss = model(idx, tgt)
    check("step %d" % a.step, loss.item(), cleave_loss(a.metrics, a.step),
          a.rtol)
    if not a.optimizer:
        if set(tensors) != names:
            sys.exit("not a state dict: %s" % sorted(set(tensors) - names))
        return

    opt = json.loads(a.optimizer)
    kind = opt.get("type", "adamw").lower()
    expected = set(names) | {"%s.%s" % (n, s) for n in names for s in STATE[kind]}
    if set(tensors) != expected:
        sys.exit("the optimizer export's names differ: extra %s, missing %s"
                 % (sorted(set(tensors) - expected), sorted(expected - set(tensors))))
    optim = make_optimizer(model, opt)
    for n, p in model.named_parameters():
        state = {s: torch.as_tensor(np.asarray(tensors["%s.%s" % (n, s)])).clone()
                 for s in STATE[kind]}
        if kind == "adamw":
            state["step"] = torch.tensor(float(a.optimizer_steps))
        optim.state[p] = state
    optim.zero_grad(set_to_none=True)
    loss.backward()
    clip = float(opt.get("grad_clip", 0.0))
    if clip > 0:
        torch.nn.utils.clip_grad_norm_(list(model.parameters()), clip)
    optim.step()
    idx, tgt = get_batch(tokens, a.step + 1, a.batch, cfg["seq"])
    with torch.no_grad():
        after = model(idx, tgt)
    check("step %d after torch's optimizer step from the exported state"
          % (a.step + 1), after.item(), cleave_loss(a.metrics, a.step + 1),
          a.rtol)


main()
