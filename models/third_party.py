"""Small models written and exported the way an outside user would.

    /usr/bin/python3 models/third_party.py -o DIR [--only NAME ...] [--train]

Each module returns its loss and is exported with plain torch.onnx.export and
its DEFAULT settings (eval mode, do_constant_folding=True, keep_initializers_
as_inputs default), only input_names=["idx", "targets"] and
output_names=["loss"] given.  Variants per model:

  DIR/<name>_op14.onnx       opset 14 (torch 1.13's default), static batch
  DIR/<name>_op14_dyn.onnx   opset 14, dynamic_axes batch on idx and targets
  DIR/<name>_op17.onnx       opset 17, static batch
  DIR/<name>_op17_dyn.onnx   opset 17, dynamic batch

DIR/tokens.bin is a stream of random token ids below VOCAB, and
DIR/<name>.losses.json the PyTorch losses of its first STEPS batches of
BATCH samples under DESIGN.md's batch rule (what cleave-run computes with
--forward-only). DIR/<name>.io.safetensors holds a test batch (idx, targets as I64
[BATCH, SEQ]) and the PyTorch `loss` on it, to check an importer's forward
pass, plus idx_b3, targets_b3, loss_b3 for batch BATCH+1 (for the _dyn
files).  DIR/manifest.json lists every file with its opset, op types, initializer
names and the loss.

Note what the defaults do: constant folding renames initializers (a Linear
weight is stored pre-transposed as `onnx::MatMul_NN`), and eval-mode export
de-duplicates initializers by VALUE, so parameters that are equal at
initialization (e.g. the weights of two LayerNorms) become ONE initializer.

With --train the script writes instead what export_training says: each
model exported for training (training mode, no folding) with opset 14 and
17, static and dynamic batch, PyTorch's 10-step training reference, and the
spec that trains it, whose frozen_parameters name the buffers the export
made initializers.
"""
import argparse
import json
import math
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
warnings.filterwarnings("ignore")

import onnx                                   # noqa: E402
import torch                                  # noqa: E402
import torch.nn as nn                         # noqa: E402
import torch.nn.functional as F               # noqa: E402


import export                                 # noqa: E402
import reference                              # noqa: E402
import safetensors_io                         # noqa: E402
import tokenizer                              # noqa: E402

VOCAB, D, SEQ, HEADS, BATCH = 64, 32, 8, 4, 2
STEPS = 3  # batches of DIR/tokens.bin whose losses <name>.losses.json holds


class MLPLM(nn.Module):
    """Embedding -> Linear -> ReLU -> Linear -> logits; F.cross_entropy."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.fc1 = nn.Linear(D, 4 * D)
        self.fc2 = nn.Linear(4 * D, D)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, idx, targets):
        x = self.emb(idx)
        x = x + self.fc2(F.relu(self.fc1(x)))
        logits = self.head(x)
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


class LayerNormGelu(nn.Module):
    """Learned positions as an nn.Parameter, nn.LayerNorm, exact nn.GELU(),
    a second LayerNorm and a tied head (logits = x @ emb.weight.T)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.randn(SEQ, D) * 0.02)
        self.ln1 = nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
        self.ln2 = nn.LayerNorm(D)

    def forward(self, idx, targets):
        x = self.emb(idx) + self.pos
        x = x + self.mlp(self.ln1(x))
        logits = self.ln2(x) @ self.emb.weight.t()
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


