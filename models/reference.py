"""PyTorch reference numbers under DESIGN.md's training semantics.

    /usr/bin/python3 models/reference.py CONFIG --data tokens.bin --batch B
        [--seq T] [--steps 10] -o REF_DIR [--optimizer JSON] [--seed S]
        [--static-batch] [--opset N] [--forward-only] [--autocast bf16]
        [--device cuda --init params_init.safetensors --no-export]
        [--dropout P [--attn-dropout P] --cleave-seed S]

Writes into REF_DIR:
  model.onnx               the model, exported by export.py from the very
                           weights trained here (dynamic batch axis unless
                           --static-batch, then batch = B)
  params_init.safetensors  every parameter before training
  grads.safetensors        gradient of the step-0 loss w.r.t. every parameter
                           (before clipping), plus the scalar `loss`
  params_final.safetensors every parameter after --steps optimizer steps
  losses.json              {"losses": [...], "grad_norms": [...], "lrs": [...],
                            "optimizer", "batch", "seq", "steps", "seed",
                            "config", "data"}
--device cuda trains on the GPU (autocast on CUDA with --autocast); --init
starts from the parameters of a params_init.safetensors (e.g. one written
here, so a GPU machine with another torch trains the same weights), and
--no-export skips model.onnx (another torch's exporter may differ).
--dropout P gives GPT-2 its dropouts (models/gpt2.py), exported in training
mode, and trains with the masks cleave-run draws under spec seed
--cleave-seed (models/cleave_dropout.py).
With --forward-only: only model.onnx and losses.json, whose losses are those
of each step's batch with the initial weights (no optimizer step).
Safetensors keys are the ONNX initializer names (== state_dict names,
checked).

Batches: sample j of the global batch at step s takes tokens
[(s*B+j)*T, (s*B+j)*T + T + 1) of the file, wrapping at its end; the first T
are idx, the last T targets.  The step's loss is the model's loss (mean over
the B*T tokens).  Optimizer: torch.optim.AdamW (or SGD); weight decay only on
parameters with ndim >= 2; grad_clip = clip_grad_norm_ over all parameters
(0 = off).  With any of warmup_steps, lr_decay_steps, min_lr in the optimizer
JSON, the learning rate follows Cleave's schedule (ir/CleaveOps.td) through
LambdaLR, stepped after each optimizer step: at 0-based step i it is
lr * (i + 1) / warmup_steps while i < warmup_steps; then, when lr_decay_steps >
warmup_steps, min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2 with
p = min(1, (i - warmup_steps) / (lr_decay_steps - warmup_steps)); else lr.
"lrs" in losses.json is the learning rate each step used.
"""
import argparse
import json
import math
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
warnings.filterwarnings("ignore")      # torch.onnx.export's tracer warnings

import numpy as np                                 # noqa: E402
import onnx                                        # noqa: E402
from onnx import numpy_helper                      # noqa: E402
import torch                                       # noqa: E402

import safetensors_io                              # noqa: E402
from configs import get_config                     # noqa: E402
from export import export_model, make_model        # noqa: E402
from tokenizer import read_tokens                  # noqa: E402

DEFAULT_OPTIMIZER = {"type": "adamw", "lr": 1e-3, "betas": [0.9, 0.95],
                     "eps": 1e-8, "weight_decay": 0.1, "grad_clip": 1.0}


def get_batch(tokens, step, B, T):
    """(idx, targets) int64 [B, T] for global step `step`."""
    n = len(tokens)
    starts = (step * B + np.arange(B)) * T
    pos = (starts[:, None] + np.arange(T + 1)[None, :]) % n
    w = torch.from_numpy(tokens[pos].astype(np.int64))
    return w[:, :T].contiguous(), w[:, 1:].contiguous()


