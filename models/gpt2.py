"""GPT-2 in plain PyTorch, returning its loss.

Learned token and position embeddings, pre-LN blocks with LayerNorm, causal
self-attention written out by hand (fused c_attn, boolean causal mask built in
forward from torch.arange, so the model has no buffers), GELU MLP 4x, final
LayerNorm, head tied to wte.weight.  forward(idx, targets) -> scalar mean
cross-entropy.  No dropout unless cfg["dropout"] > 0: then GPT-2's four
(embedding, attention probabilities, and after each residual branch's
projection), as nn.Dropout modules (models/cleave_dropout.py gives them
Cleave's masks).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def dropout_module(cfg, key="dropout"):
    """nn.Dropout(cfg[key]), or the identity without dropout (so the export
    of a model without dropout has no Dropout node). cfg["attn_dropout"]
    (the attention probabilities') defaults to cfg["dropout"]."""
    p = cfg.get(key)
    if p is None:
        p = cfg.get("dropout") or 0.0
    return nn.Dropout(p) if p > 0 else nn.Identity()


def causal_future_mask(T, device):
    """Bool [T, T], True where key position > query position (to be masked)."""
    pos = torch.arange(T, device=device)
    return pos.view(1, T) > pos.view(T, 1)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        d, self.n_head = cfg["d_model"], cfg["n_head"]
        assert d % self.n_head == 0
        self.hd = d // self.n_head
        self.c_attn = nn.Linear(d, 3 * d, bias=cfg["bias"], device=device)
        self.c_proj = nn.Linear(d, d, bias=cfg["bias"], device=device)
        self.attn_dropout = dropout_module(cfg, "attn_dropout")
        self.resid_dropout = dropout_module(cfg)

    def forward(self, x, future):
        B, T, C = x.size()
        hd = self.hd
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)   # B nh T hd
        k = k.view(B, T, self.n_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(future, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = att @ v                                          # B nh T hd
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        d = cfg["d_model"]
        self.c_fc = nn.Linear(d, 4 * d, bias=cfg["bias"], device=device)
        self.c_proj = nn.Linear(4 * d, d, bias=cfg["bias"], device=device)
        self.approximate = "tanh" if cfg["gelu"] == "tanh" else "none"
        self.dropout = dropout_module(cfg)

    def forward(self, x):
        return self.dropout(
            self.c_proj(F.gelu(self.c_fc(x), approximate=self.approximate)))


class Block(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        d, eps = cfg["d_model"], cfg["ln_eps"]
        self.ln_1 = nn.LayerNorm(d, eps=eps, device=device)
        self.attn = CausalSelfAttention(cfg, device=device)
        self.ln_2 = nn.LayerNorm(d, eps=eps, device=device)
        self.mlp = MLP(cfg, device=device)

    def forward(self, x, future):
        x = x + self.attn(self.ln_1(x), future)
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT2(nn.Module):
    layers_attr = "h"   # the nn.ModuleList of identical blocks

    def __init__(self, cfg, device=None):
        super().__init__()
        self.cfg = dict(cfg)
        d = cfg["d_model"]
        self.wte = nn.Embedding(cfg["vocab"], d, device=device)
        self.wpe = nn.Embedding(cfg["max_seq"], d, device=device)
        self.drop = dropout_module(cfg)
        self.h = nn.ModuleList([Block(cfg, device=device)
                                for _ in range(cfg["n_layer"])])
        self.ln_f = nn.LayerNorm(d, eps=cfg["ln_eps"], device=device)
        if device is None or torch.device(device).type != "meta":
            self.init_weights()

    def init_spec(self):
        """How each parameter is initialized: {name: (kind, std)}.

        kind is "normal" (mean 0, given std), "zeros" or "ones".  GPT-2 init:
        N(0, 0.02) for Linear and Embedding weights, residual projections
        N(0, 0.02/sqrt(2*n_layer)), biases 0, LayerNorm 1/0.
        """
        std = self.cfg["init_std"]
        spec = {}
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                spec[name] = ("normal", std / math.sqrt(2 * self.cfg["n_layer"]))
            elif name.endswith(".weight") and p.dim() >= 2:
                spec[name] = ("normal", std)
            elif ".ln_" in name or name.startswith("ln_"):
                spec[name] = ("ones", 0.0) if name.endswith("weight") else ("zeros", 0.0)
            else:
                spec[name] = ("zeros", 0.0)
        return spec

    @torch.no_grad()
    def init_weights(self):
        params = dict(self.named_parameters())
        for name, (kind, std) in self.init_spec().items():
            p = params[name]
            if kind == "normal":
                nn.init.normal_(p, mean=0.0, std=std)
            elif kind == "ones":
                nn.init.ones_(p)
            else:
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        B, T = idx.size()
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        future = causal_future_mask(T, idx.device)
        for block in self.h:
            x = block(x, future)
        x = self.ln_f(x)
        logits = F.linear(x, self.wte.weight)               # tied head
        return F.cross_entropy(logits.view(-1, logits.size(-1)),
                               targets.view(-1))
