"""Checks a cleave-run --trace file: every started collective of KIND
("REDUCE_SCATTER 3 started") begins inside a backward function run for the
step's last microbatch, on the same rank, i.e. it overlaps the backward
instead of waiting for the optimizer.

    /usr/bin/python3 test/runtime/started_during_backward.py TRACE.json KIND

Prints "N started KIND, all during a backward" (exit 0) or the first that
is not (exit 1); exit 1 too when there is none.
"""
import json
import sys


def main():
    path, kind = sys.argv[1], sys.argv[2]
    trace = json.load(open(path))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    spans = {}
    for e in events:
        if e.get("ph") == "X" and "backward" in e["name"] and "last microbatch" in e["name"]:
            spans.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"]))
    started = [e for e in events if e.get("ph") == "X" and
               e["name"].startswith(kind + " ") and e["name"].endswith(" started")]
    if not started:
        sys.exit("no started %s in %s" % (kind, path))
    for e in started:
        if not any(a <= e["ts"] <= b for a, b in spans.get(e["pid"], [])):
            sys.exit("rank %d: '%s' at %.1f us is outside every last-microbatch "
                     "backward" % (e["pid"], e["name"], e["ts"]))
    print("%d started %s, all during a backward" % (len(started), kind))


if __name__ == "__main__":
    main()
