"""Damages a cleave-run checkpoint the ways the bad-checkpoint test needs.

    /usr/bin/python3 test/runtime/damage_checkpoint.py STEP_DIR ACTION [ARG...]

  flip FILE OFFSET         xor one byte of STEP_DIR/FILE with 0x01
  flip-tensor R TENSOR K   xor byte K of rank R's TENSOR (in its file) with 0x01
  truncate FILE BYTES      cut STEP_DIR/FILE short by BYTES
  rename TENSOR NEW        rank 0's TENSOR is called NEW in the manifest
  reshape TENSOR D0,D1..   rank 0's TENSOR has full shape (and slice) D0,D1..
  rename-rank R TENSOR NEW  rank R's TENSOR is called NEW in the manifest
  copy TENSOR NEW          rank 0 also holds NEW, a copy of TENSOR's entry
  version V                the manifest says version V
  drop-tensor-hashes       no tensor has a crc32c or sha256 (as manifests
                           before them)
"""
import json
import os
import sys


def edit_manifest(step_dir, change):
    path = os.path.join(step_dir, "manifest.json")
    with open(path) as f:
        manifest = json.load(f)
    change(manifest)
    with open(path, "w") as f:
        json.dump(manifest, f)


def tensor(manifest, name, rank=0):
    for t in manifest["ranks"][rank]["tensors"]:
        if t["name"] == name:
            return t
    sys.exit("no tensor %r in rank %d's entry" % (name, rank))


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 1]))


def main():
    step_dir, action, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    if action == "flip":
        flip(os.path.join(step_dir, args[0]), int(args[1]))
    elif action == "flip-tensor":
        with open(os.path.join(step_dir, "manifest.json")) as f:
            manifest = json.load(f)
        rank = int(args[0])
        t = tensor(manifest, args[1], rank)
        if int(args[2]) >= t["bytes"]:
            sys.exit("rank %d's %r has %d bytes" % (rank, args[1], t["bytes"]))
        flip(os.path.join(step_dir, manifest["ranks"][rank]["file"]),
             t["offset"] + int(args[2]))
    elif action == "truncate":
        path = os.path.join(step_dir, args[0])
        os.truncate(path, os.path.getsize(path) - int(args[1]))
    elif action == "rename":
        edit_manifest(step_dir, lambda m: tensor(m, args[0]).update(name=args[1]))
    elif action == "reshape":
        shape = [int(d) for d in args[1].split(",")]
        edit_manifest(step_dir, lambda m: tensor(m, args[0]).update(
            shape=shape, slice_size=shape))
    elif action == "rename-rank":
        edit_manifest(step_dir, lambda m: tensor(m, args[1], int(args[0])).update(
            name=args[2]))
    elif action == "copy":
        edit_manifest(step_dir, lambda m: m["ranks"][0]["tensors"].append(
            dict(tensor(m, args[0]), name=args[1])))
    elif action == "drop-tensor-hashes":
        edit_manifest(step_dir, lambda m: [t.pop(key, None)
                                           for r in m["ranks"]
                                           for t in r["tensors"]
                                           for key in ("crc32c", "sha256")])
    elif action == "version":
        edit_manifest(step_dir, lambda m: m.update(version=int(args[0])))
    else:
        sys.exit("unknown action %r" % action)


if __name__ == "__main__":
    main()
