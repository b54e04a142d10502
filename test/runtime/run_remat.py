"""Trains one model with each activation-checkpointing strategy and checks
that every run is bit-identical to the run without checkpointing, and what
the plan says of memory: with cleave-compile and cleave-run (on PATH).

    /usr/bin/python3 test/runtime/run_remat.py MODEL.onnx SPEC.json OUT \
        --data tokens.bin [--np 4] [--steps 3] [--strategies each group_2 ...]
        [--device cpu-staged]

For each strategy ("none" first, the reference) it compiles with
`--set activation_checkpointing=S`, trains (under mpirun with --np > 1),
and prints one line:

    S: same losses and parameters, activations A < B, peak measured M <= plan P

"same" is test/runtime/same_run.py's exact comparison of the losses and the
--save-params bytes. A is the largest per-rank `activations` in plan.json's
predicted memory, B the same without checkpointing (the sign says which is
larger: "<", "=" or ">"); M and P are the last
step's measured and planned peak (cleave-run's metrics, the worst rank).
A strategy `S+offloadH` also offloads the checkpoints to host memory
(`offload_activations`, `activation_loading_horizon=H`); its line adds the
host arena, which must be planned and used:

    S+offloadH: same losses and parameters, activations A < B, peak
        measured M <= plan P, host activations H, host measured HM <= plan HP

where A is then the device's (`predicted_activations_by_space`).
Every line ends with ", live peak measured == plan": each rank's live peak
in each space (cleave-run's metrics, "live_peak_bytes" and
"host_live_peak_bytes") equals the plan's prediction to the byte ("!="
and a failure where it does not), or, where fewer than two steps updated
the parameters (fp16 steps that overflowed are skipped), ", live peak not
compared (N steps updated)".
`--device` runs cleave-run on another backend (cpu-staged: the device's
copy path). Exits non-zero if a run fails, differs, or measures more than
its plan or a live peak other than the plan's, or an offload plans no host
activations.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("onnx")
    ap.add_argument("spec")
    ap.add_argument("out")
    ap.add_argument("--data", required=True)
    ap.add_argument("--np", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--strategies", nargs="*",
                    default=["each", "group_2", "contiguous", "selective"])
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    failed = 0
    reference = None
    for strategy in ["none"] + a.strategies:
        out = os.path.join(a.out, strategy)
        remat, _, offload = strategy.partition("+offload")
        sets = ["--set", "activation_checkpointing=" + remat]
        if offload:
            sets += ["--set", "offload_activations=true",
                     "--set", "activation_loading_horizon=" + offload]
        rc, text = run(["cleave-compile", a.onnx, "--spec", a.spec] + sets +
                       ["-o", out])
        if rc == 0:
            cmd = ["cleave-run", out, "--data", a.data, "--steps", str(a.steps),
                   "--threads", "1", "--metrics", out + ".jsonl",
                   "--save-params", out + ".safetensors",
                   "--device", a.device]
            if a.np > 1:
                cmd = ["timeout", "300", "mpirun", "-np", str(a.np),
                       "--oversubscribe", "--allow-run-as-root"] + cmd
            rc, text = run(cmd)
        if rc != 0:
            print("%s: FAILED\n%s" % (strategy, text))
            failed += 1
            continue
        plan = json.load(open(os.path.join(out, "plan.json")))
        activations = max(r["predicted_activations_by_space"]["device"]
                          if offload else r["predicted_memory"]["activations"]
                          for r in plan["ranks"])
        host = max(r["predicted_activations_by_space"]["host"]
                   for r in plan["ranks"])
        last = [json.loads(line) for line in open(out + ".jsonl")][-1]
        measured, planned = last["peak_bytes"], last["predicted_peak_bytes"]
        # The live peaks, per rank and space, equal the plan's to the byte.
        live = [(last[k], last["predicted_" + k]) for k in
                ("live_peak_bytes", "host_live_peak_bytes") if k in last]
        exact = all(m == p for ms, ps in live for m, p in zip(ms, ps))
        # The plan's peak is that of a step updating after another did: an
        # fp16 run whose steps overflowed (skipped) holds less.
        updated = sum(1 for line in open(out + ".jsonl")
                      if not json.loads(line).get("skipped"))
        if updated >= 2:
            failed += not exact
            verdict_live = (", live peak measured %s plan"
                            % ("==" if exact else "!="))
        else:
            verdict_live = (", live peak not compared (%d steps updated)"
                            % updated)
        if strategy == "none":
            reference = (out, activations)
            print("none: activations %d, peak measured %d <= plan %d%s"
                  % (activations, measured, planned, verdict_live))
            continue
        rc, same = run([sys.executable, os.path.join(HERE, "same_run.py"),
                        reference[0] + ".jsonl", out + ".jsonl",
                        reference[0] + ".safetensors", out + ".safetensors"])
        verdict = "same losses and parameters" if rc == 0 else same.strip()
        sign = "<" if activations < reference[1] else \
            "=" if activations == reference[1] else ">"
        line = ("%s: %s, activations %d %s %d, peak measured %d %s plan %d"
                % (strategy, verdict, activations, sign, reference[1],
                   measured, "<=" if measured <= planned else ">", planned))
        failed += rc != 0 or measured > planned
        if offload:
            hm = last.get("host_peak_bytes", 0)
            hp = last.get("predicted_host_peak_bytes", 0)
            line += (", host activations %d, host measured %d %s plan %d"
                     % (host, hm, "<=" if hm <= hp else ">", hp))
            failed += host == 0 or hm > hp
        print(line + verdict_live)
    sys.exit(1 if failed else 0)


main()
