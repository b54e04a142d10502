"""Compares plan.json's peaks without remat with the plan of a compile
without it: the first folder is that compile, every other one a compile
with remat or offload. Prints one line per folder and stage:

    FOLDER stage S: peak P, the same peak as without (W) and its timelines'
        highest points per function match

or "... differs: ..." when they do not.
"""
import json
import os
import sys


def load(folder):
    return json.load(open(os.path.join(folder, "plan.json")))["stages"]


def main():
    reference = load(sys.argv[1])
    for folder in sys.argv[2:]:
        for ref, stage in zip(reference, load(folder)):
            name = "%s stage %d" % (os.path.basename(folder), stage["stage"])
            without = stage.get("peak_bytes_without_remat")
            want = ref["predicted_memory"]["peak_bytes"]
            highs = [max(f.get("bytes_without_remat", [0]))
                     for f in stage["memory_timeline"]]
            ref_highs = [max(f["bytes"]) for f in ref["memory_timeline"]]
            if without != want or highs != ref_highs:
                print("%s differs: without remat %s, highs %s; the plan "
                      "without it %d, highs %s"
                      % (name, without, highs, want, ref_highs))
                continue
            print("%s: peak %d, the same peak as without (%d) and its "
                  "timelines' highest points per function match"
                  % (name, stage["predicted_memory"]["peak_bytes"], without))


main()