def make_optimizer(model, opt):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    wd = float(opt.get("weight_decay", 0.0))
    groups = [{"params": decay, "weight_decay": wd},
              {"params": no_decay, "weight_decay": 0.0}]
    kind = opt.get("type", "adamw").lower()
    if kind == "adamw":
        return torch.optim.AdamW(groups, lr=float(opt["lr"]),
                                 betas=tuple(opt.get("betas", (0.9, 0.999))),
                                 eps=float(opt.get("eps", 1e-8)))
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=float(opt["lr"]),
                               momentum=float(opt.get("momentum", 0.0)))
    raise SystemExit("optimizer type %r: expected adamw or sgd" % kind)


SCHEDULE_KEYS = ("warmup_steps", "lr_decay_steps", "min_lr")


def lr_factor(opt):
    """The schedule as LambdaLR's factor of lr for 0-based step i."""
    lr = float(opt["lr"])
    warmup = int(opt.get("warmup_steps", 0))
    decay = int(opt.get("lr_decay_steps", 0))
    min_lr = float(opt.get("min_lr", 0.0))
    if warmup < 0 or decay < 0 or min_lr < 0:
        raise SystemExit("optimizer: warmup_steps, lr_decay_steps and min_lr "
                         "must not be negative")

    def factor(i):
        if i < warmup:
            return (i + 1) / warmup
        if decay > warmup and lr > 0:
            p = min(1.0, (i - warmup) / (decay - warmup))
            return (min_lr + (lr - min_lr) * (1 + math.cos(math.pi * p)) / 2) / lr
        return 1.0
    return factor


def make_scheduler(optim, opt):
    """LambdaLR for the schedule keys, or None when the JSON gives none
    (a constant learning rate)."""
    if not any(k in opt for k in SCHEDULE_KEYS):
        return None
    return torch.optim.lr_scheduler.LambdaLR(optim, lr_factor(opt))


def params_dict(model):
    return {n: p.detach().cpu().clone() for n, p in model.named_parameters()}


def train(model, tokens, B, T, steps, opt, autocast=None, verbose=True,
          device="cpu"):
    """Trains `model` in place for `steps` optimizer steps on the batches of
    `tokens` (get_batch).  Returns the per-step losses, the gradient norms
    before clipping, the learning rates, and the step-0 gradients (before
    clipping) keyed by parameter name plus the step-0 `loss`, as
    grads.safetensors holds them."""
    optim = make_optimizer(model, opt)
    sched = make_scheduler(optim, opt)
    clip = float(opt.get("grad_clip", 0.0))
    params = list(model.parameters())
    losses, norms, lrs, grads0 = [], [], [], None
    for s in range(steps):
        idx, tgt = get_batch(tokens, s, B, T)
        idx, tgt = idx.to(device), tgt.to(device)
        optim.zero_grad(set_to_none=True)
        if autocast:
            # Mixed precision as PyTorch runs it: bf16 products, fp32
            # master weights and gradients.
            with torch.autocast(device, dtype=torch.bfloat16):
                loss = model(idx, tgt)
        else:
            loss = model(idx, tgt)
        loss.backward()
        norm = torch.norm(torch.stack([p.grad.detach().norm(2) for p in params]), 2)
        if s == 0:
            grads0 = {n: p.grad.detach().cpu().clone() for n, p in model.named_parameters()}
            grads0["loss"] = loss.detach().cpu().clone()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        lrs.append(optim.param_groups[0]["lr"])
        optim.step()
        if sched is not None:
            sched.step()
        losses.append(float(loss.item()))
        norms.append(float(norm.item()))
        if verbose:
            print("step %3d  loss %.6f  grad_norm %.4f  lr %.4g"
                  % (s, losses[-1], norms[-1], lrs[-1]))
    return losses, norms, lrs, grads0


def named_weights(model):
    """Every parameter and buffer of `model` by state_dict name (a tied
    parameter under its first name), detached copies: what an export for
    training can make initializers of."""
    weights = dict(model.named_parameters())
    weights.update(model.named_buffers())
    return {n: w.detach().clone() for n, w in weights.items()}


