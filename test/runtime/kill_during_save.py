"""kill -9 at random moments of checkpoint saves (issue 16 item 6).

A run that saves a checkpoint after every step is killed with SIGKILL after
a random delay, again and again, each time resuming where the last one
stopped. After every kill, the checkpoint --resume picks (the newest with a
manifest) must load and train on: it is the one before the killed save or
the one the save completed, never a partial one. Prints how many kills
left a save unfinished (a step folder without its manifest, or a .tmp
file), so that the test shows it hit saves, not only steps.

Usage: kill_during_save.py CLEAVE_RUN OUT DATA DIR KILLS SEED
"""
import glob
import os
import random
import re
import subprocess
import sys
import time


def newest_complete(ck):
    steps = [int(m.group(1)) for d in glob.glob(os.path.join(ck, "step-*"))
             if (m := re.search(r"step-(\d+)$", d))
             and os.path.exists(os.path.join(d, "manifest.json"))]
    return max(steps) if steps else None


def unfinished(ck):
    partial = [d for d in glob.glob(os.path.join(ck, "step-*"))
               if not os.path.exists(os.path.join(d, "manifest.json"))]
    return bool(partial or glob.glob(os.path.join(ck, "**", "*.tmp"),
                                     recursive=True))


def main():
    run, out, data, ck, kills, seed = sys.argv[1:7]
    rng = random.Random(int(seed))
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first = subprocess.run([run, out, "--data", data, "--steps", "1",
                            "--checkpoint-dir", ck], **quiet)
    if first.returncode != 0:
        sys.exit("the first run failed: " + first.stderr)
    mid_save = 0
    for i in range(int(kills)):
        p = subprocess.Popen(
            [run, out, "--data", data, "--steps", "1000000",
             "--checkpoint-dir", ck, "--checkpoint-every", "1", "--keep", "2",
             "--resume", ck], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 1.5))
        p.kill()
        p.wait()
        mid_save += unfinished(ck)
        step = newest_complete(ck)
        if step is None:
            sys.exit(f"kill {i}: no complete checkpoint is left in {ck}")
        # What --resume picks loads and trains one more step (it saves
        # nothing: no --checkpoint-dir).
        check = subprocess.run([run, out, "--data", data, "--steps",
                                str(step + 1), "--resume", ck], **quiet)
        if check.returncode != 0:
            sys.exit(f"kill {i}: --resume of step {step} failed:\n"
                     + check.stderr)
    print(f"kills: {kills}, every resume loaded; "
          f"{'some' if mid_save else 'no'} kills interrupted a save "
          f"({mid_save})")


if __name__ == "__main__":
    main()
