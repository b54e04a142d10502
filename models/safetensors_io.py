"""Minimal reader/writer for the safetensors format (no dependencies).

Format: 8-byte little-endian u64 N, then N bytes of JSON header
{name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
 optional "__metadata__": {str: str}}, then the raw little-endian data;
offsets are relative to the end of the header.  Tensors are written in
sorted name order, the header padded with spaces to a multiple of 8 bytes.
"""
import json
import struct

import numpy as np

_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U8": np.uint8, "U16": np.uint16, "BOOL": np.bool_,
}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


def _to_numpy(t):
    if hasattr(t, "detach"):                      # torch.Tensor
        t = t.detach().cpu().contiguous().numpy()
    a = np.asarray(t)
    return a if a.flags.c_contiguous else a.copy(order="C")  # keeps 0-d


def save(tensors, path, metadata=None):
    """Write {name: torch.Tensor | np.ndarray} to `path`."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = _to_numpy(tensors[name])
        if a.dtype not in _NAMES:
            raise TypeError("unsupported dtype %s for %s" % (a.dtype, name))
        b = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _NAMES[a.dtype], "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load(path, torch_tensors=False):
    """Read a safetensors file -> ({name: array}, metadata dict)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        dt = np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<")
        a = np.frombuffer(data, dtype=dt, count=(e - b) // dt.itemsize,
                          offset=base + b).reshape(info["shape"]).copy()
        if torch_tensors:
            import torch
            a = torch.from_numpy(a)
        out[name] = a
    return out, meta


if __name__ == "__main__":
    import sys
    ts, meta = load(sys.argv[1])
    if meta:
        print("metadata:", meta)
    for k in sorted(ts):
        a = ts[k]
        print("%-50s %-5s %-20s %s" % (k, _NAMES[a.dtype], list(a.shape),
                                        ("%.6g" % a.ravel()[0]) if a.size else ""))
