"""PyTorch CPU training-step times of a named config, for bench/train-cpu.sh.

    /usr/bin/python3 bench/torch_train.py CONFIG --batch B --seq T
        --data tokens.bin --steps S --threads N --optimizer JSON

Runs S whole training steps (zero_grad, forward, backward, clip_grad_norm_,
AdamW) of the same model (export.py's weights for the seed) on the same
batches as cleave-run, under models/reference.py's training semantics, with
N threads; prints one JSON line with every step's seconds and loss (the
caller drops the first step as a warm-up).
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
from reference import get_batch, make_optimizer  # noqa: E402
from tokenizer import read_tokens  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--optimizer", required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    opt = json.loads(a.optimizer)
    cfg = get_config(a.config, seq=a.seq)
    model = make_model(cfg, seed=a.seed)
    model.train()
    optim = make_optimizer(model, opt)
    params = list(model.parameters())
    clip = float(opt.get("grad_clip", 0.0))
    tokens = read_tokens(a.data)
    seconds, losses = [], []
    for s in range(a.steps):
        idx, tgt = get_batch(tokens, s, a.batch, a.seq)
        start = time.perf_counter()
        optim.zero_grad(set_to_none=True)
        loss = model(idx, tgt)
        loss.backward()
        if clip > 0:
            torch.nn.utils.clip_grad_norm_(params, clip)
        optim.step()
        seconds.append(time.perf_counter() - start)
        losses.append(float(loss))
    print(json.dumps({"seconds": seconds, "losses": losses,
                      "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
