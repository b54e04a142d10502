"""A checkpoint written in the background overlaps training: in a
cleave-run --trace, the save of step S (copied at the boundary after S
steps, "checkpoint copy (step-S)") is committed ("checkpoint commit
(step-S)") only after the next step (0-based index S, its functions'
spans "... (step S)") ran, and its writer's span is on the "checkpoint
writer" thread. Prints, per rank, the steps that ran between the copy and
the commit, or what is wrong, and exits 1 then.

usage: save_overlaps_step.py TRACE.json S
"""
import json
import re
import sys


def main():
    trace, saved = sys.argv[1], int(sys.argv[2])
    events = json.load(open(trace))["traceEvents"]
    writer_threads = {(e["pid"], e["tid"]) for e in events
                      if e.get("ph") == "M" and e["name"] == "thread_name"
                      and e["args"]["name"] == "checkpoint writer"}
    spans = [e for e in events if e.get("ph") == "X"]
    ok = True
    for pid in sorted({e["pid"] for e in spans}):
        mine = [e for e in spans if e["pid"] == pid]
        def one(name):
            found = [e for e in mine if e["name"] == name]
            if len(found) != 1:
                sys.exit(f"rank {pid}: {len(found)} spans '{name}', expected 1")
            return found[0]
        copy = one(f"checkpoint copy (step-{saved})")
        write = one(f"checkpoint write (step-{saved})")
        commit = one(f"checkpoint commit (step-{saved})")
        if (pid, write["tid"]) not in writer_threads:
            print(f"rank {pid}: the writer's span is not on the checkpoint "
                  "writer thread")
            ok = False
        copied = copy["ts"] + copy["dur"]
        between = sorted({int(m.group(1)) for e in mine
                          if (m := re.search(r"\(step (\d+)\)$", e["name"]))
                          and e["ts"] >= copied
                          and e["ts"] + e["dur"] <= commit["ts"]})
        if saved not in between:
            print(f"rank {pid}: step {saved} did not run between the copy "
                  f"and the commit of step-{saved}")
            ok = False
        else:
            print(f"rank {pid}: step-{saved} copied, then step(s) "
                  f"{', '.join(map(str, between))} ran, then it was committed")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
