#!/usr/bin/env python3
"""What a background checkpoint save costs training (issue 16: one step or
less), from cleave-run's output of runs without saves and runs with saves
every K steps, given alternately on the command line:

    save_cost.py plain-1.txt saving-1.txt [plain-2.txt saving-2.txt ...]

A save's cost is measured two ways. Over the whole run: the training time
the saving runs spent beyond the plain runs (their steps' time plus what
training waited for each background save: the copy, the writer, the
commit; less the plain runs' steps' time) over the background saves; on a
shared 2-core machine a step varies by 10 % from run to run, and the sum
collects that noise from every step. Near the save: what training waited
for it plus how much longer than the plain runs' median step the step
after it took (the writer runs beside that step). The first step (warm-up)
and the final save at the end (written in the foreground, reported on its
own) are left out. Prints the figures it measured; not a test.
"""
import re
import statistics
import sys

STEP = re.compile(r"^step (\d+)/\d+ \| loss \S+ \| (\d+) ms")
WAITED = re.compile(r"^checkpoint \S+/step-(\d+) saved after step \d+: "
                    r"training waited ([0-9.]+) ms")
FINAL = re.compile(r"^checkpoint \S+ saved in ([0-9.]+) ms")


def read(path):
    steps, waited, final = {}, [], []
    with open(path) as f:
        for line in f:
            if m := STEP.match(line):
                steps[int(m.group(1))] = float(m.group(2))
            elif m := WAITED.match(line):
                waited.append((int(m.group(1)), float(m.group(2))))
            elif m := FINAL.match(line):
                final.append(float(m.group(1)))
    return steps, waited, final


def main(paths):
    if len(paths) < 2 or len(paths) % 2:
        sys.exit("usage: save_cost.py PLAIN SAVING [PLAIN SAVING ...]")
    costs, near, plain_steps, finals = [], [], [], []
    for plain_path, saving_path in zip(paths[::2], paths[1::2]):
        plain, _, _ = read(plain_path)
        saving, waited, final = read(saving_path)
        shared = sorted(set(plain) & set(saving) - {1})
        if not shared or not waited:
            sys.exit(f"{saving_path}: no steps or no background save to compare")
        plain_steps += [plain[s] for s in shared]
        median = statistics.median(plain[s] for s in shared)
        steps = sum(saving[s] - plain[s] for s in shared)
        waits = sum(w for _, w in waited)
        costs.append((steps + waits) / len(waited))
        here = [w + saving[step + 1] - median for step, w in waited
                if step + 1 in saving]
        near += here
        finals += final
        print(f"  {saving_path}: {len(waited)} background saves, training "
              f"waited {', '.join(f'{w:.0f}' for _, w in waited)} ms; the "
              f"steps after them {', '.join(f'{saving[s + 1]:.0f}' for s, _ in waited if s + 1 in saving)} ms "
              f"(median plain step {median:.0f} ms); all steps {steps:+.0f} ms "
              f"beside the plain run's")
    step = statistics.median(plain_steps)
    cost = statistics.mean(costs)
    print(f"a background save costs, near it, {statistics.mean(near):.0f} ms "
          f"({statistics.mean(near) / step:.2f} steps of {step:.0f} ms, the "
          f"median step without saves; each: "
          f"{', '.join(f'{c:.0f}' for c in near)} ms)")
    print(f"  over the whole run {cost:.0f} ms ({cost / step:.2f} steps; per "
          f"run: {', '.join(f'{c:.0f}' for c in costs)} ms)")
    if finals:
        print(f"the final save (foreground): "
              f"{', '.join(f'{f:.0f}' for f in finals)} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