class MHABlock(nn.Module):
    """nn.MultiheadAttention(batch_first=True) with a causal bool attn_mask,
    LayerNorm, nn.GELU(approximate='tanh')."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(SEQ, D)
        self.ln1 = nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True)
        self.ln2 = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 4 * D)
        self.act = nn.GELU(approximate="tanh")
        self.fc2 = nn.Linear(4 * D, D)
        self.lnf = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.emb(idx) + self.pos(torch.arange(T))
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        x = x + a
        x = x + self.fc2(self.act(self.fc1(self.ln2(x))))
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class RopeAttnSwiGLU(nn.Module):
    """Hand-written attention (separate q/k/v Linears, float -inf triu mask
    added to the scores), RMSNorm, interleaved rotary embeddings with
    cos/sin as persistent buffers, SiLU-gated MLP, untied head."""

    def __init__(self):
        super().__init__()
        hd = D // HEADS
        self.emb = nn.Embedding(VOCAB, D)
        self.norm1 = RMSNorm(D)
        self.q = nn.Linear(D, D, bias=False)
        self.k = nn.Linear(D, D, bias=False)
        self.v = nn.Linear(D, D, bias=False)
        self.o = nn.Linear(D, D, bias=False)
        self.norm2 = RMSNorm(D)
        self.gate = nn.Linear(D, 2 * D, bias=False)
        self.up = nn.Linear(D, 2 * D, bias=False)
        self.down = nn.Linear(2 * D, D, bias=False)
        self.normf = RMSNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.outer(torch.arange(SEQ).float(), inv)          # SEQ, hd/2
        self.register_buffer("cos", ang.cos())
        self.register_buffer("sin", ang.sin())
        self.register_buffer("mask", torch.full((SEQ, SEQ), float("-inf")).triu(1))

    def rope(self, x):                   # x: B, H, T, hd (pairs interleaved)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        c, s = self.cos[: x.shape[2]], self.sin[: x.shape[2]]
        return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.emb(idx)
        h = self.norm1(x)
        q, k, v = (m(h).view(B, T, HEADS, D // HEADS).transpose(1, 2)
                   for m in (self.q, self.k, self.v))
        q, k = self.rope(q), self.rope(k)
        s = q @ k.transpose(-1, -2) / math.sqrt(D // HEADS) + self.mask[:T, :T]
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)
        x = x + self.o(y)
        h = self.norm2(x)
        x = x + self.down(F.silu(self.gate(h)) * self.up(h))
        logits = self.head(self.normf(x))
        return F.cross_entropy(logits.view(B * T, VOCAB), targets.view(B * T))


class EncoderLayerLM(nn.Module):
    """nn.TransformerEncoderLayer (batch_first, norm_first, gelu) with a
    float causal mask from nn.Transformer.generate_square_subsequent_mask."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.zeros(1, SEQ, D))
        self.layer = nn.TransformerEncoderLayer(D, HEADS, dim_feedforward=2 * D,
                                                dropout=0.0, activation="gelu",
                                                batch_first=True, norm_first=True)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, idx, targets):
        T = idx.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        x = self.layer(self.emb(idx) + self.pos[:, :T], src_mask=mask)
        logits = self.head(x)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


