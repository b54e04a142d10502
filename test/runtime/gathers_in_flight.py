"""Prints, for each decoded rank program (`protoc --decode` text), how many
ALL_GATHERs it starts (ones with an event) and the most that are in flight
at once (started, not yet waited for), walking each function's body in
order:

    /usr/bin/python3 test/runtime/gathers_in_flight.py RANK.txt...

One line per file: "<file>: N started, at most M in flight".
"""
import os
import re
import sys


def in_flight(text):
    started, flying, most = 0, set(), 0
    for m in re.finditer(r"collective \{[^}]*\}|event \{[^}]*\}", text):
        block = m.group(0)
        if block.startswith("collective"):
            event = re.search(r"event: (\d+)", block)
            if "ALL_GATHER" in block and event:
                started += 1
                flying.add(event.group(1))
                most = max(most, len(flying))
        elif "wait: true" in block:
            flying.discard(re.search(r"id: (\d+)", block).group(1))
    return started, most


def main():
    for path in sys.argv[1:]:
        started, most = in_flight(open(path).read())
        print("%s: %d started, at most %d in flight"
              % (os.path.basename(path), started, most))


if __name__ == "__main__":
    main()
