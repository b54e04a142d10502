"""PyTorch training-step throughput of a named config on one GPU, eager and
torch.compile, for bench/train-gpu.sh (runs on the GPU machine).

    python3 bench/torch_train_gpu.py CONFIG --seq T --batches 32,16,8
        [--steps 10] [--device cuda] [--modes eager,compile]

For each mode it tries the batches from the first (largest) and keeps the
first that does not run out of memory: S steps of zero_grad, forward under
bf16 autocast, backward, clip_grad_norm_(1.0) and AdamW (fp32 master
weights, as Cleave's bf16 programs), on random tokens. The first 3 steps
(compilation, allocator warm-up) are dropped; the rest are timed with
CUDA events. Also measures the bf16 matrix-product rate of the device
(8192^3 torch.matmul, the best of 10 after warm-up), the ceiling MFU is
taken against. Prints one JSON line per mode and one for the rate.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))

import torch  # noqa: E402

from configs import get_config  # noqa: E402
from export import make_model  # noqa: E402


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def matmul_rate(device, n):
    """bf16 FLOP/s of an n x n x n product, the best of 10."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(10):
        synchronize(device)
        start = time.perf_counter()
        a @ b
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return 2.0 * n ** 3 / best


def run(cfg, batch, seq, steps, device, mode):
    torch.manual_seed(0)
    model = make_model(cfg).to(device)
    model.train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    optim = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                               {"params": rest, "weight_decay": 0.0}],
                              lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    forward = torch.compile(model) if mode == "compile" else model
    params = list(model.parameters())
    vocab = cfg["vocab"]
    seconds, losses = [], []
    for s in range(steps):
        idx = torch.randint(0, vocab, (batch, seq), device=device)
        tgt = torch.randint(0, vocab, (batch, seq), device=device)
        synchronize(device)
        start = time.perf_counter()
        optim.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = forward(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optim.step()
        synchronize(device)
        seconds.append(time.perf_counter() - start)
        losses.append(float(loss))
    return seconds, losses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--batches", required=True, help="comma-separated, largest first")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--matmul-size", type=int, default=8192)
    a = ap.parse_args()
    if a.steps < 4:
        sys.exit("--steps must be at least 4 (3 are warm-up)")
    cfg = get_config(a.config, seq=a.seq)
    n_params = sum(p.numel() for p in make_model(cfg, shapes_only=True).parameters())
    print(json.dumps({"matmul_bf16_flops": matmul_rate(a.device, a.matmul_size),
                      "device": torch.cuda.get_device_name() if a.device == "cuda" else "cpu",
                      "torch": torch.__version__, "params": n_params}), flush=True)
    for mode in a.modes.split(","):
        if mode == "compile" and not hasattr(torch, "compile"):
            print(json.dumps({"mode": mode, "error": "this torch has no torch.compile"}), flush=True)
            continue
        result = {"mode": mode, "error": "no batch fits"}
        for batch in [int(b) for b in a.batches.split(",")]:
            try:
                seconds, losses = run(cfg, batch, a.seq, a.steps, a.device, mode)
            except torch.cuda.OutOfMemoryError if a.device == "cuda" else MemoryError:
                torch.cuda.empty_cache() if a.device == "cuda" else None
                continue
            timed = seconds[3:]
            mean = sum(timed) / len(timed)
            result = {"mode": mode, "batch": batch, "seq": a.seq,
                      "seconds": mean, "tokens_per_second": batch * a.seq / mean,
                      "losses": losses}
            break
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