class CausalLMLoss(nn.Module):
    """Hugging Face transformers 4.49's shared causal-LM loss
    (ForCausalLMLoss) on a small body: the labels are padded on the right
    with the ignore index by nn.functional.pad (an ONNX Pad on int64) and
    shifted by one, so the last position of each row is ignored."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.randn(SEQ, D) * 0.02)
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, idx, targets):
        x = self.emb(idx) + self.pos
        logits = self.head(F.gelu(self.ln(x))).float()
        labels = F.pad(targets, (0, 1), value=-100)
        shift_labels = labels[..., 1:].contiguous()
        return F.cross_entropy(logits.view(-1, VOCAB), shift_labels.view(-1),
                               ignore_index=-100)


class HFPositions(nn.Module):
    """Position tricks of Hugging Face decoders: OPT's learned positions
    count the attention mask (torch.cumsum, an ONNX CumSum; offset 2 as
    OPTLearnedPositionalEmbedding), and older GPT-NeoX gathers its rotary
    tables by position (Tensor.repeat and torch.gather: ONNX Tile and
    GatherElements) from buffers the export makes initializers; a slice
    assignment (an ONNX ScatterND, as OPT's mask preparation writes)
    scales the first position, with gradients through both sides."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(SEQ + 2, D)
        inv = 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D))
        freqs = torch.outer(torch.arange(SEQ).float(), inv)
        table = torch.cat([freqs, freqs], -1)
        self.register_buffer("cos_cached", table.cos()[None, None])
        self.register_buffer("sin_cached", table.sin()[None, None])
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, idx, targets):
        B, T = idx.shape
        mask = torch.ones(B, T)
        positions = (torch.cumsum(mask, dim=1) * mask - 1).long()
        x = self.emb(idx) + self.pos(positions + 2)
        gather_indices = positions[:, None, :, None].repeat(1, 1, 1, D)
        cos = torch.gather(self.cos_cached.repeat(B, 1, 1, 1), 2, gather_indices)
        sin = torch.gather(self.sin_cached.repeat(B, 1, 1, 1), 2, gather_indices)
        h = x[:, None]
        rotated = torch.cat([-h[..., D // 2:], h[..., :D // 2]], -1)
        h = self.ln((h * cos + rotated * sin)[:, 0])
        h[:, 0] = h[:, 0] * 0.5
        logits = self.head(h)
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


class PaddingIdx(nn.Module):
    """An nn.Embedding with padding_idx 0 (BERT's and Gemma's pad token)
    and a tied head: PyTorch gives row 0 no gradient from the
    lookup (the head still trains it), which the training export writes to
    the cleave.padding_idx metadata. Ids below 16 read as padding, so every
    batch looks the padding row up several times."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D, padding_idx=0)
        self.ln = nn.LayerNorm(D)
        self.fc = nn.Linear(D, D)

    def forward(self, idx, targets):
        ids = torch.where(idx < 16, torch.zeros_like(idx), idx)
        x = self.emb(ids)
        x = x + self.fc(F.gelu(self.ln(x)))
        logits = self.ln(x) @ self.emb.weight.t() / math.sqrt(D)
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


MODELS = {
    "tp_causal_lm_loss": CausalLMLoss,
    "tp_hf_positions": HFPositions,
    "tp_mlp": MLPLM,
    "tp_layernorm_gelu": LayerNormGelu,
    "tp_mha": MHABlock,
    "tp_rope_rmsnorm_swiglu": RopeAttnSwiGLU,
    "tp_encoder_layer": EncoderLayerLM,
    "tp_padding_idx": PaddingIdx,
}


def stream_losses(model, tokens, batch, steps):
    """The model's loss on each step's batch of a token stream, by DESIGN.md's
    batch rule (sample j of step s: tokens [(s*B+j)*T, ... + T + 1))."""
    losses = []
    n = len(tokens)
    with torch.no_grad():
        for s in range(steps):
            rows = []
            for j in range(batch):
                start = (s * batch + j) * SEQ
                rows.append([tokens[(start + k) % n] for k in range(SEQ + 1)])
            w = torch.tensor(rows, dtype=torch.int64)
            losses.append(float(model(w[:, :SEQ].contiguous(),
                                      w[:, 1:].contiguous())))
    return losses


def export_all(outdir, only=None, seed=0, verbose=True):
    os.makedirs(outdir, exist_ok=True)
    manifest = []
    # A token stream for cleave-run: random ids below VOCAB.
    g = torch.Generator().manual_seed(seed + 2)
    tokens = torch.randint(0, VOCAB, (4096,), generator=g).tolist()
    tokenizer.write_tokens(os.path.join(outdir, "tokens.bin"), tokens)
    for name, cls in MODELS.items():
        if only and name not in only:
            continue
        torch.manual_seed(seed)
        model = cls()
        g = torch.Generator().manual_seed(seed + 1)
        idx = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
        tgt = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
        idx3 = torch.randint(0, VOCAB, (BATCH + 1, SEQ), generator=g)
        tgt3 = torch.randint(0, VOCAB, (BATCH + 1, SEQ), generator=g)
        model.eval()
        with torch.no_grad():
            loss = model(idx, tgt)
            loss3 = model(idx3, tgt3)
        with open(os.path.join(outdir, name + ".losses.json"), "w") as f:
            json.dump({"losses": stream_losses(model, tokens, BATCH, STEPS),
                       "batch": BATCH, "seq": SEQ, "data": "tokens.bin"}, f)
        safetensors_io.save({"idx": idx, "targets": tgt, "loss": loss,
                             "idx_b3": idx3, "targets_b3": tgt3, "loss_b3": loss3},
                            os.path.join(outdir, name + ".io.safetensors"))
        for opset in (None, 17):
            for dyn in (False, True):
                tag = "%s_op%d%s" % (name, opset or 14, "_dyn" if dyn else "")
                path = os.path.join(outdir, tag + ".onnx")
                t0 = time.time()
                kwargs = {}
                if opset is not None:
                    kwargs["opset_version"] = opset
                if dyn:
                    kwargs["dynamic_axes"] = {"idx": {0: "batch"}, "targets": {0: "batch"}}
                torch.onnx.export(model, (idx, tgt), path, input_names=["idx", "targets"],
                                  output_names=["loss"], **kwargs)
                dt = time.time() - t0
                m = onnx.load(path)
                onnx.checker.check_model(m)
                ops = sorted({n.op_type for n in m.graph.node})
                manifest.append({
                    "file": tag + ".onnx", "model": name, "opset": m.opset_import[0].version,
                    "dynamic_batch": dyn, "batch": BATCH, "seq": SEQ, "vocab": VOCAB,
                    "loss": float(loss), "loss_b3": float(loss3),
                    "io": name + ".io.safetensors",
                    "params": sum(p.numel() for p in model.parameters()),
                    "torch_parameters": [n for n, _ in model.named_parameters()],
                    "torch_buffers": [n for n, _ in model.named_buffers()],
                    "initializers": [t.name for t in m.graph.initializer],
                    "ops": ops, "seconds": round(dt, 3)})
                if verbose:
                    print("%-36s opset %2d  %.2fs  %s" % (tag + ".onnx", m.opset_import[0].version,
                                                        dt, " ".join(ops)))
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def check_no_dropout(name, model, idx, tgt):
    """PyTorch trains on the train-mode loss; it must not depend on the
    random state (no active dropout), or no other run could reproduce it."""
    model.train()
    with torch.no_grad():
        torch.manual_seed(1)
        a = model(idx, tgt)
        torch.manual_seed(2)
        b = model(idx, tgt)
    if not torch.equal(a, b):
        raise SystemExit("%s: the train-mode loss changes with the random seed "
                         "(%.7f, %.7f): dropout is active; set its p to 0"
                         % (name, float(a), float(b)))


def export_training(outdir, only=None, seed=0, steps=10, verbose=True, batch=BATCH,
                    autocast=None, models=None):
    """For training: each model exported as a user who trains exports it
    (training mode, no constant folding: one initializer per parameter,
    named as in state_dict, none merged by value), and PyTorch's reference
    run of `steps` steps under DESIGN.md's semantics on DIR/tokens.bin
    (reference.train: its batches, AdamW with weight decay on ndim >= 2
    only, clip_grad_norm_).  Writes <name>_train_op{14,17}[_dyn].onnx
    (static batch `batch`, or dynamic), <name>.train/ (losses.json,
    params_init and params_final safetensors, keyed by initializer name:
    the parameters and the buffers the export made initializers, which
    stay unchanged) and <name>.spec.json, the spec to train it with: those
    buffers are its frozen_parameters.  With autocast "bf16" the reference
    trains under torch.autocast and the spec sets bf16.  `models` (name ->
    class) replaces MODELS, for a test's own modules."""
    os.makedirs(outdir, exist_ok=True)
    g = torch.Generator().manual_seed(seed + 2)
    tokens = torch.randint(0, VOCAB, (4096,), generator=g)
    tokenizer.write_tokens(os.path.join(outdir, "tokens.bin"), tokens.tolist())
    tokens = tokens.numpy()
    # eps 1e-6 rather than 1e-8: the key bias of nn.MultiheadAttention's
    # in_proj_bias has a gradient of exactly zero (softmax cancels it), so
    # what it gets is rounding noise, which AdamW with eps 1e-8 turns into
    # updates near lr that no two implementations share (2e-4 apart after
    # 10 steps, while its query and value thirds agree to 3e-9); eps 1e-6
    # keeps them at the noise.
    opt = dict(reference.DEFAULT_OPTIMIZER, eps=1e-6)
    for name, cls in (models or MODELS).items():
        if only and name not in only:
            continue
        torch.manual_seed(seed)
        model = cls()
        idx, tgt = reference.get_batch(tokens, 0, batch, SEQ)
        check_no_dropout(name, model, idx, tgt)
        weights = reference.named_weights(model)
        inits = None
        for opset in (14, 17):
            for dyn in (False, True):
                path = os.path.join(outdir, "%s_train_op%d%s.onnx"
                                    % (name, opset, "_dyn" if dyn else ""))
                proto = export.export_for_training(model, (idx, tgt), path,
                                                   ["idx", "targets"], opset=opset,
                                                   dynamic_batch=dyn)
                # The initializers are exactly the weights trained below.
                found = reference.check_initializers(proto, weights, path)
                assert inits is None or sorted(found) == sorted(inits), (path, found)
                inits = found
        ref = reference.write_training_reference(
            model, tokens, batch, SEQ, steps, opt, inits, os.path.join(outdir, name + ".train"),
            info={"seed": seed, "data": "tokens.bin"}, autocast=autocast)
        frozen = ref["frozen_parameters"]
        spec = {"batch_size": batch, "optimizer": opt}
        if frozen:
            spec["frozen_parameters"] = frozen
        if autocast == "bf16":
            spec["bf16"] = True
        with open(os.path.join(outdir, name + ".spec.json"), "w") as f:
            json.dump(spec, f, indent=1)
        if verbose:
            print("%-24s %d parameters, frozen %s, losses %.4f .. %.4f"
                  % (name, len(dict(model.named_parameters())), frozen,
                     ref["losses"][0], ref["losses"][-1]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--outdir", required=True)
    ap.add_argument("--only", nargs="*", choices=sorted(MODELS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train", action="store_true",
                    help="training exports and PyTorch training references "
                         "(export_training) instead of the inference exports")
    ap.add_argument("--batch", type=int, default=BATCH,
                    help="with --train: the global batch (default %d); the "
                         "static exports take it whole" % BATCH)
    ap.add_argument("--autocast", choices=["bf16"],
                    help="with --train: the reference trains under "
                         "torch.autocast and the spec sets bf16")
    a = ap.parse_args()
    if a.autocast and not a.train:
        ap.error("--autocast needs --train")
    if a.train:
        export_training(a.outdir, a.only, a.seed, batch=a.batch, autocast=a.autocast)
    else:
        export_all(a.outdir, a.only, a.seed)


if __name__ == "__main__":
    main()
