"""The host link of a GPU machine, measured: the rate of copies between
page-locked (and pageable) host memory and the device, each way, and of a
device-to-device copy, through PyTorch on the GPU machine. The offload cost
(docs/remat.md, "Cost") prices a host copy at a rate like these; this
prints what the machine does. Not a test.

    python3 bench/host-link-gpu.py [--mib 256] [--repeats 10]

Prints one JSON object: bytes per second for h2d/d2h (pinned, pageable)
and d2d (bytes read and written), each the median of the timed copies
after two warm-ups, timed with CUDA events.
"""
import argparse
import json
import statistics

import torch


def timed(copy, repeats):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    for _ in range(2):
        copy()
    torch.cuda.synchronize()
    seconds = []
    for _ in range(repeats):
        start.record()
        copy()
        end.record()
        end.synchronize()
        seconds.append(start.elapsed_time(end) / 1e3)
    return statistics.median(seconds)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    n = args.mib * 1024 * 1024
    device = torch.empty(n, dtype=torch.uint8, device="cuda")
    other = torch.empty(n, dtype=torch.uint8, device="cuda")
    pinned = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    pageable = torch.empty(n, dtype=torch.uint8)
    result = {"gpu": torch.cuda.get_device_name(), "bytes": n}
    for name, host in (("pinned", pinned), ("pageable", pageable)):
        result["h2d_%s_bytes_per_second" % name] = n / timed(
            lambda: device.copy_(host, non_blocking=True), args.repeats)
        result["d2h_%s_bytes_per_second" % name] = n / timed(
            lambda: host.copy_(device, non_blocking=True), args.repeats)
    result["d2d_bytes_per_second"] = 2 * n / timed(lambda: other.copy_(device), args.repeats)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
