"""Checks a cleave-run --trace file of sharded data parallelism: every
rank all-gathers parameters inside each forward and each backward it runs
(cleave.gather_param, gathered again for the backward) and none inside its
optimizer (the update writes the chunk it keeps).

    /usr/bin/python3 test/runtime/gathers_in_functions.py TRACE.json

Prints "R ranks: N forward, M backward runs, each with all-gathers, none in
an optimizer" (exit 0) or the first function run that breaks it (exit 1).
"""
import json
import sys


def main():
    trace = json.load(open(sys.argv[1]))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    runs = [e for e in events if e.get("ph") == "X" and
            (" mb" in e["name"] or e["name"].startswith("optimizer"))]
    gathers = [e for e in events if e.get("ph") == "X" and
               e["name"].startswith("ALL_GATHER")]
    counts = {"forward": 0, "backward": 0}
    for run in runs:
        inside = [g for g in gathers if g["pid"] == run["pid"] and
                  run["ts"] <= g["ts"] <= run["ts"] + run["dur"]]
        kind = ("optimizer" if run["name"].startswith("optimizer") else
                "backward" if "backward" in run["name"] else "forward")
        if kind == "optimizer" and inside:
            sys.exit("rank %d: '%s' all-gathers" % (run["pid"], run["name"]))
        if kind != "optimizer":
            if not inside:
                sys.exit("rank %d: '%s' gathers nothing" %
                         (run["pid"], run["name"]))
            counts[kind] += 1
    if not counts["forward"] or not counts["backward"]:
        sys.exit("no forward or backward runs in %s" % sys.argv[1])
    ranks = len({r["pid"] for r in runs})
    print("%d ranks: %d forward, %d backward runs, each with all-gathers, "
          "none in an optimizer" % (ranks, counts["forward"],
                                     counts["backward"]))


if __name__ == "__main__":
    main()
