"""Llama-style decoder in plain PyTorch, returning its loss.

RMSNorm written out (x * rsqrt(mean(x^2) + eps) * weight), rotary position
embeddings (rotate-half convention; cos/sin computed in forward from
torch.arange and the non-persistent buffer `rope.inv_freq`), SwiGLU MLP,
grouped-query attention (n_kv_head <= n_head, K/V repeated per group),
untied output head, no biases.  forward(idx, targets) -> scalar mean
cross-entropy.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from gpt2 import causal_future_mask


class RMSNorm(nn.Module):
    def __init__(self, d, eps, device=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d, device=device))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_inv_freq(head_dim, theta, device=None):
    return 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device,
                                         dtype=torch.float32) / head_dim))


class Rotary(nn.Module):
    """cos/sin tables [T, head_dim] computed in forward from torch.arange.

    inv_freq is a non-persistent buffer; torch.onnx.export records it as a
    Constant node (not an initializer).  It is always real data, also when
    the rest of the model is on the meta device (shapes-only export): the
    tables are computed on its device and moved with .to(device), a no-op
    in the exported graph.
    """

    def __init__(self, head_dim, theta, device=None):
        super().__init__()
        if device is not None and torch.device(device).type == "meta":
            device = None
        self.register_buffer("inv_freq", rope_inv_freq(head_dim, theta, device),
                             persistent=False)

    def forward(self, T, device):
        t = torch.arange(T, device=self.inv_freq.device).to(torch.float32)
        freqs = t.view(T, 1) * self.inv_freq.view(1, -1)     # T, hd/2
        emb = torch.cat((freqs, freqs), dim=-1)               # T, hd
        return emb.cos().to(device), emb.sin().to(device)


def rotate_half(x):
    h = x.size(-1) // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def apply_rotary(x, cos, sin):
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        d = cfg["d_model"]
        self.n_head, self.n_kv_head = cfg["n_head"], cfg["n_kv_head"]
        assert d % self.n_head == 0 and self.n_head % self.n_kv_head == 0
        self.hd = d // self.n_head
        self.wq = nn.Linear(d, self.n_head * self.hd, bias=False, device=device)
        self.wk = nn.Linear(d, self.n_kv_head * self.hd, bias=False, device=device)
        self.wv = nn.Linear(d, self.n_kv_head * self.hd, bias=False, device=device)
        self.wo = nn.Linear(self.n_head * self.hd, d, bias=False, device=device)
        # Only with cfg["attn_dropout"] (or "dropout") > 0; no node else.
        from gpt2 import dropout_module
        self.attn_dropout = dropout_module(cfg, "attn_dropout")

    def forward(self, x, cos, sin, future):
        B, T, C = x.size()
        q = self.wq(x).view(B, T, self.n_head, self.hd).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_kv_head, self.hd).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_kv_head, self.hd).transpose(1, 2)
        q = apply_rotary(q, cos, sin)
        k = apply_rotary(k, cos, sin)
        rep = self.n_head // self.n_kv_head
        if rep > 1:                                          # GQA: repeat K/V
            k = k[:, :, None].expand(B, self.n_kv_head, rep, T, self.hd) \
                .reshape(B, self.n_head, T, self.hd)
            v = v[:, :, None].expand(B, self.n_kv_head, rep, T, self.hd) \
                .reshape(B, self.n_head, T, self.hd)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
        att = att.masked_fill(future, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, self.n_head * self.hd)
        return self.wo(y)


class FeedForward(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        d, h = cfg["d_model"], cfg["ffn_hidden"]
        self.w1 = nn.Linear(d, h, bias=False, device=device)   # gate
        self.w2 = nn.Linear(h, d, bias=False, device=device)   # down
        self.w3 = nn.Linear(d, h, bias=False, device=device)   # up

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        d, eps = cfg["d_model"], cfg["norm_eps"]
        self.attention_norm = RMSNorm(d, eps, device=device)
        self.attention = Attention(cfg, device=device)
        self.ffn_norm = RMSNorm(d, eps, device=device)
        self.feed_forward = FeedForward(cfg, device=device)

    def forward(self, x, cos, sin, future):
        x = x + self.attention(self.attention_norm(x), cos, sin, future)
        x = x + self.feed_forward(self.ffn_norm(x))
        return x


class Llama(nn.Module):
    layers_attr = "layers"   # the nn.ModuleList of identical blocks

    def __init__(self, cfg, device=None):
        super().__init__()
        self.cfg = dict(cfg)
        d = cfg["d_model"]
        self.tok_embeddings = nn.Embedding(cfg["vocab"], d, device=device)
        self.rope = Rotary(d // cfg["n_head"], cfg["rope_theta"], device=device)
        self.layers = nn.ModuleList([Block(cfg, device=device)
                                     for _ in range(cfg["n_layer"])])
        self.norm = RMSNorm(d, cfg["norm_eps"], device=device)
        # head_bias: an nn.Linear head with its default bias (not Llama's).
        self.output = nn.Linear(d, cfg["vocab"], bias=cfg.get("head_bias", False),
                                device=device)
        if device is None or torch.device(device).type != "meta":
            self.init_weights()

    def init_spec(self):
        """{name: (kind, std)}: N(0, 0.02) for every matrix and the head's
        bias (head_bias), norms 1."""
        std = self.cfg["init_std"]
        return {name: (("normal", std)
                       if p.dim() >= 2 or name == "output.bias"
                       else ("ones", 0.0))
                for name, p in self.named_parameters()}

    @torch.no_grad()
    def init_weights(self):
        params = dict(self.named_parameters())
        for name, (kind, std) in self.init_spec().items():
            if kind == "normal":
                nn.init.normal_(params[name], mean=0.0, std=std)
            else:
                nn.init.ones_(params[name])

    def forward(self, idx, targets):
        B, T = idx.size()
        x = self.tok_embeddings(idx)
        cos, sin = self.rope(T, idx.device)
        # On the rope's device like cos/sin, so that a meta-device export
        # traces the same graph as a real one.
        future = causal_future_mask(T, self.rope.inv_freq.device).to(idx.device)
        for block in self.layers:
            x = block(x, cos, sin, future)
        logits = self.output(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)),
                               targets.view(-1))
