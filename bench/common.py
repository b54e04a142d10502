"""What the bench scripts share: running a command and failing with its
output, and a cleave-run whose losses must equal a reference run's."""
import json
import os
import subprocess
import sys


def run(cmd, **kw):
    """Runs `cmd` (a list), returns its stdout and stderr together; on a
    non-zero exit, exits naming the command and the end of its output."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, **kw)
    if p.returncode:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), p.stdout[-3000:]))
    return p.stdout


class SameLosses:
    """Runs cleave-run on compiled folders and checks that every run's
    losses are the same floats as the first run's."""

    def __init__(self, bin_dir, data, steps, device):
        self.bin_dir, self.data = bin_dir, data
        self.steps, self.device = steps, device
        self.reference = None  # (name, losses)

    def train(self, name, out, metrics):
        """Trains `out`, prints the command as an HTML comment, returns the
        metrics lines; exits when the losses differ from the first run's."""
        cmd = [os.path.join(self.bin_dir, "cleave-run"), out, "--data",
               self.data, "--steps", str(self.steps), "--device",
               self.device, "--metrics", metrics]
        print("<!-- %s -->" % " ".join(cmd[1:]))
        run(cmd)
        lines = [json.loads(l) for l in open(metrics)]
        losses = [l["loss"] for l in lines]
        if self.reference is None:
            self.reference = (name, losses)
        elif losses != self.reference[1]:
            sys.exit("%s: losses %s differ from %s's %s"
                     % (name, losses, *self.reference))
        return lines
