"""Compiles and trains one model in several layouts and checks that the
runtime's measured live peak equals the plan's prediction, per rank and
per memory space, to the byte: with cleave-compile and cleave-run (on PATH).

    /usr/bin/python3 test/runtime/peak_equals_plan.py MODEL.onnx SPEC.json OUT \
        --data tokens.bin [--steps 3] \
        --layout NAME [np=N] [device=cpu-staged] [key=value ...] \
        [--layout ...]

Each layout compiles MODEL with SPEC and `--set key=value` for each key
(world_size=np), trains --steps steps (under mpirun when np > 1) with
--metrics, and prints one line per rank:

    NAME rank R: device M == P (arena A), host HM == HP

M and HM are the last step's measured live peaks of that rank (cleave-run's
metrics, "live_peak_bytes" and "host_live_peak_bytes"), P and HP the plan's
("predicted_live_peak_bytes" there, the program's MemoryPlan), A the rank's
device arena in plan.json (predicted_memory.peak_bytes, what is allocated).
"==" becomes "!=" where they differ. The script also checks that plan.json
carries the same prediction as the program (predicted_live_peak_bytes),
that the arena holds the live peak (A >= P), that the first step measured
no more than the plan, and that cleave-run printed its end-of-run line and
no warning. Exits non-zero if anything fails.
"""
import argparse
import json
import os
import subprocess
import sys


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("onnx")
    ap.add_argument("spec")
    ap.add_argument("out")
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--layout", nargs="+", action="append", required=True,
                    metavar="NAME [np=N] [device=D] [key=value ...]")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    failed = 0
    for name, *settings in a.layout:
        np, device, sets = 1, "cpu", []
        for s in settings:
            key, _, value = s.partition("=")
            if key == "np":
                np = int(value)
            elif key == "device":
                device = value
            else:
                sets += ["--set", s]
        out = os.path.join(a.out, name)
        rc, o, e = run(["cleave-compile", a.onnx, "--spec", a.spec,
                        "--set", "world_size=%d" % np] + sets + ["-o", out])
        if rc == 0:
            cmd = ["cleave-run", out, "--data", a.data,
                   "--steps", str(a.steps), "--threads", "1",
                   "--device", device, "--metrics", out + ".jsonl"]
            if np > 1:
                cmd = ["timeout", "300", "mpirun", "-np", str(np),
                       "--oversubscribe", "--allow-run-as-root"] + cmd
            rc, o, e = run(cmd)
        if rc != 0:
            print("%s: FAILED\n%s%s" % (name, o, e))
            failed += 1
            continue
        plan = json.load(open(os.path.join(out, "plan.json")))
        steps = [json.loads(line) for line in open(out + ".jsonl")]
        last = steps[-1]
        if "warning" in e or "live peak per rank, measured / plan" not in o:
            print("%s: cleave-run warned or printed no live peaks:\n%s%s"
                  % (name, o, e))
            failed += 1
        for r in range(np):
            rank = plan["ranks"][r]
            arena = rank["predicted_memory"]["peak_bytes"]
            planned = rank["predicted_live_peak_bytes"]
            m, p = last["live_peak_bytes"][r], last["predicted_live_peak_bytes"][r]
            hm = last.get("host_live_peak_bytes", [0] * np)[r]
            hp = last.get("predicted_host_live_peak_bytes", [0] * np)[r]
            print("%s rank %d: device %d %s %d (arena %d), host %d %s %d"
                  % (name, r, m, "==" if m == p else "!=", p, arena,
                     hm, "==" if hm == hp else "!=", hp))
            failed += m != p or hm != hp
            if (planned["device"], planned["host"]) != (p, hp):
                print("%s rank %d: plan.json predicts %s, the program %d, %d"
                      % (name, r, planned, p, hp))
                failed += 1
            if arena < p or rank["predicted_memory_by_space"]["host"] < hp:
                print("%s rank %d: an arena is smaller than its live peak"
                      % (name, r))
                failed += 1
            # What the measured peak held when reached adds up to it.
            parts = sum(v[r] for v in last["live_peak_categories"].values())
            if parts != m:
                print("%s rank %d: the live peak's categories add up to %d, "
                      "not %d" % (name, r, parts, m))
                failed += 1
            if steps[0]["live_peak_bytes"][r] > p:
                print("%s rank %d: the first step measured more than the plan"
                      % (name, r))
                failed += 1
    sys.exit(1 if failed else 0)


main()
