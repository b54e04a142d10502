"""PyTorch CPU forward time of a named config, for bench/forward-cpu.sh.

    /usr/bin/python3 bench/torch_forward.py CONFIG --batch B --seq T
        --data tokens.bin --steps S --threads N

Times the forward (loss) of the same model (export.py's weights for the
seed) on the same batches as cleave-run, with torch.no_grad and N threads;
prints one JSON line with the median seconds per step and the losses.
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
from reference import get_batch  # noqa: E402
from tokenizer import read_tokens  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg = get_config(a.config, seq=a.seq)
    model = make_model(cfg, seed=a.seed)
    model.eval()
    tokens = read_tokens(a.data)
    times, losses = [], []
    with torch.no_grad():
        idx, tgt = get_batch(tokens, 0, a.batch, a.seq)
        model(idx, tgt)  # warm-up
        for s in range(a.steps):
            idx, tgt = get_batch(tokens, s, a.batch, a.seq)
            start = time.perf_counter()
            loss = model(idx, tgt)
            times.append(time.perf_counter() - start)
            losses.append(float(loss))
    times.sort()
    print(json.dumps({"median_s": times[len(times) // 2], "losses": losses,
                      "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