def check_initializers(proto, weights, path):
    """Every initializer of the exported `proto` is one of `weights`, under
    its name and bit for bit (what an export for training must give);
    returns their names in file order."""
    names = []
    for t in proto.graph.initializer:
        assert t.name in weights, "%s: initializer %s is no parameter or buffer" \
            % (path, t.name)
        assert np.array_equal(numpy_helper.to_array(t), weights[t.name].numpy()), \
            (path, t.name)
        names.append(t.name)
    return names


def write_training_reference(model, tokens, B, T, steps, opt, inits, outdir,
                             info=None, verbose=False, autocast=None):
    """PyTorch's reference for training an export of `model` whose
    initializers are `inits` (parameter and buffer names): trains `model` in
    place (train()) for `steps` steps and writes into `outdir`
    params_init.safetensors and params_final.safetensors (keyed by
    initializer name: the parameters and the buffers the export made
    initializers, which stay unchanged) and losses.json (losses, grad_norms,
    lrs, optimizer, batch, seq, steps, frozen_parameters: the initializers
    that are no parameter, plus `info`); under torch.autocast when
    `autocast` is "bf16".  Returns losses.json's dict."""
    params = dict(model.named_parameters())
    assert set(params) <= set(inits), \
        "parameters the export lost: %s" % sorted(set(params) - set(inits))
    frozen = [n for n in inits if n not in params]
    os.makedirs(outdir, exist_ok=True)
    safetensors_io.save({n: w for n, w in named_weights(model).items() if n in inits},
                        os.path.join(outdir, "params_init.safetensors"))
    model.train()
    losses, norms, lrs, _ = train(model, tokens, B, T, steps, opt, autocast=autocast,
                                  verbose=verbose)
    safetensors_io.save({n: w for n, w in named_weights(model).items() if n in inits},
                        os.path.join(outdir, "params_final.safetensors"))
    result = {"losses": losses, "grad_norms": norms, "lrs": lrs, "optimizer": opt,
              "batch": B, "seq": T, "steps": steps, "frozen_parameters": frozen}
    if autocast:
        result["autocast"] = autocast
    result.update(info or {})
    with open(os.path.join(outdir, "losses.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result


def run(cfg, tokens, B, steps, outdir, opt, seed=0, dynamic_batch=True, opset=17,
        data_name=None, verbose=True, forward_only=False, autocast=None,
        device="cpu", init=None, export=True, cleave_seed=None):
    os.makedirs(outdir, exist_ok=True)
    T = cfg["seq"]
    model = make_model(cfg, seed=seed)
    if init:
        start, _ = safetensors_io.load(init)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name not in start:
                    raise SystemExit("%s has no parameter %s" % (init, name))
                p.copy_(torch.as_tensor(np.asarray(start[name])))
    if export:
        onnx_path = os.path.join(outdir, "model.onnx")
        export_model(cfg, onnx_path, batch=B, dynamic_batch=dynamic_batch,
                     seed=seed, opset=opset, model=model, verbose=False)

        # The ONNX initializers are exactly the weights we start from.
        proto = onnx.load(onnx_path)
        inits = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
        for name, p in model.named_parameters():
            assert name in inits, "parameter %s is not an ONNX initializer" % name
            assert np.array_equal(inits[name], p.detach().numpy()), name
        extra = set(inits) - {n for n, _ in model.named_parameters()}
        assert not extra, "initializers that are not parameters: %s" % sorted(extra)
        if (cfg.get("dropout") or 0) > 0 or (cfg.get("attn_dropout") or 0) > 0:
            # The masks cleave-run draws (docs/dropout.md).
            import cleave_dropout
            cleave_dropout.install(model, onnx_path, cleave_seed or 0)
    model.to(device)

    model.train()
    if forward_only:
        # The loss of each step's batches with the initial weights: what
        # `cleave-run --forward-only` computes.
        losses = []
        with torch.no_grad():
            for s in range(steps):
                idx, tgt = get_batch(tokens, s, B, T)
                losses.append(float(model(idx.to(device), tgt.to(device)).item()))
                if verbose:
                    print("step %3d  loss %.6f (forward only)" % (s, losses[-1]))
        info = {"losses": losses, "forward_only": True, "batch": B, "seq": T,
                "steps": steps, "seed": seed, "config": cfg, "data": data_name,
                "dynamic_batch": dynamic_batch, "opset": opset,
                "torch": torch.__version__}
        with open(os.path.join(outdir, "losses.json"), "w") as f:
            json.dump(info, f, indent=1)
        return info
    safetensors_io.save(params_dict(model), os.path.join(outdir, "params_init.safetensors"))
    losses, norms, lrs, grads = train(model, tokens, B, T, steps, opt,
                                      autocast=autocast, verbose=verbose,
                                      device=device)
    if grads is not None:
        safetensors_io.save(grads, os.path.join(outdir, "grads.safetensors"))
    safetensors_io.save(params_dict(model), os.path.join(outdir, "params_final.safetensors"))
    info = {"losses": losses, "grad_norms": norms, "lrs": lrs,
            "optimizer": opt, "batch": B,
            "seq": T, "steps": steps, "seed": seed, "config": cfg,
            "data": data_name, "dynamic_batch": dynamic_batch, "opset": opset,
            "autocast": autocast, "device": device, "torch": torch.__version__}
    with open(os.path.join(outdir, "losses.json"), "w") as f:
        json.dump(info, f, indent=1)
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--data", required=True, help="token file (flat uint16 or llm.c)")
    ap.add_argument("--batch", type=int, required=True, help="global batch size B")
    ap.add_argument("--seq", type=int, help="sequence length T (default: config's)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("-o", "--output", required=True, help="output directory")
    ap.add_argument("--optimizer", help="JSON, default %s" % json.dumps(DEFAULT_OPTIMIZER))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--static-batch", action="store_true",
                    help="export model.onnx with batch fixed to B")
    ap.add_argument("--opset", type=int, default=17, choices=range(13, 18))
    ap.add_argument("--forward-only", action="store_true",
                    help="only model.onnx and the losses of --steps batches "
                         "with the initial weights (no training)")
    ap.add_argument("--autocast", choices=["bf16"],
                    help="train under torch.autocast (bf16)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="where torch trains (default cpu)")
    ap.add_argument("--init", help="start from this params_init.safetensors")
    ap.add_argument("--no-export", action="store_true",
                    help="do not write model.onnx")
    ap.add_argument("--dropout", type=float,
                    help="GPT-2: dropout probability (trained with Cleave's masks)")
    ap.add_argument("--attn-dropout", type=float,
                    help="GPT-2: the attention probabilities' (default: --dropout)")
    ap.add_argument("--cleave-seed", type=int, default=0,
                    help="the spec's 'seed' that keys Cleave's dropout masks")
    a = ap.parse_args()
    opt = dict(DEFAULT_OPTIMIZER)
    if a.optimizer:
        user = json.loads(a.optimizer)
        if user.get("type", "adamw").lower() != "adamw":
            opt = {"type": user["type"], "lr": DEFAULT_OPTIMIZER["lr"],
                   "weight_decay": 0.0, "grad_clip": 0.0}
        opt.update(user)
    cfg = get_config(a.config, seq=a.seq, dropout=a.dropout,
                     attn_dropout=a.attn_dropout)
    if ((cfg.get("dropout") or 0) > 0 or (cfg.get("attn_dropout") or 0) > 0) and \
            (a.no_export or a.forward_only):
        raise SystemExit("--dropout needs the export (its node names) and training")
    tokens = read_tokens(a.data)
    if tokens.max() >= cfg["vocab"]:
        raise SystemExit("token %d >= vocab %d of %s" % (tokens.max(), cfg["vocab"], a.config))
    run(cfg, tokens, a.batch, a.steps, a.output, opt, seed=a.seed,
        dynamic_batch=not a.static_batch, opset=a.opset, data_name=a.data,
        forward_only=a.forward_only, autocast=a.autocast, device=a.device,
        init=a.init, export=not a.no_export, cleave_seed=a.cleave_seed)
    print("wrote", a.output)


if __name__ == "__main__":
    main()
