"""Named model configurations for Cleave's reference models.

Each config is a plain dict so it can be written into JSON (losses.json, ONNX
metadata).  `get_config(name, **overrides)` returns a copy with overrides
applied (e.g. seq=128).
"""
import copy

# family "gpt2": learned positions, pre-LN LayerNorm, GELU MLP 4x, tied head.
# family "llama": RMSNorm, rotary embeddings, SwiGLU, GQA, untied head.

CONFIGS = {
    # ---------------------------------------------------------------- GPT-2
    "gpt2-toy": dict(family="gpt2", n_layer=2, d_model=64, n_head=4,
                     vocab=256, seq=32),
    "gpt2-124m": dict(family="gpt2", n_layer=12, d_model=768, n_head=12,
                      vocab=50257, seq=1024),
    "gpt2-350m": dict(family="gpt2", n_layer=24, d_model=1024, n_head=16,
                      vocab=50257, seq=1024),
    # GPT-3 paper's "XL" (1.3B) dims with the GPT-2 architecture.
    "gpt2-1.3b": dict(family="gpt2", n_layer=24, d_model=2048, n_head=16,
                      vocab=50257, seq=1024),
    # No 30B in the GPT-3 paper; these are the OPT-30B dims (GPT-3 style).
    "gpt3-30b": dict(family="gpt2", n_layer=48, d_model=7168, n_head=56,
                     vocab=50257, seq=2048),
    "gpt3-175b": dict(family="gpt2", n_layer=96, d_model=12288, n_head=96,
                      vocab=50257, seq=2048),
    # Eight equal blocks and a small vocabulary: pipeline stages balance
    # (bench/pipeline-bubble.sh measures the bubble with it).
    # A vocabulary that tensor 2 does not divide: the embedding and head
    # stay replicated (runtime/tensor-parallel-equals-torch.test).
    "gpt2-toy-v257": dict(family="gpt2", n_layer=2, d_model=64, n_head=4,
                          vocab=257, seq=32),
    "gpt2-pipe": dict(family="gpt2", n_layer=8, d_model=256, n_head=8,
                      vocab=256, seq=128),
    # ---------------------------------------------------------------- Llama
    "llama-toy": dict(family="llama", n_layer=2, d_model=64, n_head=4,
                      n_kv_head=2, ffn_hidden=192, vocab=256, seq=32),
    # Multi-query attention (one key/value head): with tensor 2 each rank
    # holds the one head its query heads read
    # (runtime/tensor-gqa-equals-torch.test).
    "llama-toy-mqa": dict(family="llama", n_layer=2, d_model=64, n_head=4,
                          n_kv_head=1, ffn_hidden=192, vocab=256, seq=32),
    # A vocabulary neither 2 nor 4 divides and an untied head with a bias
    # (nn.Linear's default): the table, the head and its bias are padded
    # (runtime/tensor-vocab-padding-equals-torch.test).
    "llama-toy-v257-bias": dict(family="llama", n_layer=2, d_model=64,
                                n_head=4, n_kv_head=2, ffn_hidden=192,
                                vocab=257, seq=32, head_bias=True),
    "llama2-7b": dict(family="llama", n_layer=32, d_model=4096, n_head=32,
                      n_kv_head=32, ffn_hidden=11008, vocab=32000, seq=2048),
    "llama2-70b": dict(family="llama", n_layer=80, d_model=8192, n_head=64,
                       n_kv_head=8, ffn_hidden=28672, vocab=32000, seq=2048),
}

# Defaults filled in for every config of a family.
FAMILY_DEFAULTS = {
    "gpt2": dict(ln_eps=1e-5, gelu="tanh", bias=True, init_std=0.02),
    "llama": dict(norm_eps=1e-5, rope_theta=10000.0, init_std=0.02),
}


def get_config(name, **overrides):
    if name not in CONFIGS:
        raise SystemExit("unknown config %r; known: %s"
                         % (name, ", ".join(sorted(CONFIGS))))
    cfg = dict(FAMILY_DEFAULTS[CONFIGS[name]["family"]])
    cfg.update(copy.deepcopy(CONFIGS[name]))
    for k, v in overrides.items():
        if v is not None:
            cfg[k] = v
    cfg["name"] = name
    # Rows of GPT-2's position table: the config's default context, or more
    # when a longer sequence is asked for.
    cfg["max_seq"] = max(CONFIGS[name]["seq"], cfg["seq"])
    return cfg


def build_model(cfg, device=None):
    """Instantiate the nn.Module for a config (on `device`, e.g. 'meta')."""
    if cfg["family"] == "gpt2":
        from gpt2 import GPT2
        return GPT2(cfg, device=device)
    if cfg["family"] == "llama":
        from llama import Llama
        return Llama(cfg, device=device)
    raise ValueError(cfg["family"])


def param_count(cfg):
    import torch
    m = build_model(cfg, device="meta")
    return sum(p.numel() for p in m.parameters())


if __name__ == "__main__":
    import os, sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    for n in CONFIGS:
        print("%-12s %12.3fM params  %s" % (n, param_count(get_config(n)) / 1e6,
                                             CONFIGS[n]))
