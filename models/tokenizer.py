"""Byte-level tokenizer and token-file reader/writer.

    /usr/bin/python3 models/tokenizer.py TEXT_FILE -o tokens.bin [--llmc]

Each byte of the text is one token (vocab 256).  Token files:
  default  flat little-endian uint16, nothing else
  --llmc   llm.c's format: a header of 256 little-endian int32
           (magic 20240520, version 1, number of tokens, zeros) then the
           tokens as uint16
read_tokens() accepts both (an llm.c header is recognised by its magic).

(Named tokenizer.py, not tokenize.py: a tokenize.py next to our scripts
would shadow Python's standard `tokenize` module, which torch imports.)
"""
import argparse
import sys

import numpy as np

LLMC_MAGIC = 20240520
LLMC_VERSION = 1
LLMC_HEADER_INTS = 256


def encode(data: bytes):
    return np.frombuffer(data, dtype=np.uint8).astype("<u2")


def decode(tokens):
    return bytes(int(t) for t in tokens).decode("utf-8", errors="replace")


def write_tokens(path, tokens, llmc=False):
    tokens = np.asarray(tokens).astype("<u2")
    with open(path, "wb") as f:
        if llmc:
            header = np.zeros(LLMC_HEADER_INTS, dtype="<i4")
            header[0], header[1], header[2] = LLMC_MAGIC, LLMC_VERSION, len(tokens)
            f.write(header.tobytes())
        f.write(tokens.tobytes())


def read_tokens(path):
    """-> np.ndarray of uint16 tokens (flat or llm.c format)."""
    raw = np.fromfile(path, dtype=np.uint8)
    if raw.size >= 4 * LLMC_HEADER_INTS:
        header = raw[:4 * LLMC_HEADER_INTS].view("<i4")
        if header[0] == LLMC_MAGIC:
            if header[1] != LLMC_VERSION:
                raise ValueError("%s: llm.c token file version %d, expected %d"
                                 % (path, header[1], LLMC_VERSION))
            n = int(header[2])
            body = raw[4 * LLMC_HEADER_INTS:]
            if body.size != 2 * n:
                raise ValueError("%s: header says %d tokens, file holds %d bytes"
                                 % (path, n, body.size))
            return body.view("<u2").copy()
    if raw.size % 2:
        raise ValueError("%s: odd size for a uint16 token file" % path)
    return raw.view("<u2").copy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("text")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--llmc", action="store_true", help="llm.c header format")
    a = ap.parse_args()
    with open(a.text, "rb") as f:
        toks = encode(f.read())
    write_tokens(a.output, toks, llmc=a.llmc)
    print("%s: %d tokens (byte-level, vocab 256) -> %s%s"
          % (a.text, len(toks), a.output, " (llm.c format)" if a.llmc else ""),
          file=sys.stderr)


if __name__ == "__main__":
    main()
