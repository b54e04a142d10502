"""Counts the hierarchical gathers (sdp_hierarchical_allgather) of decoded
programs whose first hop, the ALL_GATHER within the host into a "(host
block)" view, is started (has an event) and waited for by an Event that the
second hop's start follows at once (cleave.gather_next_hop), with kernels
between the first hop's start and that wait.

    /usr/bin/python3 test/runtime/first_hops_started.py RANK.txt...

RANK.txt is a rank's program as `protoc --decode` prints it. Prints
"P programs: F first hops started, each waited for after kernels, then the
second started; S synchronous" (exit 0), or the first that breaks it
(exit 1).
"""
import re
import sys


def main():
    started = synchronous = 0
    for path in sys.argv[1:]:
        text = open(path).read()
        names = [m.group(1) if m else "" for m in (
            re.search(r'\n  name: "([^"]*)"', t)
            for t in re.split(r"\ntensors \{", text)[1:])]
        for function in re.split(r"\nfunctions \{", text)[1:]:
            body = []
            for inst in re.finditer(
                    r"body \{\s*(kernel|collective|event|free|copy|send_recv)"
                    r" \{(.*?)\n  \}\n", function, re.S):
                kind, inner = inst.group(1), inst.group(2)
                event = re.search(r"(?:event|id): (\d+)", inner)
                out = re.search(r"outputs: (\d+)", inner)
                body.append((kind, inner, int(event.group(1)) if event else 0,
                             int(out.group(1)) if out else -1))
            for i, (kind, inner, event, out) in enumerate(body):
                if (kind != "collective" or "ALL_GATHER" not in inner or
                        not names[out].endswith("(host block)")):
                    continue
                if not event:
                    synchronous += 1
                    continue
                kernels = 0
                for j in range(i + 1, len(body)):
                    later = body[j]
                    if later[0] == "event" and later[2] == event:
                        break
                    kernels += later[0] == "kernel"
                else:
                    sys.exit("%s: first hop %d is never waited for" %
                             (path, event))
                nxt = body[j + 1] if j + 1 < len(body) else None
                if not kernels:
                    sys.exit("%s: no kernel between the start of first hop "
                             "%d and its wait" % (path, event))
                if (not nxt or nxt[0] != "collective" or
                        "ALL_GATHER" not in nxt[1] or not nxt[2]):
                    sys.exit("%s: the wait for first hop %d is not followed "
                             "by the second hop's start" % (path, event))
                started += 1
    if not started:
        sys.exit("no started first hop in %s" % " ".join(sys.argv[1:]))
    print("%d programs: %d first hops started, each waited for after "
          "kernels, then the second started; %d synchronous" %
          (len(sys.argv) - 1, started, synchronous))


if __name__ == "__main__":
    main()
