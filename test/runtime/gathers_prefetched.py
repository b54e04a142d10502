"""Checks that sharded parameters' gathers overlap compute (ZeRO-3
prefetch, cleave-prefetch-gathers) in a cleave-run --trace file and the
programs that made it.

    /usr/bin/python3 test/runtime/gathers_prefetched.py TRACE.json RANK.txt...

RANK.txt is a rank's program as `protoc --decode` prints it. In each
program every started ALL_GATHER (one with an event) has a kernel between
it and the Event that waits for it. In the trace every "ALL_GATHER N
started" span is followed, in the same function run, by its "wait for
ALL_GATHER N", and part of the time between the two is covered by no
communication span of that rank: compute ran while the gather travelled.

Gradient buckets (cleave-bucket-scatters): every "REDUCE_SCATTER N
started" span lies inside a backward run, its "wait for REDUCE_SCATTER N"
later in the same run.

Prints "R ranks: S started gathers, each waited for after compute; P
programs: G started ALL_GATHERs, each with kernels before its wait" and
"B started gradient reduce-scatters, each inside a backward run and waited
for in it" (exit 0) or the first start that breaks it (exit 1).
"""
import json
import re
import sys


def check_program(path):
    """Started ALL_GATHERs of a decoded program, each checked to have a
    kernel between it and its wait; returns their count."""
    text = open(path).read()
    started = 0
    for function in re.split(r"\nfunctions \{", text)[1:]:
        # The body's instructions in order: (kind, event).
        body = []
        for inst in re.finditer(
                r"body \{\s*(kernel|collective|event|free|copy|send_recv) \{"
                r"(.*?)\n  \}\n", function, re.S):
            kind, inner = inst.group(1), inst.group(2)
            if kind == "collective":
                event = re.search(r"event: (\d+)", inner)
                body.append(("gather" if "ALL_GATHER" in inner and event
                             else "collective",
                             int(event.group(1)) if event else 0))
            elif kind == "event":
                wait = "wait: true" in inner
                body.append(("wait" if wait else "record",
                             int(re.search(r"id: (\d+)", inner).group(1))))
            else:
                body.append((kind, 0))
        for i, (kind, event) in enumerate(body):
            if kind != "gather":
                continue
            started += 1
            kernels = 0
            for later, e in body[i + 1:]:
                if later == "wait" and e == event:
                    break
                kernels += later == "kernel"
            else:
                sys.exit("%s: started ALL_GATHER %d is never waited for" %
                         (path, event))
            if not kernels:
                sys.exit("%s: no kernel runs between the start of ALL_GATHER "
                         "%d and its wait" % (path, event))
    return started


def uncovered(begin, end, spans):
    """The time in [begin, end] that no span of `spans` covers."""
    free, at = 0.0, begin
    for s0, s1 in sorted(spans):
        if s1 <= at or s0 >= end:
            continue
        if s0 > at:
            free += s0 - at
        at = max(at, s1)
        if at >= end:
            break
    return free + max(0.0, end - at)


def main():
    trace = json.load(open(sys.argv[1]))
    programs = sys.argv[2:]
    gathers = sum(check_program(p) for p in programs)
    if programs and not gathers:
        sys.exit("no started ALL_GATHER in %s" % " ".join(programs))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    spans = [e for e in events if e.get("ph") == "X"]
    runs = [e for e in spans if " mb" in e["name"]]
    communication = {}
    for e in spans:
        if " mb" in e["name"] or e["name"].startswith("optimizer"):
            continue
        communication.setdefault(e["pid"], []).append(
            (e["ts"], e["ts"] + e["dur"]))
    started = 0
    for run in runs:
        end = run["ts"] + run["dur"]
        inside = sorted((e for e in spans if e["pid"] == run["pid"] and
                         run["ts"] <= e["ts"] <= end and e is not run),
                        key=lambda e: e["ts"])
        for i, e in enumerate(inside):
            m = re.fullmatch(r"ALL_GATHER (\d+) started", e["name"])
            if not m:
                continue
            started += 1
            wait = next((w for w in inside[i + 1:] if w["name"] ==
                         "wait for ALL_GATHER " + m.group(1)), None)
            if wait is None:
                sys.exit("rank %d: '%s' in '%s' has no wait after it" %
                         (run["pid"], e["name"], run["name"]))
            if uncovered(e["ts"] + e["dur"], wait["ts"],
                         communication[run["pid"]]) <= 0:
                sys.exit("rank %d: nothing computes between '%s' and its "
                         "wait in '%s'" % (run["pid"], e["name"], run["name"]))
    if not started:
        sys.exit("no started ALL_GATHER in %s" % sys.argv[1])
    # Gradient buckets (cleave-bucket-scatters): each started reduce-scatter
    # is inside a backward run, waited for later in the same run.
    scatters = 0
    for e in spans:
        m = re.fullmatch(r"REDUCE_SCATTER (\d+) started", e["name"])
        if not m:
            continue
        run = next((r for r in runs if r["pid"] == e["pid"] and
                    r["ts"] <= e["ts"] <= r["ts"] + r["dur"]), None)
        if run is None or "backward" not in run["name"]:
            sys.exit("rank %d: '%s' is not inside a backward run" %
                     (e["pid"], e["name"]))
        if not any(w["pid"] == e["pid"] and w["name"] ==
                   "wait for REDUCE_SCATTER " + m.group(1) and
                   e["ts"] <= w["ts"] <= run["ts"] + run["dur"]
                   for w in spans):
            sys.exit("rank %d: '%s' in '%s' has no wait after it" %
                     (e["pid"], e["name"], run["name"]))
        scatters += 1
    if not scatters:
        sys.exit("no started REDUCE_SCATTER in %s" % sys.argv[1])
    ranks = len({r["pid"] for r in runs})
    print("%d ranks: %d started gathers, each waited for after compute; "
          "%d programs: %d started ALL_GATHERs, each with kernels before its "
          "wait" % (ranks, started, len(programs), gathers))
    print("%d started gradient reduce-scatters, each inside a backward run "
          "and waited for in it" % scatters)


if __name__ == "__main__":
    main()
