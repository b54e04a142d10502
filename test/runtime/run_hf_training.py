"""Hugging Face models trained by Cleave as by PyTorch, and loaded back.

    .venv-hf/bin/python test/runtime/run_hf_training.py DIR FAMILY...
        [--steps 10] [--opsets 14 17] [--variants static dyn]
        [--layouts data2 pipeline2] [--kv-heads K]

For each FAMILY (export_hf.py's --from-config names) a tiny model is built
from its config and saved to DIR/<family>/, exported with
models/export_hf.py at each opset, with a static batch of 4 and with a
dynamic one, and trained for --steps AdamW steps (weight decay, clipping)
by cleave-compile and cleave-run (on PATH; the dynamic-batch export as 2
microbatches) and by PyTorch (the same transformers module, reference.py's
semantics and batches). The losses (1e-5 relative, compare_losses.py) and
final parameters (compare_params.py) must agree. Then what cleave-run saved
(--save-params) goes back into the transformers model (for the first
export through export_hf.py --import-params, save_pretrained and
from_pretrained; for the others, the checkpoint of the last step as
`cleave-checkpoint export` writes it, with load_cleave_params: strict
load_state_dict), and its loss on the next batch must equal that of
PyTorch's trained model
(1e-5 relative). With --layouts, the last export also trains on 2 ranks
under mpirun (data parallel, or a 2-stage pipeline of 2 microbatches,
tensor parallel of degree 2 with and without sequence parallelism, ZeRO-1
or sharded degree 2 over 2 data ranks, `each` checkpointing over 2 data
ranks) or 4 (tensor 2 x pipeline 2, tensor 2 x sharded 2, tensor 4 with
and without sequence parallelism), with the same losses and parameters (when the
last export has a fixed batch, it is one microbatch in every layout); under a
tensor layout a line says how many parameters plan.json's tensor_parallel
section splits and which matrices it leaves whole, with why.

Prints "<family>_op<N>[_dyn]: losses ok, parameters ok, loaded back ok" per
export (or what failed, with the tool's message) and exits non-zero if any
export fails.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "..", "models")
sys.path.insert(0, MODELS)

import numpy as np                 # noqa: E402
import torch                       # noqa: E402

import export_hf                   # noqa: E402
import reference                   # noqa: E402
import tokenizer                   # noqa: E402

BATCH, SEQ, VOCAB = 4, 16, 128
SIZES = dict(layers=2, hidden=32, heads=4, intermediate=64, vocab=VOCAB, positions=32)
# eps 1e-6 as in third_party.py: the attention key biases (GPT-2, BERT)
# get a gradient that is exactly zero but for rounding, which AdamW with
# eps 1e-8 turns into updates near lr that no two implementations share.
OPTIMIZER = dict(reference.DEFAULT_OPTIMIZER, eps=1e-6)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, (p.stdout + p.stderr).strip()


def loss_on(model, tokens, step):
    """The loss of `model` (export_hf's loss forward) on batch `step`."""
    ids, labels = reference.get_batch(tokens, step, BATCH, SEQ)
    with torch.no_grad():
        return float(model(ids, labels))


# --layouts: the spec keys of each parallel layout (2 ranks, 4 for
# tensor2-pipeline2, tensor2-sharded2 and tensor4*).
LAYOUTS = {
    "data2": ["world_size=2", "ddp=true", "microbatches=1"],
    "pipeline2": ["world_size=2", "pipeline_parallel_degree=2", "microbatches=2"],
    "tensor2": ["world_size=2", "tensor_parallel_degree=2", "microbatches=1"],
    "tensor2-sp": ["world_size=2", "tensor_parallel_degree=2", "sequence_parallel=true",
                   "microbatches=1"],
    "tensor2-pipeline2": ["world_size=4", "tensor_parallel_degree=2",
                          "pipeline_parallel_degree=2", "microbatches=2"],
    "tensor4": ["world_size=4", "tensor_parallel_degree=4", "microbatches=1"],
    "tensor4-sp": ["world_size=4", "tensor_parallel_degree=4", "sequence_parallel=true",
                   "microbatches=1"],
    "zero1-data2": ["world_size=2", "ddp=true", "shard_optimizer_state=true",
                    "microbatches=1"],
    "sharded2": ["world_size=2", "ddp=true", "sharded_data_parallel_degree=2",
                 "sdp_param_persistence_threshold=0", "microbatches=1"],
    "tensor2-sharded2": ["world_size=4", "ddp=true", "tensor_parallel_degree=2",
                         "sharded_data_parallel_degree=2",
                         "sdp_param_persistence_threshold=0", "microbatches=1"],
    "each-data2": ["world_size=2", "ddp=true", "activation_checkpointing=each",
                   "microbatches=1"],
}


def world(sets):
    return int(next(kv for kv in sets if kv.startswith("world_size=")).split("=")[1])


def tensor_split(program):
    """What plan.json's tensor_parallel section says the tensor axis split:
    how many parameters, and each matrix (2 or more dimensions) left whole
    with its reason, so that a family whose attention or MLP weights stay
    replicated shows."""
    with open(os.path.join(program, "plan.json")) as f:
        tp = json.load(f)["tensor_parallel"]
    params = {}
    for p in tp["parameters"]:  # a parameter is listed per stage holding it
        params[p["name"]] = p
    split = [p for p in params.values() if p["split"]]
    whole = sorted("%s (%s)" % (p["name"], p["replicated_why"]) for p in params.values()
                   if not p["split"] and len(p["full_shape"]) >= 2)
    return "split %d of %d parameters; matrices whole: %s" % (
        len(split), len(params), "; ".join(whole) or "none")


def check_family(family, d, tokens_path, tokens, steps, opsets, variants, layouts,
                 kv_heads=None):
    """Returns the number of failed exports and of exports."""
    folder = os.path.join(d, family)
    model, task = export_hf.build_from_config(family, kv_heads=kv_heads, **SIZES)
    model.save_pretrained(folder, safe_serialization=True)

    # PyTorch's run: the same module as the export, from the same folder.
    ref = os.path.join(d, family + ".train")
    model, task, _ = export_hf.load_model(folder)
    export_hf.with_loss_forward(model, task)
    inits = None
    exports = []
    failed = 0
    for opset in opsets:
        for variant in variants:
            tag = "%s_op%d%s" % (family, opset, "_dyn" if variant == "dyn" else "")
            path = os.path.join(d, tag + ".onnx")
            m, t, _ = export_hf.load_model(folder)
            try:
                proto, _, padding = export_hf.export_hf(m, t, path, SEQ, BATCH,
                                                        dynamic_batch=variant == "dyn",
                                                        opset=opset)
            except (Exception, SystemExit) as e:  # an op torch cannot write
                print("%s: export FAILED: %s" % (tag, str(e).strip().splitlines()[0]))
                failed += 1
                continue
            found = sorted(t.name for t in proto.graph.initializer)
            assert inits is None or found == inits, (path, found, inits)
            if inits is None:
                # The rows the lookups leave untrained (cleave.padding_idx),
                # and how often the batches trained hold that token.
                print("%s: padding rows %s" % (family, ", ".join(
                    "%s=%d (%d times in the inputs)"
                    % (n, r, int((tokens[:steps * BATCH * SEQ] == r).sum()))
                    for n, r in sorted(padding.items())) or "none"))
            inits = found
            exports.append((tag, path, variant))
    if not exports:
        return failed, failed + len(layouts)
    reference.write_training_reference(model, tokens, BATCH, SEQ, steps, OPTIMIZER,
                                       inits, ref, info={"data": tokens_path})
    after = loss_on(model, tokens, steps)

    spec = os.path.join(d, family + ".spec.json")
    with open(spec, "w") as f:
        json.dump({"batch_size": BATCH, "optimizer": OPTIMIZER}, f)
    for tag, path, variant in exports:
        out = os.path.join(d, tag + ".program")
        # The first export loads back through export_hf.py; the others
        # through the checkpoint of the last step, as a user exports it.
        first = tag == exports[0][0]
        rc, text = run(["cleave-compile", path, "--spec", spec, "--set",
                        "microbatches=" + ("2" if variant == "dyn" else "1"), "-o", out])
        if rc == 0:
            # One thread: lit runs tests side by side, a tiny model gains
            # nothing from more, and OpenMP threads that wait for a busy
            # core made 10 steps take 5 s instead of 0.2 s.
            rc, text = run(["cleave-run", out, "--threads", "1", "--data", tokens_path,
                            "--steps", str(steps),
                            "--metrics", out + ".jsonl", "--save-params",
                            out + ".safetensors"] +
                           ([] if first else ["--checkpoint-dir", out + ".ck"]))
            if rc == 0 and not first:
                rc, text = run(["cleave-checkpoint", "export", out + ".ck", "-o",
                                out + ".exported.safetensors"])
        if rc != 0:
            print("%s: FAILED\n%s" % (tag, "\n".join("   " + l for l in text.splitlines()[:6])))
            failed += 1
            continue
        lrc, ltext = run([sys.executable, os.path.join(HERE, "compare_losses.py"),
                          out + ".jsonl", os.path.join(ref, "losses.json")])
        prc, ptext = run([sys.executable, os.path.join(HERE, "compare_params.py"),
                          out + ".safetensors",
                          os.path.join(ref, "params_final.safetensors")])
        # The saved parameters back in transformers: the first export's
        # through the files a user would write (export_hf.py --import-params
        # does save_pretrained, then from_pretrained), the others' in this
        # process (the same load_cleave_params, without a second start).
        brc, btext = 0, ""
        if first:
            back = os.path.join(d, tag + ".trained")
            brc, btext = run([sys.executable, os.path.join(MODELS, "export_hf.py"),
                              folder, "--import-params", out + ".safetensors",
                              "--save-model", back])
            if brc == 0:
                m, t, _ = export_hf.load_model(back)
        else:
            # The others' through the checkpoint: cleave-checkpoint export
            # writes the state_dict's own names.
            m, t, _ = export_hf.load_model(folder)
            export_hf.load_cleave_params(m, out + ".exported.safetensors")
        if brc == 0:
            export_hf.with_loss_forward(m, t)
            loaded = loss_on(m, tokens, steps)
            rel = abs(loaded - after) / abs(after)
            brc = 0 if rel <= 1e-5 else 1
            btext = "loaded back: loss %.7f, PyTorch's trained model %.7f, rel %.2e" \
                % (loaded, after, rel)
        print("%s: losses %s, parameters %s, loaded back %s"
              % (tag, "ok" if lrc == 0 else "DIFFER", "ok" if prc == 0 else "DIFFER",
                 "ok" if brc == 0 else "DIFFERS"))
        for text in (ltext, ptext, btext):
            print("   " + text.splitlines()[-1])
        failed += lrc != 0 or prc != 0 or brc != 0
    total = len(opsets) * len(variants)
    # The last export (the dynamic batch one, when there is one) under the
    # parallel layouts asked for, on 2 ranks (4 for tensor2-pipeline2 and
    # tensor4*).
    # A fixed-batch export is one microbatch: the pipelines run 1.
    tag, path, variant = exports[-1]
    for layout in layouts:
        total += 1
        sets = [kv if variant == "dyn" or not kv.startswith("microbatches=")
                else "microbatches=1" for kv in LAYOUTS[layout]]
        out = os.path.join(d, "%s.%s.program" % (tag, layout))
        cmd = ["cleave-compile", path, "--spec", spec, "-o", out]
        for kv in sets:
            cmd += ["--set", kv]
        rc, text = run(cmd)
        if rc == 0:
            rc, text = run(["timeout", "300", "mpirun", "-np", str(world(sets)), "--oversubscribe",
                            "--allow-run-as-root", "cleave-run", out, "--threads", "1",
                            "--data", tokens_path, "--steps", str(steps), "--metrics",
                            out + ".jsonl", "--save-params", out + ".safetensors"])
        if rc != 0:
            print("%s %s: FAILED\n%s" % (tag, layout,
                                        "\n".join("   " + l for l in text.splitlines()[:6])))
            failed += 1
            continue
        lrc, ltext = run([sys.executable, os.path.join(HERE, "compare_losses.py"),
                          out + ".jsonl", os.path.join(ref, "losses.json")])
        prc, ptext = run([sys.executable, os.path.join(HERE, "compare_params.py"),
                          out + ".safetensors",
                          os.path.join(ref, "params_final.safetensors")])
        print("%s %s: losses %s, parameters %s" % (tag, layout, "ok" if lrc == 0 else "DIFFER",
                                                 "ok" if prc == 0 else "DIFFER"))
        for text in (ltext, ptext):
            print("   " + text.splitlines()[-1])
        if any(kv.startswith("tensor_parallel_degree=") for kv in sets):
            print("   " + tensor_split(out))
        failed += lrc != 0 or prc != 0
    return failed, total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("families", nargs="+", choices=sorted(export_hf.FAMILIES))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--opsets", type=int, nargs="+", default=[14, 17])
    ap.add_argument("--variants", nargs="+", default=["static", "dyn"],
                    choices=["static", "dyn"])
    ap.add_argument("--kv-heads", type=int,
                    help="key/value heads (grouped-query attention; of %d heads)"
                    % SIZES["heads"])
    ap.add_argument("--layouts", nargs="*", default=[], choices=sorted(LAYOUTS),
                    help="also train the last export on 2 or 4 ranks under mpirun "
                         "in these layouts")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    g = torch.Generator().manual_seed(2)
    # Every id, and a quarter of the tokens 0 or 1: BERT and Gemma pad with
    # 0, OPT with 1, and an nn.Embedding's padding_idx row gets no gradient
    # from the lookup in PyTorch, which the export's cleave.padding_idx
    # metadata tells Cleave. So every batch holds the pad token, several
    # times.
    tokens = torch.randint(0, VOCAB, (4096,), generator=g)
    pads = torch.rand(4096, generator=g) < 0.25
    tokens[pads] = torch.randint(0, 2, (int(pads.sum()),), generator=g)
    tokens = tokens.numpy().astype(np.int64)
    tokens_path = os.path.join(a.dir, "tokens.bin")
    tokenizer.write_tokens(tokens_path, tokens.tolist())
    failed = total = 0
    for family in a.families:
        f, n = check_family(family, a.dir, tokens_path, tokens, a.steps, a.opsets,
                            a.variants, a.layouts, a.kv_heads)
        failed += f
        total += n
    print("%d of %d train as in PyTorch" % (total - failed, total))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
