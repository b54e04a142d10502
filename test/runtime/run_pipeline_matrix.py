"""The pipeline and data-parallel equality matrix (issue: pipeline and data
parallelism): for a model and its PyTorch reference (models/reference.py,
global batch B, 10 AdamW steps), every (pipeline, data) layout in
{(2,1), (4,1), (2,2), (1,4)} x every schedule (simple, interleaved,
interleaved_virtual with 2 chunks per rank) x microbatches in {1, 2, 4, 8}
that is valid is compiled, run under mpirun on the CPU backend, and its
per-step losses and final parameters compared with PyTorch's (the training
tolerances: losses 1e-5 relative, parameters rtol 1e-4 / atol 1e-5).

    /usr/bin/python3 test/runtime/run_pipeline_matrix.py MODEL.onnx REF_DIR \
        --batch B --data tokens.bin --bin BUILD/bin --out DIR [--spec SPEC]

Prints one line per case and a summary; exits non-zero if any case differs,
fails to compile or run, or if no case ran. A layout is skipped (and said
to be) only when the spec would be invalid: the batch does not split into
data ranks x microbatches, interleaved_virtual needs microbatches a
multiple of the pipeline degree, or the model has fewer places to cut than
stages.
"""
import argparse
import itertools
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, timeout=300):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    return p.returncode, p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("reference")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    layouts = [(2, 1), (4, 1), (2, 2), (1, 4)]
    schedules = [("simple", 1), ("interleaved", 1), ("interleaved_virtual", 2)]
    ran = failed = 0
    started = time.time()
    for (p, d), (kind, v), m in itertools.product(layouts, schedules, [1, 2, 4, 8]):
        if p == 1 and kind != "interleaved":
            continue  # no pipeline: the schedule does not apply
        name = "p%d-d%d-%s-m%d" % (p, d, kind, m)
        if a.batch % (d * m):
            print("%-34s skipped: batch %d does not split into %d x %d" % (name, a.batch, d, m))
            continue
        if kind == "interleaved_virtual" and m % p:
            print("%-34s skipped: interleaved_virtual needs microbatches a multiple of %d" % (name, p))
            continue
        out = os.path.join(a.out, name)
        compile_cmd = [os.path.join(a.bin, "cleave-compile"), a.model, "--spec", a.spec,
                       "--set", "batch_size=%d" % a.batch,
                       "--set", "world_size=%d" % (p * d),
                       "--set", "pipeline_parallel_degree=%d" % p,
                       "--set", "microbatches=%d" % m,
                       "--set", "pipeline=%s" % kind,
                       "--set", "virtual_pipeline_degree=%d" % v,
                       "--set", "ddp=%s" % ("true" if d > 1 else "false"),
                       "-o", out]
        rc, text = run(compile_cmd)
        if rc != 0:
            if "places to cut between layers" in text:
                print("%-34s skipped: %s" % (name, text.strip().splitlines()[-1].split("error: ")[-1]))
                continue
            print("%-34s COMPILE FAILED\n%s" % (name, text))
            failed += 1
            continue
        metrics = out + ".jsonl"
        params = out + ".safetensors"
        run_cmd = ["timeout", "300", "mpirun", "-np", str(p * d), "--oversubscribe",
                   "--allow-run-as-root", os.path.join(a.bin, "cleave-run"), out,
                   "--data", a.data, "--steps", str(a.steps), "--threads", "1",
                   "--metrics", metrics, "--save-params", params]
        t0 = time.time()
        rc, text = run(run_cmd, timeout=330)
        seconds = time.time() - t0
        if rc != 0:
            print("%-34s RUN FAILED (exit %d)\n%s" % (name, rc, text[-3000:]))
            failed += 1
            continue
        rc1, losses = run([sys.executable, os.path.join(HERE, "compare_losses.py"), metrics,
                           os.path.join(a.reference, "losses.json")])
        rc2, weights = run([sys.executable, os.path.join(HERE, "compare_params.py"), params,
                            os.path.join(a.reference, "params_final.safetensors")])
        ok = rc1 == 0 and rc2 == 0
        ran += 1
        failed += not ok
        print("%-34s %s  losses: %s  params: %s  (%.1f s)"
              % (name, "ok" if ok else "DIFFERS", losses.strip().splitlines()[-1],
                 weights.strip().splitlines()[-1], seconds))
        if not ok:
            print(losses)
            print(weights)
    print("pipeline matrix: %d cases ran, %d failed (%.0f s)"
          % (ran, failed, time.time() - started))
    sys.exit(0 if failed == 0 and ran > 0 else 1)


if __name__ == "__main__":
    main()
