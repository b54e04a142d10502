"""The measured pipeline bubble from a cleave-run --trace file.

    /usr/bin/python3 bench/trace_bubble.py TRACE.json PLAN.json [--skip 1]

For every step after the first `skip` (warm-up), on each rank: the span of
the pipeline from the first forward to the last backward that any rank of
the step runs (the optimizer is not part of the bubble), and the time the
rank computed in it: its forward and backward functions minus the time they
waited in receives. Idle fraction = 1 - computed / span, averaged over the
steps; printed per rank next to the schedule's theoretical bubble from
plan.json.
"""
import argparse
import collections
import json
import re
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("plan")
    ap.add_argument("--skip", type=int, default=1)
    a = ap.parse_args()
    with open(a.trace) as f:
        events = json.load(f)
    if isinstance(events, dict):
        events = events.get("traceEvents", [])
    with open(a.plan) as f:
        plan = json.load(f)
    step_of = re.compile(r"\(step (\d+)\)")
    work = collections.defaultdict(list)   # (step) -> [(rank, start, end)]
    compute = collections.defaultdict(float)  # (step, rank) -> seconds
    waits = collections.defaultdict(list)  # rank -> [(start, end)]
    for e in events:
        if e.get("ph") != "X":
            continue
        name, rank = e["name"], e["pid"]
        start, end = e["ts"], e["ts"] + e["dur"]
        if name.startswith("receive from"):
            waits[rank].append((start, end))
            continue
        m = step_of.search(name)
        if not m or ("forward" not in name and "backward" not in name):
            continue
        step = int(m.group(1))
        work[step].append((rank, start, end))
    steps = sorted(s for s in work if s >= a.skip)
    if not steps:
        sys.exit("trace_bubble: no pipeline steps after the first %d in %s" % (a.skip, a.trace))
    ranks = sorted({r for s in steps for r, _, _ in work[s]})
    idle = collections.defaultdict(list)
    for s in steps:
        begin = min(t0 for _, t0, _ in work[s])
        end = max(t1 for _, _, t1 in work[s])
        for r in ranks:
            busy = 0.0
            for rank, t0, t1 in work[s]:
                if rank != r:
                    continue
                waited = sum(max(0.0, min(t1, w1) - max(t0, w0)) for w0, w1 in waits[r])
                busy += (t1 - t0) - waited
            idle[r].append(1.0 - busy / (end - begin))
    sched = plan.get("schedule", {})
    print("schedule %s, %d pipeline ranks, %d microbatches, %d virtual stages; steps %d-%d"
          % (sched.get("kind"), plan["mesh"]["pipeline"], sched.get("microbatches", 0),
             sched.get("virtual_stages", 1), steps[0], steps[-1]))
    for r in ranks:
        print("rank %d: measured idle %.1f%%" % (r, 100 * sum(idle[r]) / len(idle[r])))
    mean = sum(sum(v) / len(v) for v in idle.values()) / len(idle)
    print("mean measured idle %.1f%%, predicted (plan) %.1f%%, theoretical %.1f%%"
          % (100 * mean, 100 * sched.get("predicted_bubble", 0),
             100 * sched.get("theoretical_bubble", 0)))


if __name__ == "__main__":
    main()
