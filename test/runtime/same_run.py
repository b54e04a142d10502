"""Two runs of one program agree exactly: the losses of their metrics files
(JSON lines) are equal step for step, and so are their saved parameters
(safetensors: same names, types, shapes and bytes). Prints 'same: N steps,
M parameters' or what differs, and exits 1 then.

usage: same_run.py A.jsonl B.jsonl [A.safetensors B.safetensors]
"""
import json
import struct
import sys


def losses(path):
    out = []
    with open(path) as f:
        for line in f:
            m = json.loads(line)
            out.append((m.get("step"), m.get("loss"), m.get("skipped")))
    return out


def tensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    return {k: (v["dtype"], v["shape"], body[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}


def main():
    a, b = losses(sys.argv[1]), losses(sys.argv[2])
    bad = []
    if len(a) != len(b) or not a:
        bad.append(f"{len(a)} steps against {len(b)}")
    for x, y in zip(a, b):
        if x != y:
            bad.append(f"step {x[0]}: loss {x[1]} (skipped {x[2]}) against {y[1]} (skipped {y[2]})")
    count = 0
    if len(sys.argv) > 4:
        p, q = tensors(sys.argv[3]), tensors(sys.argv[4])
        if sorted(p) != sorted(q):
            bad.append(f"parameters {sorted(p)} against {sorted(q)}")
        for name in sorted(set(p) & set(q)):
            if p[name] != q[name]:
                bad.append(f"parameter {name} differs")
        count = len(p)
    if bad:
        print("differ:\n  " + "\n  ".join(bad[:10]))
        sys.exit(1)
    print(f"same: {len(a)} steps, {count} parameters")


main()
